// kl_capture_inject.cpp - kernelloop's launch-capture injection library (`kernelloop init --capture`).
//
// Loaded into a user's own CUDA program with CUDA_INJECTION64_PATH=<this .so>; the CUDA driver
// dlopens it during cuInit and calls InitializeInjection(). It records what each kernel launch
// really is, so that `init` can write a harness that reproduces it:
//   - the kernel's (mangled) name and its demangled signature,
//   - grid, block, dynamic shared memory,
//   - every argument's bytes (sizes from the demangled signature's types; for a launch through
//     the driver API, from cuFuncGetParamInfo), and for each argument that points into
//     GPU memory the allocation it points into (base, size, memory type),
//   - at the first launch of each kernel, a sample of the memory each pointer argument points at
//     (after synchronizing the launch's stream), so value ranges of inputs can be seen,
//   - and, from CUPTI's activity records, each launch's GPU time (matched by correlation id).
// One JSON object per line goes to the file named by $KERNELLOOP_CAPTURE_OUT:
//   {"kind":"meta","pid":P,"cupti_version":N}
//   {"kind":"launch","corr":C,"api":"runtime|driver","name":"<mangled>","signature":"<demangled>"|null,
//    "grid":[x,y,z],"block":[x,y,z],"smem":B,
//    "args":[{"type":"float const*"|null,"size":S|null,"hex":"..","pointer":{"base":"0x..","size":N,
//             "memory":"device|managed|host|other"}|null,"sample":"hex"|null}, ...]}
//   {"kind":"kernel","corr":C,"name":"<mangled>","start":T,"end":T}
//   {"kind":"error","where":"..","message":".."}  {"kind":"truncated"}  {"kind":"end"}
// Caps (environment, with defaults): KERNELLOOP_CAPTURE_MAX_LAUNCHES=20000 launch lines,
// KERNELLOOP_CAPTURE_SAMPLE_BYTES=16384 bytes sampled per pointer argument, samples for at most
// 64 distinct kernels. Rules: never crash or alter the program's results; a failure becomes an
// "error" line; a launch inside a CUDA graph capture is recorded without samples (a synchronous
// copy would break the capture).
//
// Build: g++ -std=c++17 -O2 -Wall -shared -fPIC kl_capture_inject.cpp -I<cuda/include>
//        -I<cupti/include> -L<cupti/lib> -lcupti -Wl,-rpath,<cupti/lib> -ldl -lpthread

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <cupti.h>  // also brings the generated_*_meta.h parameter structs

#include <cxxabi.h>
#include <dlfcn.h>
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#if CUPTI_API_VERSION >= 130000
typedef CUpti_ActivityKernel10 KlKernelRecord;  // the layout of the libcupti these headers belong to
#else
typedef CUpti_ActivityKernel9 KlKernelRecord;
#endif

