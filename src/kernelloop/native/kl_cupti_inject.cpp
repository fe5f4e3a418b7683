// kl_cupti_inject.cpp - kernelloop's CUPTI injection library.
//
// Loaded into an untrusted CUDA program with CUDA_INJECTION64_PATH=<this .so>.
// The CUDA driver dlopens it during cuInit and calls InitializeInjection().
// It records what really ran on the GPU (kernels, copies, memsets), every CUDA
// runtime API call, and every cudaEventRecord / cudaEventElapsedTime call, and
// writes one JSON object per line to the pipe named by $KERNELLOOP_CUPTI_FD
// ("fd:dev:inode", the verifier's: read while the program runs, so nothing the
// program runs after the end record can change what came before), else to the
// file named by $KERNELLOOP_CUPTI_OUT (the profiler's).
//
// Line kinds (all timestamps are CUPTI nanoseconds, one clock domain):
//   {"kind":"start","pid":P,"early":0|1,"nonce":"<32 hex>"}   (pipe mode: first, written at load)
//   {"kind":"meta","cupti_version":N,"compiled_api":N,"pid":P,"kernel_struct":"..","memcpy_struct":".."}
//   {"kind":"api","cbid":N,"name":"cudaLaunchKernel","start":T,"end":T,"corr":C,"thread":T,"ret":R}
//   {"kind":"kernel","name":"<mangled>","start":T,"end":T,"corr":C,"stream":S,"device":D,
//    "context":X,"grid":[x,y,z],"block":[x,y,z],"dyn_smem":B,"static_smem":B,"regs":R,"graph_node":G}
//   {"kind":"memcpy","copy_kind":"HtoD|DtoH|DtoD|HtoH|PtoP|other","bytes":B,"start":T,"end":T,
//    "corr":C,"stream":S,"device":D}
//   {"kind":"memset","bytes":B,"start":T,"end":T,"corr":C,"stream":S,"device":D}
//   {"kind":"event_record","cbid":N,"event":"0x..","stream":"0x..","stream_id":S,"t":T,"corr":C}
//   {"kind":"elapsed","cbid":N,"start_event":"0x..","end_event":"0x..","ms":F|null,"result":R,"t":T,"corr":C}
//   {"kind":"dropped","count":N}  {"kind":"error","where":"..","code":N,"message":".."}
//   {"kind":"truncated"}  {"kind":"end","bytes":N,"nonce":"<32 hex>"}   (N: the bytes written before it)
//
// "name" of api lines has CUPTI's ABI suffix removed (cudaLaunchKernel_v7000 ->
// cudaLaunchKernel; cudaLaunchKernel_ptsz stays). "stream_id" (CUPTI's id of the
// stream, as in kernel "stream") is absent when it cannot be had. "ms" is null
// unless the call succeeded.
//
// Rules: never crash or alter the host program; every CUPTI failure becomes an
// "error" line (at most 20 per call site); writing is serialized by one mutex;
// at most kMaxLines data lines, then one "truncated" (meta/dropped/end are not
// capped). "end" is written by an atexit handler after a forced flush: a program
// that leaves through _exit or a signal has no "end" and loses the activity
// records CUPTI had not yet handed over. A forked child writes nothing.
// The file is opened for appending (an injected CUDA child process adds its own
// meta line); give each run a fresh path. The pipe is checked before every write
// to be the one named (its descriptor may have been closed or replaced: then
// nothing more is written, and the trace has no end), and is not inherited by
// programs the process executes (their tracer finds no such pipe and writes nothing).
// The pipe's name is read when the library is loaded: the verifier preloads it
// (LD_PRELOAD), so that is before any code of the program's runs, and what the
// program does to its environment later (rewriting the variable's text in place,
// red team round 301) cannot point the trace elsewhere. There and then it writes
// the stream's first line, {"kind":"start","pid":P,"early":0|1,"nonce":"<hex>"}
// ("early": libcuda was not loaded yet, so the library was preloaded, not loaded by
// the driver at the first CUDA call); the end record repeats the nonce, so an end
// written by anything else (a library the driver was pointed at instead, round 302)
// cannot close the stream.
//
// Build: g++ -std=c++17 -O2 -Wall -shared -fPIC kl_cupti_inject.cpp -I<cuda/include>
//        -I<cupti/include> -L<cupti/lib> -lcupti -Wl,-rpath,<cupti/lib> -ldl -lpthread
//        -o libkl_cupti_inject.so

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <cupti.h>

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#if !defined(CUPTI_API_VERSION) || CUPTI_API_VERSION < 18
#error "kl_cupti_inject needs CUPTI from CUDA 12.0 or newer"
#endif

