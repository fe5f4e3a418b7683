// kernelloop_harness.cuh — the trusted harness of the kernelloop program contract, version 2.
//
// A v2 program's frozen harness (below the "editable end" marker) includes this header and
// hands it the buffers and the launcher call; the header runs the experiment so that every
// timed call is a fresh, checked experiment (docs/contract.md, "Contract v2"):
//
//   * every call (warm-up and timed) gets inputs of its own, generated on the GPU by a trusted
//     kernel from (seed, call, buffer); the seed of the timed calls is read from a pipe the
//     verifier fills (KERNELLOOP_STREAM_FD) only after warm-up, so it is not in the process
//     before then and nothing computed during warm-up can be reused;
//   * outputs and scratch buffers are poisoned and in-out buffers re-initialised before every
//     call, so every call must write its whole result;
//   * the L2 cache is flushed (a write of 2x its size, persisting lines reset) before every call;
//   * every call is timed by its own pair of events, on the legacy default stream;
//   * after every call a trusted kernel gathers elements of every output at positions drawn
//     from the pipe after the call (a candidate cannot know them while it runs), and guard zones
//     around every buffer are checked for out-of-bounds writes;
//   * after the last call every output is dumped whole.
//
// Everything goes to KERNELLOOP_OUTPUT_FILE (when set) as records the verifier reads:
//   kernelloop-manifest 2 <bytes>\n<json>
//   kernelloop-sample 2 <call> <buffer> <dtype> <count>\n<count raw elements>
//   kernelloop-output 1 <dtype> <count>\n<count raw elements>      (one per output, at the end)
// and stderr carries "KERNEL_MS: <mean ms per timed call>".
//
// Build a v2 program by hand with: nvcc -O3 -arch=sm_XX -I "$(kernelloop include-dir)" file.cu
#pragma once

#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <string>
#include <type_traits>
#include <vector>

namespace kl {

inline void check(cudaError_t err, const char* what, const char* file, int line) {
  if (err != cudaSuccess) {
    fprintf(stderr, "CUDA error %s in %s at %s:%d\n", cudaGetErrorString(err), what, file, line);
    exit(1);
  }
}
#define KL_CHECK(call) ::kl::check((call), #call, __FILE__, __LINE__)

[[noreturn]] inline void fail(const char* message) {
  fprintf(stderr, "kernelloop harness: %s\n", message);
  exit(1);
}

// An out-of-bounds write found by a guard zone: a distinct exit status the verifier reports.
constexpr int kGuardExitCode = 86;

__host__ __device__ inline uint64_t mix64(uint64_t z) {  // splitmix64's finalizer
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// The dump's name of each element type.
template <class T> struct DType;
template <> struct DType<float> { static constexpr const char* name = "float32"; };
template <> struct DType<double> { static constexpr const char* name = "float64"; };
template <> struct DType<int32_t> { static constexpr const char* name = "int32"; };
template <> struct DType<uint32_t> { static constexpr const char* name = "uint32"; };
template <> struct DType<int64_t> { static constexpr const char* name = "int64"; };
template <> struct DType<uint64_t> { static constexpr const char* name = "uint64"; };
template <> struct DType<int16_t> { static constexpr const char* name = "int16"; };
template <> struct DType<uint16_t> { static constexpr const char* name = "uint16"; };
template <> struct DType<int8_t> { static constexpr const char* name = "int8"; };
template <> struct DType<uint8_t> { static constexpr const char* name = "uint8"; };
template <> struct DType<__half> { static constexpr const char* name = "float16"; };
template <> struct DType<__nv_bfloat16> { static constexpr const char* name = "bfloat16"; };

template <class T> __host__ __device__ inline T from_float(float x) { return static_cast<T>(x); }
template <> __host__ __device__ inline __half from_float<__half>(float x) { return __float2half(x); }
template <> __host__ __device__ inline __nv_bfloat16 from_float<__nv_bfloat16>(float x) {
  return __float2bfloat16(x);
}

// Generators: `value(r, i, key)` gives element i from its own 64 random bits r; key is the
// (seed, call, buffer) key, the same for the whole buffer in one call (for buffer-wide
// choices such as a histogram's hot bins). Write your own with the same member.
template <class T> struct Uniform {  // floating point, in [lo, hi)
  float lo = 0.0f, hi = 1.0f;
  __device__ T value(uint64_t r, size_t, uint64_t) const {
    float u = (float)(r >> 40) * (1.0f / 16777216.0f);
    return from_float<T>(lo + (hi - lo) * u);
  }
};
template <class T> struct UniformInt {  // integers in [lo, hi); hi <= lo gives lo
  int64_t lo = 0, hi = 2;
  __device__ T value(uint64_t r, size_t, uint64_t) const {
    return hi > lo ? static_cast<T>(lo + (int64_t)(r % (uint64_t)(hi - lo))) : static_cast<T>(lo);
  }
};

template <class T, class Gen>
__global__ void kl_fill_kernel(T* out, size_t n, uint64_t key, Gen gen) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    out[i] = gen.value(mix64(key ^ mix64(i)), i, key);
}

__global__ void kl_gather_kernel(const unsigned char* base, size_t elem, const uint64_t* index, size_t count,
                                 unsigned char* out) {
  size_t k = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (k < count)
    for (size_t b = 0; b < elem; ++b) out[k * elem + b] = base[index[k] * elem + b];
}

__global__ void kl_guard_check_kernel(const unsigned char* zone, size_t n, unsigned char expect, int* bad) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    if (zone[i] != expect) atomicExch(bad, 1);
}