namespace {

// Driver entry points, looked up in the already loaded libcuda (no link-time dependency).
typedef CUresult (*GetAddressRangeFn)(CUdeviceptr *, size_t *, CUdeviceptr);
typedef CUresult (*PointerGetAttributeFn)(void *, CUpointer_attribute, CUdeviceptr);
typedef CUresult (*MemcpyDtoHFn)(void *, CUdeviceptr, size_t);
typedef CUresult (*StreamSynchronizeFn)(CUstream);
typedef CUresult (*StreamIsCapturingFn)(CUstream, CUstreamCaptureStatus *);
typedef CUresult (*FuncGetNameFn)(const char **, CUfunction);
typedef CUresult (*FuncGetParamInfoFn)(CUfunction, size_t, size_t *, size_t *);

struct Driver {
  GetAddressRangeFn get_address_range = nullptr;
  PointerGetAttributeFn pointer_get_attribute = nullptr;
  MemcpyDtoHFn memcpy_dtoh = nullptr;
  StreamSynchronizeFn stream_synchronize = nullptr;
  StreamIsCapturingFn stream_is_capturing = nullptr;
  FuncGetNameFn func_get_name = nullptr;
  FuncGetParamInfoFn func_get_param_info = nullptr;
} g_drv;

pthread_mutex_t g_mutex = PTHREAD_MUTEX_INITIALIZER;
FILE *g_out = nullptr;
std::atomic<bool> g_enabled{false};
std::atomic<bool> g_initialized{false};
std::atomic<bool> g_finished{false};
std::atomic<long> g_launches{0};
long g_max_launches = 20000;
size_t g_sample_bytes = 16384;
constexpr size_t kMaxSampledKernels = 64;
std::set<std::string> g_sampled;  // kernels sampled so far; guarded by g_mutex
CUpti_SubscriberHandle g_subscriber;

// A runtime launch may call the driver's launch too: only the runtime callback records it.
thread_local bool t_in_runtime_launch = false;
thread_local int t_in_self = 0;  // our own driver calls must not be recorded

void write_line(const std::string &line) {
  pthread_mutex_lock(&g_mutex);
  if (g_out != nullptr) fwrite(line.data(), 1, line.size(), g_out);
  pthread_mutex_unlock(&g_mutex);
}

void append_json_string(std::string &s, const char *str) {
  s += '"';
  for (const unsigned char *p = reinterpret_cast<const unsigned char *>(str); *p; ++p) {
    if (*p == '"' || *p == '\\') {
      s += '\\';
      s += static_cast<char>(*p);
    } else if (*p < 0x20 || *p >= 0x7f) {
      char buf[8];
      snprintf(buf, sizeof buf, "\\u%04x", *p);
      s += buf;
    } else {
      s += static_cast<char>(*p);
    }
  }
  s += '"';
}

void append_hex(std::string &s, const unsigned char *bytes, size_t n) {
  static const char digits[] = "0123456789abcdef";
  s.reserve(s.size() + 2 * n + 2);
  for (size_t i = 0; i < n; ++i) {
    s += digits[bytes[i] >> 4];
    s += digits[bytes[i] & 15];
  }
}

void report_error(const char *where, const char *message) {
  static std::atomic<int> count{0};
  if (count.fetch_add(1) >= 50) return;
  std::string line = "{\"kind\":\"error\",\"where\":";
  append_json_string(line, where);
  line += ",\"message\":";
  append_json_string(line, message);
  line += "}\n";
  write_line(line);
}

std::string demangle(const char *name) {
  if (name == nullptr) return "";
  int status = 0;
  char *out = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  if (status != 0 || out == nullptr) return "";
  std::string s(out);
  free(out);
  return s;
}

// The parameter types of a demangled function signature: the top-level comma-separated parts
// of its last parenthesis group ("void k<32>(float*, int)" -> {"float*", "int"}).
std::vector<std::string> parameter_types(const std::string &signature) {
  std::vector<std::string> types;
  size_t close = signature.rfind(')');
  if (close == std::string::npos) return types;
  int depth = 0;
  size_t open = std::string::npos;
  for (size_t i = close + 1; i-- > 0;) {
    char c = signature[i];
    if (c == ')') ++depth;
    if (c == '(' && --depth == 0) {
      open = i;
      break;
    }
  }
  if (open == std::string::npos) return types;
  std::string cur;
  depth = 0;
  for (size_t i = open + 1; i < close; ++i) {
    char c = signature[i];
    if (c == '(' || c == '<' || c == '[') ++depth;
    if (c == ')' || c == '>' || c == ']') --depth;
    if (c == ',' && depth == 0) {
      types.push_back(cur);
      cur.clear();
    } else if (!(cur.empty() && c == ' ')) {
      cur += c;
    }
  }
  if (!cur.empty() && cur != "void") types.push_back(cur);
  return types;
}

// The size of a parameter of this (demangled) type; 0 when it cannot be told from the name.
size_t type_size(const std::string &type) {
  int depth = 0;
  for (char c : type) {
    if (c == '<') ++depth;
    if (c == '>') --depth;
    if (c == '*' && depth == 0) return sizeof(void *);
  }
  std::string t;
  for (size_t i = 0; i < type.size(); ++i) {  // drop cv-qualifiers
    if (type.compare(i, 6, "const ") == 0 || type.compare(i, 6, " const") == 0) {
      i += 5;
      continue;
    }
    if (type.compare(i, 9, "volatile ") == 0) {
      i += 8;
      continue;
    }
    t += type[i];
  }
  static const struct { const char *name; size_t size; } sizes[] = {
      {"bool", 1}, {"char", 1}, {"signed char", 1}, {"unsigned char", 1}, {"short", 2},
      {"unsigned short", 2}, {"int", 4}, {"unsigned int", 4}, {"long", 8}, {"unsigned long", 8},
      {"long long", 8}, {"unsigned long long", 8}, {"float", 4}, {"double", 8}, {"__half", 2},
      {"__nv_bfloat16", 2}, {"half", 2}, {"char2", 2}, {"int2", 8}, {"float2", 8}, {"float4", 16},
      {"int4", 16}, {"uint2", 8}, {"uint4", 16}, {"double2", 16}, {"dim3", 12}};
  for (const auto &entry : sizes) {
    if (t == entry.name) return entry.size;
  }
  return 0;
}

const char *memory_kind(CUdeviceptr p, bool *in_gpu_memory) {
  *in_gpu_memory = false;
  if (g_drv.pointer_get_attribute == nullptr) return "other";
  unsigned int memtype = 0;
  ++t_in_self;
  CUresult res = g_drv.pointer_get_attribute(&memtype, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p);
  unsigned int managed = 0;
  if (res == CUDA_SUCCESS) g_drv.pointer_get_attribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, p);
  --t_in_self;
  if (res != CUDA_SUCCESS) return "host";  // not memory the driver knows: a plain host pointer
  if (managed) {
    *in_gpu_memory = true;
    return "managed";
  }
  if (memtype == CU_MEMORYTYPE_DEVICE) {
    *in_gpu_memory = true;
    return "device";
  }
  return memtype == CU_MEMORYTYPE_HOST ? "host" : "other";
}

