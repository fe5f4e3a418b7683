// histogram.cu — 256-bin histogram of 2^26 bytes. The bytes are drawn afresh for every call
// with a skew: a quarter of them fall into 4 "hot" bins chosen for that call (each ~16x as
// full as an average bin), the rest are uniform over all 256 values.
//
// Naive baseline: one thread per byte, one global atomicAdd per element.
// Bottleneck an expert would diagnose: 67 million global atomics on only 256 addresses —
// they serialize in the L2 atomic units, worst on the hot bins — plus one-byte loads (each
// warp load brings in 32 useful bytes). Fix: privatize the histogram in shared memory
// (one sub-histogram per block, or per warp to also spread the hot-bin contention), read
// the input 16 bytes per thread with a grid-stride loop, and merge each block's 256 counts
// into the global bins with one atomicAdd per bin per block.
//
// The bins are accumulated with atomics, so the LAUNCHER zeroes them (cudaMemsetAsync)
// before each launch; the harness poisons them before every call.
//
// Measured on an H200 under the contract v1 harness: 19.3 ms per launcher call;
// one whole run ~1.0 s wall.
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

// The default size (the harness also checks 2^24 + 7) and the bin count. [[maybe_unused]]: the
// editable translation unit need not reference them.
[[maybe_unused]] static const int N = 1 << 26;
[[maybe_unused]] static const int NUM_BINS = 256;

// kernelloop: editable begin
__global__ void naive_histogram_kernel(const unsigned char* in, unsigned int* bins, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) atomicAdd(&bins[in[i]], 1u);
}

// Zeroes the NUM_BINS counters itself: the kernel accumulates into them with atomicAdd.
void launch_histogram(const unsigned char* in, unsigned int* bins, int n) {
  CUDA_CHECK(cudaMemsetAsync(bins, 0, NUM_BINS * sizeof(unsigned int)));
  int block = 256;
  int grid = (n + block - 1) / block;
  naive_histogram_kernel<<<grid, block>>>(in, bins, n);
}
// kernelloop: editable end

#include <kernelloop_harness.cuh>

// The input bytes (a kl::Harness generator, see kernelloop_harness.cuh): 4 distinct hot bins
// drawn from the key, then a quarter of the bytes fall into them and the rest are uniform over
// all 256 values. Distinct, so no key piles two hot bins onto one counter (that doubled the
// contention). The key is new for every call, so every call has hot bins of its own; their
// positions move the baseline's time (up to 25% from one set to another on an H200, under
// contract v1's one set per run), so the mean over the timed calls now averages several sets.
struct HotBinBytes {
  static constexpr bool stressable = true;  // any mix of bytes is a valid input (kl::Harness stress)
  __device__ uint8_t value(uint64_t r, size_t, uint64_t key) const {
    if ((r & 3) != 0) return (uint8_t)(r >> 56);
    const unsigned which = (unsigned)(r >> 2) & 3u;
    uint8_t hot[4];
    uint64_t state = key;
    for (unsigned k = 0; k <= which; ++k) {
      bool repeated = true;
      while (repeated) {
        state = kl::mix64(state);
        hot[k] = (uint8_t)(state >> 56);
        repeated = false;
        for (unsigned g = 0; g < k; ++g) repeated = repeated || hot[g] == hot[k];
      }
    }
    return hot[which];
  }
};

int main() {
  kl::Harness h;
  // The alternative size, 2^24 + 7 bytes, catches a kernel that hard-codes 2^26 (or sizes its
  // grid for it): a quarter of the bytes, and not a multiple of 16, so a 16-byte (uint4) loop
  // leaves a tail of 7 bytes that the exemplar and the template count one by one (the buffer
  // itself stays 16-byte aligned).
  const int n = h.size({N, (1 << 24) + 7});
  const unsigned char* in = h.input<uint8_t>("in", (size_t)n, HotBinBytes{});
  unsigned int* bins = h.output<unsigned int>("bins", NUM_BINS);  // the launcher zeroes them itself
  // FLOPs: none, a histogram counts with integer atomics.
  h.run([&] { launch_histogram(in, bins, n); }, {.warmup = 2, .calls = 20, .flops = 0});

  std::vector<unsigned int> hBins = h.fetch(bins);
  unsigned long long checksum = 0, weighted = 0;
  for (int b = 0; b < NUM_BINS; ++b) {
    checksum += hBins[b];
    weighted += hBins[b] * (unsigned long long)((b % 7) + 1);
  }
  // Counts are exact integers: every one of the 256 bins is printed, 16 to a line.
  printf("checksum %llu\n", checksum);
  printf("weighted %llu\n", weighted);
  for (int b = 0; b < NUM_BINS; b += 16) {
    printf("bins");
    for (int k = 0; k < 16; ++k) printf(" %u", hBins[b + k]);
    printf("\n");
  }
  return 0;
}