// Newest record layouts. CUPTI fills records with the layout of the libcupti it
// was built against; we link (and rpath) the libcupti matching these headers.
#if CUPTI_API_VERSION >= 130000
typedef CUpti_ActivityKernel10 KlKernelRecord;
typedef CUpti_ActivityMemcpy6 KlMemcpyRecord;
#define KL_KERNEL_STRUCT "CUpti_ActivityKernel10"
#define KL_MEMCPY_STRUCT "CUpti_ActivityMemcpy6"
#else
typedef CUpti_ActivityKernel9 KlKernelRecord;
typedef CUpti_ActivityMemcpy5 KlMemcpyRecord;
#define KL_KERNEL_STRUCT "CUpti_ActivityKernel9"
#define KL_MEMCPY_STRUCT "CUpti_ActivityMemcpy5"
#endif
typedef CUpti_ActivityMemset4 KlMemsetRecord;
typedef CUpti_ActivityAPI KlApiRecord;

namespace {

// ---------------------------------------------------------------------------
// Runtime API parameter layouts we read. They mirror the structs in
// generated_cuda_runtime_api_meta.h / generated_cudart_removed_meta.h, written
// out here because the elapsed-time structs live in different headers across
// CUDA versions. cbids are ABI-stable numbers.
struct EventRecordParams {        // cudaEventRecord_v3020 / _ptsz_v7000
  cudaEvent_t event;
  cudaStream_t stream;
};
struct EventRecordFlagsParams {   // cudaEventRecordWithFlags_v11010 / _ptsz_v11010
  cudaEvent_t event;
  cudaStream_t stream;
  unsigned int flags;
};
struct ElapsedParams {            // cudaEventElapsedTime_v3020 / _v12080
  float *ms;
  cudaEvent_t start;
  cudaEvent_t end;
};

constexpr CUpti_CallbackId kCbidEventRecord = 135;            // cudaEventRecord_v3020
constexpr CUpti_CallbackId kCbidEventRecordPtsz = 242;        // cudaEventRecord_ptsz_v7000
constexpr CUpti_CallbackId kCbidEventRecordFlags = 370;       // cudaEventRecordWithFlags_v11010
constexpr CUpti_CallbackId kCbidEventRecordFlagsPtsz = 371;   // cudaEventRecordWithFlags_ptsz_v11010
constexpr CUpti_CallbackId kCbidElapsed = 139;                // cudaEventElapsedTime_v3020
constexpr CUpti_CallbackId kCbidElapsed12080 = 486;           // cudaEventElapsedTime_v12080

static_assert(kCbidEventRecord == CUPTI_RUNTIME_TRACE_CBID_cudaEventRecord_v3020, "cbid");
static_assert(kCbidEventRecordPtsz == CUPTI_RUNTIME_TRACE_CBID_cudaEventRecord_ptsz_v7000, "cbid");
static_assert(kCbidEventRecordFlags == CUPTI_RUNTIME_TRACE_CBID_cudaEventRecordWithFlags_v11010, "cbid");
static_assert(kCbidEventRecordFlagsPtsz == CUPTI_RUNTIME_TRACE_CBID_cudaEventRecordWithFlags_ptsz_v11010,
              "cbid");
static_assert(kCbidElapsed == CUPTI_RUNTIME_TRACE_CBID_cudaEventElapsedTime_v3020, "cbid");
#if CUPTI_API_VERSION >= 130000
static_assert(kCbidElapsed12080 == CUPTI_RUNTIME_TRACE_CBID_cudaEventElapsedTime_v12080, "cbid");
static_assert(sizeof(ElapsedParams) == sizeof(cudaEventElapsedTime_v12080_params), "layout");
static_assert(offsetof(ElapsedParams, ms) == offsetof(cudaEventElapsedTime_v12080_params, ms), "layout");
static_assert(offsetof(ElapsedParams, start) == offsetof(cudaEventElapsedTime_v12080_params, start),
              "layout");
static_assert(offsetof(ElapsedParams, end) == offsetof(cudaEventElapsedTime_v12080_params, end), "layout");
#endif
static_assert(sizeof(EventRecordParams) == sizeof(cudaEventRecord_v3020_params), "layout");
static_assert(offsetof(EventRecordParams, stream) == offsetof(cudaEventRecord_v3020_params, stream),
              "layout");
static_assert(sizeof(EventRecordParams) == sizeof(cudaEventRecord_ptsz_v7000_params), "layout");
static_assert(sizeof(EventRecordFlagsParams) == sizeof(cudaEventRecordWithFlags_v11010_params), "layout");
static_assert(offsetof(EventRecordFlagsParams, stream) ==
                  offsetof(cudaEventRecordWithFlags_v11010_params, stream),
              "layout");
static_assert(sizeof(EventRecordFlagsParams) == sizeof(cudaEventRecordWithFlags_ptsz_v11010_params),
              "layout");

// ---------------------------------------------------------------------------
// Output. Only trivially destructible globals: CUPTI's worker thread may still
// call us while static destructors run at exit.

constexpr uint64_t kMaxLines = 2000000;       // data lines before "truncated"
constexpr size_t kBufferSize = 8u << 20;      // activity buffer handed to CUPTI
constexpr size_t kBufferAlign = 8;
constexpr int kMaxErrorsPerSite = 20;

pthread_mutex_t g_mutex = PTHREAD_MUTEX_INITIALIZER;
FILE *g_out = nullptr;                 // file mode: opened once, never closed (exit flushes it)
int g_fd = -1;                         // pipe mode: the descriptor named by KERNELLOOP_CUPTI_FD
dev_t g_fd_dev = 0;                    // ... and the pipe it must still be before every write
ino_t g_fd_ino = 0;
bool g_fd_lost = false;                // the descriptor stopped being that pipe: write nothing more
char g_fd_spec[128] = {0};             // KERNELLOOP_CUPTI_FD as it was when the library was loaded
bool g_fd_spec_set = false;
bool g_early = false;                  // loaded before libcuda: preloaded, before any code of the program's
char g_nonce[33] = {0};                // 128 random bits in hex: the start line's, repeated by the end record
uint64_t g_bytes = 0;                  // bytes written so far (the end record states them)
uint64_t g_lines = 0;                  // data lines written; guarded by g_mutex
bool g_truncated = false;              // guarded by g_mutex
std::atomic<bool> g_capped{false};     // lock-free hint: the cap was reached
std::atomic<bool> g_enabled{false};    // false: drop everything (not started, or forked child)
std::atomic<bool> g_initialized{false};
std::atomic<bool> g_finished{false};
CUpti_SubscriberHandle g_subscriber = nullptr;

// Write bytes to the trace; caller holds g_mutex.
void emit(const char *data, size_t n) {
  if (g_out != nullptr) {
    g_bytes += fwrite(data, 1, n, g_out);
    return;
  }
  if (g_fd < 0 || g_fd_lost) return;
  struct stat st;
  if (fstat(g_fd, &st) != 0 || !S_ISFIFO(st.st_mode) || st.st_dev != g_fd_dev || st.st_ino != g_fd_ino) {
    g_fd_lost = true;
    return;
  }
  while (n > 0) {
    ssize_t w = write(g_fd, data, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      g_fd_lost = true;
      return;
    }
    data += w;
    n -= static_cast<size_t>(w);
    g_bytes += static_cast<uint64_t>(w);
  }
}

bool have_sink() { return g_out != nullptr || g_fd >= 0; }

// Write `nlines` complete data lines (each ending in '\n') as one chunk, as many
// as the cap allows; the first time the cap cuts lines off, add "truncated".
void write_data(const std::string &chunk, uint64_t nlines) {
  if (nlines == 0 || !g_enabled.load(std::memory_order_acquire)) return;
  pthread_mutex_lock(&g_mutex);
  if (have_sink()) {
    uint64_t avail = g_lines < kMaxLines ? kMaxLines - g_lines : 0;
    if (nlines <= avail) {
      emit(chunk.data(), chunk.size());
      g_lines += nlines;
    } else {
      size_t cut = 0;
      for (uint64_t i = 0; i < avail; ++i) cut = chunk.find('\n', cut) + 1;
      if (cut > 0) emit(chunk.data(), cut);
      g_lines += avail;
      g_capped.store(true, std::memory_order_relaxed);
      if (!g_truncated) {
        g_truncated = true;
        static const char kTruncated[] = "{\"kind\":\"truncated\"}\n";
        emit(kTruncated, sizeof kTruncated - 1);
      }
    }
  }
  pthread_mutex_unlock(&g_mutex);
}

// Control lines (meta, dropped, end) are never capped, so a reader can always
// tell how the run ended.
void write_control(const std::string &line) {
  if (!g_enabled.load(std::memory_order_acquire)) return;
  pthread_mutex_lock(&g_mutex);
  if (have_sink()) emit(line.data(), line.size());
  pthread_mutex_unlock(&g_mutex);
}

// The end record states the bytes before it, so a reader can tell the tracer's
// whole stream from one that anything else wrote to.
void append_fmt(std::string &s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

void write_end() {
  if (!g_enabled.load(std::memory_order_acquire)) return;
  pthread_mutex_lock(&g_mutex);
  if (have_sink()) {
    std::string line;
    append_fmt(line, "{\"kind\":\"end\",\"bytes\":%llu,\"nonce\":\"%s\"}\n", static_cast<unsigned long long>(g_bytes),
               g_nonce);
    emit(line.data(), line.size());
  }
  pthread_mutex_unlock(&g_mutex);
}

void append_fmt(std::string &s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void append_fmt(std::string &s, const char *fmt, ...) {
  char buf[256];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  if (static_cast<size_t>(n) < sizeof buf) {
    s.append(buf, static_cast<size_t>(n));
    return;
  }
  std::string big(static_cast<size_t>(n) + 1, '\0');
  va_start(ap, fmt);
  vsnprintf(&big[0], big.size(), fmt, ap);
  va_end(ap);
  s.append(big.data(), static_cast<size_t>(n));
}

// JSON string literal (with quotes), or null for a null pointer. Bytes >= 0x80
// pass through unchanged; the reader decodes with replacement.
void append_json_string(std::string &s, const char *str) {
  if (str == nullptr) {
    s += "null";
    return;
  }
  s += '"';
  for (const unsigned char *p = reinterpret_cast<const unsigned char *>(str); *p; ++p) {
    unsigned char c = *p;
    switch (c) {
      case '"': s += "\\\""; break;
      case '\\': s += "\\\\"; break;
      case '\n': s += "\\n"; break;
      case '\r': s += "\\r"; break;
      case '\t': s += "\\t"; break;
      case '\b': s += "\\b"; break;
      case '\f': s += "\\f"; break;
      default:
        if (c < 0x20 || c == 0x7f) {
          append_fmt(s, "\\u%04x", static_cast<unsigned>(c));
        } else {
          s += static_cast<char>(c);
        }
    }
  }
  s += '"';
}

void append_ptr(std::string &s, const void *p) {
  append_fmt(s, "\"0x%llx\"", static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(p)));
}

// Report a CUPTI failure; at most kMaxErrorsPerSite lines per call site.
void report_error(const char *where, CUptiResult code, std::atomic<int> *site_count) {
  if (site_count != nullptr && site_count->fetch_add(1, std::memory_order_relaxed) >= kMaxErrorsPerSite) {
    return;
  }
  const char *msg = nullptr;
  if (cuptiGetResultString(code, &msg) != CUPTI_SUCCESS) msg = nullptr;
  std::string line = "{\"kind\":\"error\",\"where\":";
  append_json_string(line, where);
  append_fmt(line, ",\"code\":%d,\"message\":", static_cast<int>(code));
  append_json_string(line, msg != nullptr ? msg : "unknown CUPTI error");
  line += "}\n";
  write_data(line, 1);
}

// Evaluate a CUPTI call; on failure write an error line and yield false.
#define KL_CUPTI(call, where)                                     \
  ([&]() -> bool {                                                \
    static std::atomic<int> kl_site_count_{0};                    \
    CUptiResult kl_res_ = (call);                                 \
    if (kl_res_ == CUPTI_SUCCESS) return true;                    \
    report_error((where), kl_res_, &kl_site_count_);              \
    return false;                                                 \
  }())

void write_dropped() {
  size_t dropped = 0;
  if (KL_CUPTI(cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped), "cuptiActivityGetNumDroppedRecords") &&
      dropped > 0) {
    std::string line;
    append_fmt(line, "{\"kind\":\"dropped\",\"count\":%llu}\n", static_cast<unsigned long long>(dropped));
    write_control(line);
  }
}

// ---------------------------------------------------------------------------
// Activity records.

const char *copy_kind_name(uint8_t kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: return "HtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: return "DtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD: return "DtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH: return "HtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP: return "PtoP";
    default: return "other";
  }
}