bool stream_is_capturing(CUstream stream) {
  if (g_drv.stream_is_capturing == nullptr) return true;  // cannot tell: do not risk a sync
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  ++t_in_self;
  CUresult res = g_drv.stream_is_capturing(stream, &status);
  --t_in_self;
  return res != CUDA_SUCCESS || status != CU_STREAM_CAPTURE_STATUS_NONE;
}

struct Launch {
  const char *api;
  uint32_t corr;
  const char *name;  // mangled
  unsigned grid[3], block[3];
  size_t smem;
  CUstream stream;
  void **args;
  CUfunction function;  // null for runtime launches until the driver callback names it
};

void record_launch(const Launch &l) {
  if (l.name == nullptr) return;
  long n = g_launches.fetch_add(1);
  if (n == g_max_launches) write_line("{\"kind\":\"truncated\"}\n");
  if (n >= g_max_launches) return;
  std::string signature = demangle(l.name);
  std::vector<std::string> types = parameter_types(signature);
  std::vector<size_t> sizes;
  if (l.function != nullptr && g_drv.func_get_param_info != nullptr) {
    ++t_in_self;
    for (size_t i = 0; i < 4096; ++i) {
      size_t offset = 0, size = 0;
      if (g_drv.func_get_param_info(l.function, i, &offset, &size) != CUDA_SUCCESS) break;
      sizes.push_back(size);
    }
    --t_in_self;
  }
  size_t count = sizes.empty() ? types.size() : sizes.size();
  bool sample = false;
  if (g_sample_bytes > 0 && l.args != nullptr) {
    pthread_mutex_lock(&g_mutex);
    if (g_sampled.size() < kMaxSampledKernels && g_sampled.insert(l.name).second) sample = true;
    pthread_mutex_unlock(&g_mutex);
    if (sample && stream_is_capturing(l.stream)) sample = false;
    if (sample && g_drv.stream_synchronize != nullptr) {
      ++t_in_self;
      if (g_drv.stream_synchronize(l.stream) != CUDA_SUCCESS) sample = false;
      --t_in_self;
    }
  }
  std::string line;
  char buf[256];
  snprintf(buf, sizeof buf, "{\"kind\":\"launch\",\"corr\":%u,\"api\":\"%s\",\"name\":", l.corr, l.api);
  line += buf;
  append_json_string(line, l.name);
  line += ",\"signature\":";
  if (signature.empty()) {
    line += "null";
  } else {
    append_json_string(line, signature.c_str());
  }
  snprintf(buf, sizeof buf, ",\"grid\":[%u,%u,%u],\"block\":[%u,%u,%u],\"smem\":%zu,\"args\":[", l.grid[0],
           l.grid[1], l.grid[2], l.block[0], l.block[1], l.block[2], l.smem);
  line += buf;
  for (size_t i = 0; i < count; ++i) {
    if (i > 0) line += ',';
    const std::string type = i < types.size() ? types[i] : "";
    size_t size = i < sizes.size() ? sizes[i] : type_size(type);
    line += "{\"type\":";
    if (type.empty()) {
      line += "null";
    } else {
      append_json_string(line, type.c_str());
    }
    if (size == 0 || l.args == nullptr || l.args[i] == nullptr || size > 4096) {
      line += ",\"size\":null,\"hex\":null,\"pointer\":null,\"sample\":null}";
      continue;
    }
    snprintf(buf, sizeof buf, ",\"size\":%zu,\"hex\":\"", size);
    line += buf;
    append_hex(line, static_cast<const unsigned char *>(l.args[i]), size);
    line += "\",\"pointer\":";
    bool is_pointer = size == sizeof(void *) && (type.empty() || type_size(type) == sizeof(void *)) &&
                      (type.empty() || type.find('*') != std::string::npos);
    CUdeviceptr p = 0;
    if (is_pointer) memcpy(&p, l.args[i], sizeof p);
    bool in_gpu = false;
    const char *kind = is_pointer && p != 0 ? memory_kind(p, &in_gpu) : nullptr;
    CUdeviceptr base = 0;
    size_t extent = 0;
    if (in_gpu && g_drv.get_address_range != nullptr) {
      ++t_in_self;
      if (g_drv.get_address_range(&base, &extent, p) != CUDA_SUCCESS) base = 0, extent = 0;
      --t_in_self;
    }
    if (kind == nullptr) {
      line += "null,\"sample\":null}";
      continue;
    }
    snprintf(buf, sizeof buf, "{\"base\":\"0x%llx\",\"size\":%zu,\"memory\":\"%s\"},\"sample\":",
             static_cast<unsigned long long>(base), extent, kind);
    line += buf;
    size_t available = extent > 0 && p >= base ? extent - static_cast<size_t>(p - base) : 0;
    size_t want = available < g_sample_bytes ? available : g_sample_bytes;
    if (sample && in_gpu && want > 0 && g_drv.memcpy_dtoh != nullptr) {
      std::vector<unsigned char> bytes(want);
      ++t_in_self;
      CUresult res = g_drv.memcpy_dtoh(bytes.data(), p, want);
      --t_in_self;
      if (res == CUDA_SUCCESS) {
        line += '"';
        append_hex(line, bytes.data(), want);
        line += "\"}";
        continue;
      }
    }
    line += "null}";
  }
  line += "]}\n";
  write_line(line);
}