__global__ void kl_bandwidth_probe_kernel(const float4* in, float4* out, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    out[i] = in[i];
}

// FP32 FMA throughput: 8 independent chains per thread (the result is stored so the compiler
// keeps the work).
__global__ void kl_fma_probe_kernel(float* out, int iters, float a, float b) {
  float x[8];
  for (int j = 0; j < 8; ++j) x[j] = threadIdx.x * 1e-3f + j;
  for (int i = 0; i < iters; ++i)
#pragma unroll
    for (int j = 0; j < 8; ++j) x[j] = fmaf(x[j], a, b);
  float sum = 0.0f;
  for (int j = 0; j < 8; ++j) sum += x[j];
  if (sum == 12345.678f) out[threadIdx.x] = sum;
}

enum class Role { input, output, inout, scratch };
inline const char* role_name(Role r) {
  switch (r) {
    case Role::input: return "input";
    case Role::output: return "output";
    case Role::inout: return "inout";
    default: return "scratch";
  }
}

struct Buffer {
  std::string name;
  Role role;
  const char* dtype;
  size_t count, elem;
  unsigned char* base;  // the allocation: guard, data, guard
  unsigned char* data;
  void (*fill)(const Buffer&, uint64_t key, const void* gen);
  std::vector<unsigned char> gen;  // the generator, by value
};

struct RunOptions {
  int warmup = 2;
  int calls = 20;
  double flops = 0.0;  // the work one call must do, when known (a matmul: 2*M*N*K)
};

class Harness {
 public:
  static constexpr size_t kGuardBytes = 4096;
  static constexpr unsigned char kGuardByte = 0xA5;
  static constexpr int kSamplesPerBuffer = 256;

  Harness() {
    const char* seed_text = getenv("KERNELLOOP_SEED");
    seed_ = seed_text && *seed_text ? strtoull(seed_text, nullptr, 10) : 20260528ull;
    const char* fd_text = getenv("KERNELLOOP_STREAM_FD");
    secret_fd_ = fd_text && *fd_text ? atoi(fd_text) : -1;
    const char* size_text = getenv("KERNELLOOP_SIZE_INDEX");
    size_index_ = size_text && *size_text ? atoi(size_text) : 0;
    const char* out = getenv("KERNELLOOP_OUTPUT_FILE");
    if (out && *out) output_path_ = out;
    KL_CHECK(cudaGetDevice(&device_));
  }
  Harness(const Harness&) = delete;
  Harness& operator=(const Harness&) = delete;

