// row_softmax.cu — numerically stable softmax over each row of a 16384x2048 fp32 matrix:
// out[r][c] = exp(in[r][c] - max_r) / sum_c exp(in[r][c] - max_r).
//
// Naive baseline: ONE THREAD PER ROW, three passes over global memory (row max, sum of
// exponentials, normalise and write).
// Bottleneck an expert would diagnose: uncoalesced, latency-bound access. Lanes of a warp
// walk 32 different rows 8 KiB apart, so every warp load touches 32 sectors for 32 useful
// floats, each row is read three times, and only 16384 threads exist (~4 warps per SM on
// an H100), far too few to hide memory latency. Fix: one block (or warp) per row, coalesced
// float4 loads, the row held in registers, max and sum reduced with warp shuffles, so each
// element is read once and written once (bandwidth-bound, ~256 MB of traffic).
// (16384 rows rather than 8192 so that even the one-thread-per-row baseline has a block of
// 128 threads for nearly every SM.)
//
// Measured on an H200 under the contract v1 harness: 0.92 ms per launcher call;
// one whole run ~0.55 s wall.
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

// The default size; the harness also checks 3001 x 1500. [[maybe_unused]]: the editable
// translation unit need not reference them.
[[maybe_unused]] static const int ROWS = 16384;
[[maybe_unused]] static const int COLS = 2048;

// kernelloop: editable begin
__global__ void naive_softmax_kernel(const float* in, float* out, int rows, int cols) {
  int row = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= rows) return;
  const float* x = in + (size_t)row * cols;
  float* y = out + (size_t)row * cols;
  float m = x[0];
  for (int c = 1; c < cols; ++c) m = fmaxf(m, x[c]);
  float s = 0.0f;
  for (int c = 0; c < cols; ++c) s += expf(x[c] - m);
  for (int c = 0; c < cols; ++c) y[c] = expf(x[c] - m) / s;
}

void launch_softmax(const float* in, float* out, int rows, int cols) {
  int block = 128;
  int grid = (rows + block - 1) / block;
  naive_softmax_kernel<<<grid, block>>>(in, out, rows, cols);
}
// kernelloop: editable end

#include <kernelloop_harness.cuh>

int main() {
  kl::Harness h;
  // The alternative size, 3001 rows of 1500 columns, catches a kernel that hard-codes 16384 x 2048
  // (or a row length of 2048, like the register-resident path of a block-per-row kernel): 1500 is
  // a multiple of 4, so the rows stay 16-byte aligned for float4 loads (the verdict says so), but
  // not of 8, 32, 128 or 256, so a row ends inside a warp's or a block's last chunk; 3001 rows is
  // odd, so no rows-per-block grouping divides it. The exemplars and the templates
  // take their general paths for it.
  const int rows = h.size({ROWS, 3001});
  const int cols = h.size({COLS, 1500});
  const size_t count = (size_t)rows * cols;
  // Logits in [-100, 100): beyond expf's range (88), so a softmax that skips the max subtraction
  // overflows here, as it would on real logits; inputs in [0, 1) would let it pass.
  const float* in = h.input<float>("in", count, kl::Uniform<float>{-100.0f, 100.0f});
  float* out = h.output<float>("out", count);
  // FLOPs: at least a subtraction (or the FMA that scales the exponent), an addition into the
  // row sum and a scaling per element; the exponentials and the max comparisons are not counted.
  h.run([&] { launch_softmax(in, out, rows, cols); },
        {.warmup = 2, .calls = 20, .flops = 3.0 * rows * cols});

  std::vector<float> hOut = h.fetch(out);
  double checksum = 0.0, weighted = 0.0;
  for (size_t i = 0; i < count; ++i) {
    checksum += hOut[i];
    weighted += hOut[i] * (double)((i % 7) + 1);
  }
  printf("checksum %.9g\n", checksum);
  printf("weighted %.9g\n", weighted);
  printf("corners %.9g %.9g %.9g %.9g\n", hOut[0], hOut[cols - 1], hOut[(size_t)(rows - 1) * cols],
         hOut[count - 1]);
  return 0;
}