bool is_runtime_launch(CUpti_CallbackId cbid) {
  return cbid == CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000 ||
         cbid == CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000 ||
         cbid == CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000 ||
         cbid == CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_ptsz_v9000 ||
         cbid == CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060 ||
         cbid == CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060;
}

bool is_driver_launch(CUpti_CallbackId cbid) {
  return cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel || cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz ||
         cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx || cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz ||
         cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel ||
         cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz;
}

Launch runtime_launch(const CUpti_CallbackData *cb, CUpti_CallbackId cbid) {
  Launch l{"runtime", cb->correlationId, cb->symbolName, {1, 1, 1}, {1, 1, 1}, 0, nullptr, nullptr, nullptr};
  if (cbid == CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060 ||
      cbid == CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060) {
    auto *p = static_cast<const cudaLaunchKernelExC_v11060_params *>(cb->functionParams);
    if (p->config != nullptr) {
      const cudaLaunchConfig_t &c = *p->config;
      l.grid[0] = c.gridDim.x, l.grid[1] = c.gridDim.y, l.grid[2] = c.gridDim.z;
      l.block[0] = c.blockDim.x, l.block[1] = c.blockDim.y, l.block[2] = c.blockDim.z;
      l.smem = c.dynamicSmemBytes;
      l.stream = reinterpret_cast<CUstream>(c.stream);
    }
    l.args = p->args;
  } else {  // cudaLaunchKernel and cudaLaunchCooperativeKernel share one layout
    auto *p = static_cast<const cudaLaunchKernel_v7000_params *>(cb->functionParams);
    l.grid[0] = p->gridDim.x, l.grid[1] = p->gridDim.y, l.grid[2] = p->gridDim.z;
    l.block[0] = p->blockDim.x, l.block[1] = p->blockDim.y, l.block[2] = p->blockDim.z;
    l.smem = p->sharedMem;
    l.stream = reinterpret_cast<CUstream>(p->stream);
    l.args = p->args;
  }
  return l;
}