// Runtime API names by cbid, with CUPTI's ABI suffix ("cudaLaunchKernel_v7000")
// dropped. Cached: the strings CUPTI returns are static. Races only recompute.
constexpr uint32_t kNameCache = 2048;
std::atomic<const char *> g_name_ptr[kNameCache];
std::atomic<int> g_name_len[kNameCache];  // 0: not cached; -1: no name

int api_name(CUpti_CallbackId cbid, const char **out) {
  if (cbid < kNameCache) {
    int len = g_name_len[cbid].load(std::memory_order_acquire);
    if (len != 0) {
      *out = g_name_ptr[cbid].load(std::memory_order_relaxed);
      return len;
    }
  }
  static std::atomic<int> site{0};
  const char *name = nullptr;
  CUptiResult res = cuptiGetCallbackName(CUPTI_CB_DOMAIN_RUNTIME_API, cbid, &name);
  if (res != CUPTI_SUCCESS) {
    report_error("cuptiGetCallbackName", res, &site);
    name = nullptr;
  }
  int len = -1;
  if (name != nullptr && name[0] != '\0') {
    size_t n = strlen(name);
    const char *v = nullptr;
    for (const char *q = name; (q = strstr(q, "_v")) != nullptr; q += 2) v = q;
    if (v != nullptr && v[2] != '\0' && strspn(v + 2, "0123456789") == strlen(v + 2)) {
      n = static_cast<size_t>(v - name);
    }
    len = n > 0 && n < 4096 ? static_cast<int>(n) : -1;
  }
  if (cbid < kNameCache) {
    g_name_ptr[cbid].store(name, std::memory_order_relaxed);
    g_name_len[cbid].store(len, std::memory_order_release);
  }
  *out = name;
  return len;
}