  // The problem size: the first option normally; the verifier also checks correctness at the
  // others (KERNELLOOP_SIZE_INDEX), so a kernel specialised to one size is caught.
  template <class T> T size(std::initializer_list<T> options) {
    if (options.size() == 0) fail("size() needs at least one option");
    if (size_calls_++ > 0 && size_options_ != (int)options.size())
      fail("every size() call needs the same number of options (one alternative problem per index)");
    size_options_ = (int)options.size();
    if (size_index_ < 0 || size_index_ >= (int)options.size()) fail("KERNELLOOP_SIZE_INDEX out of range");
    return options.begin()[size_index_];
  }

  template <class T, class Gen = Uniform<T>> T* input(const char* name, size_t count, Gen gen = Gen()) {
    return add<T, Gen>(name, Role::input, count, gen);
  }
  // Read and written: re-initialised from `gen` before every call (e.g. C in C = aAB + bC).
  template <class T, class Gen = Uniform<T>> T* inout(const char* name, size_t count, Gen gen = Gen()) {
    return add<T, Gen>(name, Role::inout, count, gen);
  }
  template <class T> T* output(const char* name, size_t count) {
    return add<T, Uniform<T>>(name, Role::output, count, Uniform<T>());
  }
  // Workspace the launcher may use; poisoned before every call, never compared.
  template <class T> T* scratch(const char* name, size_t count) {
    return add<T, Uniform<T>>(name, Role::scratch, count, Uniform<T>());
  }

  // Warm-up calls, then the timed calls, each a fresh, checked experiment.
  template <class Launch> void run(Launch launch, RunOptions opt = RunOptions()) {
    if (opt.calls < 1 || opt.warmup < 1) fail("run() needs at least one warm-up call and one timed call");
    prepare(opt);
    for (int w = 0; w < opt.warmup; ++w) {
      prepare_call(mix64(seed_ ^ 0x5741524D55500000ull) + (uint64_t)w);
      launch();
      KL_CHECK(cudaGetLastError());
      KL_CHECK(cudaDeviceSynchronize());
      check_guards(-1 - w);
    }
    const uint64_t secret = read_secret();  // only now does the timed calls' seed exist here
    std::vector<float> ms(opt.calls);
    for (int c = 0; c < opt.calls; ++c) {
      prepare_call(mix64(secret) + (uint64_t)c);
      KL_CHECK(cudaEventRecord(start_[c]));
      launch();
      KL_CHECK(cudaEventRecord(stop_[c]));
      KL_CHECK(cudaEventSynchronize(stop_[c]));
      KL_CHECK(cudaGetLastError());
      KL_CHECK(cudaDeviceSynchronize());  // work left on other streams lands before the check
      KL_CHECK(cudaEventElapsedTime(&ms[c], start_[c], stop_[c]));
      check_guards(c);
      sample_outputs(c, read_secret());
    }
    double total = 0.0;
    for (float t : ms) total += t;
    dump_outputs();
    call_ms_ = ms;
    fprintf(stderr, "KERNEL_MS: %.6f\n", total / opt.calls);
  }

  // Copies an output (after run(): the last call's result) to the host, for printing.
  template <class T> std::vector<T> fetch(const T* device_ptr) {
    const Buffer& b = find(device_ptr);
    std::vector<T> host(b.count);
    KL_CHECK(cudaMemcpy(host.data(), b.data, b.count * b.elem, cudaMemcpyDeviceToHost));
    return host;
  }

  uint64_t seed() const { return seed_; }
  const std::vector<float>& call_ms() const { return call_ms_; }