Launch driver_launch(const CUpti_CallbackData *cb, CUpti_CallbackId cbid) {
  Launch l{"driver", cb->correlationId, cb->symbolName, {1, 1, 1}, {1, 1, 1}, 0, nullptr, nullptr, nullptr};
  if (cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx || cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz) {
    auto *p = static_cast<const cuLaunchKernelEx_params *>(cb->functionParams);
    if (p->config != nullptr) {
      const CUlaunchConfig &c = *p->config;
      l.grid[0] = c.gridDimX, l.grid[1] = c.gridDimY, l.grid[2] = c.gridDimZ;
      l.block[0] = c.blockDimX, l.block[1] = c.blockDimY, l.block[2] = c.blockDimZ;
      l.smem = c.sharedMemBytes;
      l.stream = c.hStream;
    }
    l.function = p->f;
    l.args = p->extra == nullptr ? p->kernelParams : nullptr;
  } else {  // cuLaunchKernel and cuLaunchCooperativeKernel: the same leading fields
    auto *p = static_cast<const cuLaunchKernel_params *>(cb->functionParams);
    l.grid[0] = p->gridDimX, l.grid[1] = p->gridDimY, l.grid[2] = p->gridDimZ;
    l.block[0] = p->blockDimX, l.block[1] = p->blockDimY, l.block[2] = p->blockDimZ;
    l.smem = p->sharedMemBytes;
    l.stream = p->hStream;
    l.function = p->f;
    l.args = p->extra == nullptr ? p->kernelParams : nullptr;
  }
  if (l.name == nullptr && l.function != nullptr && g_drv.func_get_name != nullptr) {
    ++t_in_self;
    if (g_drv.func_get_name(&l.name, l.function) != CUDA_SUCCESS) l.name = nullptr;
    --t_in_self;
  }
  return l;
}

void on_callback_impl(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const CUpti_CallbackData *cb) {
  if (cb->functionParams == nullptr || t_in_self > 0) return;
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API && is_runtime_launch(cbid)) {
    if (cb->callbackSite == CUPTI_API_ENTER) {
      // Recorded at entry: the sample must show memory as it is before this kernel runs.
      t_in_runtime_launch = true;
      record_launch(runtime_launch(cb, cbid));
    } else {
      t_in_runtime_launch = false;
    }
    return;
  }
  if (domain == CUPTI_CB_DOMAIN_DRIVER_API && is_driver_launch(cbid) && cb->callbackSite == CUPTI_API_ENTER &&
      !t_in_runtime_launch) {
    record_launch(driver_launch(cb, cbid));  // a program that uses the driver API itself
  }
}

void CUPTIAPI on_callback(void *, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void *data) {
  if (!g_enabled.load(std::memory_order_acquire) || data == nullptr) return;
  try {
    on_callback_impl(domain, cbid, static_cast<const CUpti_CallbackData *>(data));
  } catch (...) {
  }
}

// --------------------------------------------------------------------------- GPU time per launch

constexpr size_t kBufferSize = 4u << 20;

void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records) {
  *max_records = 0;
  void *p = nullptr;
  if (posix_memalign(&p, 8, kBufferSize) != 0) p = nullptr;
  *buffer = static_cast<uint8_t *>(p);
  *size = p != nullptr ? kBufferSize : 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t *buffer, size_t, size_t valid_size) {
  if (buffer == nullptr) return;
  if (g_enabled.load(std::memory_order_acquire)) {
    try {
      std::string chunk;
      CUpti_Activity *rec = nullptr;
      while (cuptiActivityGetNextRecord(buffer, valid_size, &rec) == CUPTI_SUCCESS) {
        if (rec->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && rec->kind != CUPTI_ACTIVITY_KIND_KERNEL) continue;
        auto *k = reinterpret_cast<const KlKernelRecord *>(rec);
        char buf[160];
        snprintf(buf, sizeof buf, "{\"kind\":\"kernel\",\"corr\":%u,\"start\":%llu,\"end\":%llu,\"name\":",
                 k->correlationId, static_cast<unsigned long long>(k->start),
                 static_cast<unsigned long long>(k->end));
        chunk += buf;
        append_json_string(chunk, k->name != nullptr ? k->name : "");
        chunk += "}\n";
      }
      write_line(chunk);
    } catch (...) {
    }
  }
  free(buffer);
}

