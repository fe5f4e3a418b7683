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
// before each launch; the harness poisons it before every call.
//
// Measured on an H200 under the contract v1 harness: 0.64 ms per launcher call;
// one whole run ~0.5 s wall.
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

// The default size; the harness also checks 2^24 + 3. [[maybe_unused]]: the editable
// translation unit need not reference it.
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

#include <kernelloop_harness.cuh>

int main() {
  kl::Harness h;
  // The alternative size, 2^24 + 3 elements, catches a kernel that hard-codes 2^26 (or sizes its
  // grid for it): a quarter of the elements, and not a multiple of 4, so a float4 loop leaves a
  // tail of 3 elements that the exemplar and the template sum element by element (the buffer
  // itself stays 16-byte aligned).
  const int n = h.size({N, (1 << 24) + 3});
  const float* in = h.input<float>("in", (size_t)n, kl::Uniform<float>{0.0f, 1.0f});
  float* out = h.output<float>("out", 1);  // the launcher zeroes it itself
  // FLOPs: one addition per element.
  h.run([&] { launch_reduce_sum(in, out, n); }, {.warmup = 2, .calls = 20, .flops = (double)n});

  const float sum = h.fetch(out)[0];
  // One result only; the mean is the same number rescaled (a float sum of 2^26 terms carries
  // ~1e-5 relative rounding noise whatever the order, well inside rtol).
  printf("sum %.9g\n", (double)sum);
  printf("mean %.9g\n", (double)sum / (double)n);
  return 0;
}