 private:
  template <class T, class Gen>
  static void fill_with(const Buffer& b, uint64_t key, const void* gen) {
    static_assert(std::is_trivially_copyable<Gen>::value, "a generator is copied by value to the GPU");
    Gen g;
    memcpy(&g, gen, sizeof(Gen));
    kl_fill_kernel<T, Gen><<<1024, 256>>>(reinterpret_cast<T*>(b.data), b.count, key, g);
    KL_CHECK(cudaGetLastError());
  }

  template <class T, class Gen> T* add(const char* name, Role role, size_t count, Gen gen) {
    if (prepared_) fail("declare every buffer before run()");
    if (count == 0) fail("a buffer needs at least one element");
    Buffer b;
    b.name = name;
    b.role = role;
    b.dtype = DType<T>::name;
    b.count = count;
    b.elem = sizeof(T);
    KL_CHECK(cudaMalloc(&b.base, count * sizeof(T) + 2 * kGuardBytes));
    b.data = b.base + kGuardBytes;
    b.fill = &Harness::fill_with<T, Gen>;
    b.gen.resize(sizeof(Gen));
    memcpy(b.gen.data(), &gen, sizeof(Gen));
    buffers_.push_back(b);
    return reinterpret_cast<T*>(b.data);
  }

  const Buffer& find(const void* device_ptr) const {
    for (const Buffer& b : buffers_)
      if (b.data == device_ptr) return b;
    fail("fetch() of a pointer that is no declared buffer");
  }