// Append one record as a JSON line to `line`; false for kinds we do not write.
bool format_record(const CUpti_Activity *rec, std::string &line) {
  switch (rec->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
      const KlKernelRecord *k = reinterpret_cast<const KlKernelRecord *>(rec);
      line += "{\"kind\":\"kernel\",\"name\":";
      append_json_string(line, k->name);
      append_fmt(line,
                 ",\"start\":%llu,\"end\":%llu,\"corr\":%u,\"stream\":%u,\"device\":%u,\"context\":%u,"
                 "\"grid\":[%d,%d,%d],\"block\":[%d,%d,%d],\"dyn_smem\":%d,\"static_smem\":%d,"
                 "\"regs\":%u,\"graph_node\":%llu}\n",
                 static_cast<unsigned long long>(k->start), static_cast<unsigned long long>(k->end),
                 k->correlationId, k->streamId, k->deviceId, k->contextId, k->gridX, k->gridY, k->gridZ,
                 k->blockX, k->blockY, k->blockZ, k->dynamicSharedMemory, k->staticSharedMemory,
                 static_cast<unsigned>(k->registersPerThread),
                 static_cast<unsigned long long>(k->graphNodeId));
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      const KlMemcpyRecord *m = reinterpret_cast<const KlMemcpyRecord *>(rec);
      append_fmt(line,
                 "{\"kind\":\"memcpy\",\"copy_kind\":\"%s\",\"bytes\":%llu,\"start\":%llu,\"end\":%llu,"
                 "\"corr\":%u,\"stream\":%u,\"device\":%u}\n",
                 copy_kind_name(m->copyKind), static_cast<unsigned long long>(m->bytes),
                 static_cast<unsigned long long>(m->start), static_cast<unsigned long long>(m->end),
                 m->correlationId, m->streamId, m->deviceId);
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      const KlMemsetRecord *m = reinterpret_cast<const KlMemsetRecord *>(rec);
      append_fmt(line,
                 "{\"kind\":\"memset\",\"bytes\":%llu,\"start\":%llu,\"end\":%llu,\"corr\":%u,"
                 "\"stream\":%u,\"device\":%u}\n",
                 static_cast<unsigned long long>(m->bytes), static_cast<unsigned long long>(m->start),
                 static_cast<unsigned long long>(m->end), m->correlationId, m->streamId, m->deviceId);
      break;
    }
    case CUPTI_ACTIVITY_KIND_RUNTIME: {
      const KlApiRecord *a = reinterpret_cast<const KlApiRecord *>(rec);
      append_fmt(line, "{\"kind\":\"api\",\"cbid\":%u", static_cast<unsigned>(a->cbid));
      const char *name = nullptr;
      int len = api_name(a->cbid, &name);
      if (len > 0) {
        line += ",\"name\":";
        append_json_string(line, std::string(name, static_cast<size_t>(len)).c_str());
      }
      append_fmt(line, ",\"start\":%llu,\"end\":%llu,\"corr\":%u,\"thread\":%u,\"ret\":%u}\n",
                 static_cast<unsigned long long>(a->start), static_cast<unsigned long long>(a->end),
                 a->correlationId, a->threadId, a->returnValue);
      break;
    }
    default:
      return false;  // a kind we did not enable
  }
  return true;
}

