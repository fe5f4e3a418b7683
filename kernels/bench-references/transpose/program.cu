// transpose.cu — out-of-place transpose of an 8192x8192 fp32 matrix: out[c][r] = in[r][c].
//
// Naive baseline: one thread per element, 32x8 blocks, threadIdx.x walks the columns of the
// input. Reads are coalesced (a warp reads 128 contiguous bytes of a row) but the writes are
// strided: the 32 lanes of a warp write one float each into 32 different output rows 32 KiB
// apart, so every warp store touches 32 sectors and DRAM write efficiency is ~1/8.
// Bottleneck an expert would diagnose: uncoalesced writes. Fix: stage a 32x32 tile through
// shared memory (padded to 32x33 so the column read of the tile is free of bank conflicts)
// and write it back transposed with coalesced rows — bandwidth-bound at ~512 MB of traffic.
//
// Measured on an H200 under the contract v1 harness: 0.99 ms per launcher call;
// one whole run ~0.75 s wall.
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

// The default size; the harness also checks 3001 x 4999. [[maybe_unused]]: the editable
// translation unit need not reference them.
[[maybe_unused]] static const int ROWS = 8192;  // rows of the input = columns of the output
[[maybe_unused]] static const int COLS = 8192;  // columns of the input = rows of the output

// kernelloop: editable begin
__global__ void naive_transpose_kernel(const float* in, float* out, int rows, int cols) {
  int col = blockIdx.x * blockDim.x + threadIdx.x;
  int row = blockIdx.y * blockDim.y + threadIdx.y;
  if (row < rows && col < cols) out[(size_t)col * rows + row] = in[(size_t)row * cols + col];
}

// in is rows x cols (row-major); out is cols x rows (row-major).
void launch_transpose(const float* in, float* out, int rows, int cols) {
  dim3 block(32, 8);
  dim3 grid((cols + block.x - 1) / block.x, (rows + block.y - 1) / block.y);
  naive_transpose_kernel<<<grid, block>>>(in, out, rows, cols);
}
// kernelloop: editable end

#include <kernelloop_harness.cuh>

int main() {
  kl::Harness h;
  // The alternative size, 3001 rows of 4999 columns, catches a kernel that hard-codes 8192 x 8192
  // and one that swaps rows and columns (the default is square, so that goes unseen there):
  // both are odd, so no tile or vector width divides them: the edge tiles are partial, which the
  // exemplar and the template bound-check.
  const int rows = h.size({ROWS, 3001});
  const int cols = h.size({COLS, 4999});
  const size_t count = (size_t)rows * cols;
  const float* in = h.input<float>("in", count, kl::Uniform<float>{0.0f, 1.0f});
  float* out = h.output<float>("out", count);  // cols rows of rows elements
  // FLOPs: none, a transpose only moves data.
  h.run([&] { launch_transpose(in, out, rows, cols); }, {.warmup = 2, .calls = 20, .flops = 0});

  std::vector<float> hOut = h.fetch(out);
  double checksum = 0.0, weighted = 0.0;
  for (size_t i = 0; i < count; ++i) {
    checksum += hOut[i];
    weighted += hOut[i] * (double)((i % 7) + 1);
  }
  printf("checksum %.9g\n", checksum);
  printf("weighted %.9g\n", weighted);
  printf("corners %.9g %.9g %.9g %.9g\n", hOut[0], hOut[rows - 1], hOut[(size_t)(cols - 1) * rows],
         hOut[count - 1]);
  return 0;
}
