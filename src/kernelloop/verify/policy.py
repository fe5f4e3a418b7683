"""The policy gate: what an editable part may not do.

Checked three ways. The source scan gives readable messages and runs before anything
is compiled; the object scan (imported and defined symbols, host instructions, static
initializers) is the real guard, since macros, token pasting and function pointers can
hide a name from a text search but not from the linker; the linked program's shared
library dependencies are checked last.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from pydantic import BaseModel

from ..program.macros import Macro, Macros, expand
from ..program.phases import spliced_raw_string
from ..program.scanner import SPLICE, blank_comments, body_start, literal_spans, scan_items, strip_comments
from ..program.run_lambda import LOADER_DIRECTIVE_PATTERNS
from ..tools.symbols import demangle


class Violation(BaseModel):
    rule: str
    where: str  # "source line N" | "object" | "program"
    detail: str

    def describe(self) -> str:
        return f"{self.rule} ({self.where}): {self.detail}"


# Headers an editable part may include. Anything else, and any quoted include, is refused:
# an include can read arbitrary files into compiler messages.
ALLOWED_HEADERS = re.compile(
    r"^(?:cuda_runtime(?:_api)?\.h|cuda\.h|device_launch_parameters\.h|cuda_fp16\.h|cuda_bf16\.h|cuda_fp8\.h"
    r"|cuda_pipeline(?:_primitives)?\.h|cuda_awbarrier(?:_primitives)?\.h|cooperative_groups\.h"
    r"|cooperative_groups/[\w/]+\.h|mma\.h|math_constants\.h|vector_types\.h|vector_functions\.h"
    r"|sm_\d+_intrinsics\.h|curand_kernel\.h|cuda/(?:pipeline|barrier|atomic|latch|semaphore|ptx|annotated_ptr|std/[\w/]+)"
    r"|cub/(?:block|warp|thread)/[\w/]+\.cuh|cub/util_\w+\.cuh"
    r"|c(?:stdint|stddef|stdio|stdlib|string|math|float|limits|assert)|(?:stdint|stddef|stdio|stdlib|string|math|float|limits|assert)\.h"
    r"|type_traits|utility|limits|algorithm|array|vector|cstdint|numeric|functional|tuple|initializer_list)$"
)
_ASM = re.compile(r"\b(?:asm|__asm__|__asm)\b")
_VENDOR = r"(?:cublas\w*|cublasLt\w*|cudnn\w*|cufft\w*|cusparse\w*|cusolver\w*|curand[A-Z]\w*|nccl\w*)"

# The CUDA runtime calls an editable part may make: an allow-list (verifier v2). What an
# honest launcher needs and nothing that runs host code, loads code, measures time, keeps
# state beyond a call, changes the device or lets a kernel touch host memory. The object
# scan checks the imported symbol (`_v2`/`_ptds`/`_ptsz` variants included); the source
# scan names the refused ones early, with a line number.
_CUDA_SUFFIX = r"(?:_v\d+)?(?:_ptds|_ptsz)?"
_CUDA_ALLOWED = re.compile(
    r"^(?:"
    # launching: what nvcc's <<<>>> stubs call (a template kernel's host declaration names
    # cudaLaunchKernel with null arguments; the source may name no launch call: scan_host_pass,
    # `launch-arguments`)
    r"cudaLaunchKernel"
    # kernel attributes and occupancy (what cudaOccupancyMaxPotentialBlockSize compiles to)
    r"|cudaFuncSetAttribute|cudaFuncGetAttributes|cudaFuncSetCacheConfig|cudaFuncSetSharedMemConfig|cudaFuncGetName"
    r"|cudaOccupancy(?:MaxActiveBlocksPerMultiprocessor(?:WithFlags)?|AvailableDynamicSMemPerBlock"
    r")"
    # read-only queries
    r"|cudaGetDevice|cudaGetDeviceCount|cudaDeviceGetAttribute|cudaGetDeviceProperties|cudaDriverGetVersion"
    r"|cudaRuntimeGetVersion|cudaDeviceGetStreamPriorityRange|cudaMemGetInfo|cudaPointerGetAttributes"
    r"|cudaGetSymbolAddress|cudaGetSymbolSize"
    # device memory; copies whose direction the host-code scan reads as a constant (the timing
    # audit also counts host<->device copies against the baseline's)
    r"|cudaMalloc|cudaFree|cudaMallocAsync|cudaFreeAsync|cudaMallocPitch|cudaMalloc3D|cudaMallocArray|cudaFreeArray"
    r"|cudaMemset(?:2D|3D)?(?:Async)?|cudaMemcpy(?:Async)?|cudaMemcpy(?:To|From)Symbol(?:Async)?"
    r"|cudaCreateTextureObject|cudaDestroyTextureObject|cudaCreateSurfaceObject|cudaDestroySurfaceObject"
    r"|cudaCreateChannelDesc"
    # streams and events for multi-stream dependencies (never an elapsed time)
    r"|cudaStreamCreate(?:WithFlags|WithPriority)?|cudaStreamDestroy|cudaStreamSynchronize|cudaStreamQuery"
    r"|cudaStreamWaitEvent|cudaStreamGetFlags|cudaStreamGetPriority|cudaDeviceSynchronize"
    r"|cudaEventCreate(?:WithFlags)?|cudaEventRecord(?:WithFlags)?|cudaEventDestroy|cudaEventSynchronize|cudaEventQuery"
    # stream capture and kernel graphs (nodes typed at compile time: kernels, empty nodes)
    r"|cudaStreamBeginCapture|cudaStreamEndCapture|cudaStreamIsCapturing|cudaStreamGetCaptureInfo"
    r"|cudaThreadExchangeStreamCaptureMode"
    r"|cudaGraphCreate|cudaGraphAddEmptyNode"
    r"|cudaGraphInstantiate(?:WithFlags|WithParams)?|cudaGraphLaunch|cudaGraphUpload|cudaGraphExecUpdate"
    r"|cudaGraphExecDestroy|cudaGraphDestroy"
    # errors
    r"|cudaGetLastError|cudaPeekAtLastError|cudaGetErrorString|cudaGetErrorName"
    # cuComplex.h's arithmetic on complex numbers: inline functions of the header, no driver call
    # (kept-aside set 9: a conjugate transpose's cuConjf read as the driver API)
    r"|cuC(?:real|imag|add|sub|mul|div|abs|fma)f?|cuConjf?|cuComplex(?:FloatToDouble|DoubleToFloat)"
    rf"){_CUDA_SUFFIX}$"
)
# Refused CUDA calls, by what they would let the candidate do: (rule, pattern, why).
_CUDA_REFUSED: list[tuple[str, str, str]] = [
    ("host-callback", r"cudaLaunchHostFunc|cudaStreamAddCallback|cudaLogsRegisterCallback"
     r"|cudaDeviceRegisterAsyncNotification",
     "runs host code from inside the stream, outside the launcher's call"),
    ("graph-node", r"cudaGraphAddHostNode|cudaGraph(?:Exec)?HostNode\w*|cudaGraphAddNode\w*"
     r"|cudaGraph(?:Exec)?NodeSetParams|cudaGraphConditionalHandleCreate\w*|cudaGraphAddChildGraphNode"
     r"|cudaStreamBeginCaptureToGraph",
     "graph host nodes, and the generic node API whose node type is data, run host code"),
    ("launch-arguments", r"cudaLaunchCooperativeKernel\w*|cudaLaunchKernelExC|cudaGraphAddKernelNode"
     r"|cudaGraph(?:Exec)?KernelNodeSetParams",
     "takes an array of pointers to the kernel's arguments, and the runtime copies into the kernel whatever "
     "host memory they name: launch with <<<>>> (clusters: __cluster_dims__)"),
    ("host-copy", r"cudaMemcpy(?:2D|3D)\w*|cudaMemcpy\w*Array\w*|cudaMemcpyBatch\w*",
     "a copy whose direction and host side the host-code scan cannot check (only cudaMemcpy, cudaMemcpyAsync "
     "and the symbol copies, with a constant direction)"),
    ("user-object", r"cudaUserObject\w+|cudaGraph(?:Retain|Release)UserObject",
     "a user object's destructor runs host code on a CUDA thread"),
    ("code-loading", r"cudaLibrary\w+|cudaGetKernel|cudaKernelSetAttributeForDevice|cudaGetFuncBySymbol"
     r"|cudaGetDriverEntryPoint\w*|cudaGetExportTable",
     "loads or reaches device or driver code that the object scan never sees"),
    ("timing", r"cudaEventElapsedTime\w*",
     "the harness alone measures time: a launcher must not open timing windows"),
    ("profiler", r"cudaProfilerSt\w+", "starts or stops profiling around the harness's measurement"),
    ("l2-persistence", r"cudaCtxResetPersistingL2Cache|cudaStreamSetAttribute|cudaStreamCopyAttributes"
     r"|cudaGraphKernelNodeSetAttribute|cudaGraphKernelNodeCopyAttributes",
     "controls persisting L2 lines or stream attributes that outlive the call"),
    ("device-state", r"cudaDeviceSetLimit|cudaDeviceSetCacheConfig|cudaDeviceSetSharedMemConfig|cudaSetDevice\w*"
     r"|cudaSetValidDevices|cudaChooseDevice|cudaInitDevice|cudaDeviceReset|cudaDevice(?:En|Dis)ablePeerAccess"
     r"|cudaMemcpy\w*Peer\w*|cudaDeviceSetMemPool|cudaMemPool\w+|cudaMallocFromPoolAsync|cudaDeviceGraphMemTrim"
     r"|cudaDeviceSetGraphMemAttribute|cudaGraphAddMem(?:Alloc|Free)Node",
     "changes device-wide state (limits such as the persisting-L2 set-aside, the current device, "
     "peers, memory pools) that outlives the call or moves work off the timed device"),
    ("host-memory", r"cudaHostAlloc|cudaMallocHost|cudaHostRegister|cudaHostUnregister|cudaHostGetDevicePointer"
     r"|cudaHostGetFlags|cudaFreeHost|cudaMallocManaged|cudaMemAdvise\w*|cudaMemPrefetch\w*|cudaMemDiscard\w*"
     r"|cudaStreamAttachMemAsync|cudaMemRangeGetAttributes?|__cudaRegisterManagedVar",
     "pinned, mapped or managed host memory: a kernel could read or write host memory with no copy the audit sees"),
    ("ipc", r"cudaIpc\w+|cudaImportExternal\w+|cudaExternalMemory\w+|cudaDestroyExternal\w+"
     r"|cudaSignalExternal\w+|cudaWaitExternal\w+|cudaGraphics\w+",
     "shares memory or events with another process or API"),
    ("file-io", r"cudaGraphDebugDotPrint|cudaLogsDumpToFile", "writes a file"),
]
# Queries whose answer changes with the process or the machine after verification (free memory
# falls in a real application; the driver is upgraded; more GPUs; a graph being captured; a pointer's
# kind; limits other code sets): allowed only where the baseline makes them (red team round 67: the
# tail dropped while less than a quarter of the GPU's memory is free; round 68: with two GPUs or more,
# or under stream capture). The device's own properties (SM count) stay allowed: launch configuration.
_ENVIRONMENT_QUERY = re.compile(
    rf"^(?:cudaMemGetInfo|cudaDriverGetVersion|cudaGetDeviceCount|cudaStreamIsCapturing|cudaStreamGetCaptureInfo\w*"
    rf"|cudaPointerGetAttributes|cudaDeviceGetLimit|cudaThreadGetLimit|cudaDeviceGetPCIBusId|cudaDeviceGetByPCIBusId"
    rf"|cudaGetDeviceFlags|cudaDeviceGetCacheConfig|cudaDeviceGetSharedMemConfig|cudaDeviceCanAccessPeer"
    rf"|cuMemGetInfo|cuDriverGetVersion|cuDeviceGetCount|cuPointerGetAttributes?){_CUDA_SUFFIX}$")
_CUDA_REFUSED_RE = [(rule, re.compile(rf"^(?:{pattern}){_CUDA_SUFFIX}$"), why) for rule, pattern, why in _CUDA_REFUSED]


def cuda_call_rule(name: str) -> tuple[str, str] | None:
    """(rule, why) for a CUDA runtime or driver symbol an editable part may not use; None if allowed."""
    if _CUDA_ALLOWED.match(name) or name.startswith("__cuda") and name != "__cudaRegisterManagedVar":
        return None
    for rule, pattern, why in _CUDA_REFUSED_RE:
        if pattern.match(name):
            return rule, why
    if re.match(r"^cu[A-Z]\w*$", name):
        return "driver-api", "a driver API call (module and library loading, raw launches, contexts)"
    if name.startswith("cuda"):
        return "forbidden-call", "a CUDA runtime call that is not on the launcher allow-list"
    return None
# (rule, pattern on comment- and string-free source, message)
# An attribute list's opening as the compiler's tokens: blanks or a comment may stand between the two
# `(` or `[`, and the keyword has a second spelling (red team round 158: `__attribute__( (ms_abi) )`).
# A macro spelling (`#define A __attribute__`) is read on the preprocessed part (scan_preprocessed).
_ATTRIBUTE_OPEN = r"(?:\b__attribute(?:__)?\s*\(\s*\(|\[\s*\[)"

_SOURCE_RULES: list[tuple[str, re.Pattern[str], str]] = [
    ("vendor-library", re.compile(rf"\b{_VENDOR}\b"), "vendor library call {m}: only hand-written kernels are allowed"),
    ("vendor-library", re.compile(r"\b(?:thrust|cutlass|cute)\s*::"), "library algorithm {m}: only hand-written kernels are allowed"),
    ("vendor-library", re.compile(r"\bcub\s*::\s*(?:\w+\s*::\s*)*Device\w+"), "cub device-wide call {m}: only block/warp-level cub is allowed"),
    # Short common words (open, write, connect, ...) are left to the object scan, which
    # sees what is really imported and does not trip over a device helper named `write`.
    ("process", re.compile(r"\b(?:system|popen|pclose|exec[lv]p?e?|execvpe|fexecve|fork|vfork|posix_spawnp?|ptrace)\s*\("), "process control {m}"),
    ("network", re.compile(r"\b(?:socket|getaddrinfo|gethostbyname|inet_pton|inet_addr)\s*\(|\bsockaddr(?:_in6?)?\b"), "network access {m}"),
    ("file-io", re.compile(r"\b(?:fopen|freopen|fdopen|openat|creat|fwrite|fread|fputs|fputc|fgets|pwrite|writev|unlink)\s*\("), "file access {m}"),
    ("file-io", re.compile(r"\b(?:std\s*::\s*)?(?:ofstream|ifstream|fstream|filebuf)\b"), "file stream {m}"),
    ("printing", re.compile(r"\b(?:printf|fprintf|dprintf|vprintf|vfprintf|puts|putchar|putc|fflush|perror)\s*\("), "printing {m}: only the frozen harness prints"),
    ("printing", re.compile(r"\b(?:std\s*::\s*)?(?:cout|cerr|clog)\b"), "printing {m}: only the frozen harness prints"),
    ("environment", re.compile(r"\b(?:getenv|secure_getenv|setenv|putenv|unsetenv|clearenv|environ|__environ)\b"), "environment access {m}"),
    ("dynamic-code", re.compile(r"\b(?:dlopen|dlsym|dlmopen|syscall)\s*\("), "dynamic loading or raw system call {m}"),
    # Anywhere in an attribute list: `__attribute__((used, constructor))` is one too.
    ("static-init", re.compile(_ATTRIBUTE_OPEN + r"[^;{}]*?\b(?:__)?(?:constructor|init_priority)(?:__)?\b"),
     "static constructor {m}: runs code before main"),
    ("exit-handler", re.compile(_ATTRIBUTE_OPEN + r"[^;{}]*?\b(?:__)?destructor(?:__)?\b"),
     "{m}: runs code after main, outside the harness"),
    ("exit-handler", re.compile(r"\b(?:atexit|at_quick_exit|quick_exit|on_exit|__cxa_atexit|__cxa_thread_atexit(?:_impl)?)\b"),
     "exit handler {m}: runs code after main, outside the harness"),
    ("ifunc", re.compile(r"\b(?:__)?(?:ifunc|target_clones)(?:__)?\b"),
     "GNU indirect function {m}: its resolver runs inside the dynamic loader, before main"),
    ("tls", re.compile(r"\b(?:thread_local|__thread|_Thread_local)\b"),
     "thread-local storage {m}: per-thread state with its own initializers and destructors"),
    # A naked function is nothing but hand-written host assembly (the red team's push/ret trampoline).
    ("host-asm", re.compile(_ATTRIBUTE_OPEN + r"[^;{}]*?\b(?:__)?naked(?:__)?\b"),
     "{m}: a naked function is raw host assembly"),
    ("harness-state", re.compile(r"\bcudaDeviceReset\s*\("), "{m} would destroy the harness's context"),
    ("main", re.compile(r"\bint\s+main\s*\("), "the editable part defines main()"),
    # Outside comments and literals, C++ needs nothing but printable ASCII less $ @ ` and \ (splices are
    # joined first). A character the scanners and the compiler read differently (round 56: `$` in an
    # identifier, then a quote the lexers took for a digit separator) can blind both to whole lines.
    ("character", re.compile(r"[^\t\n\v\f\r\x20-\x7e]|[$@`\\]"),
     "the character {m} outside comments and literals: identifiers and operators are plain ASCII, and a "
     "character the scanners may read differently from the compiler could hide code from them"),
    # Pasting builds names the text scan cannot see; kernels have no need for it.
    ("macro", re.compile(r"##"), "token pasting ({m}) can build forbidden names"),
    # Values the build supplies, not the code: they differ between the verifier's build and every
    # other build of the same text (best.cu, the checked-in file, a later day), so a candidate could
    # compile one kernel for the verifier and another for everyone else (red team round 51).
    ("build-context", re.compile(r"\b(?:__LINE__|__FILE__|__FILE_NAME__|__BASE_FILE__|__COUNTER__|__DATE__|__TIME__|"
                                 r"__TIMESTAMP__|__INCLUDE_LEVEL__|__builtin_LINE|__builtin_FILE|__builtin_FUNCTION|"
                                 r"__builtin_COLUMN|source_location|__has_include|__has_include_next|__has_embed|"
                                 r"__PRETTY_FUNCTION__|__FUNCTION__|__func__|__FUNCSIG__|typeid)\b"),
     "{m} is a value of the build, not of the code: what is verified would not be what ships"),
    # What the optimiser knows about a value, not the value: it follows the optimisation level, the
    # inlining and every fact the compiler learns (a debug build's assertion whose failure path never
    # returns tells it the condition held: red team round 169 read that through a template's
    # __builtin_constant_p and shifted the column count in debug builds only).
    ("optimizer-knowledge", re.compile(r"\b(?:__builtin_constant_p|__builtin_object_size|__builtin_dynamic_object_size)\b"),
     "{m} reads what the optimiser knows about a value, which differs between builds of the same code (an "
     "assertion's failure path, the optimisation level): what is verified would not be what ships"),
]
_PROTECTED_MACRO = re.compile(
    r"^(?:cuda[A-Z]\w*|cu[A-Z]\w*|main|exit|abort|printf|fprintf|puts|fwrite|write|stderr|stdout|"
    r"malloc|free|memcpy|memset|std|KERNEL_MS|getenv|atexit|__\w+)$"
)
_DEFINE = re.compile(r"^[ \t]*#[ \t]*(define|undef)[ \t]+([A-Za-z_]\w*)", re.M)
_INCLUDE = re.compile(r"^[ \t]*#[ \t]*(include|include_next|import)\b[ \t]*(.*)$", re.M)


def _without_strings(text: str) -> str:
    """String, character and raw string literals made `""`, found as the compiler finds them:
    reading forward, a quote inside a number being a digit separator (1'000; red team rounds 55,
    154) and a raw string ending only at its delimiter (round 155)."""
    out, i = [], 0
    for start, end in literal_spans(text):
        out.append(text[i:start] + '""')
        i = end
    out.append(text[i:])
    return "".join(out)


_DIGRAPHS = [("%:%:", "##"), ("%:", "#"), ("<%", "{"), ("%>", "}"), ("<:", "["), (":>", "]"), ("??=", "#")]


def normalize_source(text: str) -> str:
    """What the compiler sees before tokenizing: line splices joined, digraphs and the
    `??=` trigraph spelled out. Scanning this defeats `#inc\\<newline>lude` and `%:include`."""
    # phase 1 as gcc and nvcc read it: a lone CR ends a line too, and a vertical tab or form feed is
    # a blank, also beside a directive's `#` (red team round 157: `// ...` CR `#define Q __LINE__`
    # and `#` VT `include <dlfcn.h>` hid a directive from every rule)
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\v", " ").replace("\f", " ")
    text = SPLICE.sub("", text)  # a backslash, blanks, a newline: one splice to gcc and nvcc (round 156)
    for digraph, plain in _DIGRAPHS:
        text = text.replace(digraph, plain)
    return text


# The source rules about attributes and storage: also read on the preprocessed part, where a macro
# cannot spell them (the others there would trip over the toolkit's own expansions).
_EXPANDED_SOURCE_RULES = [r for r in _SOURCE_RULES
                          if r[0] in {"static-init", "exit-handler", "host-asm", "ifunc", "tls", "optimizer-knowledge"}]


# Rules on the text with string literals kept: what an asm string can ask the assembler.
_RAW_RULES: list[tuple[str, re.Pattern[str], str]] = [
    # Saving and restoring a macro undoes what the verifier's own builds redefine after the part's
    # includes (the frozen macros' pinned names, the assert comparison: red team round 69), in
    # `#pragma` or `_Pragma("...")` form.
    ("macro", re.compile(r"\b(?:push_macro|pop_macro)\b"),
     "{m} saves or restores a macro, which would undo the verifier's own definitions of it"),
    ("include", re.compile(LOADER_DIRECTIVE_PATTERNS["include"]), "assembler directive {m} reads a file into the program"),
    ("static-init", re.compile(_ATTRIBUTE_OPEN + r"[^;{}]*?\b(?:__)?section(?:__)?\b|#\s*pragma\s+section"),
     "explicit section placement {m} (init/fini arrays run code outside the harness)"),
    ("static-init", re.compile(LOADER_DIRECTIVE_PATTERNS["sections"]),
     "assembler section {m} (code that runs outside the harness)"),
    # section switches, the .init/.fini sections, symbol versions and kinds are assembler business no kernel needs,
    # and PTX has none of them (program.run_lambda.LOADER_DIRECTIVE_PATTERNS, which the frozen code is held to too)
    ("static-init", re.compile(LOADER_DIRECTIVE_PATTERNS["section-switches"]),
     "assembler directive {m} (code that runs outside the harness)"),
    ("symver", re.compile(LOADER_DIRECTIVE_PATTERNS["symver"]),
     "assembler directive {m} binds a name to another library symbol"),
    ("ifunc", re.compile(LOADER_DIRECTIVE_PATTERNS["ifunc"]),
     "symbol kind {m}: an indirect function runs its resolver before main; a unique symbol escapes containment"),
    # The host-code scan checks its stack model against the unwind tables the compiler writes
    # under its default options (verify/unwind.py); options set from the source could change both.
    ("compiler-options", re.compile(r"#\s*pragma\s+(?:GCC|clang)\s+optimize\b|\b_Pragma\s*\(\s*(?:u8|[uUL])?R?\"[^\"]*?(?:GCC|clang)\s+optimize"
                                    r"|" + _ATTRIBUTE_OPEN + r"[^;{}]*?\b(?:__)?optimize(?:__)?\b"),
     "{m}: changes how the host compiler builds the code the host-code scan judges"),
    # A calling convention or register-saving rule of its own lets the launcher leave the
    # harness's callee-saved registers changed with no store the scan sees (round 23: ms_abi).
    ("compiler-options", re.compile(_ATTRIBUTE_OPEN + r"[^;{}]*?\b(?:__)?(?:ms_abi|sysv_abi|regparm|stdcall"
                                    r"|cdecl|fastcall|thiscall|vectorcall|sseregparm|preserve_(?:most|all|none)"
                                    r"|no_(?:callee|caller)_saved_registers|interrupt|force_align_arg_pointer)(?:__)?\b"),
     "{m}: a calling convention of its own, which the host-code scan does not model"),
]


_ASM_TOKEN = re.compile(r"\b(?:__asm__|__asm|asm)\b")
# The C++ runtime's ABI entry points: the compiler calls them itself (static-local guards,
# throw and catch, unwinding) with pointers it makes; called by name, each writes through a
# pointer the caller chose (a red team wrote bytes anywhere with __cxa_guard_release/abort).
# nvcc's registration entry points too: its generated registration code (not the editable
# part's lines) calls them; a launcher calling __cudaRegisterFunction could re-point a harness
# kernel's host stub at device code of its own (red-team round 10).
_ABI_TOKEN = re.compile(r"\b(?:__cxa_\w+|_Unwind_\w+|__gxx_\w+|__builtin_eh_\w+|__builtin_unwind_\w+"
                        r"|__cudaRegister\w*|__cudaUnregister\w*|__cudaInitModule)\b")


# Launch calls that take an array of pointers to the kernel's arguments: the runtime copies into
# the kernel's parameters whatever host memory each pointer names (red team round 19 read 4 KiB of
# the harness's memory into a by-value parameter; round 20 did it again through the header's
# cudaLaunchKernelEx, whose cudaKernel_t overload takes its arguments by reference). Only nvcc's
# <<<>>> stubs launch: they build the array from their own by-value parameters, copied by the
# scanned code. The editable part's own lines (as the host compiler gets them: macros expanded)
# may name no launch call, no kernel handle and no launch configuration. `<<<>>>` itself
# becomes __cudaPushCallConfiguration, a kernel's host wrapper names its parameters __cuda_N, and a
# template kernel's host declaration gets the body `::cudaLaunchKernel(0, 0, 0, 0, 0, 0)` (no array).
_NULL_LAUNCH = re.compile(r"::\s*cudaLaunchKernel\s*\(\s*0\s*(?:,\s*0\s*){5}\)")
_LAUNCH_ARRAY_TOKEN = re.compile(
    r"\b(?:cudaLaunchKernel\w*|cudaLaunchCooperativeKernel\w*|cudaKernel_t|cudaLaunchConfig\w*|cudaLaunchAttribute\w*"
    r"|cudaGraphAddKernelNode"
    r"|cudaGraph(?:Exec)?KernelNodeSetParams|cuLaunch\w*|__cuda(?!PushCallConfiguration\b|_\d+\b|Register|Unregister|InitModule)\w+)\b")


def scan_host_pass(lines: list[tuple[int, str]]) -> list[Violation]:
    """Assembly in the host code the host compiler actually gets from the editable part
    (tools.nvcc.host_pass): whatever made the source scan read it as device code (a
    `#ifdef __CUDA_ARCH__` around `__device__`, a macro), it is host assembly here."""
    found: list[Violation] = []
    for number, text in lines:
        code = _without_strings(text)
        if m := _ASM_TOKEN.search(code):
            found.append(Violation(rule="host-asm", where=f"source line {number}",
                                   detail=f"`{m.group(0)}` in the host code nvcc compiles for this line: host code "
                                          "may not contain assembly"))
        if m := _LAUNCH_ARRAY_TOKEN.search(_NULL_LAUNCH.sub(" ", code)):
            found.append(Violation(rule="launch-arguments", where=f"source line {number}",
                                   detail=f"`{m.group(0)}` launches with (or reaches the runtime's launch with) an "
                                          "array of argument pointers, whose pointees the runtime copies into the "
                                          "kernel from any host address: launch with <<<>>>"))
        if m := _ABI_TOKEN.search(code):
            found.append(Violation(rule="abi-call", where=f"source line {number}",
                                   detail=f"`{m.group(0)}` names a C++ runtime ABI or CUDA registration function: "
                                          "the compiler calls these itself, and called by name they write "
                                          "through any pointer or re-register a kernel"))
        if len(found) >= 5:
            break
    # Attributes and pragmas in the host code itself: a macro defined for the host pass only
    # (`#ifndef __CUDA_ARCH__`, `#define CC(x) __attribute__(x)`) spells them nowhere else (round 158).
    found += _attribute_rules("\n".join(text for _, text in lines), "host code nvcc compiles")
    return found


def _attribute_rules(text: str, where: str) -> list[Violation]:
    """The attribute, section and pragma rules on TEXT, code as the compiler reads it (macros expanded)."""
    found: list[Violation] = []
    seen: set[tuple[str, str]] = set()
    for rules, view in ((_RAW_RULES, text), (_EXPANDED_SOURCE_RULES, _without_strings(text))):
        for rule, pattern, message in rules:
            for m in pattern.finditer(view):
                detail = message.format(m=m.group(0).rstrip("(: ").strip()) + " (after macro expansion)"
                if (rule, detail) not in seen:
                    seen.add((rule, detail))
                    found.append(Violation(rule=rule, where=where, detail=detail))
    return found


# What a conditional directive may test besides the program's own macros: the target and the
# toolchain, which the verdict names (arch, nvcc version), and the language.
_CONFIGURATION_ALLOWED = re.compile(
    r"^(?:defined|true|false|__CUDA_ARCH__|__CUDA_ARCH_LIST__|__CUDA_ARCH_FEAT_\w+|__CUDA_ARCH_SPECIFIC__|"
    r"__CUDA_ARCH_FAMILY_SPECIFIC__|__CUDACC__|__NVCC__|__CUDACC_VER_MAJOR__|__CUDACC_VER_MINOR__|"
    r"__CUDACC_VER_BUILD__|__cplusplus|CUDART_VERSION|CUDA_VERSION|__CUDA_FP16_TYPES_EXIST__|"
    r"__CUDA_BF16_TYPES_EXIST__|__CUDA_FP8_TYPES_EXIST__|__CUDA_ARCH_HAS_FEATURE__|"
    # the versions of the toolkit's own libraries (red team round 65: `#if CCCL_VERSION >= 2000000`)
    r"(?:CCCL|CUB|THRUST|_LIBCUDACXX_CUDA_API|LIBCUDACXX|_CCCL)_(?:MAJOR_|MINOR_|PATCH_)?VERSION)$")
_CONDITIONAL = re.compile(r"^[ \t]*#[ \t]*(if|ifdef|ifndef|elif|elifdef|elifndef)\b(.*)$", re.M)
# Names nvcc and gcc give the functions they make; the host-code reading counts such functions by
# name, so the editable part may not make one of its own (red team round 52: `extern "C" __nv_probe`).
_COMPILER_PREFIX = re.compile(r"\b(?:__cuda\w*|____nv_\w*|__sti__\w*|__device_stub__\w*|__wrapper__device_stub\w*|"
                              r"_GLOBAL__\w*|__static_initialization\w*|__cxx_global_var_init\w*|__fatDeviceText|"
                              r"__dso_handle|__nv_(?!bfloat16|bfloat162|fp8|fp6|fp4|half|cvt|atomic)\w+)\b")
# The harness's own namespace: declaring into it lets lookup find the harness's functions only
# where the harness shares the unit (red team round 51's argument-dependent lookup).
HARNESS_NAMESPACE = "kl"


def defined_macros(text: str) -> set[str]:
    """Names a text `#define`s (the preamble's and the editable part's own macros)."""
    return {m.group(2) for m in _DEFINE.finditer(strip_comments(normalize_source(text))) if m.group(1) == "define"}


def _configuration_tests(text: str, own_macros: set[str]) -> list[tuple[int, str]]:
    """(offset, name) of each macro a conditional directive tests that only the build can supply: not
    defined by the program itself, not the target or toolchain. `#ifdef NDEBUG`, `#if __OPTIMIZE__`,
    `#ifdef KL_VERIFY` pick code by how the file is compiled, and the verifier's build is not the
    user's release build (red team round 52 used the include path)."""
    # Every definition counts, each read on its own (`#undef MODE` then `#define MODE 1` hides none; a
    # function-like first definition does not make an object-like second one take arguments: round 66).
    # A body starts with `(` exactly when the macro is function-like (`(` right after the name).
    definitions: dict[str, list[str]] = {}
    for m in _DEFINE.finditer(text):
        if m.group(1) == "define":
            definitions.setdefault(m.group(2), []).append(
                text[m.end():text.find("\n", m.end()) if "\n" in text[m.end():] else len(text)])
    own = set(definitions) | own_macros  # names the program defines: never read by the toolkit's meaning
    # Expanded only where one definition leaves no doubt which is in force at the condition.
    single = {name: bodies[0] for name, bodies in definitions.items() if len(bodies) == 1}

    def words(code: str) -> list[str]:
        if set(_CALL_NAME.findall(code)) - {"defined"}:  # a call: read what it expands to
            code = _expand_calls(code, single, own)
        return re.findall(r"(?<![\w.])[A-Za-z_]\w*", _without_strings(code))

    found = []
    for m in _CONDITIONAL.finditer(text):
        todo, seen = words(m.group(2)), set()
        while todo:  # an own macro's body counts as written in the condition (`#define OWN defined(NDEBUG)`)
            name = todo.pop()
            if name in seen:
                continue
            seen.add(name)
            if name in definitions:
                for body in definitions[name]:
                    params = re.match(r"^\(([^)]*)\)", body)  # a function-like macro: its parameters are no names
                    todo += [w for w in words(body[params.end() if params else 0:])
                             if not params or w not in re.findall(r"\w+", params.group(1))]
            elif name not in own_macros and not _CONFIGURATION_ALLOWED.match(name):
                found.append((m.start(), name))
    return found