void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records) {
  *max_records = 0;
  void *p = nullptr;
  if (posix_memalign(&p, kBufferAlign, kBufferSize) != 0) p = nullptr;
  *buffer = static_cast<uint8_t *>(p);
  *size = p != nullptr ? kBufferSize : 0;  // 0: CUPTI drops records and counts them
}

void drain_buffer(uint8_t *buffer, size_t valid_size) {
  // Lines go out in chunks of ~1 MiB: one lock and one write per chunk.
  std::string chunk;
  chunk.reserve((1u << 20) + 8192);
  uint64_t nlines = 0;
  CUpti_Activity *rec = nullptr;
  for (;;) {
    CUptiResult res = cuptiActivityGetNextRecord(buffer, valid_size, &rec);
    if (res == CUPTI_ERROR_MAX_LIMIT_REACHED) break;  // end of buffer
    if (res != CUPTI_SUCCESS) {
      static std::atomic<int> site{0};
      report_error("cuptiActivityGetNextRecord", res, &site);
      break;
    }
    if (g_capped.load(std::memory_order_relaxed)) break;  // nothing more will be written
    if (format_record(rec, chunk)) ++nlines;
    if (chunk.size() >= (1u << 20)) {
      write_data(chunk, nlines);
      chunk.clear();
      nlines = 0;
    }
  }
  write_data(chunk, nlines);
  write_dropped();
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t *buffer, size_t, size_t valid_size) {
  if (buffer == nullptr) return;
  if (g_enabled.load(std::memory_order_acquire) && valid_size > 0) {
    try {
      drain_buffer(buffer, valid_size);
    } catch (...) {
    }
  }
  free(buffer);
}

