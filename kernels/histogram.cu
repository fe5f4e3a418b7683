// histogram.cu — 256-bin histogram of 2^26 bytes. The bytes are drawn from the seed with a
// skew: a quarter of them fall into 4 "hot" bins chosen from the seed (each ~16x as full
// as an average bin), the rest are uniform over all 256 values.
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
// before each launch; the harness still poisons them before the timed loop.
//
// Measured on an H200: 19.3 ms per launcher call; one whole run ~1.0 s wall.
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

// Fills the input bytes, continuing the splitmix64 stream: 4 distinct hot bins drawn first,
// then a quarter of the bytes fall into them and the rest are uniform over all 256 values.
// Distinct, so no seed piles two hot bins onto one counter (that doubled the contention). The
// hot bins' positions still vary with the seed, and the baseline's time with them: up to 25%
// across seeds on an H200, beyond the verifier's 15% drift guard in some runs.
static void make_inputs(uint64_t& state, std::vector<unsigned char>& hIn) {
  unsigned char hot[4];
  for (int h = 0; h < 4; ++h) {
    bool repeated = true;
    while (repeated) {
      hot[h] = (unsigned char)(next_random(state) >> 56);
      repeated = false;
      for (int g = 0; g < h; ++g) repeated = repeated || hot[g] == hot[h];
    }
  }
  for (unsigned char& x : hIn) {
    uint64_t r = next_random(state);
    x = ((r & 3) == 0) ? hot[(r >> 2) & 3] : (unsigned char)(r >> 56);
  }
}

int main() {
  const char* seed_text = getenv("KERNELLOOP_SEED");
  uint64_t state = seed_text ? strtoull(seed_text, nullptr, 10) : 20260528ull;
  const size_t count = (size_t)N;
  std::vector<unsigned char> hIn(count);
  make_inputs(state, hIn);
  std::vector<unsigned int> hBins(NUM_BINS);
  const size_t bin_bytes = NUM_BINS * sizeof(unsigned int);

  unsigned char* in;
  unsigned int* bins;
  CUDA_CHECK(cudaMalloc(&in, count));
  CUDA_CHECK(cudaMalloc(&bins, bin_bytes));
  CUDA_CHECK(cudaMemcpy(in, hIn.data(), count, cudaMemcpyHostToDevice));

  const int warmup = 2, iters = 20;
  for (int i = 0; i < warmup; ++i) launch_histogram(in, bins, N);
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaDeviceSynchronize());
  // Fresh inputs for the timed calls (new hot bins too): the same splitmix64 stream
  // continued, uploaded over the same buffers, so no result computed during the warm-up
  // can be replayed.
  make_inputs(state, hIn);
  CUDA_CHECK(cudaMemcpy(in, hIn.data(), count, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaDeviceSynchronize());
  // Poison the bins so the timed launches must (re)initialise and write them themselves.
  CUDA_CHECK(cudaMemset(bins, 0xFF, bin_bytes));

  cudaEvent_t start, stop;
  CUDA_CHECK(cudaEventCreate(&start));
  CUDA_CHECK(cudaEventCreate(&stop));
  CUDA_CHECK(cudaEventRecord(start));
  for (int i = 0; i < iters; ++i) launch_histogram(in, bins, N);
  CUDA_CHECK(cudaEventRecord(stop));
  CUDA_CHECK(cudaEventSynchronize(stop));
  CUDA_CHECK(cudaGetLastError());
  float total_ms = 0.0f;
  CUDA_CHECK(cudaEventElapsedTime(&total_ms, start, stop));

  CUDA_CHECK(cudaMemcpy(hBins.data(), bins, bin_bytes, cudaMemcpyDeviceToHost));
  static_assert(sizeof(unsigned int) == 4, "the bins are dumped as uint32");
  dump_output("uint32", hBins.data(), NUM_BINS, sizeof(unsigned int));
  double checksum = 0.0, weighted = 0.0;
  for (int b = 0; b < NUM_BINS; ++b) {
    checksum += hBins[b];
    weighted += hBins[b] * (double)((b % 7) + 1);
  }
  // Counts are exact integers: every one of the 256 bins is printed, 16 to a line.
  printf("checksum %.1f\n", checksum);
  printf("weighted %.1f\n", weighted);
  for (int b = 0; b < NUM_BINS; b += 16) {
    printf("bins");
    for (int k = 0; k < 16; ++k) printf(" %u", hBins[b + k]);
    printf("\n");
  }
  fprintf(stderr, "KERNEL_MS: %.6f\n", total_ms / iters);
  return 0;
}
