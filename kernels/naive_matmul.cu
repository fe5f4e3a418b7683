// naive_matmul.cu — 1024x1024 fp32 matrix product C = A * B, one thread per output
// element, 16x16 blocks, no data reuse (the reference demo's baseline).
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

static const int N = 1024;

// kernelloop: editable begin
__global__ void naive_matmul_kernel(const float* A, const float* B, float* C, int n) {
  int row = blockIdx.y * blockDim.y + threadIdx.y;
  int col = blockIdx.x * blockDim.x + threadIdx.x;
  if (row < n && col < n) {
    float acc = 0.0f;
    for (int k = 0; k < n; ++k) acc += A[row * n + k] * B[k * n + col];
    C[row * n + col] = acc;
  }
}

void launch_matmul(const float* A, const float* B, float* C, int n) {
  dim3 block(16, 16);
  dim3 grid((n + block.x - 1) / block.x, (n + block.y - 1) / block.y);
  naive_matmul_kernel<<<grid, block>>>(A, B, C, n);
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

// Fills A then B with values in [0, 1), continuing the splitmix64 stream.
static void make_inputs(uint64_t& state, std::vector<float>& hA, std::vector<float>& hB) {
  for (float& a : hA) a = (next_random(state) >> 40) * (1.0f / 16777216.0f);
  for (float& b : hB) b = (next_random(state) >> 40) * (1.0f / 16777216.0f);
}

int main() {
  const char* seed_text = getenv("KERNELLOOP_SEED");
  uint64_t state = seed_text ? strtoull(seed_text, nullptr, 10) : 20260528ull;
  const size_t count = (size_t)N * N, bytes = count * sizeof(float);
  std::vector<float> hA(count), hB(count), hC(count);
  make_inputs(state, hA, hB);

  float *A, *B, *C;
  CUDA_CHECK(cudaMalloc(&A, bytes));
  CUDA_CHECK(cudaMalloc(&B, bytes));
  CUDA_CHECK(cudaMalloc(&C, bytes));
  CUDA_CHECK(cudaMemcpy(A, hA.data(), bytes, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(B, hB.data(), bytes, cudaMemcpyHostToDevice));

  const int warmup = 2, iters = 20;
  for (int i = 0; i < warmup; ++i) launch_matmul(A, B, C, N);
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaDeviceSynchronize());
  // Fresh inputs for the timed calls: the same splitmix64 stream continued, uploaded over
  // the same buffers, so no result computed during the warm-up can be replayed.
  make_inputs(state, hA, hB);
  CUDA_CHECK(cudaMemcpy(A, hA.data(), bytes, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(B, hB.data(), bytes, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaDeviceSynchronize());
  // Poison the output so the timed launches must write every element themselves.
  CUDA_CHECK(cudaMemset(C, 0xFF, bytes));

  cudaEvent_t start, stop;
  CUDA_CHECK(cudaEventCreate(&start));
  CUDA_CHECK(cudaEventCreate(&stop));
  CUDA_CHECK(cudaEventRecord(start));
  for (int i = 0; i < iters; ++i) launch_matmul(A, B, C, N);
  CUDA_CHECK(cudaEventRecord(stop));
  CUDA_CHECK(cudaEventSynchronize(stop));
  CUDA_CHECK(cudaGetLastError());
  float total_ms = 0.0f;
  CUDA_CHECK(cudaEventElapsedTime(&total_ms, start, stop));

  CUDA_CHECK(cudaMemcpy(hC.data(), C, bytes, cudaMemcpyDeviceToHost));
  dump_output("float32", hC.data(), count, sizeof(float));
  double checksum = 0.0, weighted = 0.0;
  for (size_t i = 0; i < count; ++i) {
    checksum += hC[i];
    weighted += hC[i] * (double)((i % 7) + 1);
  }
  printf("checksum %.6f\n", checksum);
  printf("weighted %.6f\n", weighted);
  printf("corners %.6f %.6f %.6f %.6f\n", hC[0], hC[N - 1], hC[(size_t)(N - 1) * N], hC[count - 1]);
  printf("samples");
  for (int s = 0; s < 16; ++s) printf(" %.6f", hC[next_random(state) % count]);
  printf("\n");
  fprintf(stderr, "KERNEL_MS: %.6f\n", total_ms / iters);
  return 0;
}
