// sum_reduction.cu — sum of 2^26 fp32 values in [0, 1) into a single float.
//
// Naive baseline: one element per thread, the classic interleaved-addressing shared-memory
// tree (`if (tid % (2*s) == 0)`), one atomicAdd per 256-thread block into the output.
// Bottleneck an expert would diagnose: the tree, not memory. Each of the 262144 blocks loads
// only 256 floats, then spends 8 __syncthreads rounds in which the `tid % (2*s)` test leaves
// most lanes of every warp idle (divergence, an integer modulo per step, strided shared
// memory accesses with bank conflicts), and 262144 same-address atomics serialize at L2.
// Fix: a grid-stride loop with float4 loads so each thread sums hundreds of elements in a
// register, a warp-shuffle (__shfl_down_sync) tree inside each warp, one atomic per block
// for a grid of a few blocks per SM — bandwidth-bound at ~256 MB read.
//
// The output is accumulated with atomics, so the LAUNCHER zeroes it (cudaMemsetAsync)
// before each launch; the harness still poisons it before the timed loop.
//
// Measured on an H200: 0.64 ms per launcher call; one whole run ~0.5 s wall.
//
// kernelloop program contract (docs/contract.md): inputs from KERNELLOOP_SEED, results
// on stdout, "KERNEL_MS: <mean ms>" on stderr. Only the part between the editable
// markers may be rewritten; everything else is the frozen harness.
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <vector>
#include <cuda_runtime.h>

#define CUDA_CHECK(call)                                                        \
  do {                                                                          \
    cudaError_t err_ = (call);                                                  \
    if (err_ != cudaSuccess) {                                                  \
      fprintf(stderr, "CUDA error %s at %s:%d\n", cudaGetErrorString(err_),     \
              __FILE__, __LINE__);                                              \
      exit(1);                                                                  \
    }                                                                           \
  } while (0)

// Sizes. [[maybe_unused]]: the editable translation unit need not reference them.
[[maybe_unused]] static const int N = 1 << 26;

// kernelloop: editable begin
__global__ void reduce_interleaved_kernel(const float* in, float* out, int n) {
  extern __shared__ float sdata[];
  unsigned int tid = threadIdx.x;
  unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
  sdata[tid] = (i < (unsigned int)n) ? in[i] : 0.0f;
  __syncthreads();
  for (unsigned int s = 1; s < blockDim.x; s *= 2) {
    if (tid % (2 * s) == 0) sdata[tid] += sdata[tid + s];
    __syncthreads();
  }
  if (tid == 0) atomicAdd(out, sdata[0]);
}

// Zeroes *out itself: the kernel accumulates into it with atomicAdd.
void launch_reduce_sum(const float* in, float* out, int n) {
  CUDA_CHECK(cudaMemsetAsync(out, 0, sizeof(float)));
  int block = 256;
  int grid = (n + block - 1) / block;
  reduce_interleaved_kernel<<<grid, block, block * sizeof(float)>>>(in, out, n);
}
// kernelloop: editable end

static uint64_t next_random(uint64_t& state) {  // splitmix64
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Full output dump: when KERNELLOOP_OUTPUT_FILE names a file, every output buffer is
// appended to it as an ASCII header line "kernelloop-output 1 <dtype> <count>\n" followed
// by <count> raw little-endian elements. Unset or empty: nothing is written.
static void dump_output(const char* dtype, const void* data, size_t count, size_t elem_size) {
  const char* path = getenv("KERNELLOOP_OUTPUT_FILE");
  if (path == nullptr || path[0] == '\0') return;
  FILE* f = fopen(path, "ab");
  if (f == nullptr) {
    fprintf(stderr, "cannot open KERNELLOOP_OUTPUT_FILE %s for appending\n", path);
    exit(1);
  }
  bool ok = fprintf(f, "kernelloop-output 1 %s %zu\n", dtype, count) > 0 &&
            fwrite(data, elem_size, count, f) == count;
  if (fclose(f) != 0 || !ok) {
    fprintf(stderr, "cannot write the output dump to KERNELLOOP_OUTPUT_FILE %s\n", path);
    exit(1);
  }
}

// Fills the input with values in [0, 1), continuing the splitmix64 stream.
static void make_inputs(uint64_t& state, std::vector<float>& hIn) {
  for (float& x : hIn) x = (next_random(state) >> 40) * (1.0f / 16777216.0f);
}

int main() {
  const char* seed_text = getenv("KERNELLOOP_SEED");
  uint64_t state = seed_text ? strtoull(seed_text, nullptr, 10) : 20260528ull;
  const size_t count = (size_t)N, bytes = count * sizeof(float);
  std::vector<float> hIn(count);
  make_inputs(state, hIn);

  float *in, *out;
  CUDA_CHECK(cudaMalloc(&in, bytes));
  CUDA_CHECK(cudaMalloc(&out, sizeof(float)));
  CUDA_CHECK(cudaMemcpy(in, hIn.data(), bytes, cudaMemcpyHostToDevice));

  const int warmup = 2, iters = 20;
  for (int i = 0; i < warmup; ++i) launch_reduce_sum(in, out, N);
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaDeviceSynchronize());
  // Fresh inputs for the timed calls: the same splitmix64 stream continued, uploaded over
  // the same buffers, so no result computed during the warm-up can be replayed.
  make_inputs(state, hIn);
  CUDA_CHECK(cudaMemcpy(in, hIn.data(), bytes, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaDeviceSynchronize());
  // Poison the output so the timed launches must (re)initialise and write it themselves.
  CUDA_CHECK(cudaMemset(out, 0xFF, sizeof(float)));

  cudaEvent_t start, stop;
  CUDA_CHECK(cudaEventCreate(&start));
  CUDA_CHECK(cudaEventCreate(&stop));
  CUDA_CHECK(cudaEventRecord(start));
  for (int i = 0; i < iters; ++i) launch_reduce_sum(in, out, N);
  CUDA_CHECK(cudaEventRecord(stop));
  CUDA_CHECK(cudaEventSynchronize(stop));
  CUDA_CHECK(cudaGetLastError());
  float total_ms = 0.0f;
  CUDA_CHECK(cudaEventElapsedTime(&total_ms, start, stop));

  float hOut = 0.0f;
  CUDA_CHECK(cudaMemcpy(&hOut, out, sizeof(float), cudaMemcpyDeviceToHost));
  dump_output("float32", &hOut, 1, sizeof(float));
  // One result only; the extra lines are the same number rescaled (a float sum of 2^26
  // terms carries ~1e-5 relative rounding noise whatever the order, well inside rtol).
  printf("sum %.6f\n", (double)hOut);
  printf("mean %.9f\n", (double)hOut / (double)N);
  printf("scaled %.9f\n", (double)hOut * 1e-6);
  fprintf(stderr, "KERNEL_MS: %.6f\n", total_ms / iters);
  return 0;
}