_CALL = re.compile(r"(?<![\w.])([A-Za-z_]\w*)\s*\(([^()]*)\)")
_CALL_NAME = re.compile(r"(?<![\w.])([A-Za-z_]\w*)\s*\(")


def _expand_calls(code: str, bodies: dict[str, str], own: set[str], rounds: int = 8) -> str:
    """`code` with each call of a function-like macro replaced by its body, arguments substituted and
    pasted, as the preprocessor does: the program's own macros by their own bodies (`bodies`), any other
    by the toolkit's (`__CUDA_ARCH_HAS_FEATURE__(SM90_ALL)` -> `__CUDA_ARCH_FEAT_SM90_ALL`, red team
    round 64), never a name the program defines by the toolkit's meaning (round 65: `#undef isascii`,
    `#define isascii(c) NDEBUG`). A call this cannot expand (variadic, nested parentheses, a count of
    arguments that does not fit) stays as written and its words are read as they stand: fail closed."""
    from ..tools.nvcc import toolkit_macros
    toolkit = toolkit_macros()

    def expand(call: re.Match) -> str:
        body = bodies.get(call.group(1)) if call.group(1) in own else toolkit.get(call.group(1))
        params = re.match(r"^\(([^)]*)\)\s?(.*)$", body or "", re.S)  # `(` right after the name: function-like
        if not params or "..." in params.group(1):
            return call.group(0)
        names = [p.strip() for p in params.group(1).split(",") if p.strip()]
        args = [a.strip() for a in call.group(2).split(",")] if call.group(2).strip() else []
        if len(names) != len(args):
            return call.group(0)
        text = re.sub(r"\b\w+\b", lambda w: args[names.index(w.group(0))] if w.group(0) in names else w.group(0),
                      params.group(2))
        return " " + re.sub(r"\s*##\s*", "", text) + " "

    for _ in range(rounds):
        expanded = _CALL.sub(expand, code)
        if expanded == code:
            break
        code = expanded
    return code


