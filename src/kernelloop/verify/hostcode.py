"""The editable part's host code may touch only its own memory, and call only what it names.

The candidate's launcher runs inside the harness's process. Plain C++ lets it walk the stack
to the harness's objects, to the environment and the auxiliary vector, and from there to the
program's GOT: with a found function pointer it reaches all of libc without importing anything
(read the verifier's pipe ahead, rewrite the CUPTI trace at exit), and with a found data
pointer it rewrites the harness's own state (what it poisons, where it samples). A red team did
all of this (docs/verifier.md). The import allow-list cannot see any of it: the capability comes
from two machine-level operations, and this scan refuses both in the editable object's host code:

- **indirect calls and jumps** (`call *%rax`, `jmp *...`): a function reached through a pointer
  found in memory, or a return-oriented chain, needs one; an honest launcher calls kernels and
  the CUDA runtime by name (direct calls, which the import allow-list checks);
- **stores to memory the function does not own**: every store must go to its own stack frame
  (`disp(%rsp)` inside the frame, no index register) or to the editable object's own globals
  (`%rip`-relative, relocated against this object). A store through any other pointer could
  rewrite the harness, its return address or the GOT.

The same holds for the library calls that write host memory through a pointer argument (the
CUDA runtime's out-parameters: `cudaDeviceGetAttribute(&value, ...)`, `cudaMalloc(&ptr, ...)`,
and nvcc's own launch stubs): each such pointer must be set, in the same straight-line stretch
of code as the call, to the function's own frame or its own globals (`lea disp(%rsp)` or
`lea sym(%rip)`). libc's memory writers (`memcpy`, `memset`, ...) are refused outright: their
destination is data. A CUDA copy (`cudaMemcpy`, `...Async`, `...To/FromSymbol`) must name its
direction as a constant: device to device, or host to device / device to host with the host side
its own frame or globals and a constant size (a red team read and wrote any host address with
host-to-host and default-direction copies, round 19). Copies whose direction the scan cannot see
in registers (2D, 3D, arrays) are refused.

Control must also come back the way it went: a `ret` with bytes still pushed in its own frame
(`push %reg; ret` is a call through a pointer without a `call *`) and any write to %rsp other
than adding or subtracting a constant, push and pop (a stack pivot) are refused.

Loads follow the same rule: the harness's state (its seed), what the runtime keeps on the
heap (the fill kernels' parameters: the inputs' key) and anything else in the process is out of
reach. A red team read a call's draw from the harness's frame above the launcher's with loads
alone, regenerated a quarter of the input from it and skipped reading it (round 11). Every read
must be of the function's own frame (from 128 bytes below %rsp, its red zone, to its return
address), its stack-passed arguments (as many as its demangled signature says; none when it
cannot be read), the editable object's own data or the GOT entries of functions it names
(`%rip`-relative, relocated), `stdout`/`stderr` (the preamble's error macros) and the stack
protector's canary (%fs:0x28). The harness, for its part, leaves nothing secret in registers or
in the dead stack the launcher's frame reuses (kernelloop_harness.cuh, `scrub_before_launch`).

The cost: host code in the editable part cannot use host containers, references or pointers to
host memory (a launcher only sizes grids and launches), and the scan is conservative (a switch
compiled to a jump table is refused). A function's `.cold` part (gcc's hot/cold split) is judged
in its parent's frame at the depth of the parent's jumps into it; code that only the unwinder
reaches (landing pads) may read its frame but not write it.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from ..tools.runtime_structs import runtime_struct_layouts, runtime_struct_sizes
from ..tools.state_refs import PROCESSOR_STATE_INSTRUCTION
from ..tools.symbols import demangle
from .frame_writes import FrameTrace, Step, unwritten_reads
from .policy import Violation
from .unwind import UnwindTable
from .x86 import Instruction, SectionBytes

_FUNC = re.compile(r"^[0-9a-f]+ <(?P<name>[^>]+)>:$")
_SECTION = re.compile(r"^Disassembly of section (?P<name>\S+):$")
_INSN = re.compile(r"^\s*(?P<addr>[0-9a-f]+):\s+(?P<text>.+)$")
_RELOC = re.compile(r"^\s*[0-9a-f]+:\s+(?P<type>R_X86_64_\w+)\s+(?P<target>\S+)$")
# A memory operand in AT&T syntax: [%seg:]disp(base,index,scale) or disp(%rip).
_MEM = re.compile(r"(?:(?P<seg>%[cdefgs]s):)?(?P<disp>-?(?:0x[0-9a-f]+|\d+))?\((?P<base>%\w+)?(?:,(?P<index>%\w+))?(?:,\d)?\)")
_IMM_RSP = re.compile(r"^(sub|add)q?\s+\$(?P<imm>-?(?:0x[0-9a-f]+|\d+)),%rsp$")

_FORBIDDEN = {"wrpkru": "writes the protection-key register", "xrstor": "restores extended state",
              "xrstors": "restores extended state", "syscall": "raw system call", "sysenter": "raw system call",
              "int": "software interrupt", "int3": "software interrupt",
              # time, entropy and the machine's identity read without a call: a launcher that reads
              # them can act otherwise later, elsewhere or at random than while verified (red team
              # round 65: `__builtin_ia32_rdtsc()`)
              "rdtsc": "reads the time-stamp counter", "rdtscp": "reads the time-stamp counter",
              "rdpmc": "reads a performance counter", "rdrand": "draws a random number",
              "rdseed": "draws a random number", "cpuid": "reads the processor's identity",
              "rdpid": "reads the processor's number", "xgetbv": "reads extended control state",
              # stores to an implicit address, and stack-pointer moves the frame model does not follow
              "maskmovdqu": "stores to the address in %rdi", "vmaskmovdqu": "stores to the address in %rdi",
              "maskmovq": "stores to the address in %rdi", "movdir64b": "stores to an address in a register",
              "movdiri": "direct store", "enqcmd": "stores to an address in a register",
              "enqcmds": "stores to an address in a register", "leave": "moves the stack pointer to %rbp",
              "leaveq": "moves the stack pointer to %rbp", "enter": "builds a frame the scan does not model",
              "enterq": "builds a frame the scan does not model", "popf": "restores flags", "popfq": "restores flags",
              "loop": "a branch the frame model does not follow", "loope": "a branch the frame model does not follow",
              "loopne": "a branch the frame model does not follow", "jrcxz": "a branch the frame model does not follow",
              "jecxz": "a branch the frame model does not follow", "ljmp": "far jump", "lcall": "far call",
              "lret": "far return", "iret": "interrupt return", "iretq": "interrupt return"}
_EXEC_SECTIONS = re.compile(r"^\.(text|init|fini)")
_ARG_REGS = ("%rdi", "%rsi", "%rdx", "%rcx", "%r8", "%r9")
# The general registers whose pointer facts the scan follows (the argument registers are where a call reads
# them; the others carry a pointer there: a compiler parks an out-pointer in any of them, or in a frame slot)
_REG_ALIASES = {"%rdi": ("%rdi", "%edi", "%di", "%dil"), "%rsi": ("%rsi", "%esi", "%si", "%sil"),
                "%rdx": ("%rdx", "%edx", "%dx", "%dl"), "%rcx": ("%rcx", "%ecx", "%cx", "%cl"),
                "%r8": ("%r8", "%r8d", "%r8w", "%r8b"), "%r9": ("%r9", "%r9d", "%r9w", "%r9b"),
                "%rax": ("%rax", "%eax", "%ax", "%al"), "%rbx": ("%rbx", "%ebx", "%bx", "%bl"),
                "%rbp": ("%rbp", "%ebp", "%bp", "%bpl"), "%r10": ("%r10", "%r10d", "%r10w", "%r10b"),
                "%r11": ("%r11", "%r11d", "%r11w", "%r11b"), "%r12": ("%r12", "%r12d", "%r12w", "%r12b"),
                "%r13": ("%r13", "%r13d", "%r13w", "%r13b"), "%r14": ("%r14", "%r14d", "%r14w", "%r14b"),
                "%r15": ("%r15", "%r15d", "%r15w", "%r15b")}
# Imports that write host memory through pointer arguments (index = argument position).
# Their pointers must provably be the caller's own frame or globals.
OUT_POINTER_ARGS: dict[str, tuple[int, ...]] = {
    "cudaDeviceGetAttribute": (0,), "cudaGetDeviceProperties": (0,), "cudaGetDeviceProperties_v2": (0,),
    "cudaGetDevice": (0,), "cudaGetDeviceCount": (0,), "cudaDriverGetVersion": (0,), "cudaRuntimeGetVersion": (0,),
    "cudaMalloc": (0,), "cudaMallocAsync": (0,), "cudaMallocPitch": (0, 1), "cudaMemGetInfo": (0, 1),
    "cudaFuncGetAttributes": (0,), "cudaOccupancyMaxActiveBlocksPerMultiprocessor": (0,),
    "cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags": (0,), "cudaOccupancyMaxPotentialBlockSize": (0, 1),
    "cudaOccupancyAvailableDynamicSMemPerBlock": (0,),
    "cudaStreamCreate": (0,), "cudaStreamCreateWithFlags": (0,), "cudaStreamCreateWithPriority": (0,),
    "cudaEventCreate": (0,), "cudaEventCreateWithFlags": (0,), "cudaStreamEndCapture": (1,),
    "cudaGraphInstantiate": (0,), "cudaGraphInstantiateWithFlags": (0,), "cudaStreamIsCapturing": (1,),
    "cudaPointerGetAttributes": (0,), "cudaDeviceGetLimit": (0,), "cudaFuncGetName": (0,),
    "cudaDeviceGetStreamPriorityRange": (0, 1), "cudaStreamGetPriority": (1,), "cudaStreamGetFlags": (1,),
    "cudaGetSymbolAddress": (0,), "cudaGetSymbolSize": (0,), "cudaStreamGetCaptureInfo": (1, 2, 3, 4, 5, 6),
    "__cudaPopCallConfiguration": (0, 1, 2, 3), "__cudaGetKernel": (0,), "cudaGetFuncBySymbol": (0,), "cudaThreadExchangeStreamCaptureMode": (0,),
}
OUT_POINTER_ARGS.update({  # struct results returned through a hidden pointer (%rdi), and handles
    "cudaCreateChannelDesc": (0,), "cudaMalloc3D": (0,), "cudaMallocArray": (0,), "cudaMalloc3DArray": (0,),
    "cudaCreateTextureObject": (0,), "cudaCreateSurfaceObject": (0,), "cudaGraphCreate": (0,),
    "cudaGraphAddKernelNode": (0,), "cudaGraphAddEmptyNode": (0,), "cudaGraphAddMemsetNode": (0,),
    "cudaGraphAddMemcpyNode": (0,), "cudaGraphAddChildGraphNode": (0,), "cudaGraphInstantiateWithParams": (0, 2),
    "cudaGraphExecUpdate": (2,), "cudaGetChannelDesc": (0,),
    "cudaFuncGetParamInfo": (2, 3), "cudaStreamGetId": (1,), "cudaStreamGetDevice": (1,), "cudaEventQuery": (),
})
OUT_POINTER_ARGS.update({  # libm/libc functions with output pointers an honest launcher might reach
    "frexp": (1,), "frexpf": (1,), "modf": (1,), "modff": (1,), "remquo": (2,), "remquof": (2,),
    "sincos": (1, 2), "sincosf": (1, 2), "lgamma_r": (1,), "lgammaf_r": (1,), "posix_memalign": (0,),
})
# Library calls that may return without writing their output (an error they report, not a CUDA one
# the timing audit sees): what they point at is written, for the frame's definite assignment, by
# nothing (red team round 213: a failed call leaves the bytes a caller's previous call left there).
# The CUDA runtime's failures are the audit's (audit.py: a runtime error the baseline's run lacks).
MAY_RETURN_UNWRITTEN = frozenset({"posix_memalign"})
# Imports that write no host memory through their arguments (or, for copies, only memory the
# timing audit counts: every host copy is compared with the baseline's). The scan fails closed:
# a call to an import in neither table is refused, so adding a name to the policy's allow-list
# cannot open a write primitive by itself (a red team found one through a struct return).
_CUDA_NO_HOST_WRITES = re.compile(
    r"^(?:cudaLaunchKernel|cudaLaunchKernelExC|cudaLaunchCooperativeKernel|cudaFuncSetAttribute"
    r"|cudaFuncSetCacheConfig|cudaFuncSetSharedMemConfig|cudaFree|cudaFreeAsync|cudaFreeArray"
    r"|cudaMemset(?:2D|3D)?(?:Async)?|cudaDestroyTextureObject|cudaDestroySurfaceObject"
    r"|cudaStreamDestroy|cudaStreamSynchronize|cudaStreamQuery|cudaStreamWaitEvent|cudaDeviceSynchronize"
    r"|cudaEventRecord(?:WithFlags)?|cudaEventDestroy|cudaEventSynchronize|cudaEventQuery|cudaStreamBeginCapture"
    r"|cudaGraphKernelNodeSetParams|cudaGraphExecKernelNodeSetParams|cudaGraphLaunch"
    r"|cudaGraphUpload|cudaGraphExecDestroy|cudaGraphDestroy|cudaGetLastError|cudaPeekAtLastError"
    r"|cudaGetErrorString|cudaGetErrorName"
    r"|__cudaRegister(?:FatBinary|FatBinaryEnd|Function|Var|Texture|Surface|LinkedBinary\w*)|__cudaUnregisterFatBinary"
    r"|__cudaPushCallConfiguration|__cudaInitModule|__cudaLaunchKernel)"
    r"(?:_v\d+)?(?:_ptds|_ptsz)?$")
_LIBC_NO_HOST_WRITES = re.compile(
    r"^(?:_Znwm|_Znam|_ZnwmRKSt9nothrow_t|_ZnamRKSt9nothrow_t|_ZnwmSt11align_val_t|malloc|calloc|aligned_alloc"
    r"|__cxa_guard_acquire|__cxa_guard_release|__cxa_guard_abort|__cxa_begin_catch|__cxa_end_catch|__cxa_rethrow"
    r"|__cxa_allocate_exception|__cxa_throw|__cxa_pure_virtual|__cxa_call_unexpected|_Unwind_Resume"
    r"|__stack_chk_fail|_ZSt\d+__throw_\w+|_ZSt9terminatev|abort|exit|atexit|memcmp|__errno_location"
    # a failed `assert`: prints its strings and aborts (it reads its arguments, never returns)
    r"|__assert_fail|__assert_perror_fail"
    r"|(?:sqrt|cbrt|exp|exp2|expm1|log|log2|log10|log1p|pow|sin|cos|tan|asin|acos|atan|atan2|sinh|cosh|tanh"
    r"|erf|erfc|fabs|floor|ceil|round|lround|trunc|fmod|fmin|fmax|fma|hypot|ldexp|nearbyint|rint)[fl]?"
    r"|__isinf\w*|__isnan\w*|__finite\w*|__fpclassify\w*"
    # the preamble's own error-printing macros (the source policy refuses FILE, stderr and these names
    # in the editable part, so the stream is the preamble's)
    r"|fprintf|__fprintf_chk|fwrite|fputs|fputc|putc|printf|__printf_chk|puts|putchar|perror|fflush)$")
# The C++ runtime's ABI functions (__cxa_guard_*, __cxa_throw, _Unwind_Resume) write through
# their pointer arguments. Only the compiler may call them, with pointers it makes: the source
# may not name them (policy.scan_host_pass, `abi-call`; a red team wrote bytes anywhere with
# __cxa_guard_release/abort). Their pointer is not tracked here: the compiler sets it in code
# the frame model splits (a `.cold` part for the abort path).
# free/delete/realloc write the allocator's metadata around their argument and hand its memory
# to the next allocation anywhere in the process: of a heap pointer found in memory, or of the
# launcher's own memory dressed as a chunk (red team round 18 had the harness's next malloc return
# the candidate's globals), each is a write primitive. They are refused outright.
_ALLOCATOR_RELEASE = re.compile(r"^(?:free|cfree|realloc|reallocarray|_ZdlPv\w*|_ZdaPv\w*)$")


_API_SUFFIX = re.compile(r"(?:_v\d+)?(?:_ptds|_ptsz)?$")
# Streams whose order with stream 0 depends on how the program is built (red team round 174): a
# blocking stream waits for the legacy default stream, and it for the stream, only in the legacy
# build; nvcc --default-stream per-thread (CUDA_API_PER_THREAD_DEFAULT_STREAM) makes stream 0 the
# thread's own stream, which orders with no other, so a part leaning on that implicit order races
# there. A cudaStreamNonBlocking stream orders only as the code says in either build.
# The creating call and the position of its flags (None: always blocking).
STREAM_CREATION_FLAGS: dict[str, int | None] = {
    "cudaStreamCreate": None, "cudaStreamCreateWithFlags": 1, "cudaStreamCreateWithPriority": 1}
_STREAM_NON_BLOCKING = 0x01
# Calls whose answer, not only their order, depends on what stream 0 is (red team round 175): the
# legacy stream cannot be captured and a capture on a blocking stream (cudaStreamPerThread is one in
# the legacy build) fails a legacy-stream launch as an implicit dependency, while per-thread stream 0
# can be captured and orders with nothing; stream 0's flags, priority, id, capture state and
# completion are the legacy stream's in one build and the thread's stream's in the other. Refused
# unless the build flags name the default stream (gate.default_stream_declared).
STREAM_MODE_CALLS = frozenset({
    "cudaStreamBeginCapture", "cudaStreamBeginCaptureToGraph", "cudaStreamEndCapture", "cudaStreamIsCapturing",
    "cudaStreamGetCaptureInfo", "cudaStreamUpdateCaptureDependencies", "cudaThreadExchangeStreamCaptureMode",
    "cudaStreamGetFlags", "cudaStreamGetPriority", "cudaStreamGetId", "cudaStreamGetDevice", "cudaStreamQuery",
})


def _out_pointer_args(name: str) -> tuple[int, ...] | None:
    """The out-pointer positions of an import, its versioned/per-thread variants included."""
    found = OUT_POINTER_ARGS.get(name)
    return found if found is not None else OUT_POINTER_ARGS.get(_API_SUFFIX.sub("", name))


# CUDA copies, by the argument positions the scan checks: (direction, byte count, destination,
# source); -1 where that side is a device symbol. cudaMemcpyKind values: 0 host to host, 1 host
# to device, 2 device to host, 3 device to device, 4 inferred from the pointers.
_COPY_ARGS: dict[str, tuple[int, int, int, int]] = {
    "cudaMemcpy": (3, 2, 0, 1), "cudaMemcpyAsync": (3, 2, 0, 1),
    "cudaMemcpyToSymbol": (4, 2, -1, 1), "cudaMemcpyToSymbolAsync": (4, 2, -1, 1),
    "cudaMemcpyFromSymbol": (4, 2, 0, -1), "cudaMemcpyFromSymbolAsync": (4, 2, 0, -1),
}
_HOST_TO_DEVICE, _DEVICE_TO_HOST, _DEVICE_TO_DEVICE = 1, 2, 3


def _copy_args(name: str) -> tuple[int, int, int, int] | None:
    return _COPY_ARGS.get(name) or _COPY_ARGS.get(_API_SUFFIX.sub("", name))


def classified_import(name: str) -> bool:
    """Whether the scan knows what `name` writes through its arguments."""
    return _out_pointer_args(name) is not None or _copy_args(name) is not None or bool(
        _CUDA_NO_HOST_WRITES.match(name) or _LIBC_NO_HOST_WRITES.match(name) or _MEMORY_WRITERS.match(name))


# Writers whose destination is data, whatever the compiler can prove: refused in host code.
_MEMORY_WRITERS = re.compile(r"^(__)?(memcpy|memmove|memset|mempcpy|bcopy|bzero|explicit_bzero|str\w*cpy|str\w*cat|"
                             r"wmem\w+|(memcpy|memmove|memset|mempcpy|str\w*cpy|str\w*cat|wmem\w+)_chk)$")


# How many bytes each modelled out-parameter receives (default 8: an int64, a size_t, a handle or
# a pointer). A write is judged by its whole extent, not its start: an out-pointer near the top of
# the frame must not reach the saved registers or the return address (a red team overflowed a
# 20-byte struct return into the return address and ran a return-oriented chain).
OUT_POINTER_SIZES: dict[str, dict[int, int]] = {
    "cudaDeviceGetAttribute": {0: 4}, "cudaGetDevice": {0: 4}, "cudaGetDeviceCount": {0: 4},
    "cudaDriverGetVersion": {0: 4}, "cudaRuntimeGetVersion": {0: 4}, "cudaGetDeviceProperties": {0: 1024},
    "cudaFuncGetAttributes": {0: 160}, "cudaPointerGetAttributes": {0: 96}, "cudaMalloc3D": {0: 32},
    "cudaCreateChannelDesc": {0: 20}, "cudaGetChannelDesc": {0: 20}, "cudaGraphInstantiateWithParams": {2: 32},
    "cudaGraphExecUpdate": {2: 24}, "cudaOccupancyMaxActiveBlocksPerMultiprocessor": {0: 4},
    "cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags": {0: 4}, "cudaOccupancyMaxPotentialBlockSize": {0: 4, 1: 4},
    "cudaDeviceGetStreamPriorityRange": {0: 4, 1: 4}, "cudaStreamGetPriority": {1: 4}, "cudaStreamGetFlags": {1: 4},
    "cudaStreamIsCapturing": {1: 4}, "cudaStreamGetCaptureInfo": {1: 4}, "cudaThreadExchangeStreamCaptureMode": {0: 4},
    "cudaStreamGetDevice": {1: 4}, "__cudaPopCallConfiguration": {0: 12, 1: 12},
    "frexp": {1: 4}, "frexpf": {1: 4}, "modff": {1: 4}, "remquo": {2: 4}, "remquof": {2: 4}, "sincosf": {1: 4, 2: 4},
    "lgamma_r": {1: 4}, "lgammaf_r": {1: 4},
}

# Out-parameters that are in/out structures or hold padding: the spans (offset, bytes) the call
# writes, and those it reads (its input fields, which the caller must have written). The rest of
# the extent is written by nothing: a field the runtime only reads, or padding, keeps what the
# stack held, in a caller's process what its previous call left there (red team round 214:
# `cudaGraphInstantiateParams.uploadStream`, never written with flags 0, carried a call count).
OUT_POINTER_SPANS: dict[str, dict[int, tuple[tuple[tuple[int, int], ...], tuple[tuple[int, int], ...]]]] = {
    # flags, uploadStream in; errNode_out, result_out out; 4 bytes of padding
    "cudaGraphInstantiateWithParams": {2: (((16, 12),), ((0, 16),))},
    # result (an enum), 4 bytes of padding, errorNode, errorFromNode
    "cudaGraphExecUpdate": {2: (((0, 4), (8, 16)), ())},
}


def out_pointer_effects(name: str, position: int, size: int) -> tuple[tuple[tuple[int, int], ...],
                                                                      tuple[tuple[int, int], ...]]:
    """(spans written, spans read) of the out-parameter at POSITION of SIZE bytes, relative to its start."""
    spans = OUT_POINTER_SPANS.get(name) or OUT_POINTER_SPANS.get(_API_SUFFIX.sub("", name)) or {}
    if position in spans:
        return spans[position]
    if struct := _runtime_struct_of(name, position):
        # A runtime structure: its named fields as this toolkit lays them out; its reserved arrays and
        # padding are written by nothing (red team round 217: a count in cudaFuncAttributes.reserved).
        # Where the toolkit cannot be asked, nothing is taken as written (reads of it are refused).
        layout = runtime_struct_layouts().get(struct)
        return (tuple((o, n) for o, n in layout.written if o < size) if layout else ()), ()
    return ((0, size),), ()


def _runtime_struct_of(name: str, position: int) -> str | None:
    """The runtime structure (RUNTIME_STRUCTS' probe name) a call writes at POSITION, if any."""
    if position != 0:
        return None
    return _STRUCT_OUT_PARAMETER.get(_API_SUFFIX.sub("", name)) or _STRUCT_OUT_PARAMETER.get(name)


# Pointers an allowed call reads through (index -> bytes read): each must be the caller's own
# frame or globals, as output pointers must (round 21 had texture descriptors read from the
# harness's state). 0 bytes: only a null pointer (a constant 0) is allowed there (a dependency
# array whose length the scan does not follow). An optional descriptor may be null too.
IN_POINTER_ARGS: dict[str, dict[int, int]] = {
    "cudaCreateTextureObject": {1: 144, 2: 72, 3: 112}, "cudaCreateSurfaceObject": {1: 144},
    "cudaMallocArray": {1: 20}, "cudaMalloc3DArray": {1: 20}, "cudaGraphAddEmptyNode": {2: 0},
}
_OPTIONAL_IN_POINTERS = {("cudaCreateTextureObject", 3)}


def _in_pointer_args(name: str) -> dict[int, int]:
    return IN_POINTER_ARGS.get(name) or IN_POINTER_ARGS.get(_API_SUFFIX.sub("", name)) or {}


# Calls whose out-parameter is one of the runtime's structures: its size is this toolkit's (the table
# above holds an upper bound for when the toolkit cannot be asked; too large only refuses honest code).
_STRUCT_OUT_PARAMETER = {"cudaGetDeviceProperties": "device_prop", "cudaFuncGetAttributes": "func_attributes",
                         "cudaPointerGetAttributes": "pointer_attributes", "cudaMalloc3D": "pitched_ptr",
                         "cudaCreateChannelDesc": "channel_format_desc", "cudaGetChannelDesc": "channel_format_desc"}


def _out_pointer_size(name: str, position: int) -> int:
    base = _API_SUFFIX.sub("", name)
    if (struct := _runtime_struct_of(name, position)) and (measured := runtime_struct_sizes().get(struct)):
        return measured
    sizes = OUT_POINTER_SIZES.get(name) or OUT_POINTER_SIZES.get(base) or {}
    return sizes.get(position, 8)


def _record_effects(trace, call_key, target: str, k: int, offset: int, size: int, rule: str) -> None:
    """The frame bytes a call writes through argument K (only the spans it writes), or reads."""
    if rule != "foreign-store":
        trace.call_reads.setdefault(call_key, []).append((offset, size))
        return
    written, read = out_pointer_effects(target, k, size)
    trace.call_writes.setdefault(call_key, []).extend((offset + o, n) for o, n in written)
    if read:
        trace.call_reads.setdefault(call_key, []).extend((offset + o, n) for o, n in read)


@dataclass
class _Function:
    name: str
    section: str
    frame: int = 0  # bytes the function has moved %rsp down since entry (sub, push), in layout order
    saved: int = 0  # bytes of callee-saved registers pushed before the frame was opened
    table_saved: int = 0  # bytes of callee-saved register slots the unwind table names, anywhere in it
    opened: int = 0  # the largest frame right after a `sub $n,%rsp`: saved registers plus locals
    frame_opened: bool = False
    called: bool = False
    unwound: bool = False  # in code reached only by the unwinder: its depth is a guess, so no stack writes

    @property
    def protected(self) -> int:
        """Bytes below the return address that are the caller's (saved registers): locals end there."""
        return max(self.saved, self.table_saved)

    lines: list[str] = field(default_factory=list)


def _disassemble(obj: Path) -> str:
    objdump = shutil.which("objdump")
    if objdump is None:
        raise FileNotFoundError("objdump (binutils) is needed to scan the candidate's host code")
    out = subprocess.run([objdump, "-dr", "--no-show-raw-insn", "-M", "att", str(obj)],
                         capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        raise RuntimeError(f"objdump failed: {out.stderr.strip()[:200]}")
    return out.stdout


def _int(text: str | None) -> int:
    """objdump's immediates and displacements; 64-bit values above 2^63 are negative."""
    value = int(text, 0) if text else 0
    return value - (1 << 64) if value >= 1 << 63 else value


def _operands(text: str) -> tuple[str, list[str]]:
    """Mnemonic (with prefixes) and operands, splitting on commas outside parentheses."""
    text = text.split("#", 1)[0].strip()
    parts = text.split(None, 1)
    mnemonic = parts[0]
    rest = parts[1] if len(parts) > 1 else ""
    while mnemonic.split()[-1] in ("lock", "rep", "repz", "repnz", "repe", "repne", "notrack", "bnd", "data16",
                                    "addr32", "cs", "ds"):
        if not rest:
            break
        inner = rest.split(None, 1)
        mnemonic = f"{mnemonic} {inner[0]}"
        rest = inner[1] if len(inner) > 1 else ""
    ops, depth, cur = [], 0, ""
    for ch in rest:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            ops.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        ops.append(cur.strip())
    return mnemonic, ops


@dataclass
class _OwnData:
    """Where the object's own symbols lie: a symbol's section and offset, and each section's size."""
    symbols: dict[str, tuple[str, int]]
    sections: dict[str, int]

    def names(self) -> set[str]:
        return set(self.symbols) | set(self.sections)

    def fits(self, name: str, offset: int, width: int) -> bool:
        """Whether `width` bytes at `name + offset` stay inside the section that holds `name`."""
        section, start = (name, 0) if name in self.sections else self.symbols.get(name, ("", 0))
        size = self.sections.get(section)
        return size is not None and 0 <= start + offset and start + offset + width <= size


def own_data(obj: Path) -> _OwnData:
    readelf = shutil.which("readelf")
    if readelf is None:
        raise FileNotFoundError("readelf (binutils) is needed to scan the candidate's host code")
    out = subprocess.run([readelf, "-SsW", str(obj)], capture_output=True, text=True, timeout=60).stdout
    by_index: dict[str, str] = {}
    sections: dict[str, int] = {}
    for m in re.finditer(r"^\s*\[\s*(\d+)\]\s+(\S+)\s+\S+\s+[0-9a-f]+\s+[0-9a-f]+\s+([0-9a-f]+)", out, re.M):
        by_index[m.group(1)] = m.group(2)
        sections[m.group(2)] = int(m.group(3), 16)
    symbols: dict[str, tuple[str, int]] = {}
    for m in re.finditer(r"^\s*\d+:\s+([0-9a-f]+)\s+\S+\s+\w+\s+\w+\s+\w+\s+(\d+)\s+(\S+)\s*$", out, re.M):
        if m.group(2) in by_index:
            symbols[m.group(3)] = (by_index[m.group(2)], int(m.group(1), 16))
    return _OwnData(symbols=symbols, sections=sections)


_DIRECT_TARGET = re.compile(r"^(?P<target>[0-9a-f]+) <")
_BRANCH = re.compile(r"^(?:j[a-z]+|call|callq|loop\w*)$")
_UNCONDITIONAL = ("jmp", "jmpq", "ret", "retq", "ud2", "hlt")
# Processor state a launcher could keep a count in from one call to the next and read back: the x87
# status word (its condition bits C0-C3 set by `fxam`, its sticky exception flags: red team round 208
# counted calls in both, read with `fnstsw`), the MXCSR's sticky flags, the MMX registers (the x87 data
# registers, readable whatever their tags say), whether extended state is in use (`xgetbv`), the
# protection keys and the shadow stack pointer; and the flags as the caller left them (`lahf`, `pushf`: a
# launcher entered right after the harness's test of a zero result sees ZF set, red team round 212). The harness compares the control bits after every
# call; these hold what honest code leaves too (a raised inexact flag), so they cannot be compared, and
# a reset would hide a count from the verifier rather than show it (rounds 196-199): reading them is
# refused. (The writers, and the instructions that dump them whole, are PROCESSOR_STATE_INSTRUCTION.)
PROCESSOR_STATE_READ = re.compile(r"^(?:fn?stsw|v?stmxcsr|xgetbv|rdpkru|rdssp[dq]?|emms|femms|lahf|pushf[dqw]?)$")
_MMX_REGISTER = re.compile(r"%mm\d\b")
_PADDING = re.compile(r"^\s*(?:(?:data16|cs|ds)\s+)*(?:nop\w*|xchg\s+%ax,%ax|int3)\b")


@dataclass
class _Listing:
    """Where instructions start, and the direct branches with no relocation, per section."""
    starts: dict[str, set[int]]
    branches: dict[str, list[tuple[int, int, str]]]  # (from, to, function)
    entered: set[tuple[str, int]]  # (section, offset) that relocated jumps land at (cold parts jumping back)


def _listing(text: str) -> _Listing:
    starts: dict[str, set[int]] = {}
    branches: dict[str, list[tuple[int, int, str]]] = {}
    entered: set[tuple[str, int]] = set()
    section, func = "", ""
    lines = text.splitlines()
    for k, line in enumerate(lines):
        if m := _SECTION.match(line):
            section = m.group("name")
            continue
        if m := _FUNC.match(line):
            func = m.group("name")
            continue
        m = _INSN.match(line)
        if not m or _RELOC.match(line) or not _EXEC_SECTIONS.match(section):
            continue
        address = int(m.group("addr"), 16)
        starts.setdefault(section, set()).add(address)
        mnemonic, ops = _operands(m.group("text"))
        relocation = _RELOC.match(lines[k + 1]) if k + 1 < len(lines) else None
        if _BRANCH.match(mnemonic.split()[-1]) and ops and relocation is None:
            if t := _DIRECT_TARGET.match(ops[0]):
                branches.setdefault(section, []).append((address, int(t.group("target"), 16), func))
        elif mnemonic.split()[-1].startswith("j") and relocation is not None:
            symbol, _, addend = relocation.group("target").partition("+") if "+" in relocation.group("target") \
                else relocation.group("target").partition("-")
            if symbol.startswith("."):
                offset = _int(addend) if "+" in relocation.group("target") else -_int(addend or "0")
                entered.add((symbol, offset + 4))
    return _Listing(starts=starts, branches=branches, entered=entered)


def scan_host_code(obj: Path, exported: frozenset[str] | set[str] = frozenset(),
                   c_signatures: dict[str, str] | None = None) -> list[Violation]:
    """Violations in the host code of a compiled editable part (see the module's docstring).
    `exported`: the symbols the baseline exports (its launchers), whose signatures are trusted.
    `c_signatures`: for an exported symbol of C linkage (`extern "C"`, a name that says nothing of
    its parameters), the signature the baseline declares it with, which the harness calls it by
    (`f(double const*, int)`): a candidate's own definition of the name is not read.

    The scan reads the code in address order. Code the compiler lays out before the jumps that
    enter it (a loop's body entered only by its loop's jumps back: an error check after a launch
    inside a loop) is met first as if only the unwinder reached it; a second reading starts each such
    place at the depth every jump back to it brought from code of known depth, and checks that the
    jumps back still agree (_LoopEntries)."""
    loop_entries = _LoopEntries()
    trace = FrameTrace()
    found = _scan_host_code(obj, exported, c_signatures, loop_entries, trace)
    confirmed = loop_entries.confirmed()
    if confirmed:
        second = _LoopEntries(seeded=confirmed)
        trace = FrameTrace()
        found = _scan_host_code(obj, exported, c_signatures, second, trace)
        for section, address in sorted(set(confirmed) - set(second.confirmed())):
            found.append(Violation(rule="stack-depth", where="object",
                                   detail=f"{section}+{address:#x}: entered only by jumps back from code whose stack "
                                          "depth the scan could not confirm"))
    if not any(v.rule == "stack-depth" for v in found):  # the frame model holds: offsets mean what they say
        found += _unwritten_stack_reads(trace)
    return found


def _unwritten_stack_reads(trace: FrameTrace) -> list[Violation]:
    """Stack bytes and registers read that the call may not have set: a channel between calls (frame_writes)."""
    found: list[Violation] = []
    for read in unwritten_reads(trace):
        if any(v.detail.startswith(f"{read.function}:") for v in found):
            continue
        if read.how.startswith(("uses %", "reads %")):
            what = f"`{read.instruction}` {read.how}"
        else:
            what = (f"`{read.instruction}` {read.how} {read.size} bytes of its frame ({read.offset} from its entry "
                    "stack pointer) that some path through the call has not written")
        found.append(Violation(rule="uninitialised-stack", where="object", detail=(
            f"{read.function}: {what}: what an earlier call left there, a channel between calls no state check "
            "sees; set every local and register before reading it")))
    return found


@dataclass
class _LoopEntries:
    """Places met with no known way in (taken as unwinder-only code), at the depth the compiler's
    unwind table gave them, and the depths that jumps back to them from code of known depth bring."""
    seeded: dict[tuple[str, int], int] = field(default_factory=dict)  # the second reading's starting depths
    unreached: dict[tuple[str, int], int] = field(default_factory=dict)  # place -> the depth it was read at
    backward: dict[tuple[str, int], set[int]] = field(default_factory=dict)  # place -> depths jumps back bring
    guessed_back: set[tuple[str, int]] = field(default_factory=set)  # places a jump back from guessed code reaches

    def confirmed(self) -> dict[tuple[str, int], int]:
        """Places every jump back reaches from code of known depth, at the one depth they were read at."""
        places = {**self.unreached, **self.seeded}
        return {key: depth for key, depth in places.items()
                if self.backward.get(key) == {depth} and key not in self.guessed_back}


def _scan_host_code(obj: Path, exported: frozenset[str] | set[str], c_signatures: dict[str, str] | None,
                    loop_entries: _LoopEntries, trace: FrameTrace) -> list[Violation]:
    data = own_data(obj)
    own = data.names()
    violations: list[Violation] = []
    seen: set[tuple[str, str]] = set()
    section = ""
    func: _Function | None = None
    # A %rip-relative store awaiting its relocation, then the next instruction's address:
    # (function, instruction, width) and (symbol, addend, relocation address).
    pending_store: tuple[str, str, int] | None = None
    # %rip-relative accesses whose relocation has come, judged once the next instruction's address
    # is known: (rule, function, instruction, width, symbol, addend, relocation address).
    pending_global: list[tuple[str, str, str, int, str, int, int]] = []
    pending_call: str | None = None  # a direct call whose target comes on the relocation line
    pending_call_key: tuple[str, int] | None = None  # where that call is (frame_writes)
    pending_branch_key: tuple[str, int] | None = None  # where a jump whose target comes on its relocation is
    cold_unwound_start = False  # the next instruction opens a cold part no jump enters
    # Every direct call or jump to a function of this object, for the stack-argument check at the
    # end: (caller, the caller's own bytes below %rsp's return slot at the call, callee, a tail jump).
    own_calls: list[tuple[str, int, str, bool]] = []
    pending_call_site: tuple[int, bool] = (0, False)
    # Argument registers set, in this straight-line stretch, to the function's own memory or to a
    # constant: ("stack", displacement, ""), ("global", offset, symbol) or ("const", value, "").
    own_pointers: dict[str, tuple[str, int, str]] = {}
    pending_lea: str | None = None  # an `lea sym(%rip)` into this register awaits its relocation
    pending_load: tuple[str, str, int, str, int] | None = None  # a %rip-relative load awaiting its relocation
    # A function the harness does not call that writes its own stack-passed arguments (a template
    # launcher passing on a tail call's arguments): the first such write, judged at the end by its
    # call sites. Functions referenced other than by a direct call or jump (an address taken, in code
    # or data), and executable sections referenced at a place the scan cannot name, are never let.
    argument_writes: dict[str, str] = {}
    entered_elsewhere: set[str] = set()
    # A function's cold part jumping back into it runs in its frame: no outside way in, as long as
    # nothing but the function itself enters the cold part.
    entered_by_cold: dict[str, set[str]] = {}
    referenced: set[str] = set()
    referenced_sections: set[str] = set()
    annotated: str | None = None  # a %rip-relative operand's target as objdump names it, until a relocation says otherwise

    def report(rule: str, where: str, detail: str) -> None:
        if (rule, where) not in seen and len(violations) < 20:
            seen.add((rule, where))
            violations.append(Violation(rule=rule, where="object", detail=f"{where}: {detail}"))

    def judge_global(next_address: int | None) -> None:
        nonlocal pending_global
        for rule, where, text, width, symbol, addend, reloc_at in pending_global:
            offset = addend + (next_address - reloc_at if next_address is not None else 4)
            if not data.fits(symbol, offset, width):
                verb = "writes" if rule == "foreign-store" else "reads"
                report(rule, where, f"`{text}`: {verb} {width} bytes at {symbol}{offset:+d}, outside "
                                    "the editable part's own data")
        pending_global = []

    def judge_own_pointer(where: str, target: str, k: int, size: int, role: str, rule: str,
                          defines: bool = True) -> None:
        """Argument k of a call must point at `size` bytes of the function's own frame or globals;
        `defines`: the call writes them whenever it returns (not a call that may fail and leave them)."""
        assert func is not None
        if k >= len(_ARG_REGS):  # passed on the stack: the scan follows argument registers only
            report(rule, where, f"passes {target} {role} as argument {k + 1}, on the stack, where the scan "
                                "cannot check it")
            return
        pointer = own_pointers.get(_ARG_REGS[k])
        if pointer is not None and pointer[0] == "slot":  # judged once every write of the slot is known
            parked.append((pending_call_key, where, target, k, size, role, rule, pointer[1], pointer[2],
                           func.frame, func.protected))
            return
        if pointer is not None and pointer[0] == "stack" and pending_call_key is not None and defines:
            _record_effects(trace, pending_call_key, target, k, pointer[1], size, rule)
        if pointer is None or pointer[0] not in ("stack", "global"):
            report(rule, where, f"passes {target} {role} (argument {k + 1}) that is not its own stack frame or global")
        elif pointer[0] == "stack" and pointer[1] < -func.frame:
            # Below %rsp is the callee's while it runs (its return address at -8, then its frame):
            # the red zone is the function's own only between its calls (round 21 had a copy
            # overwrite the runtime's return address there).
            report(rule, where, f"passes {target} {role} (argument {k + 1}) at {pointer[1] + func.frame}(%rsp), below "
                                "the stack pointer: the callee's return address and frame")
        elif pointer[0] == "stack" and pointer[1] + size > -func.protected:
            report(rule, where, f"passes {target} {role} (argument {k + 1}) whose {size} bytes at "
                                f"{pointer[1] + func.frame}(%rsp) reach past its locals "
                                f"({func.frame - func.protected} bytes) into saved registers or the return address")
        elif pointer[0] == "global" and not data.fits(pointer[2], pointer[1], size):
            report(rule, where, f"passes {target} {role} (argument {k + 1}) whose {size} bytes at "
                                f"{pointer[2]}{pointer[1]:+d} reach outside the editable part's own data")

    def constant_argument(k: int) -> int | None:
        fact = own_pointers.get(_ARG_REGS[k]) if k < len(_ARG_REGS) else None
        return fact[1] if fact is not None and fact[0] == "const" else None

    def judge_stream_creation(where: str, target: str, flags_at: int | None) -> None:
        """A stream the part creates is non-blocking, by a constant (STREAM_CREATION_FLAGS)."""
        flags = constant_argument(flags_at) if flags_at is not None else 0
        if flags is None or not flags & _STREAM_NON_BLOCKING:
            how = "always a blocking stream" if flags_at is None else (
                "with flags the scan cannot read as a constant" if flags is None else "as a blocking stream")
            report("default-stream", where, f"calls {target} {how}: its order with stream 0 is the legacy default "
                                             "stream's, which nvcc --default-stream per-thread drops; create it with "
                                             "cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) and order it "
                                             "with events, or declare the build (--build-flag=--default-stream=legacy)")

    def judge_copy(where: str, target: str, kind_at: int, count_at: int, dst_at: int, src_at: int) -> None:
        """A CUDA copy names its direction as a constant, and its host side is the function's own
        memory, of a constant size (round 19 read and wrote any host address with copies)."""
        kind = constant_argument(kind_at)
        if kind == _DEVICE_TO_DEVICE:
            return
        if kind not in (_HOST_TO_DEVICE, _DEVICE_TO_HOST):
            report("host-copy", where, f"calls {target} with a direction that is not device-to-device, host-to-device "
                                       "or device-to-host, written as a constant: a host-to-host or inferred copy "
                                       "reads or writes any host address")
            return
        host_at = src_at if kind == _HOST_TO_DEVICE else dst_at
        count = constant_argument(count_at)
        if host_at < 0:
            report("host-copy", where, f"calls {target} with a host-side direction on a device symbol's side")
        elif count is None or count <= 0:
            report("host-copy", where, f"calls {target} with a host-side size the scan cannot read as a constant")
        else:
            role = "a host source" if kind == _HOST_TO_DEVICE else "a host destination"
            judge_own_pointer(where, target, host_at, count, role,
                              "foreign-load" if kind == _HOST_TO_DEVICE else "foreign-store")

    text_listing = _disassemble(obj)
    listing = _listing(text_listing)
    labels = {m.group("name") for line in text_listing.splitlines() if (m := _FUNC.match(line))}
    # A function may have several names (an `alias`); objdump labels its code with one of them,
    # and a relocation may name another (red team round 38 called a reader through its alias, so
    # no window was found and the call-site check skipped it). Every name of an address is judged
    # as that address: its label, with the largest window any of its names claims.
    label_of = _function_labels(obj, labels)
    names = sorted(labels | set(label_of))
    # Stack-passed arguments: read by any function whose signature says so in fundamental types;
    # written (a tail call's arguments) only by the baseline's own launchers.
    # A declared signature is counted untrusted: a type's name there is the program's to define
    # (red team round 121: `typedef float int24_t;` read as an integer slot); keywords and pointers
    # say their class whatever the program declares.
    declared = dict(c_signatures or {})  # the baseline's own declarations (gate.c_linkage_signatures)
    claimed = {name: _stack_argument_bytes(declared[name], trusted=False) if signature == name and name in declared
               else _stack_argument_bytes(signature, trusted=name in exported)
               for name, signature in zip(names, demangle(names))}
    stack_arguments: dict[str, int] = {}
    exported_window: dict[str, int] = {}  # a launcher the harness calls: its true signature, whatever its aliases say
    for name, size in claimed.items():
        label = label_of.get(name, name)
        stack_arguments[label] = max(stack_arguments.get(label, 0), size)
        if name in exported:
            exported_window[label] = size
    stack_arguments.update(exported_window)
    for name, label in label_of.items():
        stack_arguments[name] = stack_arguments.get(label, 0)
    writable_arguments = {label: size for label, size in exported_window.items()}
    code = SectionBytes(obj)
    unwind = UnwindTable(obj)
    # Code hidden inside other instructions' bytes (a jump into an immediate) is code the linear
    # disassembly never shows: every direct branch must land where an instruction starts.
    for sec, branches in listing.branches.items():
        for source, target, name in branches:
            if target not in listing.starts.get(sec, set()):
                report("hidden-code", name, f"a branch at {source:#x} lands at {target:#x}, inside another "
                                            "instruction: bytes that run as code the scan never sees")
    # The stack depth where each forward branch lands, to follow control flow through the frame.
    frame_at_target: dict[tuple[str, int], int] = {}
    frame_at: dict[tuple[str, int], int] = {}
    functions: dict[str, _Function] = {}
    function_at = _function_addresses(text_listing)  # (section, address) -> function name
    starts_in: dict[str, list[tuple[int, str]]] = {}
    for (sec, start), fname in sorted(function_at.items()):
        starts_in.setdefault(sec, []).append((start, fname))

    def containing(sec: str, offset: int) -> str | None:
        """The function whose code holds SEC+OFFSET (the last to start at or before it)."""
        inside = [fname for start, fname in starts_in.get(sec, []) if start <= offset]
        return inside[-1] if inside else None

    def same_function(a: str, b: str) -> bool:  # a function and its cold part share one frame
        return _COLD_PART.sub("", a) == _COLD_PART.sub("", b)

    # A direct branch from one function into another anywhere but at its start (a conditional
    # jump to its start: in the main loop below).
    for sec, branches in listing.branches.items():
        for source, target, from_function in branches:
            into = containing(sec, target)
            if into is not None and not same_function(into, from_function) and function_at.get((sec, target)) != into:
                entered_elsewhere.add(into)
    functions_named = set(function_at.values())
    cold_entries: dict[str, set[int]] = {}  # cold part -> the stack depths of the jumps into it
    guessed_depth: set[tuple[str, int]] = set()  # branch targets reached from unwinder-only code
    guessed_cold: set[str] = set()  # cold parts entered from unwinder-only code
    returning = _returning_functions(text_listing)
    # Join points of the argument-register facts (see below).
    joins_unknown = {(sec, target) for sec, branches in listing.branches.items()
                     for source, target, _ in branches if target <= source} | listing.entered
    pointers_at_target: dict[tuple[str, int], dict[str, tuple[str, int, str]]] = {}
    direct_branches = {(sec, source) for sec, branches in listing.branches.items() for source, _, _ in branches}
    pending_branch: tuple[int, bool] | None = None  # a jump whose target comes on its relocation line: the
    # depth there, and whether that depth is a guess (unwinder-only code)
    fell_through = True
    ran_instructions = False  # the current function has code (not a second name at one address)
    at_function_start = False
    located = {name: key for key, name in function_at.items()}  # a function's (section, address)
    own_callee_at: dict[tuple[str, int], str] = {}  # a call of the part's own function -> the callee
    # A pointer parked in a frame slot and loaded back for a call (a compiler hoisting an out-pointer
    # out of a loop): every write of the slot in the function, and the calls that use such a pointer.
    stack_writes: list[tuple[str, int, int, tuple[str, int, str] | None]] = []  # (function, from, to, fact)
    parked: list[tuple] = []
    load_keys: dict[str, tuple[str, int]] = {}

    def judge_end(next_name: str) -> None:
        # A function whose last instruction can run on falls into whatever the linker puts next:
        # code entered with no call site, at a depth no check saw (red team round 37: a non-void
        # function without `return` ran into a reader of 64 bytes of "stack arguments").
        if func is not None and ran_instructions and fell_through:
            report("fall-through", func.name, f"can run off its end into {next_name}: code entered without a "
                                              "call, at a stack depth the scan cannot check")

    for line in _cold_sections_last(text_listing):
        if annotated is not None:
            if not _RELOC.match(line):
                referenced.add(label_of.get(annotated, annotated))  # resolved by the assembler: no relocation names it
            annotated = None
        if m := _SECTION.match(line):
            judge_end("the end of its section")
            judge_global(None)
            section = m.group("name")
            func = None
            continue
        if not _EXEC_SECTIONS.match(section):
            continue
        if m := _FUNC.match(line):
            judge_end(m.group("name"))
            ran_instructions = False
            judge_global(int(line.split()[0], 16))
            func = _Function(name=m.group("name"), section=section)
            functions[func.name] = func
            parent = functions.get(_COLD_PART.sub("", func.name)) if _COLD_PART.search(func.name) else None
            if parent is not None:
                # A function's cold part (gcc's hot/cold split: error paths, landing pads) runs in
                # its parent's frame, entered by the parent's jumps (at the depth each jump had:
                # they must agree) or by the unwinder (a depth the scan cannot tell: no stack
                # writes there). Red team round 13 wrote its return address through a cold part
                # judged with the parent's largest frame.
                depths = cold_entries.get(func.name, set())
                if len(depths) > 1:
                    report("stack-depth", func.name, f"is entered with {sorted(depths)} bytes on the stack: the scan "
                                                     "cannot tell where its writes land")
                func.frame = min(depths) if depths else max(parent.opened, parent.saved)
                cold_unwound_start = not depths
                func.opened, func.unwound = max(parent.opened, parent.saved), not depths or func.name in guessed_cold
                func.saved, func.frame_opened, func.called = parent.saved, True, True
            pending_store = pending_call = pending_lea = pending_load = pending_branch = None
            own_pointers = {}
            fell_through = True
            at_function_start = parent is None
            continue
        if func is None:
            continue
        if m := _RELOC.match(line):
            target = re.split(r"[-+]", m.group("target"), maxsplit=1)[0].split("@")[0]
            addend_text = m.group("target")[len(re.split(r"[-+]", m.group("target"), maxsplit=1)[0]):]
            addend = _int(addend_text.replace("+", "")) if addend_text else 0
            if pending_call is None:
                # An address taken (lea, mov, a constant), or a conditional jump into a function: a way in
                # that is no call or jump at its start, which the call-site checks do not see.
                named = function_at.get((target, addend + 4)) or function_at.get((target, addend)) \
                    if target.startswith(".") else label_of.get(target, target)
                if target.startswith(".") and named is None:
                    named = containing(target, addend + 4)
                if named is not None:
                    if not same_function(named, func.name):
                        referenced.add(named)
                    elif named != func.name and not _COLD_PART.search(named):
                        entered_by_cold.setdefault(named, set()).add(func.name)  # judged below
                elif target.startswith(".") and _EXEC_SECTIONS.match(target):
                    referenced_sections.add(target)
            elif target.startswith(".") and function_at.get((target, addend + 4)) is None:
                inside = containing(target, addend + 4)  # a call or jump into a function's middle
                if inside is not None and not same_function(inside, func.name):
                    referenced.add(inside)
                elif inside is not None and inside != func.name and not _COLD_PART.search(inside):
                    entered_by_cold.setdefault(inside, set()).add(func.name)  # judged below
            if pending_branch is not None:
                depth, guessed = pending_branch
                landing = (target, addend + 4) if target.startswith(".") else (
                    (located[target][0], located[target][1] + addend + 4) if target in located else None)
                if landing is not None and pending_branch_key is not None:
                    trace.relocated_targets[pending_branch_key] = landing
                entered = target if _COLD_PART.search(target) else function_at.get((target, addend + 4))
                if entered is not None and _COLD_PART.search(entered):
                    cold_entries.setdefault(entered, set()).add(depth)
                    if guessed:
                        guessed_cold.add(entered)
                elif target.startswith(".text"):  # into another section, not at a function's start
                    earlier = frame_at_target.setdefault((target, addend + 4), depth)
                    if guessed:
                        guessed_depth.add((target, addend + 4))
                    if earlier != depth:
                        report("stack-depth", func.name, f"paths reach {target}+{addend + 4:#x} with {earlier} and "
                                                         f"{depth} bytes on the stack: the scan cannot "
                                                         "tell where its writes land")
                pending_branch = None
            if pending_call is not None:
                # A call through a section's name (a static function in another section) is to the
                # function at that offset; one the scan cannot name may not return (round 15).
                callee = function_at.get((target, addend + 4)) if target.startswith(".") else label_of.get(target, target)
                if callee is not None and (callee in own or target in own or target.startswith(".")):
                    own_calls.append((pending_call, pending_call_site[0], callee, pending_call_site[1]))
                    if not pending_call_site[1] and pending_call_key is not None:
                        own_callee_at[pending_call_key] = callee
                    if pending_call_key is not None and not same_function(callee, func.name):
                        trace.own_callee_of[pending_call_key] = _COLD_PART.sub("", label_of.get(callee, callee))
                if _NO_RETURN_IMPORTS.match(target) or (callee in own or target in own or target.startswith(".")) and (
                        callee not in functions_named or callee not in returning):
                    fell_through = False  # what follows runs only if the unwinder lands there
                    if pending_call_key is not None:
                        trace.no_return.add(pending_call_key)
                if target not in own and not target.startswith(".") and not classified_import(target):
                    report("unknown-call", pending_call, f"calls {target}, which the host-code scan does not "
                                                          "classify: it may write host memory through its arguments")
                if _ALLOCATOR_RELEASE.match(target):
                    report("host-memory-write", pending_call, f"calls {target}: the allocator writes around the "
                                                              "address it is given and hands that memory out again")
                if _MEMORY_WRITERS.match(target):
                    report("host-memory-write", pending_call, f"calls {target}: writes host memory at an address "
                                                              "the editable part computes")
                for k in _out_pointer_args(target) or ():
                    judge_own_pointer(pending_call, target, k, _out_pointer_size(target, k), "an output pointer",
                                      "foreign-store", defines=target not in MAY_RETURN_UNWRITTEN)
                if (copy := _copy_args(target)) is not None:
                    judge_copy(pending_call, target, *copy)
                if (creation := _API_SUFFIX.sub("", target)) in STREAM_CREATION_FLAGS:
                    judge_stream_creation(pending_call, target, STREAM_CREATION_FLAGS[creation])
                elif creation in STREAM_MODE_CALLS:
                    report("default-stream", pending_call, f"calls {target}, whose answer depends on what stream 0 "
                                                           "is (the legacy stream, or with nvcc --default-stream "
                                                           "per-thread the thread's own, which can be captured): "
                                                           "declare the build (--build-flag=--default-stream=legacy) "
                                                           "to capture or query streams")
                for k, size in _in_pointer_args(target).items():
                    null = constant_argument(k) == 0
                    if size == 0 and not null:
                        report("foreign-load", pending_call, f"passes {target} a pointer (argument {k + 1}) that must "
                                                             "be null here: the scan does not follow what it points at")
                    elif size and not (null and (_API_SUFFIX.sub("", target), k) in _OPTIONAL_IN_POINTERS):
                        judge_own_pointer(pending_call, target, k, size, "a pointer it reads", "foreign-load")
                pending_call = None
                own_pointers = {}  # the call clobbers the argument registers
            if pending_lea is not None:
                if target.startswith(".") or target in own:
                    own_pointers[pending_lea] = ("global", addend + 4, target)  # lea's field ends the instruction
                pending_lea = None
            if pending_load is not None:
                where, text, width = pending_load[:3]
                pending_load = None
                if target.startswith(".") or target in own:  # its own data: inside the symbol's section
                    pending_global.append(("foreign-load", where, text, width, target, addend,
                                           int(line.split(":")[0], 16)))
                elif not (target in _READABLE_EXTERNAL_DATA or classified_import(target)):
                    report("foreign-load", where, f"reads {target}, which is neither the editable part's own data "
                                                  f"nor a function it calls ({text})")
            if pending_store is not None:
                where, text, width = pending_store
                pending_store = None
                if not (target.startswith(".") or target in own):
                    report("foreign-store", where,
                           f"stores into {target}, which the editable part does not define ({text})")
                else:
                    pending_global.append(("foreign-store", where, text, width, target, addend,
                                           int(line.split(":")[0], 16)))
            continue
        m = _INSN.match(line)
        if not m:
            continue
        address = int(m.group("addr"), 16)
        judge_global(address)
        # The stack depth here: from the branches that land here, else from the instruction before.
        arrived = frame_at_target.get((section, address))
        if arrived is None and not fell_through and (section, address) in loop_entries.seeded:
            arrived = loop_entries.seeded[(section, address)]  # the depth the jumps back bring (_LoopEntries)
        if arrived is None and not fell_through and _PADDING.match(m.group("text")):
            continue  # alignment padding after a jump or return: never runs
        ran_instructions = True
        unwinding_entry = (arrived is None and not fell_through) or cold_unwound_start
        cold_unwound_start = False
        if arrived is not None and fell_through and arrived != func.frame:
            report("stack-depth", func.name, f"paths reach {address:#x} with {arrived} and {func.frame} bytes "
                                             "on the stack: the scan cannot tell where its writes land")
        elif arrived is not None:
            func.frame, func.unwound = arrived, (section, address) in guessed_depth
        elif not fell_through:
            func.frame = max(func.opened, func.saved)  # reached only by the unwinder (a landing pad): the whole frame
            func.unwound = True
        # The compiler's unwind table is a second account of the depth: a disagreement means the
        # scan's model is wrong here (rounds 11-15 each wrote a return address from such a spot).
        recorded = unwind.depth_at(section, address)
        # Registers the function saves anywhere (after an early tail jump too: round 16) are its
        # caller's: its locals end below the deepest save slot.
        func.table_saved = recorded.saved
        if not recorded.covered and not _PADDING.match(m.group("text")):
            report("stack-depth", func.name, f"the instruction at {section}+{address:#x} has no unwind record: the "
                                             "scan cannot check its stack depth against the compiler's")
        elif recorded.bytes is not None and recorded.bytes != func.frame:
            if func.unwound:
                func.frame = recorded.bytes  # the compiler's depth replaces the scan's guess (writes stay refused)
            else:
                report("stack-depth", func.name, f"at {section}+{address:#x} the scan counts {func.frame} bytes on "
                                                 f"the stack and the compiler's unwind table {recorded.bytes}: the "
                                                 "scan cannot tell where its writes land")
        frame_at[(section, address)] = func.frame
        if arrived is None and not fell_through:
            loop_entries.unreached[(section, address)] = func.frame
        # What the argument registers hold where paths join is what every path agrees on: a
        # path that jumps onto a call with another pointer must not borrow the fall-through's
        # (round 17). Loop heads and the landing spots of relocated jumps are not known in
        # advance: nothing is kept there.
        if (section, address) in joins_unknown:
            own_pointers = {}
        elif (incoming := pointers_at_target.get((section, address))) is not None:
            own_pointers = {r: v for r, v in own_pointers.items() if incoming.get(r) == v} if fell_through \
                else dict(incoming)
        if pending_store is not None:  # a %rip-relative store with no relocation: not into the object's data
            report("foreign-store", pending_store[0], f"`{pending_store[1]}`: stores at a %rip-relative address "
                                                      "that is none of the editable part's own data")
        if pending_load is not None and len(pending_load) > 3:  # a %rip-relative load with no relocation:
            where_, text_, width_, target_section, target_offset = pending_load  # its own section, at a fixed offset
            if not data.fits(target_section, target_offset, width_):
                report("foreign-load", where_, f"`{text_}`: reads {width_} bytes at {target_section}"
                                               f"{target_offset:+d}, outside the section")
        pending_store = pending_lea = pending_load = pending_branch = None
        if pending_call is not None:  # a call with no relocation: a local function; arguments are gone
            pending_call, own_pointers = None, {}
        mnemonic, ops = _operands(m.group("text"))
        base_mnemonic = mnemonic.split()[-1]
        where = func.name
        fell_through = base_mnemonic not in _UNCONDITIONAL
        if base_mnemonic in ("call", "callq", "jmp", "jmpq") and ops and (t := _DIRECT_TARGET.match(ops[0])):
            callee = function_at.get((section, int(t.group("target"), 16)))
            if callee is not None and (section, address) in direct_branches:  # no relocation: this section
                own_calls.append((where, func.frame - func.protected, callee, base_mnemonic.startswith("jmp")))
                if base_mnemonic.startswith("call"):
                    own_callee_at[(section, address)] = callee
                if not same_function(callee, func.name):
                    trace.own_callee_of[(section, address)] = _COLD_PART.sub("", label_of.get(callee, callee))
            if base_mnemonic.startswith("call") and callee is not None and callee not in returning:
                fell_through = False  # a local [[noreturn]] function: what follows is a landing pad
                trace.no_return.add((section, address))
        if base_mnemonic.startswith("j") and ops and (t := _DIRECT_TARGET.match(ops[0])):
            target = int(t.group("target"), 16)
            into = containing(section, target) if (section, address) in direct_branches else None
            if into is not None and not same_function(into, func.name) and base_mnemonic not in ("jmp", "jmpq"):
                entered_elsewhere.add(into)  # a conditional tail jump: no call site the checks see
            if target > address and (section, address) in direct_branches:  # not a relocated jump's placeholder
                key = (section, target)
                snapshot = dict(own_pointers)
                pointers_at_target[key] = snapshot if key not in pointers_at_target else {
                    r: v for r, v in pointers_at_target[key].items() if snapshot.get(r) == v}
            if target > address and (section, address) in direct_branches:
                if func.unwound:  # a depth guessed in unwinder-only code stays a guess where it jumps
                    guessed_depth.add((section, target))
                earlier = frame_at_target.setdefault((section, target), func.frame)
                if earlier != func.frame:
                    report("stack-depth", where, f"paths reach {target:#x} with {earlier} and {func.frame} bytes "
                                                 "on the stack: the scan cannot tell where its writes land")
            elif frame_at.get((section, target), func.frame) != func.frame:
                report("stack-depth", where, f"a loop back to {target:#x} changes the stack depth "
                                             f"({frame_at[(section, target)]} there, {func.frame} here)")
            elif (section, address) in direct_branches:  # a jump back, at the depth it brings
                loop_entries.backward.setdefault((section, target), set()).add(func.frame)
                if func.unwound:
                    loop_entries.guessed_back.add((section, target))
        if base_mnemonic.startswith("j") and ops and not ops[0].startswith("*"):
            pending_branch = (func.frame, func.unwound)  # a jump into a cold part: its relocation names the target
            pending_branch_key = (section, address)
        if base_mnemonic in ("call", "callq", "jmp", "jmpq") and ops and not ops[0].startswith("*"):
            pending_call = where  # judged by its relocation (imports and external symbols have one)
            pending_call_key = (section, address)
            pending_call_site = (func.frame - func.protected, base_mnemonic.startswith("jmp"))
            func.called = True
        elif base_mnemonic.startswith("j") or base_mnemonic.startswith("ret"):
            own_pointers = {}  # a new straight-line stretch begins at every branch
        # Track argument registers pointing at the function's own memory; any other write to
        # them (or to a sub-register) forgets it.
        written = ops[-1] if ops else ""
        arg = next((r for r, names in _REG_ALIASES.items() if written in names), None)
        set_here = None
        if arg is not None and base_mnemonic not in ("call", "callq", "jmp", "jmpq", "push", "pushq", "cmp", "test"):
            own_pointers.pop(arg, None)
            if base_mnemonic in ("mov", "movq") and ops[0] == "%rsp" and written == arg:
                own_pointers[arg] = ("stack", -func.frame, "")  # the frame's base (positions: from the entry %rsp)
                set_here = arg
            # A constant (a copy's direction and size): a full-width write of an immediate, or a
            # register cleared with itself. 8- and 16-bit writes keep the rest of the register.
            if written in _REG_ALIASES[arg][:2] and len(ops) == 2 and (
                    base_mnemonic in ("mov", "movl", "movq", "movabs", "movabsq") and ops[0].startswith("$")):
                own_pointers[arg] = ("const", _int(ops[0][1:]), "")
                set_here = arg
            if written in _REG_ALIASES[arg][:2] and base_mnemonic in ("xor", "xorl", "xorq") and ops[0] == ops[1]:
                own_pointers[arg] = ("const", 0, "")
                set_here = arg
            if base_mnemonic in ("mov", "movq") and len(ops) == 2 and written == arg and ops[0] in own_pointers:
                own_pointers[arg] = own_pointers[ops[0]]  # a copy of a known pointer
                set_here = arg
            if base_mnemonic in ("mov", "movq") and len(ops) == 2 and written == arg and (
                    (slot := _MEM.search(ops[0])) is not None and slot.group("base") == "%rsp"
                    and slot.group("index") is None and slot.group("seg") is None):
                # a pointer loaded back from a frame slot: what the slot holds is judged at the end
                load_keys[f"{section}:{address}"] = (section, address)
                own_pointers[arg] = ("slot", _int(slot.group("disp")) - func.frame, f"{section}:{address}")
                set_here = arg
            if base_mnemonic in ("lea", "leaq") and written == arg and len(ops) == 2:
                src = _MEM.search(ops[0])
                if src is not None and src.group("index") is None:
                    if src.group("base") == "%rsp":
                        own_pointers[arg] = ("stack", _int(src.group("disp")) - func.frame, "")
                        set_here = arg
                    elif src.group("base") == "%rip":
                        pending_lea = arg
        if base_mnemonic in _FORBIDDEN:
            report("host-instruction", where, f"{base_mnemonic}: {_FORBIDDEN[base_mnemonic]}")
            continue
        if PROCESSOR_STATE_READ.match(base_mnemonic) or _MMX_REGISTER.search(m.group("text")):
            report("host-instruction", where, f"{base_mnemonic}: reads processor state that outlives a call (the "
                   "x87 status word's condition bits and sticky flags, the MXCSR's flags, an MMX register, the "
                   "extended state in use, a protection key or the shadow stack), which no digest of the part's "
                   "state compares between calls")
            continue
        if PROCESSOR_STATE_INSTRUCTION.match(base_mnemonic):
            report("host-instruction", where, f"{base_mnemonic}: changes or dumps processor state (the "
                   "floating-point environment, the x87 or vector registers' saved image, a segment base), which "
                   "no digest of the part's state compares between calls")
            continue
        insn = code.instruction(section, address)
        if insn is not None:  # registers the instruction writes without naming them last (`cqto`, `div`, `xchg`)
            for reg in [r for r in own_pointers if r[1:] in insn.written_registers and r != set_here]:
                own_pointers.pop(reg)
        if insn is None:
            report("host-instruction", where, f"`{m.group('text').split('#')[0].strip()}` at {address:#x} cannot be "
                                              "decoded where the listing puts it")
            continue
        key = (section, address)
        trace.steps[key] = Step(group=_COLD_PART.sub("", func.name), frame=func.frame, insn=insn,
                                function_start=at_function_start)
        for w in insn.writes:
            if w.base == "rsp" and not w.index:
                stored = own_pointers.get(ops[0]) if base_mnemonic in ("mov", "movq") and len(ops) == 2 else None
                fact = stored if stored is not None and stored[0] == "stack" and w.size == 8 else None
                stack_writes.append((trace.steps[key].group, w.displacement - func.frame,
                                     w.displacement - func.frame + (w.size or 8), fact))
        trace.order.append(key)
        at_function_start = False
        if key in direct_branches:
            trace.direct.add(key)
        if unwinding_entry:
            trace.unwinder_entries.add(key)
        if insn.flow in ("indirect-branch", "indirect-call") or (
                base_mnemonic in ("call", "callq", "jmp", "jmpq") and ops and ops[0].startswith("*")):
            report("indirect-call", where, f"`{insn.text}`: transfers control through a pointer; "
                                           "the editable part may only call functions it names")
            continue
        if insn.privileged_or_system or insn.flow in ("interrupt", "xbegin"):
            report("host-instruction", where, f"`{insn.text}`: a system, privileged or transactional instruction")
            continue
        if recorded.covered and recorded.bytes is None and insn.mnemonic not in ("push", "pop", "call", "ret") \
                and any(a.base == "rsp" for a in (*insn.reads, *insn.writes)):
            report("stack-depth", where, f"`{insn.text}`: uses the stack where the unwind table keeps the frame in "
                                         "another register: the scan cannot check how deep it is")
        if insn.writes_stack_pointer and not _models_stack(insn, ops):
            report("indirect-call", where, f"`{insn.text}`: moves the stack pointer in a way the frame model does "
                                           "not follow (a stack pivot)")
            continue
        if base_mnemonic not in ("call", "callq", "jmp", "jmpq") and (named := _CODE_ANNOTATION.search(
                m.group("text"))) is not None:
            annotated = named.group("name")  # where a %rip-relative operand points, if no relocation follows
        exported_window_here = writable_arguments.get(func.name)
        if _judge_writes(insn, func, where, report,
                         exported_window_here if exported_window_here is not None else stack_arguments.get(func.name, 0),
                         None if exported_window_here is not None else
                         (lambda detail, name=func.name: argument_writes.setdefault(name, detail))):
            pending_store = (where, insn.text, _write_size(insn))
        if _judge_reads(insn, func, where, report, stack_arguments.get(func.name, 0)):
            rip_read = next(r for r in insn.reads if r.base == "rip")
            pending_load = (where, insn.text, rip_read.size or 64, section,
                            address + insn.length + rip_read.displacement)
        if base_mnemonic.startswith("ret"):
            if ops:
                report("indirect-call", where, f"`{m.group('text').split('#')[0].strip()}`: a return that also "
                                               "moves the stack pointer")
            if func.frame > 0:
                report("indirect-call", where, f"returns with {func.frame} bytes of its own still on the stack: "
                                               "a jump to a pushed address")
            continue
        lea_rsp = base_mnemonic.startswith("lea") and ops and ops[-1] == "%rsp" and _MEM.search(ops[0]) \
            and _MEM.search(ops[0]).group("base") == "%rsp" and _MEM.search(ops[0]).group("index") is None
        if lea_rsp:
            func.frame -= _int(_MEM.search(ops[0]).group("disp"))
            if func.frame < 0:
                report("foreign-store", where, f"`{m.group('text').split('#')[0].strip()}`: moves the stack "
                                               "pointer above its own frame (pushes would write the caller's)")
            continue
        if r := _IMM_RSP.match(f"{base_mnemonic} {','.join(ops)}"):
            delta = _int(r.group("imm"))
            func.frame += delta if r.group(1) == "sub" else -delta
            if r.group(1) == "sub":
                func.opened = max(func.opened, func.frame)
                func.frame_opened = True
            if func.frame < 0:
                report("foreign-store", where, f"`{m.group('text').split('#')[0].strip()}`: moves the stack "
                                               "pointer above its own frame (pushes would write the caller's)")
            continue
        if base_mnemonic.startswith("push"):
            if not func.frame_opened and not func.called:
                func.saved += 8  # a callee-saved register, before the frame is opened
            func.frame += 8
            continue
        if base_mnemonic.startswith("pop"):
            func.frame -= 8
            if func.frame < 0:
                report("foreign-store", where, "pops above its own frame: the stack pointer leaves it")
            continue
    judge_end("the end of the object")
    judge_global(None)
    for key, callee in own_callee_at.items():
        trace.own_stack_arguments[key] = stack_arguments.get(callee, 0)
    for call_key, where, target, k, size, role, rule, slot, load, frame, protected in parked:
        # The slot's every write in its function stores one pointer into the frame (and no call writes
        # it): what it holds wherever the load reads it written (frame_writes checks that it is).
        group = trace.steps[call_key].group if call_key in trace.steps else ""
        facts = {fact if (lo, hi) == (slot, slot + 8) else None for g, lo, hi, fact in stack_writes
                 if g == group and lo < slot + 8 and hi > slot}
        facts |= {None for k2, spans in trace.call_writes.items() if trace.steps[k2].group == group
                  for lo, n in spans if lo < slot + 8 and lo + n > slot}
        pointer = next(iter(facts)) if len(facts) == 1 else None
        if pointer is None:
            report(rule, where, f"passes {target} {role} (argument {k + 1}) that is not its own stack frame or global")
        elif pointer[1] < -frame:
            report(rule, where, f"passes {target} {role} (argument {k + 1}) at {pointer[1] + frame}(%rsp), below "
                                "the stack pointer: the callee's return address and frame")
        elif pointer[1] + size > -protected:
            report(rule, where, f"passes {target} {role} (argument {k + 1}) whose {size} bytes at "
                                f"{pointer[1] + frame}(%rsp) reach past its locals ({frame - protected} bytes) into "
                                "saved registers or the return address")
        else:
            if rule != "foreign-store" or target not in MAY_RETURN_UNWRITTEN:
                _record_effects(trace, call_key, target, k, pointer[1], size, rule)
            trace.required_reads.setdefault(load_keys[load], []).append((slot, 8))
    for name, signature in zip(names, demangle(names)):
        if name in exported:
            counts = argument_counts(declared[name], trusted=False) if signature == name and name in declared \
                else argument_counts(signature, trusted=True) if signature != name else None
            trace.harness_arguments[label_of.get(name, name)] = None if counts is None else (
                min(counts[0], 6), min(counts[1], 8))
    trace.own_callees = {_COLD_PART.sub("", callee) for _, _, callee, _ in own_calls}
    if annotated is not None:
        referenced.add(label_of.get(annotated, annotated))
    # A function reads its stack-passed arguments above its return address; every call of it in
    # this object must have put that many bytes of the caller's own there (red team round 36: a
    # function declared with 14 arguments, called through a cast with 1, read the launcher's saved
    # registers and return address), and a tail jump may pass on only the arguments it received.
    for caller, local_bytes, callee, tail in own_calls:
        needed = stack_arguments.get(callee, 0)
        if not needed:
            continue
        if tail:
            own = stack_arguments.get(caller, 0)
            if needed > own:
                report("foreign-load", caller, f"jumps to {callee}, which reads {needed} bytes of stack-passed "
                                               f"arguments, with {own} of its own to pass on: the rest is its caller's frame")
        elif needed > local_bytes:
            report("foreign-load", caller, f"calls {callee}, which reads {needed} bytes of stack-passed arguments, "
                                           f"with {max(local_bytes, 0)} bytes of its own frame below: the rest is "
                                           "saved registers, its return address and its caller's frame")
    referenced |= _data_references(obj, label_of, function_at, referenced_sections) | entered_elsewhere
    for parent, colds in entered_by_cold.items():
        if any(cold in referenced or any(callee == cold and caller != parent for caller, _, callee, _ in own_calls)
               for cold in colds):
            referenced.add(parent)
    for name, detail in argument_writes.items():
        if not _may_write_arguments(name, stack_arguments, writable_arguments, own_calls, referenced,
                                    {n: f.section for n, f in functions.items()}, referenced_sections, set()):
            report("foreign-store", name, detail)
    return violations


def _may_write_arguments(name: str, windows: dict[str, int], exported: dict[str, int],
                         calls: list[tuple[str, int, str, bool]], referenced: set[str], section_of: dict[str, str],
                         referenced_sections: set[str], visiting: set[str]) -> bool:
    """Whether a function the harness does not call may write its stack-passed arguments: the slots
    are then its caller's, so every way in must be known and give them. No reference to it but
    direct calls and jumps at its start in this object (an address taken could be called by anything,
    with anything above its return address; a jump into its middle or a conditional jump to it is no
    call site the checks see), and at each: a call with that many bytes of
    the caller's own frame below it (its locals), or a tail jump from a launcher the harness calls,
    or from a function that may write its own, with a window as large."""
    window = windows.get(name, 0)
    if name in visiting or name in referenced or section_of.get(name) in referenced_sections or window <= 0:
        return False
    sites = [(caller, local_bytes, tail) for caller, local_bytes, callee, tail in calls if callee == name]
    # No site and no reference: nothing runs it (an explicit template instantiation nobody calls; the
    # harness calls only the launchers; falling into it from the function before is a violation of its own).
    for caller, local_bytes, tail in sites:
        if not tail:
            if local_bytes < window:
                return False
        elif caller in exported:
            if exported[caller] < window:
                return False
        elif windows.get(caller, 0) < window or not _may_write_arguments(
                caller, windows, exported, calls, referenced, section_of, referenced_sections, visiting | {name}):
            return False
    return True


# A section of code (not .init_array, which _EXEC_SECTIONS's prefix also matches: pointers the loader calls).
_CODE_SECTION = re.compile(r"^\.(?:text(?:\..*)?|init|fini)$")
# objdump's note of where a %rip-relative operand points: `# 4005d0 <name+0x10>`.
_CODE_ANNOTATION = re.compile(r"#\s*[0-9a-f]+ <(?P<name>[^>+]+)(?:\+0x[0-9a-f]+)?>")


def _data_references(obj: Path, label_of: dict[str, str], function_at: dict[tuple[str, int], str],
                     referenced_sections: set[str]) -> set[str]:
    """Functions named by a relocation of a section that is not code (a pointer in data, an
    .init_array entry); an executable section named at an offset that starts no function goes into
    REFERENCED_SECTIONS (every function in it is then taken as referenced)."""
    readelf = shutil.which("readelf")
    if readelf is None:
        raise FileNotFoundError("readelf (binutils) is needed to scan the candidate's host code")
    out = subprocess.run([readelf, "-rW", str(obj)], capture_output=True, text=True, timeout=60).stdout
    found: set[str] = set()
    described: dict[str, int] = {}
    applies_to = ""
    for line in out.splitlines():
        if m := re.match(r"^Relocation section '\.rela?(?P<section>\S*)'", line):
            applies_to = m.group("section")
            continue
        if _CODE_SECTION.match(applies_to) or applies_to.startswith(".debug"):
            continue  # code: its relocations are in the disassembly, judged there; debug records run nothing
        m = re.match(r"^[0-9a-f]+\s+[0-9a-f]+\s+\S+\s+[0-9a-f]+\s+(?P<symbol>\S+)\s*(?P<sign>[+-])\s*(?P<addend>[0-9a-f]+)",
                     line)
        if not m:
            continue
        symbol, addend = m.group("symbol"), int(m.group("addend"), 16) * (1 if m.group("sign") == "+" else -1)
        if _CODE_SECTION.match(symbol):
            named = function_at.get((symbol, addend))
            if named is None:
                referenced_sections.add(symbol)
                continue
        else:
            named = label_of.get(symbol.split("@")[0], symbol.split("@")[0])
        if applies_to == ".eh_frame":
            # Each function's own unwind record names its start once; a second mention (a
            # personality routine the unwinder would call) is a way in.
            described[named] = described.get(named, 0) + 1
            if described[named] == 1:
                continue
        found.add(named)
    return found


_COLD_PART = re.compile(r"\.cold(?:\.\d+)?$")
# Imports that never return: the code after a call to one is reached only by the unwinder.
_NO_RETURN_IMPORTS = re.compile(r"^(?:abort|exit|_exit|_Exit|quick_exit|__cxa_throw|__cxa_rethrow|_Unwind_Resume"
                                r"|__stack_chk_fail|__cxa_call_unexpected|__cxa_bad_cast|__cxa_bad_typeid"
                                r"|__cxa_pure_virtual|__assert_fail|_ZSt9terminatev|_ZSt\d+__throw_\w+)$")


def _returning_functions(listing: str) -> set[str]:
    """The object's functions that can return to their caller: a `ret`, or a jump out of them (a
    tail call). A local function with neither is [[noreturn]]: the code after a call to it is
    reached only by the unwinder (red team round 14 hid a landing pad there, at the depth of the
    call's unpopped stack arguments)."""
    returning: set[str] = set()
    name = ""
    lines = listing.splitlines()
    for k, line in enumerate(lines):
        if m := _FUNC.match(line):
            name = m.group("name")
        elif (m := _INSN.match(line)) and name and not _RELOC.match(line):
            mnemonic, ops = _operands(m.group("text"))
            base = mnemonic.split()[-1]
            relocated = k + 1 < len(lines) and _RELOC.match(lines[k + 1]) is not None  # its placeholder names itself
            if base.startswith("ret") or (base in ("jmp", "jmpq") and ops and (
                    relocated or ops[0].startswith("*") or _DIRECT_TARGET.match(ops[0]) is None
                    or f"<{name}" not in ops[0])):
                returning.add(name)
    return returning


def _function_addresses(listing: str) -> dict[tuple[str, int], str]:
    """Where each function of the listing starts: (section, address) -> name."""
    found: dict[tuple[str, int], str] = {}
    section = ""
    for line in listing.splitlines():
        if m := _SECTION.match(line):
            section = m.group("name")
        elif m := _FUNC.match(line):
            found[(section, int(line.split()[0], 16))] = m.group("name")
    return found


def _cold_sections_last(listing: str) -> list[str]:
    """The listing's lines with the cold-code sections (`.text.unlikely*`) after the others, so a
    function's cold part is judged after the function whose frame it runs in."""
    chunks: list[list[str]] = [[]]
    for line in listing.splitlines():
        if _SECTION.match(line):
            chunks.append([])
        chunks[-1].append(line)
    head, sections = chunks[0], chunks[1:]
    cold = [c for c in sections if _SECTION.match(c[0]).group("name").startswith(".text.unlikely")]
    return head + [line for c in sections if c not in cold for line in c] + [line for c in cold for line in c]


def _models_stack(insn: Instruction, ops: list[str]) -> bool:
    """Whether the frame model follows this write to %rsp: push and pop of a register or a
    constant, call, ret, `sub/add $imm,%rsp` and `lea disp(%rsp),%rsp` (the scan's own cases)."""
    if insn.mnemonic in ("push", "pop") and insn.stack_pointer_increment in (8, -8):
        return True
    if insn.mnemonic in ("call", "ret"):
        return True
    if insn.mnemonic in ("sub", "add") and ops and ops[-1] == "%rsp" and ops[0].startswith("$"):
        return True
    return insn.mnemonic == "lea" and ops and ops[-1] == "%rsp" and "(%rsp" in ops[0] and "," not in ops[0]


def _write_size(insn: Instruction) -> int:
    return next((w.size or 64 for w in insn.writes if w.base == "rip"), 64)


# External data an honest launcher reads: the FILE pointers the preamble's error macros print to.
_READABLE_EXTERNAL_DATA = {"stderr", "stdout", "stdin"}
_STACK_CANARY = 0x28  # %fs:0x28, which -fstack-protector code reads


def _judge_reads(insn: Instruction, func: _Function, where: str, report, stack_argument_bytes: int) -> bool:
    """Judge every memory read the decoder lists, like writes (see the module's docstring).
    Returns True for a %rip-relative read, judged by its relocation."""
    rip = False
    for r in insn.reads:
        if not r.size and r.base not in ("rdi", "rsi") and insn.mnemonic not in ("pop", "ret"):
            report("host-instruction", where, f"`{insn.text}`: reads memory of a size the scan cannot know "
                                              "(it depends on registers at run time)")
            continue
        size = r.size or 64
        if insn.mnemonic in ("pop", "ret") and r.base == "rsp" and not r.index:
            continue  # the frame model's own slot
        if r.segment in ("fs", "gs"):
            if not (r.segment == "fs" and not r.base and not r.index and r.displacement == _STACK_CANARY):
                report("foreign-load", where, f"`{insn.text}`: reads through segment %{r.segment} (thread-local "
                                              "storage)")
        elif r.base == "rip" and not r.index:
            rip = True
        elif r.base == "rsp" and not r.index:
            top = func.frame + 8 + stack_argument_bytes  # its return address, then its stack-passed arguments
            saved_from = func.frame - func.protected  # the registers it saved for its caller, then its return address
            if not (-128 <= r.displacement and r.displacement + size <= top):
                report("foreign-load", where, f"`{insn.text}`: reads {size} bytes at {r.displacement}(%rsp), outside "
                                              f"its own frame and its {stack_argument_bytes // 8} stack-passed "
                                              "argument(s): its caller's frame")
            elif r.displacement < func.frame + 8 and r.displacement + size > saved_from and not _restores(insn):
                # The caller's values: where it was called from (the low bits of a return address are the
                # same in every run of one harness build, and differ in a caller's program) and the
                # registers the caller keeps its own state in. Only the epilogue's restores read them.
                report("foreign-load", where, f"`{insn.text}`: reads {size} bytes at {r.displacement}(%rsp), its return "
                                              "address or a register it saved for its caller: values of the code that "
                                              "called it, which tell the verifier's harness from a caller's program")
        else:
            how = "a fixed address" if not r.base and not r.index else "a computed pointer"
            report("foreign-load", where, f"`{insn.text}`: reads through {how}; the editable part's host code may "
                                          "read only its own stack frame, arguments and globals")
    return rip


_CALLEE_SAVED_NAMES = ("%rbx", "%rbp", "%r12", "%r13", "%r14", "%r15")


def _restores(insn: Instruction) -> bool:
    """A `mov` of 8 bytes from the stack back into a callee-saved register (an epilogue that saved it with
    `mov` rather than `push`)."""
    return insn.mnemonic == "mov" and insn.text.rstrip().endswith(_CALLEE_SAVED_NAMES) and \
        all(r.size == 8 for r in insn.reads)


_INTEGER_TYPES = re.compile(r"^(?:(?:un)?signed )?(?:bool|char|short|int|long|long long|wchar_t|char(?:8|16|32)_t"
                            r"|unsigned|(?:u?int\d+_t)|size_t|ptrdiff_t|__half|__nv_bfloat16|half)$")


# A pointer or reference written as plain words and stars (`float const*`, `Foo<...>*&`): a
# `decltype(...)` or a function pointer is not read as one (round 13 dressed an empty class
# that way), and a type the scan cannot read gives no window at all.
_SIMPLE_POINTER = re.compile(r"^[\w: ]*\w[ ]*(?:\*[ ]*)+&?$|^[\w: ]*\w[ ]*&{1,2}$")


_FUNDAMENTAL = re.compile(r"^(?:(?:un)?signed )?(?:bool|char|short|int|long|long long|wchar_t|char(?:8|16|32)_t"
                          r"|unsigned|unsigned (?:char|short|int|long|long long))$")


def _function_labels(obj: Path, labels: set[str]) -> dict[str, str]:
    """Every function symbol of the object that objdump does not use as a label -> the label of
    its address (the name the listing judges that code under): aliases."""
    from elftools.elf.elffile import ELFFile
    from elftools.elf.sections import SymbolTableSection

    with open(obj, "rb") as fh:
        elf = ELFFile(fh)
        symbols = [(sym.name, sym["st_shndx"], sym["st_value"])
                   for sec in elf.iter_sections() if isinstance(sec, SymbolTableSection)
                   for sym in sec.iter_symbols()
                   if sym["st_info"]["type"] in ("STT_FUNC", "STT_GNU_IFUNC") and isinstance(sym["st_shndx"], int)]
    by_place: dict[tuple[int, int], list[str]] = {}
    for name, shndx, value in symbols:
        by_place.setdefault((shndx, value), []).append(name)
    out: dict[str, str] = {}
    for group in by_place.values():
        label = next((n for n in group if n in labels), None)
        for name in group:
            if name not in labels:
                out[name] = label if label is not None else name
    return out


def _stack_argument_bytes(signature: str, *, trusted: bool = False) -> int:
    """Bytes of arguments the SysV ABI passes a function with this demangled signature on the
    stack (six integer and eight vector registers first); 0 when it cannot be told.

    A signature is text the candidate chooses (red team round 35: an empty class named
    `constlong` read as `long`, a class of its own named `half` read as CUDA's, each claiming a
    stack slot it does not take, so the window reached the caller's frame). Only a `trusted`
    signature (a launcher the baseline exports: its types are the frozen preamble's) may count
    class types by name; any other counts fundamental types and pointers only, and a compiler's
    clone (`[clone .constprop.0]`, which may have dropped arguments) counts nothing."""
    counts = argument_counts(signature, trusted=trusted)
    if counts is None:
        return 0
    integer, vector = counts
    return 8 * (max(0, integer - 6) + max(0, vector - 8))


def argument_counts(signature: str, *, trusted: bool = False) -> tuple[int, int] | None:
    """(integer-class, vector-class) eightbytes of arguments in a demangled signature (the SysV ABI's
    classes; see _stack_argument_bytes for what a signature may be trusted with); None when it cannot
    be told."""
    if " [clone" in signature:
        return None
    head = signature
    close = head.rfind(")")
    depth, open_at = 0, -1
    for i in range(close, -1, -1):
        depth += {")": 1, "(": -1}.get(head[i], 0)
        if depth == 0:
            open_at = i
            break
    if close < 0 or open_at < 0:
        return None
    parts, depth, cur = [], 0, ""
    for ch in head[open_at + 1:close]:
        depth += {"(": 1, "<": 1, "[": 1, ")": -1, ">": -1, "]": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip() and cur.strip() != "void":
        parts.append(cur.strip())
    integer = vector = 0
    for part in parts:
        kind = " ".join(re.sub(r"\b(?:const|volatile)\b", " ", part).split())
        outer, depth = "", 0  # the type outside any template argument list: Tag<int*> is no pointer
        for ch in kind:
            depth += ch == "<"
            if depth == 0:
                outer += ch
            depth -= ch == ">"
        if _SIMPLE_POINTER.match(outer) or _FUNDAMENTAL.match(kind):
            integer += 1
        elif kind in ("float", "double"):
            vector += 1
        elif not trusted:
            return None  # a class by value, named by the candidate: its size is not known here
        elif _INTEGER_TYPES.match(kind):  # CUDA's 2-byte float classes, passed as one integer
            integer += 1
        elif kind in ("dim3", "uint3", "int3", "int4", "uint4", "long2", "ulonglong2", "longlong2"):
            integer += 2
        elif kind in ("float2", "float4", "double2"):
            vector += 1 if kind == "float2" else 2
        else:
            return None  # a class passed by value (an empty one takes no slot at all): not known here
    return integer, vector


def _judge_writes(insn: Instruction, func: _Function, where: str, report, stack_argument_bytes: int = 0,
                  argument_write=None) -> bool:
    """Judge every memory write the decoder lists (explicit or implicit: `maskmovdqu` writes at
    %rdi, `stos` at %rdi, `pop mem` at its operand). The stack slot a push or call writes is the
    frame model's. A function's own stack-passed arguments (above its return address) are its to
    write: the SysV ABI gives them to the callee, and compilers reuse them to pass a tail call's
    arguments. Where `argument_write` is given (a function the harness does not call), such a write
    is handed to it to be judged once every call site is known, instead of allowed. Returns True
    for a %rip-relative write, judged by its relocation."""
    rip = False
    for w in insn.writes:
        if insn.mnemonic in ("push", "call") and w.base == "rsp" and not w.index and w.displacement == -8:
            continue
        if not w.size and w.base not in ("rdi", "rsi"):
            # An extent set by registers at run time (xsave writes 512 to thousands of bytes by the
            # mask in edx:eax; round 28 wrote past the frame this way): no bound can be checked.
            # String instructions (size 0 at %rdi/%rsi) are judged as computed pointers below.
            report("host-instruction", where, f"`{insn.text}`: writes memory of a size the scan cannot know "
                                              "(it depends on registers at run time)")
            continue
        size = w.size or 64
        if w.segment in ("fs", "gs"):
            report("foreign-store", where, f"`{insn.text}`: stores through segment %{w.segment} (thread-local storage)")
        elif w.base == "rip" and not w.index:
            rip = True
        elif w.base == "rsp" and insn.mnemonic == "pop":
            report("foreign-store", where, f"`{insn.text}`: pops into memory addressed by the stack pointer it moves")
        elif w.base == "rsp" and not w.index and func.unwound:
            report("stack-depth", where, f"`{insn.text}`: writes the stack in code reached only by the unwinder, "
                                         "where the scan cannot tell how deep the frame is")
        elif w.base == "rsp" and not w.index:
            top = func.frame - func.protected  # the locals end here, relative to %rsp now
            arguments = func.frame + 8  # its stack-passed arguments start above the return address
            own_argument = stack_argument_bytes > 0 and arguments <= w.displacement and \
                w.displacement + size <= arguments + stack_argument_bytes
            detail = (f"`{insn.text}`: writes {size} bytes at {w.displacement}(%rsp), outside its own locals "
                      f"({max(top, 0)} bytes below the saved registers): into saved registers, its return address "
                      "or its caller's frame")
            if own_argument and argument_write is not None:
                argument_write(detail)
            elif not own_argument and not (-128 <= w.displacement and w.displacement + size <= top):
                report("foreign-store", where, detail)
        else:
            report("foreign-store", where, f"`{insn.text}`: stores through a computed pointer; the editable part's "
                                           "host code may write only its own stack frame and its own globals")
    return rip