void at_exit() {
  if (!g_enabled.load(std::memory_order_acquire) || g_finished.exchange(true)) return;
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  write_line("{\"kind\":\"end\"}\n");
  pthread_mutex_lock(&g_mutex);
  if (g_out != nullptr) fflush(g_out);
  pthread_mutex_unlock(&g_mutex);
}

void in_forked_child() { g_enabled.store(false, std::memory_order_release); }

template <typename Fn>
void lookup(void *lib, const char *name, Fn *out) {
  *out = reinterpret_cast<Fn>(dlsym(lib, name));
  if (*out == nullptr) report_error("dlsym", name);
}

long env_number(const char *name, long fallback) {
  const char *v = getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char *end = nullptr;
  long n = strtol(v, &end, 10);
  return (end != nullptr && *end == '\0' && n >= 0) ? n : fallback;
}

int initialize() {
  const char *path = getenv("KERNELLOOP_CAPTURE_OUT");
  if (path == nullptr || path[0] == '\0') return 1;
  FILE *f = fopen(path, "ae");
  if (f == nullptr) return 1;
  setvbuf(f, nullptr, _IOFBF, 1 << 16);
  g_out = f;
  g_enabled.store(true, std::memory_order_release);
  g_max_launches = env_number("KERNELLOOP_CAPTURE_MAX_LAUNCHES", g_max_launches);
  g_sample_bytes = static_cast<size_t>(env_number("KERNELLOOP_CAPTURE_SAMPLE_BYTES", 16384));
  uint32_t version = 0;
  cuptiGetVersion(&version);
  {
    char buf[128];
    snprintf(buf, sizeof buf, "{\"kind\":\"meta\",\"pid\":%ld,\"cupti_version\":%u}\n", static_cast<long>(getpid()),
             version);
    write_line(buf);
  }
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (lib == nullptr) lib = dlopen("libcuda.so.1", RTLD_NOW);
  if (lib == nullptr) {
    report_error("dlopen", "libcuda.so.1");
  } else {
    lookup(lib, "cuMemGetAddressRange_v2", &g_drv.get_address_range);
    lookup(lib, "cuPointerGetAttribute", &g_drv.pointer_get_attribute);
    lookup(lib, "cuMemcpyDtoH_v2", &g_drv.memcpy_dtoh);
    lookup(lib, "cuStreamSynchronize", &g_drv.stream_synchronize);
    lookup(lib, "cuStreamIsCapturing", &g_drv.stream_is_capturing);
    lookup(lib, "cuFuncGetName", &g_drv.func_get_name);
    lookup(lib, "cuFuncGetParamInfo", &g_drv.func_get_param_info);
  }
  pthread_atfork(nullptr, nullptr, in_forked_child);
  atexit(at_exit);
  if (cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed) == CUPTI_SUCCESS) {
    cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  } else {
    report_error("cuptiActivityRegisterCallbacks", "no kernel times (another CUPTI client?)");
  }
  if (cuptiSubscribe(&g_subscriber, on_callback, nullptr) != CUPTI_SUCCESS) {
    report_error("cuptiSubscribe", "no launches can be recorded (another CUPTI client?)");
    return 1;
  }
  const CUpti_CallbackId runtime_ids[] = {
      CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000,
      CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_ptsz_v9000,
      CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060};
  for (CUpti_CallbackId id : runtime_ids) cuptiEnableCallback(1, g_subscriber, CUPTI_CB_DOMAIN_RUNTIME_API, id);
  const CUpti_CallbackId driver_ids[] = {
      CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
      CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
      CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel, CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz};
  for (CUpti_CallbackId id : driver_ids) cuptiEnableCallback(1, g_subscriber, CUPTI_CB_DOMAIN_DRIVER_API, id);
  return 1;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
  if (g_initialized.exchange(true)) return 1;
  try {
    return initialize();
  } catch (...) {
    return 1;
  }
}