def _toolkit_macros(code: str) -> frozenset[str]:
    """The toolkit's own macros among the `__x__` names `code` holds (tools/nvcc.py toolkit_macros;
    nvcc runs only when such a name occurs)."""
    names = set(re.findall(r"\b__\w+__\b", code))
    if not names:
        return frozenset()
    from ..tools.nvcc import toolkit_macros
    return frozenset(names & toolkit_macros().keys())


_NAME_NODES = {"identifier", "field_identifier", "type_identifier", "namespace_identifier", "qualified_identifier",
               "operator_name", "destructor_name", "template_function"}


def _declarator_name(target):
    """The node naming what a declarator declares, through every wrapper: pointer, reference, array,
    function, init and attributed declarators by their `declarator` field, a parenthesized one
    (`int (__x)`, `void (__assert_fail)(...)`: no field, red team round 64) by its one declarator child."""
    while target is not None and target.type not in _NAME_NODES:
        inner = target.child_by_field_name("declarator")
        if inner is None:  # parenthesized_declarator, attributed_declarator: the declarator is a plain child
            inner = next((c for c in target.named_children
                          if c.type in _NAME_NODES or c.type.endswith("declarator")), None)
        target = inner
    return target


def _declared_names(text: str):
    """(offset, name, what) of every name the editable part declares: functions, variables, types,
    namespaces, enumerators, macros (tree-sitter-cuda's tree of the comment-free text)."""
    from ..program.cuda_tree import Source, walk
    src = Source(text)
    named = {"namespace_definition", "struct_specifier", "class_specifier", "union_specifier", "enum_specifier",
             "alias_declaration", "enumerator", "preproc_def", "preproc_function_def", "concept_definition"}
    for node in walk(src.root):
        targets = []
        if node.type in named and (node.type not in {"struct_specifier", "class_specifier", "union_specifier",
                                                     "enum_specifier"} or node.child_by_field_name("body")):
            targets = [node.child_by_field_name("name")]
        elif node.type in {"function_definition", "declaration", "field_declaration", "type_definition",
                           "parameter_declaration", "optional_parameter_declaration"}:
            # a parameter too: `int _CG_DEBUG` is a macro in another build (red team round 161)
            # every declarator, not the first alone (round 61: `KlSink unused, __assert_fail;`)
            targets = [_declarator_name(target) for target in node.children_by_field_name("declarator")]
        elif node.type in {"identifier", "type_identifier"} and _at_namespace_scope_expression(node):
            targets = [node]  # C++ has no expression here: tree-sitter misread a declaration (round 60)
        for target in targets:
            if target is None:
                continue
            while target.type in {"qualified_identifier", "template_function"} and target.child_by_field_name("name"):
                target = target.child_by_field_name("name")  # `ns::__x`, `__f<int>`: the last name
            if target.type in {"identifier", "field_identifier", "type_identifier", "namespace_identifier"}:
                yield src.offset(target.start_byte), src.text_of(target), node.type


