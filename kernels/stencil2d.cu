// stencil2d.cu — one 5-point Jacobi step on an 8192x8192 fp32 grid, out of place:
// out = 0.2 * (centre + north + south + east + west) inside, boundary cells copied.
//
// Naive baseline with a deliberately bad thread mapping: threadIdx.x walks the ROWS and
// threadIdx.y the columns (32x8 blocks). The 32 lanes of a warp therefore touch 32 addresses
// a whole row (32 KiB) apart for each of the five loads and for the store: every warp
// memory instruction touches 32 sectors instead of 4, so L1/L2 transaction throughput, not
// DRAM bandwidth, limits the kernel.
// Bottleneck an expert would diagnose: uncoalesced loads and stores from a transposed thread
// mapping. Fix: map threadIdx.x to the column (contiguous) index so each warp reads and
// writes 128 contiguous bytes (optionally with each thread sweeping several rows so the
// north/south neighbours are reused) — bandwidth-bound at ~512 MB of traffic.
//
// Measured on an H200: 1.72 ms per launcher call; one whole run ~0.8 s wall.
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
[[maybe_unused]] static const int ROWS = 8192;
[[maybe_unused]] static const int COLS = 8192;

// kernelloop: editable begin
__global__ void naive_stencil_kernel(const float* in, float* out, int rows, int cols) {
  int row = blockIdx.x * blockDim.x + threadIdx.x;  // threadIdx.x walks rows (uncoalesced)
  int col = blockIdx.y * blockDim.y + threadIdx.y;
  if (row >= rows || col >= cols) return;
  size_t idx = (size_t)row * cols + col;
  if (row == 0 || row == rows - 1 || col == 0 || col == cols - 1) {
    out[idx] = in[idx];
    return;
  }
  out[idx] = 0.2f * (in[idx] + in[idx - cols] + in[idx + cols] + in[idx + 1] + in[idx - 1]);
}

void launch_stencil(const float* in, float* out, int rows, int cols) {
  dim3 block(32, 8);
  dim3 grid((rows + block.x - 1) / block.x, (cols + block.y - 1) / block.y);
  naive_stencil_kernel<<<grid, block>>>(in, out, rows, cols);
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
  const size_t count = (size_t)ROWS * COLS, bytes = count * sizeof(float);
  std::vector<float> hIn(count), hOut(count);
  make_inputs(state, hIn);

  float *in, *out;
  CUDA_CHECK(cudaMalloc(&in, bytes));
  CUDA_CHECK(cudaMalloc(&out, bytes));
  CUDA_CHECK(cudaMemcpy(in, hIn.data(), bytes, cudaMemcpyHostToDevice));

  const int warmup = 2, iters = 20;
  for (int i = 0; i < warmup; ++i) launch_stencil(in, out, ROWS, COLS);
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaDeviceSynchronize());
  // Fresh inputs for the timed calls: the same splitmix64 stream continued, uploaded over
  // the same buffers, so no result computed during the warm-up can be replayed.
  make_inputs(state, hIn);
  CUDA_CHECK(cudaMemcpy(in, hIn.data(), bytes, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaDeviceSynchronize());
  // Poison the output so the timed launches must write every element themselves.
  CUDA_CHECK(cudaMemset(out, 0xFF, bytes));

  cudaEvent_t start, stop;
  CUDA_CHECK(cudaEventCreate(&start));
  CUDA_CHECK(cudaEventCreate(&stop));
  CUDA_CHECK(cudaEventRecord(start));
  for (int i = 0; i < iters; ++i) launch_stencil(in, out, ROWS, COLS);
  CUDA_CHECK(cudaEventRecord(stop));
  CUDA_CHECK(cudaEventSynchronize(stop));
  CUDA_CHECK(cudaGetLastError());
  float total_ms = 0.0f;
  CUDA_CHECK(cudaEventElapsedTime(&total_ms, start, stop));

  CUDA_CHECK(cudaMemcpy(hOut.data(), out, bytes, cudaMemcpyDeviceToHost));
  dump_output("float32", hOut.data(), count, sizeof(float));
  double checksum = 0.0, weighted = 0.0;
  for (size_t i = 0; i < count; ++i) {
    checksum += hOut[i];
    weighted += hOut[i] * (double)((i % 7) + 1);
  }
  printf("checksum %.6f\n", checksum);
  printf("weighted %.6f\n", weighted);
  printf("corners %.9g %.9g %.9g %.9g\n", hOut[0], hOut[COLS - 1],
         hOut[(size_t)(ROWS - 1) * COLS], hOut[count - 1]);
  printf("samples");
  for (int s = 0; s < 16; ++s) printf(" %.9g", hOut[next_random(state) % count]);
  printf("\n");
  fprintf(stderr, "KERNEL_MS: %.6f\n", total_ms / iters);
  return 0;
}
