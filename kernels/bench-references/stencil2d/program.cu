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
// Measured on an H200 under the contract v1 harness: 1.72 ms per launcher call;
// one whole run ~0.8 s wall.
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

// The default size; the harness also checks 5001 x 2999. [[maybe_unused]]: the editable
// translation unit need not reference them.
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

#include <kernelloop_harness.cuh>

int main() {
  kl::Harness h;
  // The alternative size, 5001 rows of 2999 columns, catches a kernel that hard-codes 8192 x 8192
  // and one that swaps rows and columns (the default is square): both are odd, so no block
  // width, row sweep or vector width divides them, and the last
  // blocks are partial, which the exemplar and the template bound-check.
  const int rows = h.size({ROWS, 5001});
  const int cols = h.size({COLS, 2999});
  const size_t count = (size_t)rows * cols;
  const float* in = h.input<float>("in", count, kl::Uniform<float>{0.0f, 1.0f});
  float* out = h.output<float>("out", count);
  // FLOPs: four additions and a multiplication per interior cell; the border is copied.
  h.run([&] { launch_stencil(in, out, rows, cols); },
        {.warmup = 2, .calls = 20, .flops = 5.0 * (rows - 2) * (cols - 2)});

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