_BUILD_VALUE = re.compile(r"\b(?:__LINE__|__FILE__|__FILE_NAME__|__BASE_FILE__|__COUNTER__|__DATE__|__TIME__|"
                          r"__TIMESTAMP__|__INCLUDE_LEVEL__|__builtin_LINE|__builtin_FILE|__builtin_FUNCTION|"
                          r"__builtin_COLUMN|__builtin_source_location|__has_include|__has_include_next|__has_embed)\b")
# Header macros that take a build value only for a message on failure, never as a result, and the
# header that defines each (the qualified build includes it before it pins the macro's names).
_MESSAGE_ONLY = {"assert"}
_MESSAGE_ONLY_HEADERS = {"assert": "cassert"}


def _build_value_macros(macros: dict[str, str]) -> set[str]:
    """The macros among `macros` (name -> body) that expand, directly or through each other, to a
    value of the build, or stringize their argument (a header's `#x` turns any macro's value, `linux`
    or `NDEBUG`, into data: red team round 54)."""
    found = {name for name, body in macros.items()
             if _BUILD_VALUE.search(body) or re.search(r"(?<!#)#(?!#)\s*[A-Za-z_]", _without_strings(body))}
    while True:
        more = {name for name, body in macros.items() if name not in found
                and any(word in found for word in re.findall(r"[A-Za-z_]\w*", body))}
        if not more:
            return found - _MESSAGE_ONLY
        found |= more


_IDENTIFIER = re.compile(r"(?<![\w.])[A-Za-z_]\w*")


def _own_names(body: str) -> set[str]:
    """The names a macro's body binds itself (its locals, a lambda's parameters: round 61's honest
    lambda-based CUDA_CHECK), by the fail-closed reading of _bound_names."""
    probe = f"void kl_probe_() {{ {body}; }}"
    return {name for _, name in _bound_names(probe, set(_IDENTIFIER.findall(probe)))} - {"kl_probe_"}


def _macro_parts(body: str) -> tuple[str, str, set[str]]:
    """A macro's `(params)` as written ('' for an object-like one), its replacement text, and the names
    that text keeps as its own: its parameters and what it binds itself (_own_names)."""
    params = re.match(r"^\s*\(([^)]*)\)", body)
    rest = body[params.end() if params else 0:]
    own = (set(re.findall(r"\w+", params.group(1))) if params else set()) | _own_names(_without_strings(rest))
    return (params.group(0).strip() if params else ""), rest, own


def _macro_free_names(name: str, macros: dict[str, str], seen: set[str] | None = None) -> set[str]:
    """The names a macro's expansion leaves to the lookup of wherever it is expanded: the words of its
    body (and of the macros it names, in turn), less its parameters and what the body declares itself
    (`cudaError_t err_ = (call)`)."""
    seen = set() if seen is None else seen
    if name in seen or name not in macros:
        return set()
    seen.add(name)
    _, rest, own = _macro_parts(macros[name])
    free = set(_IDENTIFIER.findall(_without_strings(rest))) - own
    for word in list(free):
        free |= _macro_free_names(word, macros, seen)
    return free


# Where a name is only used, never bound: an occurrence anywhere else (a declarator of any kind, a
# parameter, a capture, a structured binding, a using-declaration, a template parameter, ...) binds it.
# Listing the uses fails closed: a form of binding nobody listed is refused, not missed (round 57:
# parameters, references, structured bindings and a macro's `T n{}` slipped past a list of declarations).
_USE_PARENTS = {
    "argument_list", "binary_expression", "unary_expression", "update_expression", "conditional_expression",
    "parenthesized_expression", "return_statement", "subscript_expression", "subscript_argument_list",
    "comma_expression", "pointer_expression", "sizeof_expression", "alignof_expression", "expression_statement",
    "condition_clause", "initializer_list", "template_argument_list", "type_descriptor", "compound_literal_expression",
    "case_statement", "throw_statement", "new_expression", "delete_expression", "for_statement", "while_statement",
    "do_statement", "if_statement", "decltype", "static_assert_declaration", "kernel_call_syntax",
}
_TYPE_FIELD_PARENTS = {"declaration", "parameter_declaration", "optional_parameter_declaration", "field_declaration",
                       "function_definition", "cast_expression", "new_expression", "template_type", "type_definition",
                       "for_range_loop", "operator_cast"}
# Fields that hold a value or a type the declaration only uses (round 58: a member's default
# `cudaError_t status = cudaSuccess;` was refused as a binding).
_VALUE_FIELDS = {"default_value", "default_type", "value", "right"}


def _could_declare(call, no_types: frozenset[str] = frozenset()) -> bool:
    """Whether a call expression of one argument could be read as a declaration, which C++ prefers where
    a statement can be either: `T(x);`, `T(x) = v;`, `T<U>(x);`, `T(*x) = p;` declare x (round 58: the
    most vexing parse hid the names tree-sitter read as call arguments). A macro's invocation is no
    declaration as written (the reading with macros expanded shows what it becomes), nor is a call of a
    function `no_types` names."""
    callee = call.child_by_field_name("function")
    if callee is None or callee.type not in ("identifier", "template_function", "qualified_identifier"):
        return False  # `v.push_back(x);`: a member call declares nothing
    if callee.type == "identifier" and callee.text.decode() in no_types:
        return False
    args = call.child_by_field_name("arguments")
    if args is None or args.type != "argument_list" or args.named_child_count != 1:
        return False
    place = call.parent
    while place is not None and place.type in ("parenthesized_expression", "comma_expression"):
        place = place.parent
    if place is None:
        return False
    return place.type in ("expression_statement", "for_statement") or (
        place.type == "assignment_expression" and place.child_by_field_name("left") is not None
        and place.child_by_field_name("left").id in (call.id, call.parent.id))


def _field(node) -> str | None:
    parent = node.parent
    for i, child in enumerate(parent.children):
        if child.id == node.id:
            return parent.field_name_for_child(i)
    return None


def _is_use(node, no_types: frozenset[str] = frozenset()) -> bool:
    """Whether an identifier node is a use of a name (an expression, a called function, a declaration's
    type), not a place that binds it."""
    parent = node.parent
    if parent is None:
        return False
    field = _field(node)
    kind = parent.type
    if kind in ("parenthesized_expression", "pointer_expression") or (kind == "argument_list" and field is None):
        # the one argument of a call that C++ would read as a declaration `T(x);` binds x
        inner = parent
        while inner is not None and inner.type in ("parenthesized_expression", "pointer_expression"):
            inner = inner.parent
        if inner is not None and inner.type == "argument_list" and inner.parent is not None \
                and inner.parent.type == "call_expression" and _could_declare(inner.parent, no_types):
            return False
    if kind == "qualified_identifier" and field == "name" and parent.parent is not None \
            and parent.parent.type == "using_declaration":
        scope = parent.child_by_field_name("scope")  # `using ::cudaError_t;`, `using std::exit;`: the same entity
        return scope is None or (scope.type == "namespace_identifier" and scope.text in (b"std",))
    if kind in ("qualified_identifier", "template_function", "template_type") and field == "name":
        return _is_use(parent, no_types)
    if kind == "qualified_identifier" and field == "scope":
        return True
    if kind == "field_expression":
        return field in ("argument", "field")  # `p->exit`: a member's name, not a binding of exit
    if kind == "call_expression":
        return True
    if kind == "assignment_expression":
        return field == "right"
    if kind == "init_declarator":
        return field == "value"
    if kind == "cast_expression":
        return field in ("type", "value")
    if field == "type" and kind in _TYPE_FIELD_PARENTS:
        return True
    if field in _VALUE_FIELDS and kind in ("field_declaration", "enumerator", "optional_parameter_declaration",
                                           "optional_type_parameter_declaration", "for_range_loop"):
        return True
    return kind in _USE_PARENTS


def _at_namespace_scope_expression(node) -> bool:
    """Whether a node sits in an expression statement outside any function: C++ has none there, so the
    text is a declaration tree-sitter misread (round 60: `[[gnu::alias("impl")]] Sig(unused), fprintf;`
    inside `extern "C++" {}` declares a global fprintf; tree-sitter read a comma expression)."""
    statement = False
    while node is not None:
        if node.type in ("compound_statement", "function_definition", "lambda_expression", "field_declaration_list",
                         "requires_expression"):
            return False
        statement = statement or node.type == "expression_statement"
        node = node.parent
    return statement


def _bound_names(text: str, names: set[str], no_types: frozenset[str] = frozenset()):
    """(offset, name) of each occurrence of one of `names` in `text` (comment- and literal-free code)
    that binds it rather than uses it (_is_use), in tree-sitter-cuda's tree."""
    from ..program.cuda_tree import Source, walk
    src = Source(text)
    for node in walk(src.root):
        if node.type in {"identifier", "type_identifier", "field_identifier", "namespace_identifier"} \
                and node.child_count == 0 and (name := src.text_of(node)) in names \
                and (not _is_use(node, no_types) or _at_namespace_scope_expression(node)):
            yield src.offset(node.start_byte), name


def _function_names(code: str) -> frozenset[str]:
    """The names of the functions `code` declares or defines (tree-sitter's function declarators)."""
    from ..program.cuda_tree import Source, walk
    src = Source(code)
    found = set()
    for node in walk(src.root):
        if node.type == "function_declarator" and (name := node.child_by_field_name("declarator")) is not None \
                and name.type == "identifier":
            found.add(src.text_of(name))
    return frozenset(found)


def _called_names(code: str) -> set[str]:
    """The names the frozen code calls unqualified (tree-sitter's call expressions): a part's function or
    object of such a name would be found by lookup inside the frozen code's templates."""
    from ..program.cuda_tree import Source, walk
    src = Source(code)
    found = set()
    for node in walk(src.root):
        if node.type == "call_expression" and (callee := node.child_by_field_name("function")) is not None:
            if callee.type == "template_function":
                callee = callee.child_by_field_name("name")
            if callee is not None and callee.type == "identifier":
                found.add(src.text_of(callee))
    return found


def scan_macro_hygiene(editable: str, baseline_editable: str, program_macros: dict[str, str],
                       header_macros: dict[str, str], program_code: str, expanded_part: str = "") -> list[Violation]:
    """The program's own frozen macros and functions carry values of the build honestly (a CUDA_CHECK
    passes __LINE__ to its message): they are safe only while their names mean what they mean to the
    frozen code. A part that binds a name such a macro leaves to the lookup where it is expanded
    (`fprintf`, `stderr`), or a name the frozen code calls unqualified (argument-dependent lookup
    finds the part's overload of `check` inside a header's template), makes the message's line its
    own data (red team round 56: local objects named like CUDA_CHECK's calls kept the line and picked
    the kernel; round 57: the same names bound as parameters, references, structured bindings and
    through the part's own macro). Every occurrence of such a name in the part, as written and as the
    compiler reads it (`expanded_part`), must be a use (_is_use). What the baseline's part binds too
    (its launcher, its helpers) is the program's own."""
    code = _without_strings(strip_comments(normalize_source(editable)))
    macros = {**header_macros, **program_macros}
    reaching = _build_value_macros(macros) & set(program_macros)
    used = set(_IDENTIFIER.findall(code)) | set(_IDENTIFIER.findall(_without_strings(expanded_part)))
    free: dict[str, str] = {}
    for macro in sorted(used & reaching):
        for word in _macro_free_names(macro, macros):
            free.setdefault(word, f"the frozen macro {macro} (it carries a value of the build)")
    for call in sorted(_called_names(_without_strings(program_code))):
        free.setdefault(call, "the frozen code (it calls it unqualified)")
    baseline = _without_strings(strip_comments(normalize_source(baseline_editable)))
    # Callees that are no type: macros, and functions the part, the baseline's part or the frozen code
    # declare (`remember(cudaSuccess);` calls a function; round 59 found it refused)
    no_types = (frozenset(macros) | frozenset(defined_macros(editable)) | frozenset(defined_macros(baseline_editable))
                   | _function_names(code) | _function_names(baseline) | _function_names(_without_strings(program_code)))
    allowed = {name for _, name in _bound_names(baseline, set(free), no_types)}
    found: list[Violation] = []
    seen: set[str] = set()
    for view, where in ((code, "source line {}"), (_without_strings(expanded_part), "preprocessed line {}")):
        for offset, name in _bound_names(view, set(free) - allowed, no_types):
            if name in seen:
                continue
            seen.add(name)
            found.append(Violation(rule="macro-hygiene", where=where.format(view.count(chr(10), 0, offset) + 1),
                                   detail=(f"binds {name}, which {free[name]} uses: the frozen code would reach "
                                           f"the part's own {name}")))
    return found[:5]