// ---------------------------------------------------------------------------
// Callback API.

uint64_t now_ns() {
  uint64_t t = 0;
  if (!KL_CUPTI(cuptiGetTimestamp(&t), "cuptiGetTimestamp")) return 0;
  return t;
}

void on_event_record(const CUpti_CallbackData *cb, CUpti_CallbackId cbid) {
  if (cb->callbackSite != CUPTI_API_ENTER || cb->functionParams == nullptr) return;
  uint64_t t = now_ns();
  cudaEvent_t event;
  cudaStream_t stream;
  if (cbid == kCbidEventRecordFlags || cbid == kCbidEventRecordFlagsPtsz) {
    const EventRecordFlagsParams *p = static_cast<const EventRecordFlagsParams *>(cb->functionParams);
    event = p->event;
    stream = p->stream;
  } else {
    const EventRecordParams *p = static_cast<const EventRecordParams *>(cb->functionParams);
    event = p->event;
    stream = p->stream;
  }
  std::string line;
  append_fmt(line, "{\"kind\":\"event_record\",\"cbid\":%u,\"event\":", static_cast<unsigned>(cbid));
  append_ptr(line, event);
  line += ",\"stream\":";
  append_ptr(line, stream);
  // CUPTI's id for the stream, so events can be matched to kernel "stream" ids.
  // The special handles cudaStreamLegacy (0x1) and cudaStreamPerThread (0x2)
  // name the default streams, which CUPTI knows as NULL plus a per-thread flag.
  if (cb->context != nullptr) {
    uintptr_t sv = reinterpret_cast<uintptr_t>(stream);
    uint8_t per_thread = (cbid == kCbidEventRecordPtsz || cbid == kCbidEventRecordFlagsPtsz) ? 1 : 0;
    CUstream cs = reinterpret_cast<CUstream>(stream);
    if (sv == 1 || sv == 2) {
      per_thread = sv == 2 ? 1 : 0;
      cs = nullptr;
    }
    uint32_t sid = 0;
    if (KL_CUPTI(cuptiGetStreamIdEx(cb->context, cs, per_thread, &sid),
                 "cuptiGetStreamIdEx")) {
      append_fmt(line, ",\"stream_id\":%u", sid);
    }
  }
  append_fmt(line, ",\"t\":%llu,\"corr\":%u}\n", static_cast<unsigned long long>(t), cb->correlationId);
  write_data(line, 1);
}

void on_elapsed(const CUpti_CallbackData *cb, CUpti_CallbackId cbid) {
  if (cb->callbackSite != CUPTI_API_EXIT || cb->functionParams == nullptr) return;
  uint64_t t = now_ns();
  const ElapsedParams *p = static_cast<const ElapsedParams *>(cb->functionParams);
  int result = -1;
  if (cb->functionReturnValue != nullptr) {
    result = static_cast<int>(*static_cast<const cudaError_t *>(cb->functionReturnValue));
  }
  std::string line;
  append_fmt(line, "{\"kind\":\"elapsed\",\"cbid\":%u,\"start_event\":", static_cast<unsigned>(cbid));
  append_ptr(line, p->start);
  line += ",\"end_event\":";
  append_ptr(line, p->end);
  line += ",\"ms\":";
  // Only read *ms when the call succeeded: then the runtime itself wrote it.
  if (result == 0 && p->ms != nullptr && std::isfinite(*p->ms)) {
    append_fmt(line, "%.9g", static_cast<double>(*p->ms));
  } else {
    line += "null";
  }
  append_fmt(line, ",\"result\":%d,\"t\":%llu,\"corr\":%u}\n", result, static_cast<unsigned long long>(t),
             cb->correlationId);
  write_data(line, 1);
}

