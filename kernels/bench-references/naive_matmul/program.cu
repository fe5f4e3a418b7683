// naive_matmul.cu — 1024x1024 fp32 matrix product C = A * B, one thread per output
// element, 16x16 blocks, no data reuse (the reference demo's baseline).
//
// kernelloop program contract v2 (docs/contract.md): the frozen harness below the editable
// part hands its buffers and the launcher call to kernelloop_harness.cuh, which gives every
// timed call fresh inputs, flushes L2, times each call, checks each call's output and dumps
// the last. Only the part between the editable markers may be rewritten.
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

// The default size; the harness also checks correctness at 1001 (h.size below): it is odd, so no
// tile or vector width divides it, and a kernel that drops its edge handling fails there.
[[maybe_unused]] static const int N = 1024;

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

#include <kernelloop_harness.cuh>

int main() {
  kl::Harness h;
  const int n = h.size({N, 1001});
  const size_t count = (size_t)n * n;
  const float* A = h.input<float>("A", count, kl::Uniform<float>{0.0f, 1.0f});
  const float* B = h.input<float>("B", count, kl::Uniform<float>{0.0f, 1.0f});
  float* C = h.output<float>("C", count);
  h.run([&] { launch_matmul(A, B, C, n); }, {.warmup = 2, .calls = 20, .flops = 2.0 * n * n * n});

  std::vector<float> hC = h.fetch(C);
  double checksum = 0.0, weighted = 0.0;
  for (size_t i = 0; i < count; ++i) {
    checksum += hC[i];
    weighted += hC[i] * (double)((i % 7) + 1);
  }
  printf("checksum %.9g\n", checksum);
  printf("weighted %.9g\n", weighted);
  printf("corners %.9g %.9g %.9g %.9g\n", hC[0], hC[n - 1], hC[(size_t)(n - 1) * n], hC[count - 1]);
  return 0;
}