_KEYWORDS = frozenset("""alignas alignof and and_eq asm auto bitand bitor bool break case catch char char8_t char16_t
char32_t class compl concept const consteval constexpr constinit const_cast continue co_await co_return co_yield
decltype default delete do double dynamic_cast else enum explicit export extern false float for friend goto if inline
int long mutable namespace new noexcept not not_eq nullptr operator or or_eq private protected public register
reinterpret_cast requires return short signed sizeof static static_assert static_cast struct switch template this
thread_local throw true try typedef typeid typename union unsigned using virtual void volatile wchar_t while xor
xor_eq""".split())
# The compiler's own names (builtins, keywords of GNU C++): never declared, so never qualified;
# other reserved names (`__assert_fail`) are functions a header declares, pinned like the rest.
_COMPILER_OWN = re.compile(r"^(?:__\w+__|__builtin_\w+|__func__|__restrict|__typeof|__inline|__const|__volatile|"
                           r"__asm|__signed|__label__|__alignof)$")
_QUALIFIABLE = re.compile(r'"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'|(?<![\w.$])([A-Za-z_]\w*)')


def _message_only_arguments(body: str, reaching: set[str]) -> list[tuple[int, int]]:
    """Spans of BODY that are the argument of a message-only macro's call (`assert(e_ == cudaSuccess)`)
    and carry no value of the build themselves: left as written in the qualified body. assert
    stringizes its argument into its message, so a qualified name there changes the message's bytes
    and an honest part would differ (kept-aside set 7: `CUDA_OK(x)` wrapping assert); and the names
    there receive no line or file (those go to `__assert_fail`, which assert's own body names), only
    the condition, which decides nothing but whether the program stops. An argument that passes a
    build value on (`assert(check(x, __LINE__))`) is qualified as any other code, and so is every
    argument of a body that holds a build value anywhere but in assert's own expansion (`const int
    l_ = __LINE__; assert(ok(l_));` hands it on through a local: red team round 98): the exemption
    goes by where values can flow in the whole body, not by the argument's spelling."""
    # literals blanked to the same length: a ')' in a string or a character does not end a call
    blank = re.sub(r'"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', lambda m: '"' + " " * (len(m.group(0)) - 2) + '"',
                   body)
    if _BUILD_VALUE.search(blank) or set(re.findall(r"\w+", blank)) & (reaching - _MESSAGE_ONLY):
        return []
    spans = []
    for m in re.finditer(r"(?<![\w.:>])(" + "|".join(sorted(_MESSAGE_ONLY)) + r")\s*\(", blank):
        depth, i = 1, m.end()
        while i < len(blank) and depth:
            depth += {"(": 1, ")": -1}.get(blank[i], 0)
            i += 1
        if depth == 0:
            spans.append((m.end(), i - 1))
    return spans


def _flattened_body(name: str, params: str, rest: str, program_macros: dict[str, str]) -> str | None:
    """The replacement text of the program's macro NAME with the program's other macros it calls
    expanded as the preprocessor expands them where NAME is used, so its names can be qualified where
    they stand and a `#x` of an inner macro keeps the user's spelling (kept-aside set 20: `LAUNCH_CHECK()`
    defined as `CUDA_CHECK(cudaGetLastError())`, where `CUDA_CHECK` prints `#expr`: qualifying
    `cudaGetLastError` in the outer body changed the message's bytes, so an honest part was refused as
    build-identity). None where that cannot be read for sure (program.macros.expand: token pasting,
    `__VA_OPT__`, a name defined more than once, ...) or where a parameter of NAME reaches an inner
    macro's `#` (its spelling there is the use site's): the body is then qualified as written."""
    defined: dict[str, Macro] = {}
    words = [w.strip() for w in params.strip()[1:-1].split(",") if w.strip()] if params else []
    # the parameters as stand-ins no macro names, put back after the expansion
    stand_ins = {w.removesuffix("...").strip() or "__VA_ARGS__": f"kl_param_{k}_" for k, w in enumerate(words)}
    if any(w.endswith("...") for w in words):
        stand_ins["__VA_ARGS__"] = stand_ins.get("__VA_ARGS__", f"kl_param_{len(words)}_")
    for other, text in program_macros.items():
        if other == name or other in stand_ins:
            continue
        m = re.match(r"^\(([^)]*)\)", text)
        body = text[m.end():] if m else text
        ps = [w.strip() for w in m.group(1).split(",") if w.strip()] if m else None
        variadic = bool(ps) and ps[-1].endswith("...")
        if ps and variadic:
            ps[-1] = ps[-1][:-3].strip() or "__VA_ARGS__"
        defined[other] = Macro(other, tuple(ps) if ps is not None else None, variadic, body.strip())
    if any(s in rest for s in stand_ins.values()):
        return None
    text = re.sub(r"(?<![\w$])(" + "|".join(map(re.escape, stand_ins)) + r")(?![\w$])",
                  lambda m: stand_ins[m.group(1)], rest) if stand_ins else rest
    if "#" in _without_strings(text):
        return None  # NAME's own `#x` or `##` works on its use site's spelling: left to the body as written
    flat = expand(text, Macros(defined, frozenset()))
    if flat is None:
        return None
    for literal in re.findall(r'"(?:\\.|[^"\\\n])*"', flat):
        if any(s in literal for s in stand_ins.values()):
            return None
    back = {v: k for k, v in stand_ins.items()}
    return re.sub(r"\bkl_param_\d+_\b", lambda m: back[m.group(0)], flat)


def qualified_macro_definitions(editable: str, expanded_part: str, program_macros: dict[str, str],
                                header_macros: dict[str, str], namespace: str) -> str:
    """Lines that pin each free name of the frozen build-value macros the part uses as the frozen code
    sees it before the part (`namespace NS { using ::fprintf; ... }`: a using-declaration takes the
    declarations made so far, not an overload the part adds later, red team round 60), and give each
    such macro its own body with those names qualified (`::NS::fprintf(::NS::stderr, ...)`), for a
    second build of the part (verify/shipped.py): a part that binds such a name, in whatever spelling
    C++ allows (rounds 56-60 kept finding spellings a reading of the syntax missed), compiles
    otherwise there. `namespace`: a secret name (namespaces are open). Names preceded by `::`, `.`,
    `->` or `#`, followed by `::`, the body's own declarations, its parameters, keywords, the
    compiler's `__` names and macros that expand to more than a name are left as written."""
    code = _without_strings(strip_comments(normalize_source(editable)))
    macros = {**header_macros, **program_macros}
    # the program's own build-value macros, and the headers' allowed ones (assert: round 61 overloaded
    # __assert_fail, which takes assert's __LINE__, in a declaration the reading of the syntax missed)
    reaching = (_build_value_macros(macros) & set(program_macros)) | (_MESSAGE_ONLY & set(header_macros))
    used = set(_IDENTIFIER.findall(code)) | set(_IDENTIFIER.findall(_without_strings(expanded_part)))
    lines: list[str] = []
    pinned: set[str] = set()
    # the macros the used ones name in turn, for bodies that cannot be flattened (which name them as written)
    pending, redefined = sorted(used & reaching), set()
    while pending:
        name = pending.pop()
        if name in redefined:
            continue
        redefined.add(name)
        head, rest, _ = _macro_parts(macros[name])
        if name not in program_macros or _flattened_body(name, head, rest, program_macros) is None:
            pending += sorted(set(_IDENTIFIER.findall(_without_strings(rest))) & reaching - redefined)
    for name in sorted(redefined):
        head, rest, keep = _macro_parts(macros[name])
        if name in program_macros and (flat := _flattened_body(name, head, rest, program_macros)) is not None:
            head, rest, keep = _macro_parts(f"{head} {flat}")
        messages = _message_only_arguments(rest, reaching)

        def qualify(m: re.Match, rest: str = rest, keep: set[str] = keep, name: str = name,
                    messages: list[tuple[int, int]] = messages) -> str:
            word = m.group(1)
            if word is None or word in keep or word in _KEYWORDS or _COMPILER_OWN.match(word):
                return m.group(0)
            if any(start <= m.start() < end for start, end in messages):
                return m.group(0)
            before, after = rest[:m.start()].rstrip(), rest[m.end():].lstrip()
            if before.endswith(("::", ".", "->", "#")) or after.startswith("::"):
                return m.group(0)
            # a macro of more than its own name, not the macro itself (its name in its body is not expanded again)
            if word in macros and macros[word].strip() != word and word != name:
                return m.group(0)
            pinned.add(word)
            return f"::{namespace}::{word}"

        lines += [f"#undef {name}", f"#define {name}{head} {_QUALIFIABLE.sub(qualify, rest).strip()}"]
    if not lines:
        return ""
    headers = [f"#include <{_MESSAGE_ONLY_HEADERS[m]}>" for m in sorted(redefined) if m in _MESSAGE_ONLY_HEADERS]
    return "\n".join([*headers, f"namespace {namespace} {{ " + " ".join(f"using ::{w};" for w in sorted(pinned)) + " }",
                      *lines])


# The C library's routine an `assert` that fails calls with its message: the condition's text, the
# file, the line and the function, as builtins in newer C libraries (glibc 2.40's `__ASSERT_FILE` is
# `__builtin_FILE ()`: kept-aside set 8 on the lent GPU's toolchain). It prints them and aborts, so
# they are a message, as assert's are (_MESSAGE_ONLY); the part cannot name it with a build value
# itself, since the source scan refuses those names as written.
_ASSERT_FAILURE = re.compile(r"\b(?:__assert_fail|__assert_rtn|__assert2|__assert)\s*\(")


def _without_assert_failures(part: str) -> str:
    """PART with the arguments of each call of the C library's assert-failure routine blanked."""
    text = _without_strings(part)
    out, i = [], 0
    while m := _ASSERT_FAILURE.search(text, i):
        depth, j = 1, m.end()
        while j < len(text) and depth:
            depth += {"(": 1, ")": -1}.get(text[j], 0)
            j += 1
        out.append(text[i:m.end()])
        i = j - 1 if depth == 0 else j
    out.append(text[i:])
    return "".join(out)


# The switches real builds set that the toolkit's and the C++ library's headers read: a debug build
# (DEBUG, _DEBUG), the CCCL, CUB, Thrust and cooperative-groups assertion and debug switches,
# libstdc++'s assertions, PyTorch's half and bfloat16 switches, and relocatable device code (nvcc
# defines __CUDACC_RDC__: CUB's CUB_RDC_ENABLED, round 161). NDEBUG is a build of its own (assert's
# check compares code with and without it). A part may not name what these change (red team round
# 160: a parameter named CUB_STDERR, an empty macro in a -DDEBUG build, made `C / 2 - CUB_STDERR - 0`
# halve a loop). The code of the part's functions is compared too, in the builds where honest code
# compiles alike (shipped.other_builds).
BUILD_SWITCHES = ("DEBUG", "_DEBUG", "CCCL_ENABLE_ASSERTIONS", "CCCL_ENABLE_HOST_ASSERTIONS",
                  "CCCL_ENABLE_DEVICE_ASSERTIONS", "CUB_DEBUG_ALL", "CUB_DEBUG_LOG", "CUB_DEBUG_SYNC", "CUB_STDERR",
                  "THRUST_DEBUG", "THRUST_DEBUG_SYNC", "CG_DEBUG", "_GLIBCXX_ASSERTIONS",
                  "__CUDACC_DEBUG__", "_CUDA_PIPELINE_DEBUG", "_CUDA_AWBARRIER_DEBUG", "__CUDA_NO_HALF_OPERATORS__",
                  "__CUDA_NO_HALF_CONVERSIONS__", "__CUDA_NO_HALF2_OPERATORS__", "__CUDA_NO_BFLOAT16_CONVERSIONS__",
                  "__CUDA_NO_BFLOAT16_OPERATORS__", "__CUDA_NO_BFLOAT162_OPERATORS__", "__CUDA_NO_FP8_CONVERSIONS__",
                  "__CUDA_NO_FP8_CONVERSION_OPERATORS__", "__CUDA_NO_FP6_CONVERSIONS__",
                  "__CUDA_NO_FP6_CONVERSION_OPERATORS__", "__CUDA_NO_FP4_CONVERSIONS__",
                  "__CUDA_NO_FP4_CONVERSION_OPERATORS__")
BUILD_OPTIONS = ("-rdc=true",)  # options besides -D that headers read (through the macros nvcc defines)
RELEASE_SWITCHES = ("NDEBUG",)


def switch_dependent_macros(verified: dict[str, str], switched: dict[str, str],
                            judged_elsewhere: frozenset[str] = frozenset({"assert"})) -> set[str]:
    """The macros two builds define differently (in one only, or with other bodies), and every macro
    whose body names one of them: its expansion differs too. JUDGED_ELSEWHERE: names whose difference
    another check judges by the code it makes (assert: assert_release_differences), so neither they
    nor a macro wrapping them (a program's `CHECK_IDX(i, n)` around assert) count."""
    differ = {n for n in verified.keys() | switched.keys()
              if verified.get(n) != switched.get(n)} - judged_elsewhere
    names = {n: set(_IDENTIFIER.findall(body)) for n, body in {**switched, **verified}.items()}
    grew = True
    while grew:
        grew = False
        for n, used in names.items():
            if n not in differ and n not in judged_elsewhere and used & differ:
                differ.add(n)
                grew = True
    return differ


def scan_build_switches(editable: str, baseline_editable: str,
                        builds: list[tuple[tuple[str, ...], dict[str, str], dict[str, str]]]) -> list[Violation]:
    """Names the part uses, and the baseline's part does not use in its code, that another build
    defines otherwise: for each (switches, the verifier's build's macros, the macros of a build with
    those switches). A name the baseline only tests (`#ifndef NDEBUG` around a launch check) exempts
    nothing: a conditional's test is the configuration rule's, and the same name in code is another
    use (red team round 164: `const int p(int (NDEBUG));` declares a function in one build and an int
    in a release build)."""
    def names(text: str) -> set[str]:  # after a `.` too: the preprocessor replaces a member's name as well
        return set(re.findall(r"[A-Za-z_]\w*", text))

    def code(text: str) -> str:
        return _without_strings(strip_comments(normalize_source(text)))
    own, baseline = names(code(editable)), names(_CONDITIONAL.sub("", code(baseline_editable)))
    found: list[Violation] = []
    for switches, verified, switched in builds:
        for name in sorted((own & switch_dependent_macros(verified, switched)) - baseline):
            found.append(Violation(rule="build-context", where="source", detail=(
                f"names {name}, which the headers define otherwise in a build with {' or '.join(switches[:3])}"
                f"{' (or another debug switch)' if len(switches) > 3 else ''}: what is verified would not be "
                "what ships")))
    return found


# The CUDA language's keywords, which the toolkit's headers define as macros (crt/host_defines.h).
_LANGUAGE_MACROS = frozenset("""__global__ __device__ __host__ __shared__ __constant__ __managed__ __launch_bounds__
__forceinline__ __noinline__ __inline__ __inline_hint__ __align__ __builtin_align__ __restrict__ __grid_constant__
__cluster_dims__ __block_size__ __maxnreg__ __local_maxnreg__ __no_return__ __thread__ __volatile__ __nv_pure__
__annotate__ __location__ __cdecl __CUDA_ARCH_HAS_FEATURE__""".split())


def scan_preprocessed(editable: str, part: str, header_macros: dict[str, str]) -> list[Violation]:
    """The rules a text scan of the source cannot apply, on the part as the compiler reads it (red team
    round 53): a header's macro that expands to a value of the build (`_CCCL_BUILTIN_LINE()`,
    `_CCCL_HAS_INCLUDE(...)`), such a value in the expanded code, and names declared through a macro
    (`namespace SAME(kl)`, `SAME(__nv_probe)`)."""
    found: list[Violation] = []
    reaching = _build_value_macros(header_macros)
    text = _without_strings(strip_comments(normalize_source(editable)))
    for name in sorted({w for w in re.findall(r"(?<![\w.])[A-Za-z_]\w*", text) if w in reaching}):
        found.append(Violation(rule="build-context", where="source", detail=(
            f"{name} expands to a value of the build (its line, file, include path or date) or turns a macro's "
            "value into data: what is verified would not be what ships")))
    # A header's internal macro (a reserved name: `_CCCL_ASSERT`, `_LIBCUDACXX_*`, `__CUDA_*`) is the
    # headers' business, and its expansion may follow the build's switches (`-DDEBUG`, `-D_DEBUG`,
    # `-DCCCL_ENABLE_ASSERTIONS` turn `_CCCL_ASSERT((cols = C / 2) >= 0, "")` from nothing into an
    # assignment: red team round 159). The part may name only the CUDA language's own keywords.
    code = _CONDITIONAL.sub("", text)  # a conditional's test is the configuration rule's (_configuration_tests)
    for name in sorted({w for w in re.findall(r"(?<![\w.])_[A-Z_]\w*", code)
                        if w in header_macros and w not in _LANGUAGE_MACROS}):
        found.append(Violation(rule="build-context", where="source", detail=(
            f"names {name}, a macro internal to the toolkit's headers (a reserved name): what it expands to is "
            "the headers' choice and may follow the build's switches (-DDEBUG, assertion switches), so what "
            "is verified would not be what ships")))
    for m in re.finditer(r"\b__builtin_(?:LINE|FILE|FUNCTION|COLUMN|source_location)\b", _without_assert_failures(part)):
        found.append(Violation(rule="build-context", where="preprocessed source",
                               detail=f"{m.group(0)} (after macro expansion) is a value of the build"))
        break
    # Attributes and pragmas as the compiler reads them: a macro's spelling (`#define A __attribute__`,
    # `A((ms_abi))`) and every `_Pragma` form (a prefix, a raw string, a stringizing macro) are plain
    # `__attribute__((...))` and `#pragma` lines here (red team round 158).
    found += _attribute_rules(part, "preprocessed source")
    for _, name, what in _declared_names(_without_strings(part)):
        if re.match(r"^(?:__|_[A-Z])", name) or _COMPILER_PREFIX.fullmatch(name) or \
                (what == "namespace_definition" and name == HARNESS_NAMESPACE):
            found.append(Violation(rule="reserved-name", where="preprocessed source", detail=(
                f"declares {name} through a macro: a name reserved for the compiler or the harness")))
    return found


_ONE_CHARACTER = re.compile(r"^(?:u8|u|U|L)?'(?:[^'\\\n]|\\(?:[0-7]{1,3}|x[0-9A-Fa-f]+|u[0-9A-Fa-f]{4}|U[0-9A-Fa-f]{8}|.))'$")


def _long_character_literals(text: str) -> list[tuple[int, str]]:
    """(offset, literal) of each character literal of more than one character, in the hand scanner's
    reading and in tree-sitter's. Honest code has none (their value is the implementation's choice);
    a reading that lost step with the compiler at a quote makes one that spans code (round 57: `1e+'a`
    ... `2e+'b` read as a literal by both, hiding `__LINE__` between them)."""
    from ..program.cuda_tree import Source, walk
    found = []
    for start, end in literal_spans(text):  # the literals as _without_strings reads them
        literal = text[start:end]
        if literal.lstrip("u8UL").startswith("'") and not _ONE_CHARACTER.match(literal):
            found.append((start, literal))
    src = Source(text)
    for node in walk(src.root):
        if node.type == "char_literal" and not _ONE_CHARACTER.match(src.text_of(node)):
            found.append((src.offset(node.start_byte), src.text_of(node)))
    return found


def _parsed_code(editable: str) -> str:
    """The part with comments blanked and string and character literals made `""`, as tree-sitter-cuda
    reads them (line structure kept)."""
    from ..program.cuda_tree import Source, walk
    src = Source(normalize_source(editable))
    spans, last = [], -1
    for node in walk(src.root):
        if node.type in {"comment", "string_literal", "char_literal", "raw_string_literal", "system_lib_string",
                         "preproc_arg"} and node.start_byte >= last:
            spans.append((node.type, *src.span(node)))
            last = node.end_byte
    out, i = [], 0
    for kind, start, end in spans:
        chunk = src.text[start:end]
        if kind == "preproc_arg":  # a macro body is one line tree-sitter leaves as text: its literals go too
            blank = _without_strings(strip_comments(chunk))
        else:
            blank = (chunk.count("\n") * "\n" or " ") if kind == "comment" else '""' + chunk.count("\n") * "\n"
        out.append(src.text[i:start] + blank)
        i = end
    out.append(src.text[i:])
    return "".join(out)


def scan_source(editable: str, program_macros: set[str] | None = None) -> list[Violation]:
    """Rules on the editable part's text (splices joined, digraphs spelled out, comments removed),
    read twice: with each comment's lines kept, and as the compiler reads it, each comment one space
    (a directive a `/* */` carries over lines is one directive: red team round 156's
    `# /*`, newline, `*/ include <dlfcn.h>`); a rule either reading breaks is broken.
    `program_macros`: the macros the rest of the program (its preamble) defines."""
    normalized = normalize_source(editable)
    found = _scan_view(editable, strip_comments(normalized), None, program_macros)
    found += _scan_view(editable, blank_comments(normalized), normalized, program_macros)
    return _dedupe(found)


def _scan_view(editable: str, text: str, lines_of: str | None, program_macros: set[str] | None) -> list[Violation]:
    """scan_source's rules on one reading TEXT of the part; line numbers counted in LINES_OF (a text
    of TEXT's offsets with every line break) or in TEXT itself."""
    counted = text if lines_of is None else lines_of
    code = _without_strings(text)
    found: list[Violation] = []
    if (raw := spliced_raw_string(editable)) is not None:
        found.append(Violation(rule="character", where=f"source line {editable.count(chr(10), 0, raw) + 1}", detail=(
            "a raw string holding a line splice: nvcc joins it and the C++ standard keeps it, so the compiler and "
            "every reader of the text disagree about where the string ends")))
    for rule, pattern, message in _RAW_RULES:
        for m in pattern.finditer(text):
            found.append(Violation(rule=rule, where=f"source line {counted.count(chr(10), 0, m.start()) + 1}",
                                   detail=message.format(m=m.group(0).strip())))

    def line(offset: int) -> str:
        return f"source line {counted.count(chr(10), 0, offset) + 1}"

    for m in _INCLUDE.finditer(text):
        target = m.group(2).strip()
        inner = re.match(r"^<\s*([^>]+?)\s*>", target)
        if m.group(1) != "include" or not inner or not ALLOWED_HEADERS.match(inner.group(1)):
            if inner and re.match(rf"^(?:{_VENDOR}|thrust|cutlass|cute|cub/(?:cub|device))", inner.group(1), re.I):
                found.append(Violation(rule="vendor-library", where=line(m.start()),
                                       detail=f"#include {target}: only hand-written kernels are allowed"))
            else:
                found.append(Violation(rule="include", where=line(m.start()),
                                       detail=f"#{m.group(1)} {target[:80]} is not an allowed system header"))
    # A line directive makes what follows look like another file's lines to every tool that
    # reads the compiler's output (the host-pass scan among them).
    for m in re.finditer(r"^[ \t]*#[ \t]*(?:line\b|\d)", text, re.M):
        found.append(Violation(rule="line-directive", where=line(m.start()),
                               detail="#line (or a # N line marker) renames the lines that follow"))
    for m in _DEFINE.finditer(text):
        if _PROTECTED_MACRO.match(m.group(2)):
            found.append(Violation(rule="macro", where=line(m.start()),
                                   detail=f"#{m.group(1)} {m.group(2)} redefines a library or harness name"))
    own = defined_macros(editable) | (program_macros or set())
    for offset, name in _configuration_tests(text, own):
        found.append(Violation(rule="build-context", where=line(offset), detail=(
            f"tests {name}, which only the build can define (a -D flag, the compiler's options): the verifier's "
            "build is not the one that ships, so what is verified would not be what ships")))
    toolkit = _toolkit_macros(code)
    for offset, name, what in _declared_names(code):
        if name in toolkit:  # `__maxnreg__(64)`: the toolkit's attribute, which tree-sitter does not know
            continue
        if re.match(r"^(?:__|_[A-Z])", name) or _COMPILER_PREFIX.fullmatch(name):
            found.append(Violation(rule="reserved-name", where=line(offset), detail=(
                f"declares {name}: names beginning with __ or _ and a capital are the compiler's own, and the "
                "verifier reads functions so named as the compiler's")))
        elif what == "namespace_definition" and name == HARNESS_NAMESPACE:
            found.append(Violation(rule="reserved-name", where=line(offset), detail=(
                f"declares into namespace {name}, the harness's own: lookup there depends on whether the harness "
                "is in the same translation unit")))
    for m in _DEFINE.finditer(text):
        body = text[m.end():text.find("\n", m.end()) if text.find("\n", m.end()) >= 0 else len(text)]
        # Stringizing turns a macro's value into data outside any condition (`XS(NDEBUG)` is "NDEBUG"
        # in one build, "1" in another): the configuration check would not see it.
        if re.search(r"(?<!#)#(?!#)\s*[A-Za-z_]", _without_strings(body)):
            found.append(Violation(rule="build-context", where=line(m.start()), detail=(
                f"#define {m.group(2)} stringizes its argument (#x): a macro's value, which the build may set, "
                "would become data")))
        hidden = _COMPILER_PREFIX.search(_without_strings(body))
        if hidden:
            found.append(Violation(rule="reserved-name", where=line(m.start()), detail=(
                f"#define {m.group(2)} names {hidden.group(0)}, a name the compiler gives its own functions")))
    for offset, literal in _long_character_literals(text)[:1]:
        found.append(Violation(rule="character", where=line(offset), detail=(
            f"a character literal of more than one character ({literal[:40]!r}): its value is the compiler's "
            "choice, and one that long means a reading of the text lost step with the compiler")))
    # The same rules on a second reading of the text by a real parser (tree-sitter's comments and
    # literals): a lexer that misreads one construct (round 55: a digit separator taken for a quote)
    # must not hide the rest of a line from every rule.
    seen = set()
    for view in (code, _parsed_code(editable)):
        for rule, pattern, message in _SOURCE_RULES:
            for m in pattern.finditer(view):
                detail = message.format(m=m.group(0).rstrip("(: ").strip())
                if (rule, detail) not in seen:
                    seen.add((rule, detail))
                    found.append(Violation(rule=rule, where=f"source line {view.count(chr(10), 0, m.start()) + 1}",
                                           detail=detail))
    # Host assembly: every way past the host-code scan a red team found used it (instructions
    # hidden in immediates, stores and stack moves the scan did not model, a call to an import
    # the source may not name). Device code keeps inline PTX: `asm` is allowed only inside
    # functions that are __global__ or __device__ and not __host__; a macro holding `asm` could
    # be used anywhere, so it is refused.
    for item in scan_items(text):
        if not _ASM.search(_without_strings(item.text)):
            continue
        head = _without_strings(item.head) if item.kind == "code" else ""
        device_only = bool(re.search(r"\b(?:__global__|__device__)\b", head)) and "__host__" not in head
        if item.kind != "code" or not device_only or body_start(item.text) is None:
            found.append(Violation(rule="host-asm", where=line(item.start),
                                   detail="inline assembly outside a __global__/__device__ function (or in a macro): "
                                          "host code may not contain assembly"))
    # Refused CUDA runtime and driver calls, named early (the object scan is the guard: it
    # also sees calls through macros and function pointers). Types and enumerators such as
    # cudaStream_t or cudaMemcpyDeviceToDevice are not calls, so only refused names count.
    for m in re.finditer(r"\b(cuda[A-Z]\w*|cu[A-Z]\w*)\b(\s*\()?", code):
        cuda = cuda_call_rule(m.group(1))
        if cuda is None or cuda[0] == "forbidden-call" or cuda[0] == "driver-api" and not m.group(2):
            continue
        found.append(Violation(rule=cuda[0], where=line(m.start()), detail=f"{m.group(1)}: {cuda[1]}"))
    return found


# What the compiled editable part may import. An allow-list, not a deny-list: libc has
# too many ways to open a file, start a process or find a library (openat64_2, execveat,
# dl_iterate_phdr, setvbuf...) to enumerate. Everything a kernel launcher needs is here.
_ALLOWED_IMPORT = re.compile(
    r"^(?:"
    r"__cuda(?!RegisterManagedVar)\w+"  # nvcc's fatbinary/kernel registration and launch configuration
    r"|_Znwm|_Znam|_ZdlPv\w*|_ZdaPv\w*|_ZnwmRKSt9nothrow_t|_ZnamRKSt9nothrow_t"  # operator new/delete
    r"|_ZnwmSt11align_val_t|_ZdlPvSt11align_val_t|_ZdlPvmSt11align_val_t"
    r"|__cxa_(?:guard_acquire|guard_release|guard_abort|begin_catch|end_catch|rethrow|allocate_exception"
    r"|free_exception|throw|pure_virtual|call_unexpected)"
    r"|__gxx_personality_v0|_Unwind_Resume|__stack_chk_fail|__dso_handle"
    r"|_ZSt\d+__throw_\w+|_ZSt9terminatev"
    r"|atexit"  # nvcc's own registration code unregisters the fatbinary at exit (calls beyond the baseline's: refused)
    r"|memcpy|memmove|memset|memcmp|__memcpy_chk|__memset_chk|__memmove_chk|abort|exit"
    r"|malloc|calloc|realloc|free|aligned_alloc|posix_memalign"
    r"|(?:sqrt|cbrt|exp|exp2|expm1|log|log2|log10|log1p|pow|sin|cos|tan|asin|acos|atan|atan2|sinh|cosh|tanh"
    r"|erf|erfc|fabs|floor|ceil|round|lround|trunc|fmod|fmin|fmax|fma|hypot|ldexp|frexp|modf|nearbyint|rint)[fl]?"
    r"|__errno_location|__isinf\w*|__isnan\w*|__finite\w*|__fpclassify\w*"
    # a failed `assert` (a launcher's, as llm.c writes them): prints and aborts, so the run fails
    r"|__assert_fail|__assert_perror_fail"
    r")$"
)
# Kept for a readable message when the import is plainly an escape.
_BANNED_HINT = re.compile(
    r"(?:system|popen|exec|fork|spawn|socket|connect|open|read|write|print|put|getenv|environ|dl|syscall|setvbuf"
    r"|kill|mmap|ptrace|setsid|daemon|chmod|unlink|rename|send|recv|cout|cerr|fstream|Managed|HostFunc)",
    re.I,
)
_VENDOR_IMPORT = re.compile(rf"^{_VENDOR}$")
_VENDOR_DEFINED = re.compile(r"\b(?:thrust|cutlass|cute)::|\bcub::(?:\w+::)*Device\w+")
_ALLOWED_LIBS = re.compile(r"^(?:libc|libm|libdl|librt|libpthread|libstdc\+\+|libgcc_s|ld-linux[-\w.]*)\.so")
_HOST_SYSCALL = re.compile(r"\s(?:syscall|sysenter|int\s+\$0x80)\b")


# The frozen preamble is trusted: an error-check macro there (CUDA_CHECK printing with
# fprintf and calling exit) may be used by the editable part. What a call in the
# preamble can compile to (gcc turns printf("x\n") into puts, fprintf of a constant into fwrite):
_PREAMBLE_CALL_IMPORTS = {
    "fprintf": {"fprintf", "__fprintf_chk", "fwrite", "fputs", "fputc", "putc", "stderr"},
    "printf": {"printf", "__printf_chk", "puts", "putchar"},
    "puts": {"puts"},
    "fputs": {"fputs", "fwrite"},
    "perror": {"perror"},
    "fflush": {"fflush"},
}


def preamble_allowed_imports(preamble: str, editable: str) -> set[str]:
    """Printing imports the preamble's own macros/helpers explain, if the editable part
    names no printing call itself and pastes no tokens (so nothing is smuggled)."""
    code = _without_strings(strip_comments(normalize_source(editable)))
    # Naming one at all (`&fwrite`, `stderr`) means the import may not be the preamble's.
    named = re.search(r"\b(?:%s|FILE|stdout|_IO_\w+)\b" % "|".join(
        sorted({name for names in _PREAMBLE_CALL_IMPORTS.values() for name in names} | set(_PREAMBLE_CALL_IMPORTS))), code)
    if "##" in code or named or any(rule == "printing" and p.search(code) for rule, p, _ in _SOURCE_RULES):
        return set()
    pre = _without_strings(strip_comments(preamble))
    allowed: set[str] = set()
    for call, imports in _PREAMBLE_CALL_IMPORTS.items():
        if re.search(rf"\b{call}\s*\(", pre):
            allowed |= imports
    return allowed


def scan_object(
    editable_object: Path,
    *,
    defined_global: list[str],
    undefined: list[str],
    harness_undefined: list[str],
    allowed_exports: list[str],
    baseline_init_entries: int,
    trusted_imports: set[str] = frozenset(),
    baseline_object: Path | None = None,
) -> list[Violation]:
    """Rules on the compiled editable part: what it imports, defines and runs at load.

    `baseline_object` is the baseline's own editable object: what nvcc itself adds (one
    `atexit` registration) is measured on it rather than assumed."""
    found: list[Violation] = []
    baseline_imports = {line.split()[0].split("@")[0] for line in
                        _run(["nm", "-P", "--undefined-only", str(baseline_object)]).splitlines()
                        if line.strip()} if baseline_object is not None else set()
    for raw, name in zip(undefined, demangle(undefined)):
        base = raw.split("@")[0]
        if _ENVIRONMENT_QUERY.match(base) and base not in baseline_imports:
            found.append(Violation(rule="environment-query", where="object", detail=(
                f"uses {name}, which the baseline does not: its answer changes with the process and the machine "
                "(free memory, the driver), so a launcher that reads it can compute otherwise in a real program "
                "than while verified")))
            continue
        cuda = cuda_call_rule(base)
        if cuda is not None:
            found.append(Violation(rule=cuda[0], where="object", detail=f"uses {name}: {cuda[1]}"))
            continue
        if base in trusted_imports or _ALLOWED_IMPORT.match(base) or _CUDA_ALLOWED.match(base):
            continue
        if _VENDOR_IMPORT.match(name.split("(")[0]):
            found.append(Violation(rule="vendor-library", where="object", detail=f"calls {name}"))
        else:
            hint = " (process, file, network, environment or printing access)" if _BANNED_HINT.search(name) else ""
            found.append(Violation(rule="forbidden-call", where="object",
                                   detail=f"uses {name}{hint}: not on the allow-list of host calls"))
    for raw, name in zip(defined_global, demangle(defined_global)):
        if _VENDOR_DEFINED.search(name):
            found.append(Violation(rule="vendor-library", where="object", detail=f"contains {name.split('(')[0]}"))
    interposed = sorted(set(defined_global) & set(harness_undefined) - set(allowed_exports))
    for raw, name in zip(interposed, demangle(interposed)):
        found.append(Violation(rule="interposition", where="object",
                               detail=f"defines {name}, which the harness takes from a library"))
    disassembly = _run(["objdump", "-d", "--no-show-raw-insn", str(editable_object)])
    if _HOST_SYSCALL.search(disassembly):
        found.append(Violation(rule="dynamic-code", where="object", detail="raw system call instruction in host code"))
    entries = init_array_entries(editable_object)
    if entries > baseline_init_entries:
        found.append(Violation(rule="static-init", where="object",
                               detail=f"{entries - baseline_init_entries} function(s) run before or after main"))
    found += scan_symbol_types(editable_object)
    found += scan_sections(editable_object)
    relocations = _run(["readelf", "-rW", str(editable_object)])
    if re.search(r"R_\w+_IRELATIV", relocations):
        found.append(Violation(rule="ifunc", where="object",
                               detail="IRELATIVE relocation: an indirect function's resolver runs before main"))
    exits = exit_registrations(relocations)
    allowed_exits = exit_registrations(_run(["readelf", "-rW", str(baseline_object)])) if baseline_object else 1
    if exits > allowed_exits:
        found.append(Violation(rule="exit-handler", where="object",
                               detail=f"{exits - allowed_exits} more reference(s) to atexit than nvcc's own "
                                      "registration code makes: a handler would run after main"))
    return _dedupe(found)


# nm symbol types an editable object may contain: an allow-list of what nvcc and the host
# compiler emit for kernels, launchers, device globals, templates and statics: code (T/t),
# data (D/d, B/b, R/r), undefined imports (U; w/v weak ones, checked as imports), weak
# definitions (W/V: templates, inline functions, vtables, DW.ref.__gxx_personality_v0) and
# COMDAT group signatures (n). Refused, among others: i (GNU indirect function: its resolver
# runs inside the dynamic loader before main), u (GNU unique: bound process-wide by the
# dynamic loader and left global by containment), C (common), A (absolute), N (debug).
_NM_TYPES = set("TtDdBbRrUWwVvn")
# ELF symbol kinds and bindings (readelf), which nm does not show: thread-local storage is
# refused (per-thread state with its own initializers and exit-time destructors).
_ELF_TYPES = {"NOTYPE", "OBJECT", "FUNC", "SECTION", "FILE"}
_ELF_BINDS = {"LOCAL", "GLOBAL", "WEAK", "UNIQUE"}  # UNIQUE is nm's `u`, reported above


def _read_only_symbols(obj: Path) -> set[str]:
    """The symbols of an object that lie in sections nothing writes (allocated, not writable)."""
    writable: dict[str, bool] = {}
    for line in _run(["readelf", "-SW", str(obj)]).splitlines():
        m = re.match(r"^\s*\[\s*(\d+)\]\s+\S*\s+[A-Z_]+\s+[0-9a-f]+\s+[0-9a-f]+\s+[0-9a-f]+\s+[0-9a-f]+\s+([A-Za-z]*)", line)
        if m:
            writable[m.group(1)] = "W" in m.group(2) or "A" not in m.group(2)
    names = set()
    for line in _run(["readelf", "-sW", str(obj)]).splitlines():
        parts = line.split()
        if len(parts) >= 8 and parts[0].rstrip(":").isdigit() and writable.get(parts[6]) is False:
            names.add(parts[7])
    return names


def scan_symbol_types(obj: Path) -> list[Violation]:
    found: list[Violation] = []
    read_only = _read_only_symbols(obj)
    for line in _run(["nm", "-P", str(obj)]).splitlines():
        parts = line.split()
        # A unique symbol in read-only data is a constant (the toolkit's inline constexpr variables:
        # `cuda::std::piecewise_construct` from cub and cuda/std headers, round 66): no state to bind.
        if len(parts) >= 2 and parts[1] == "u" and parts[0] in read_only:
            continue
        if len(parts) >= 2 and parts[1] not in _NM_TYPES:
            rule = {"i": "ifunc"}.get(parts[1], "symbol-type")
            why = {"i": "a GNU indirect function, whose resolver runs before main",
                   "u": "a GNU unique symbol, bound process-wide (a static variable inside an inline or template "
                        "host function: make the function static)"}.get(parts[1], "a symbol kind ordinary kernels and "
                                                                                   "launchers never produce")
            found.append(Violation(rule=rule, where="object", detail=f"{demangle([parts[0]])[0]} (nm type "
                                                                   f"{parts[1]}): {why}"))
    for line in _run(["readelf", "-sW", str(obj)]).splitlines():
        parts = line.split()
        if len(parts) < 8 or not parts[0].rstrip(":").isdigit():
            continue
        kind, bind, name = parts[3], parts[4], parts[7]
        if kind == "TLS":
            found.append(Violation(rule="tls", where="object",
                                   detail=f"{demangle([name])[0]} is thread-local storage"))
        elif kind == "IFUNC":
            found.append(Violation(rule="ifunc", where="object", detail=f"{demangle([name])[0]} is an indirect function"))
        elif kind not in _ELF_TYPES or bind not in _ELF_BINDS:
            found.append(Violation(rule="symbol-type", where="object",
                                   detail=f"{demangle([name])[0]} is a {bind} {kind} symbol, which ordinary kernels "
                                          "and launchers never produce"))
    return found


# Sections an editable object may have: an allow-list of what nvcc and the host compiler emit
# (code, data, read-only data, the fatbinary, nvcc's one .init_array registration entry,
# exception tables, COMDAT groups). Refused: .init/.fini and .preinit_array/.fini_array/
# .ctors/.dtors (code run outside the harness), .tdata/.tbss (thread-local storage),
# __nv_managed_data__ (managed memory), .interp and any other special or custom section.
_ALLOWED_SECTION = re.compile(
    r"^(?:|\.(?:text|data|bss|rodata|data\.rel(?:\.ro)?(?:\.local)?|gcc_except_table)(?:\.[\w.$@-]+)?"
    r"|\.nv_fatbin|\.nvFatBinSegment|\.init_array|\.eh_frame|\.group|\.comment|\.note\.GNU-stack"
    r"|\.note\.gnu\.property|\.symtab|\.strtab|\.shstrtab|\.symtab_shndx)$"
)


def scan_sections(obj: Path) -> list[Violation]:
    found: list[Violation] = []
    for line in _run(["readelf", "-SW", str(obj)]).splitlines():
        m = re.match(r"^\s*\[\s*\d+\]\s+(\S*)\s+[A-Z_]", line)
        if not m:
            continue
        name = re.sub(r"^\.rela?(?=\.)", "", m.group(1))
        if name.startswith(".tdata") or name.startswith(".tbss"):
            found.append(Violation(rule="tls", where="object", detail=f"section {name}: thread-local storage"))
        elif not _ALLOWED_SECTION.match(name):
            found.append(Violation(rule="static-init" if re.search(r"init|fini|ctors|dtors", name) else "section",
                                   where="object", detail=f"section {name} is not one that ordinary kernels "
                                                          "and launchers produce"))
    return found


def exit_registrations(relocations: str) -> int:
    """References to atexit (calls, or its address taken) in `readelf -rW` output."""
    return sum(1 for line in relocations.splitlines()
               if re.match(r"^[0-9a-f]{8,}\s", line) and re.search(r"\s(?:atexit|at_quick_exit)(?:@\S*)?\s*[+-]", line))


_RUN_OUTSIDE_MAIN = (".init_array", ".preinit_array", ".fini_array", ".ctors", ".dtors")


def init_array_entries(obj: Path) -> int:
    """Relocations in .preinit_array/.init_array/.fini_array/.ctors/.dtors: each is a
    function run before or after main, outside the harness's control."""
    text = _run(["readelf", "-rW", str(obj)])
    count, inside = 0, False
    for line in text.splitlines():
        if line.startswith("Relocation section"):
            inside = any(section in line for section in _RUN_OUTSIDE_MAIN)
        elif inside and re.match(r"^[0-9a-f]{8,}\s", line):
            count += 1
    return count


def scan_program(binary: Path, baseline_binary: Path | None = None) -> list[Violation]:
    """The linked program may depend only on the C/C++ runtime (cudart is static), and may
    run no more code outside main than the baseline's program (same harness, same runtime):
    indirect-function resolvers (IRELATIVE relocations) and init/fini array entries."""
    text = _run(["readelf", "-dW", str(binary)])
    found = []
    for lib in re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", text):
        if not _ALLOWED_LIBS.match(lib):
            found.append(Violation(rule="vendor-library", where="program", detail=f"links {lib}"))
    if baseline_binary is None:
        return found
    base_text = _run(["readelf", "-dW", str(baseline_binary)])
    for tag in ("PREINIT_ARRAYSZ", "INIT_ARRAYSZ", "FINI_ARRAYSZ"):
        ours, theirs = _dynamic_size(text, tag), _dynamic_size(base_text, tag)
        if ours > theirs:
            found.append(Violation(rule="static-init", where="program",
                                   detail=f"{tag[:-2]} holds {(ours - theirs) // 8} more function(s) than the "
                                          "baseline's program: code that runs before or after main"))
    ours, theirs = irelative_count(binary), irelative_count(baseline_binary)
    if ours > theirs:
        found.append(Violation(rule="ifunc", where="program",
                               detail=f"{ours - theirs} more IRELATIVE relocation(s) than the baseline's program: "
                                      "indirect-function resolvers run inside the dynamic loader, before main"))
    return found


def _dynamic_size(readelf_d: str, tag: str) -> int:
    m = re.search(rf"\({tag}\)\s+(\d+)", readelf_d)
    return int(m.group(1)) if m else 0


def code_before_the_libraries(binary: Path) -> str | None:
    """What of BINARY's own the dynamic loader runs before any library's constructor (a preinit array entry, an
    indirect function's resolver), or None. The verifier's tracer (preloaded) and the harness header read their
    settings first thing; code that runs before them could change what they read (red team round 302: a
    `.preinit_array` entry written by frozen assembler rewrote the tracer's pipe name). A program built from the
    header and ordinary C++ has neither; readelf's output missing fails closed."""
    dynamic = _run(["readelf", "-dW", str(binary)])
    if "NEEDED" not in dynamic:
        return "its dynamic section could not be read"
    if _dynamic_size(dynamic, "PREINIT_ARRAYSZ") or "(PREINIT_ARRAY)" in dynamic:
        return "a preinit array (code the loader runs before every library's constructor)"
    if (count := irelative_count(binary)):
        return f"{count} indirect-function resolver(s) (IRELATIVE relocations the loader resolves by running them)"
    if exported := _exported_definitions(binary):
        # round 303: a frozen `__gmon_start__`, which every library built with crti.o calls from its DT_INIT before
        # its own constructors, exported by the executable; any definition a library can bind to runs in its place
        return f"definitions the libraries bind to ({', '.join(exported[:3])}): the loader runs them in the libraries' " \
               "own code, before or instead of theirs"
    return None


def _exported_definitions(binary: Path) -> list[str]:
    """The symbols BINARY defines for the libraries (its dynamic symbol table's definitions) other than the libraries'
    own data copied into it (R_*_COPY relocations: `stderr`, `std::nothrow`), which is data, not code."""
    copied = set(re.findall(r"R_\w+_COPY\s+[0-9a-f]+\s+(\S+)", _run(["readelf", "-rW", str(binary)])))
    defined = []
    for line in _run(["readelf", "--dyn-syms", "-W", str(binary)]).splitlines():
        fields = line.split()
        # Num: Value Size Type Bind Vis Ndx Name
        if len(fields) >= 8 and fields[0].endswith(":") and fields[6] != "UND" and \
                fields[4] in ("GLOBAL", "WEAK", "GNU_UNIQUE"):
            if fields[7] not in copied:
                defined.append(fields[7])
    return defined


def first_constructor(binary: Path) -> str | None:
    """The function BINARY's init array runs first (read from its symbol table; None when it cannot be read). The
    harness header's settings snapshot runs at priority 101, before every constructor of the program's; a frozen
    init-array entry of a lower priority (round 303: `.init_array.00050`, spelled in split string literals) would
    run before it."""
    try:
        from elftools.elf.elffile import ELFFile
        from elftools.elf.sections import SymbolTableSection
        with binary.open("rb") as f:
            elf = ELFFile(f)
            array = elf.get_section_by_name(".init_array")
            symtab = elf.get_section_by_name(".symtab")
            if array is None or not isinstance(symtab, SymbolTableSection) or array["sh_size"] < 8:
                return None
            first = int.from_bytes(array.data()[:8], "little")
            if first == 0:  # position-independent: the loader writes it from a relocation's addend
                for section in elf.iter_sections():
                    if section["sh_type"] == "SHT_RELA":
                        for rel in section.iter_relocations():
                            if rel["r_offset"] == array["sh_addr"]:
                                first = rel["r_addend"]
            names = [sym.name for sym in symtab.iter_symbols()
                     if sym["st_info"]["type"] == "STT_FUNC" and sym["st_value"] == first and sym.name]
            return names[0] if names else None
    except (OSError, ValueError, KeyError):
        return None


def irelative_count(binary: Path) -> int:
    return len(re.findall(r"R_\w+_IRELATIV", _run(["readelf", "-rW", str(binary)])))


def _run(argv: list[str]) -> str:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=120).stdout
    except (OSError, subprocess.SubprocessError):
        return ""


def _dedupe(violations: list[Violation]) -> list[Violation]:
    seen: set[tuple[str, str]] = set()
    out = []
    for v in violations:
        key = (v.rule, v.detail)
        if key not in seen:
            seen.add(key)
            out.append(v)
    return out