void on_callback_impl(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void *data) {
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) {
    const CUpti_CallbackData *cb = static_cast<const CUpti_CallbackData *>(data);
    switch (cbid) {
      case kCbidEventRecord:
      case kCbidEventRecordPtsz:
      case kCbidEventRecordFlags:
      case kCbidEventRecordFlagsPtsz:
        on_event_record(cb, cbid);
        break;
      case kCbidElapsed:
      case kCbidElapsed12080:
        on_elapsed(cb, cbid);
        break;
      default:
        break;
    }
  } else if (domain == CUPTI_CB_DOMAIN_RESOURCE && cbid == CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING) {
    // Records of a context are lost once it is gone: hand them over now.
    KL_CUPTI(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), "cuptiActivityFlushAll(context destroy)");
  }
}

// C++ exceptions (std::bad_alloc) must not unwind into CUPTI or the program.
void CUPTIAPI on_callback(void *, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void *data) {
  if (!g_enabled.load(std::memory_order_acquire) || data == nullptr) return;
  try {
    on_callback_impl(domain, cbid, data);
  } catch (...) {
  }
}

// ---------------------------------------------------------------------------
// Lifetime.

void at_exit_impl() {
  KL_CUPTI(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), "cuptiActivityFlushAll(atexit)");
  write_dropped();
  write_end();
  pthread_mutex_lock(&g_mutex);
  if (g_out != nullptr) fflush(g_out);
  pthread_mutex_unlock(&g_mutex);
}

void at_exit() {
  if (!g_enabled.load(std::memory_order_acquire)) return;
  if (g_finished.exchange(true)) return;
  try {
    at_exit_impl();
  } catch (...) {
  }
}

// A forked child shares the file but not the GPU state; it must write nothing
// (its exit would otherwise add a false "end"). The lock may be held by a
// thread that does not exist in the child, so only the atomic flag is touched.
void in_forked_child() { g_enabled.store(false, std::memory_order_release); }

bool enable_kind(CUpti_ActivityKind kind, const char *where) {
  return KL_CUPTI(cuptiActivityEnable(kind), where);
}

// "fd:dev:inode" naming an open pipe: true, with the pipe taken as the sink.
bool open_pipe(const char *spec) {
  long long fd = -1;
  unsigned long long dev = 0, ino = 0;
  char tail = 0;
  if (sscanf(spec, "%lld:%llu:%llu%c", &fd, &dev, &ino, &tail) != 3 || fd < 0) return false;
  struct stat st;
  if (fstat(static_cast<int>(fd), &st) != 0 || !S_ISFIFO(st.st_mode) ||
      static_cast<unsigned long long>(st.st_dev) != dev || static_cast<unsigned long long>(st.st_ino) != ino) {
    return false;
  }
  int flags = fcntl(static_cast<int>(fd), F_GETFD);
  if (flags < 0 || fcntl(static_cast<int>(fd), F_SETFD, flags | FD_CLOEXEC) != 0) return false;
  pthread_mutex_lock(&g_mutex);
  g_fd = static_cast<int>(fd);
  g_fd_dev = st.st_dev;
  g_fd_ino = st.st_ino;
  pthread_mutex_unlock(&g_mutex);
  return true;
}

// At load time (a preloaded library: before the program's own code and constructors).
__attribute__((constructor)) void read_settings_at_load() {
  void *cuda = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
  g_early = cuda == nullptr;
  if (cuda != nullptr) dlclose(cuda);
  unsigned char random[16] = {0};
  size_t got = 0;
  while (got < sizeof random) {
    ssize_t n = getrandom(random + got, sizeof random - got, 0);
    if (n <= 0) {
      if (n < 0 && errno == EINTR) continue;
      return;  // no nonce, no pipe: the trace stays empty, which the verifier refuses
    }
    got += static_cast<size_t>(n);
  }
  for (size_t i = 0; i < sizeof random; ++i) snprintf(g_nonce + 2 * i, 3, "%02x", random[i]);
  const char *spec = getenv("KERNELLOOP_CUPTI_FD");
  if (spec != nullptr && spec[0] != '\0') {
    snprintf(g_fd_spec, sizeof g_fd_spec, "%s", spec);
    g_fd_spec_set = true;
    if (open_pipe(g_fd_spec)) {
      std::string line;
      append_fmt(line, "{\"kind\":\"start\",\"pid\":%ld,\"early\":%d,\"nonce\":\"%s\"}\n",
                 static_cast<long>(getpid()), g_early ? 1 : 0, g_nonce);
      pthread_mutex_lock(&g_mutex);
      emit(line.data(), line.size());
      pthread_mutex_unlock(&g_mutex);
    }
  }
}