  void prepare(const RunOptions& opt) {
    prepared_ = true;
    int l2 = 0;
    KL_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device_));
    flush_bytes_ = std::max<size_t>(2 * (size_t)l2, (size_t)64 << 20);
    KL_CHECK(cudaMalloc(&flush_, flush_bytes_));
    KL_CHECK(cudaMalloc(&guard_bad_, sizeof(int)));
    size_t most = 1;
    for (Buffer& b : buffers_) {
      KL_CHECK(cudaMemset(b.base, kGuardByte, kGuardBytes));
      KL_CHECK(cudaMemset(b.data + b.count * b.elem, kGuardByte, kGuardBytes));
      most = std::max(most, b.elem);
    }
    KL_CHECK(cudaMalloc(&sample_index_, kSamplesPerBuffer * sizeof(uint64_t)));
    KL_CHECK(cudaMalloc(&sample_values_, kSamplesPerBuffer * most));
    start_.resize(opt.calls);
    stop_.resize(opt.calls);
    for (int c = 0; c < opt.calls; ++c) {
      KL_CHECK(cudaEventCreate(&start_[c]));
      KL_CHECK(cudaEventCreate(&stop_[c]));
    }
    double fma_gflops = 0.0;
    const double copy_gbps = probe_bandwidth(&fma_gflops);
    write_manifest(opt, copy_gbps, fma_gflops);
  }

  // Device-to-device copy bandwidth (read + write bytes per second) of a trusted kernel over
  // the flush buffer, and FP32 FMA throughput: the speed-of-light gate's yardsticks, measured
  // on this GPU in this run, before any launcher call.
  double probe_bandwidth(double* fma_gflops) {
    const size_t half = flush_bytes_ / 2 / sizeof(float4);
    const float4* in = reinterpret_cast<const float4*>(flush_);
    float4* out = reinterpret_cast<float4*>(flush_) + half;
    cudaEvent_t a, b;
    KL_CHECK(cudaEventCreate(&a));
    KL_CHECK(cudaEventCreate(&b));
    float best = 1e30f;
    for (int rep = 0; rep < 4; ++rep) {
      KL_CHECK(cudaEventRecord(a));
      kl_bandwidth_probe_kernel<<<2048, 256>>>(in, out, half);
      KL_CHECK(cudaEventRecord(b));
      KL_CHECK(cudaEventSynchronize(b));
      float t = 0.0f;
      KL_CHECK(cudaEventElapsedTime(&t, a, b));
      if (rep > 0 && t < best) best = t;
    }
    int sms = 1;
    KL_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device_));
    const int blocks = 8 * sms, threads = 256, iters = 2048;
    float best_fma = 1e30f;
    for (int rep = 0; rep < 3; ++rep) {
      KL_CHECK(cudaEventRecord(a));
      kl_fma_probe_kernel<<<blocks, threads>>>(reinterpret_cast<float*>(flush_), iters, 0.999f, 1e-3f);
      KL_CHECK(cudaEventRecord(b));
      KL_CHECK(cudaEventSynchronize(b));
      float t = 0.0f;
      KL_CHECK(cudaEventElapsedTime(&t, a, b));
      if (rep > 0 && t < best_fma) best_fma = t;
    }
    *fma_gflops = 2.0 * 8.0 * iters * (double)blocks * threads / (best_fma * 1e-3) / 1e9;
    KL_CHECK(cudaEventDestroy(a));
    KL_CHECK(cudaEventDestroy(b));
    return 2.0 * (double)half * sizeof(float4) / (best * 1e-3) / 1e9;
  }

  void prepare_call(uint64_t key) {
    for (size_t i = 0; i < buffers_.size(); ++i) {
      Buffer& b = buffers_[i];
      if (b.role == Role::input || b.role == Role::inout)
        b.fill(b, mix64(key ^ (0x1000 + i)), b.gen.data());
      else
        KL_CHECK(cudaMemset(b.data, 0xFF, b.count * b.elem));  // poison
    }
    KL_CHECK(cudaCtxResetPersistingL2Cache());
    KL_CHECK(cudaMemset(flush_, (int)(key & 0x7F), flush_bytes_));
    KL_CHECK(cudaDeviceSynchronize());
  }

  void check_guards(int call) {
    KL_CHECK(cudaMemset(guard_bad_, 0, sizeof(int)));
    for (Buffer& b : buffers_) {
      kl_guard_check_kernel<<<8, 256>>>(b.base, kGuardBytes, kGuardByte, guard_bad_);
      kl_guard_check_kernel<<<8, 256>>>(b.data + b.count * b.elem, kGuardBytes, kGuardByte, guard_bad_);
      int bad = 0;
      KL_CHECK(cudaMemcpy(&bad, guard_bad_, sizeof(int), cudaMemcpyDeviceToHost));
      if (bad) {
        fprintf(stderr, "kernelloop harness: out-of-bounds write: a guard zone of buffer '%s' changed in %s %d\n",
                b.name.c_str(), call < 0 ? "warm-up call" : "timed call", call < 0 ? -call : call + 1);
        exit(kGuardExitCode);
      }
    }
  }

  // 8 bytes from the verifier's pipe; without one (a run by hand), a stream from the seed.
  uint64_t read_secret() {
    if (secret_fd_ < 0) return mix64(seed_ ^ 0x53454352ull ^ ++local_draws_);
    uint64_t v = 0;
    size_t got = 0;
    while (got < sizeof v) {
      ssize_t n = read(secret_fd_, reinterpret_cast<char*>(&v) + got, sizeof v - got);
      if (n <= 0) fail("cannot read the verifier's secret stream (KERNELLOOP_STREAM_FD)");
      got += (size_t)n;
    }
    return v;
  }

  void sample_outputs(int call, uint64_t sample_seed) {
    if (output_path_.empty()) return;
    std::vector<uint64_t> index(kSamplesPerBuffer);
    std::vector<unsigned char> values;
    for (size_t i = 0; i < buffers_.size(); ++i) {
      const Buffer& b = buffers_[i];
      if (b.role != Role::output && b.role != Role::inout) continue;
      const size_t k = std::min<size_t>(kSamplesPerBuffer, b.count);
      for (size_t j = 0; j < k; ++j)
        index[j] = k == b.count ? j : mix64(sample_seed ^ mix64((i << 32) + j)) % b.count;
      KL_CHECK(cudaMemcpy(sample_index_, index.data(), k * sizeof(uint64_t), cudaMemcpyHostToDevice));
      kl_gather_kernel<<<(unsigned)((k + 127) / 128), 128>>>(b.data, b.elem, sample_index_, k, sample_values_);
      KL_CHECK(cudaGetLastError());
      values.resize(k * b.elem);
      KL_CHECK(cudaMemcpy(values.data(), sample_values_, k * b.elem, cudaMemcpyDeviceToHost));
      char header[160];
      snprintf(header, sizeof header, "kernelloop-sample 2 %d %zu %s %zu\n", call, i, b.dtype, k);
      append(header, strlen(header));
      append(values.data(), values.size());
    }
  }

  void dump_outputs() {
    if (output_path_.empty()) return;
    for (const Buffer& b : buffers_) {
      if (b.role != Role::output && b.role != Role::inout) continue;
      std::vector<unsigned char> host(b.count * b.elem);
      KL_CHECK(cudaMemcpy(host.data(), b.data, host.size(), cudaMemcpyDeviceToHost));
      char header[128];
      snprintf(header, sizeof header, "kernelloop-output 1 %s %zu\n", b.dtype, b.count);
      append(header, strlen(header));
      append(host.data(), host.size());
    }
  }

  void write_manifest(const RunOptions& opt, double copy_gbps, double fma_gflops) {
    if (output_path_.empty()) return;
    std::string json = "{\"contract\":2,\"warmup\":" + std::to_string(opt.warmup) +
                       ",\"calls\":" + std::to_string(opt.calls) + ",\"flops\":" + std::to_string(opt.flops) +
                       ",\"size_index\":" + std::to_string(size_index_) +
                       ",\"size_options\":" + std::to_string(size_options_) +
                       ",\"l2_flush_bytes\":" + std::to_string(flush_bytes_) +
                       ",\"copy_gbps\":" + std::to_string(copy_gbps) +
                       ",\"fma_gflops\":" + std::to_string(fma_gflops) +
                       ",\"samples_per_buffer\":" + std::to_string(kSamplesPerBuffer) +
                       ",\"secret_fd\":" + (secret_fd_ >= 0 ? "true" : "false") + ",\"buffers\":[";
    for (size_t i = 0; i < buffers_.size(); ++i) {
      const Buffer& b = buffers_[i];
      std::string name;
      for (char ch : b.name) name += (ch == '"' || ch == '\\' || (unsigned char)ch < 0x20) ? '_' : ch;
      json += (i ? "," : "") + std::string("{\"name\":\"") + name + "\",\"role\":\"" + role_name(b.role) +
              "\",\"dtype\":\"" + b.dtype + "\",\"count\":" + std::to_string(b.count) + "}";
    }
    json += "]}";
    std::string header = "kernelloop-manifest 2 " + std::to_string(json.size()) + "\n";
    append(header.data(), header.size());
    append(json.data(), json.size());
  }

  void append(const void* data, size_t bytes) {
    FILE* f = fopen(output_path_.c_str(), "ab");
    if (f == nullptr) fail("cannot open KERNELLOOP_OUTPUT_FILE for appending");
    bool ok = fwrite(data, 1, bytes, f) == bytes;
    if (fclose(f) != 0 || !ok) fail("cannot write KERNELLOOP_OUTPUT_FILE");
  }

  uint64_t seed_ = 0, local_draws_ = 0;
  int secret_fd_ = -1, size_index_ = 0, size_options_ = 1, size_calls_ = 0, device_ = 0;
  bool prepared_ = false;
  std::string output_path_;
  std::vector<Buffer> buffers_;
  std::vector<cudaEvent_t> start_, stop_;
  std::vector<float> call_ms_;
  unsigned char* flush_ = nullptr;
  size_t flush_bytes_ = 0;
  int* guard_bad_ = nullptr;
  uint64_t* sample_index_ = nullptr;
  unsigned char* sample_values_ = nullptr;
};

}  // namespace kl