int initialize() {
  const char *spec = g_fd_spec_set ? g_fd_spec : nullptr;
  const char *path = getenv("KERNELLOOP_CUPTI_OUT");
  if (spec != nullptr) {
    // Named but not this process's pipe (a program it executed, or a forged name): write nothing.
    if (g_fd < 0) return 1;  // the pipe named at load was not this process's: write nothing
  } else {
    if (path == nullptr || path[0] == '\0') return 1;
    // Append: a CUDA child process of the program, injected too, must not
    // truncate what the parent wrote. The caller hands us a fresh path.
    FILE *f = fopen(path, "ae");
    if (f == nullptr) return 1;
    setvbuf(f, nullptr, _IOLBF, 1 << 16);
    pthread_mutex_lock(&g_mutex);
    g_out = f;
    pthread_mutex_unlock(&g_mutex);
  }
  g_enabled.store(true, std::memory_order_release);

  uint32_t version = 0;
  if (!KL_CUPTI(cuptiGetVersion(&version), "cuptiGetVersion")) version = 0;
  {
    std::string line;
    append_fmt(line,
               "{\"kind\":\"meta\",\"cupti_version\":%u,\"compiled_api\":%d,\"pid\":%ld,"
               "\"kernel_struct\":\"%s\",\"memcpy_struct\":\"%s\"}\n",
               version, static_cast<int>(CUPTI_API_VERSION), static_cast<long>(getpid()), KL_KERNEL_STRUCT,
               KL_MEMCPY_STRUCT);
    write_control(line);
  }

  pthread_atfork(nullptr, nullptr, in_forked_child);
  if (atexit(at_exit) != 0) {
    write_data("{\"kind\":\"error\",\"where\":\"atexit\",\"code\":-1,\"message\":\"atexit failed\"}\n", 1);
  }

  // Activity API: the ground truth of what ran. Under another CUPTI client (compute-sanitizer)
  // registration fails: the trace then says so and the library stays passive, so the program
  // still ends the way it would untraced (a later flush would crash it).
  if (!KL_CUPTI(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed),
                "cuptiActivityRegisterCallbacks")) {
    write_control("{\"kind\":\"passive\"}\n");
    g_enabled.store(false, std::memory_order_release);
    return 1;
  }
  {
    enable_kind(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, "cuptiActivityEnable(CONCURRENT_KERNEL)");
    enable_kind(CUPTI_ACTIVITY_KIND_MEMCPY, "cuptiActivityEnable(MEMCPY)");
    enable_kind(CUPTI_ACTIVITY_KIND_MEMSET, "cuptiActivityEnable(MEMSET)");
    enable_kind(CUPTI_ACTIVITY_KIND_RUNTIME, "cuptiActivityEnable(RUNTIME)");
  }

  // Callback API: what the program asked its events to measure.
  if (!KL_CUPTI(cuptiSubscribe(&g_subscriber, on_callback, nullptr), "cuptiSubscribe")) {
    write_control("{\"kind\":\"passive\"}\n");
    g_enabled.store(false, std::memory_order_release);
  } else {
    const CUpti_CallbackId ids[] = {kCbidEventRecord, kCbidEventRecordPtsz, kCbidEventRecordFlags,
                                    kCbidEventRecordFlagsPtsz, kCbidElapsed, kCbidElapsed12080};
    for (CUpti_CallbackId id : ids) {
      KL_CUPTI(cuptiEnableCallback(1, g_subscriber, CUPTI_CB_DOMAIN_RUNTIME_API, id),
               "cuptiEnableCallback(RUNTIME_API)");
    }
    KL_CUPTI(cuptiEnableCallback(1, g_subscriber, CUPTI_CB_DOMAIN_RESOURCE,
                                 CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING),
             "cuptiEnableCallback(RESOURCE_CONTEXT_DESTROY_STARTING)");
  }
  return 1;
}

}  // namespace

// Called by the CUDA driver (cuInit) when CUDA_INJECTION64_PATH names this
// library. Returns 1 in every case: a failure here must not fail the program.
extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
  if (g_initialized.exchange(true)) return 1;  // the driver may call us more than once
  try {
    return initialize();
  } catch (...) {
    return 1;
  }
}
