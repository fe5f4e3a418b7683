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
destination is data. CUDA copies (`cudaMemcpy*`) stay allowed for device-to-device work: any
copy that touches host memory is counted by the timing audit against the baseline's.

Control must also come back the way it went: a `ret` with bytes still pushed in its own frame
(`push %reg; ret` is a call through a pointer without a `call *`) and any write to %rsp other
than adding or subtracting a constant, push and pop (a stack pivot) are refused.

Loads are not restricted (the launcher may read what it likes; the secrets that matter arrive
through the pipe only after the call that could use them). The cost: host code in the editable
part cannot use host containers or write through host pointers (a launcher only sizes grids and
launches), and the scan is conservative (a switch compiled to a jump table is refused).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from .policy import Violation

_FUNC = re.compile(r"^[0-9a-f]+ <(?P<name>[^>]+)>:$")
_SECTION = re.compile(r"^Disassembly of section (?P<name>\S+):$")
_INSN = re.compile(r"^\s*(?P<addr>[0-9a-f]+):\s+(?P<text>.+)$")
_RELOC = re.compile(r"^\s*[0-9a-f]+:\s+(?P<type>R_X86_64_\w+)\s+(?P<target>\S+)$")
# A memory operand in AT&T syntax: [%seg:]disp(base,index,scale) or disp(%rip).
_MEM = re.compile(r"(?:(?P<seg>%[cdefgs]s):)?(?P<disp>-?(?:0x[0-9a-f]+|\d+))?\((?P<base>%\w+)?(?:,(?P<index>%\w+))?(?:,\d)?\)")
_IMM_RSP = re.compile(r"^(sub|add)q?\s+\$(?P<imm>-?(?:0x[0-9a-f]+|\d+)),%rsp$")

# Instructions whose last memory operand is only read (AT&T: destination last).
_READ_ONLY = re.compile(r"^(cmp|test|push|bt\b|ucomis|comis|vucomis|vcomis|prefetch|nop|lea|call|jmp|j[a-z]+\b|"
                        r"pcmp|vpcmp|ptest|vptest|cvt|vcvt)")
_STRING_STORE = re.compile(r"^(rep[a-z]*\s+)?(stos|movs[bwlq]?\b|scas|cmps)")
_FORBIDDEN = {"wrpkru": "writes the protection-key register", "xrstor": "restores extended state",
              "xrstors": "restores extended state", "syscall": "raw system call", "sysenter": "raw system call",
              "int": "software interrupt", "int3": "software interrupt"}
_EXEC_SECTIONS = re.compile(r"^\.(text|init|fini)")
_ARG_REGS = ("%rdi", "%rsi", "%rdx", "%rcx", "%r8", "%r9")
_REG_ALIASES = {"%rdi": ("%rdi", "%edi", "%di", "%dil"), "%rsi": ("%rsi", "%esi", "%si", "%sil"),
                "%rdx": ("%rdx", "%edx", "%dx", "%dl"), "%rcx": ("%rcx", "%ecx", "%cx", "%cl"),
                "%r8": ("%r8", "%r8d", "%r8w", "%r8b"), "%r9": ("%r9", "%r9d", "%r9w", "%r9b")}
# Imports that write host memory through pointer arguments (index = argument position).
# Their pointers must provably be the caller's own frame or globals.
OUT_POINTER_ARGS: dict[str, tuple[int, ...]] = {
    "cudaDeviceGetAttribute": (0,), "cudaGetDeviceProperties": (0,), "cudaGetDeviceProperties_v2": (0,),
    "cudaGetDevice": (0,), "cudaGetDeviceCount": (0,), "cudaDriverGetVersion": (0,), "cudaRuntimeGetVersion": (0,),
    "cudaMalloc": (0,), "cudaMallocAsync": (0,), "cudaMallocPitch": (0, 1), "cudaMemGetInfo": (0, 1),
    "cudaFuncGetAttributes": (0,), "cudaOccupancyMaxActiveBlocksPerMultiprocessor": (0,),
    "cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags": (0,), "cudaOccupancyMaxPotentialBlockSize": (0, 1),
    "cudaOccupancyAvailableDynamicSMemPerBlock": (0,), "cudaOccupancyMaxActiveClusters": (0,),
    "cudaStreamCreate": (0,), "cudaStreamCreateWithFlags": (0,), "cudaStreamCreateWithPriority": (0,),
    "cudaEventCreate": (0,), "cudaEventCreateWithFlags": (0,), "cudaStreamEndCapture": (1,),
    "cudaGraphInstantiate": (0,), "cudaGraphInstantiateWithFlags": (0,), "cudaStreamIsCapturing": (1,),
    "cudaPointerGetAttributes": (0,), "cudaDeviceGetLimit": (0,), "cudaFuncGetName": (0,),
    "cudaDeviceGetStreamPriorityRange": (0, 1), "cudaStreamGetPriority": (1,), "cudaStreamGetFlags": (1,),
    "cudaGetSymbolAddress": (0,), "cudaGetSymbolSize": (0,), "cudaStreamGetCaptureInfo": (1, 2, 3, 4, 5),
    "__cudaPopCallConfiguration": (0, 1, 2, 3), "cudaGetFuncBySymbol": (0,), "cudaThreadExchangeStreamCaptureMode": (0,),
}
OUT_POINTER_ARGS.update({  # struct results returned through a hidden pointer (%rdi), and handles
    "cudaCreateChannelDesc": (0,), "cudaMalloc3D": (0,), "cudaMallocArray": (0,), "cudaMalloc3DArray": (0,),
    "cudaCreateTextureObject": (0,), "cudaCreateSurfaceObject": (0,), "cudaGraphCreate": (0,),
    "cudaGraphAddKernelNode": (0,), "cudaGraphAddEmptyNode": (0,), "cudaGraphAddMemsetNode": (0,),
    "cudaGraphAddMemcpyNode": (0,), "cudaGraphAddChildGraphNode": (0,), "cudaGraphInstantiateWithParams": (0, 2),
    "cudaGraphExecUpdate": (2,), "cudaOccupancyMaxPotentialClusterSize": (0,), "cudaGetChannelDesc": (0,),
    "cudaFuncGetParamInfo": (2, 3), "cudaStreamGetId": (1,), "cudaStreamGetDevice": (1,), "cudaEventQuery": (),
})
OUT_POINTER_ARGS.update({  # libm/libc functions with output pointers an honest launcher might reach
    "frexp": (1,), "frexpf": (1,), "modf": (1,), "modff": (1,), "remquo": (2,), "remquof": (2,),
    "sincos": (1, 2), "sincosf": (1, 2), "lgamma_r": (1,), "lgammaf_r": (1,), "posix_memalign": (0,),
})
# Writers whose destination is data, whatever the compiler can prove: refused in host code.
_MEMORY_WRITERS = re.compile(r"^(__)?(memcpy|memmove|memset|mempcpy|bcopy|bzero|explicit_bzero|str\w*cpy|str\w*cat|"
                             r"wmem\w+|(memcpy|memmove|memset|mempcpy|str\w*cpy|str\w*cat|wmem\w+)_chk)$")


@dataclass
class _Function:
    name: str
    section: str
    frame: int = 0  # bytes the function has moved %rsp down since entry (sub, push), in layout order
    max_frame: int = 0  # its largest frame: code laid out after an epilogue still runs inside the frame
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


def defined_symbols(obj: Path) -> set[str]:
    """Every symbol the object defines, local ones included (relocations name them)."""
    nm = shutil.which("nm")
    if nm is None:
        raise FileNotFoundError("nm (binutils) is needed to scan the candidate's host code")
    out = subprocess.run([nm, "--defined-only", str(obj)], capture_output=True, text=True, timeout=60)
    return {parts[-1] for parts in (ln.split() for ln in out.stdout.splitlines()) if len(parts) >= 3}


def scan_host_code(obj: Path, own_symbols: set[str] | None = None) -> list[Violation]:
    """Violations in the host code of a compiled editable part (see the module's docstring).
    `own_symbols`: what the object defines (read with nm when not given)."""
    own = defined_symbols(obj) if own_symbols is None else own_symbols
    violations: list[Violation] = []
    seen: set[tuple[str, str]] = set()
    section = ""
    func: _Function | None = None
    pending_store: tuple[str, str] | None = None  # (function, instruction) awaiting its relocation
    pending_call: str | None = None  # a direct call whose target comes on the relocation line
    # Argument registers set, in this straight-line stretch, to the function's own memory.
    own_pointers: set[str] = set()
    pending_lea: str | None = None  # an `lea sym(%rip)` into this register awaits its relocation

    def report(rule: str, where: str, detail: str) -> None:
        if (rule, where) not in seen and len(violations) < 20:
            seen.add((rule, where))
            violations.append(Violation(rule=rule, where="object", detail=f"{where}: {detail}"))

    for line in _disassemble(obj).splitlines():
        if m := _SECTION.match(line):
            section = m.group("name")
            func = None
            continue
        if not _EXEC_SECTIONS.match(section):
            continue
        if m := _FUNC.match(line):
            func = _Function(name=m.group("name"), section=section)
            pending_store = pending_call = pending_lea = None
            own_pointers = set()
            continue
        if func is None:
            continue
        if m := _RELOC.match(line):
            target = re.split(r"[-+]", m.group("target"), maxsplit=1)[0].split("@")[0]
            if pending_call is not None:
                if _MEMORY_WRITERS.match(target):
                    report("host-memory-write", pending_call, f"calls {target}: writes host memory at an address "
                                                              "the editable part computes")
                for k in OUT_POINTER_ARGS.get(target, ()):
                    if _ARG_REGS[k] not in own_pointers:
                        report("foreign-store", pending_call, f"passes {target} an output pointer (argument {k + 1}) "
                                                              "that is not its own stack frame or global")
                pending_call = None
                own_pointers = set()  # the call clobbers the argument registers
            if pending_lea is not None:
                if target.startswith(".") or target in own:
                    own_pointers.add(pending_lea)
                pending_lea = None
            if pending_store is not None:
                target = re.split(r"[-+]", m.group("target"), maxsplit=1)[0]
                if not (target.startswith(".") or target in own):
                    report("foreign-store", pending_store[0],
                           f"stores into {target}, which the editable part does not define ({pending_store[1]})")
                pending_store = None
            continue
        m = _INSN.match(line)
        if not m:
            continue
        pending_store = pending_lea = None
        if pending_call is not None:  # a call with no relocation: a local function; arguments are gone
            pending_call, own_pointers = None, set()
        mnemonic, ops = _operands(m.group("text"))
        base_mnemonic = mnemonic.split()[-1]
        where = func.name
        if base_mnemonic in ("call", "callq", "jmp", "jmpq") and ops and not ops[0].startswith("*"):
            pending_call = where  # judged by its relocation (imports and external symbols have one)
        elif base_mnemonic.startswith("j") or base_mnemonic.startswith("ret"):
            own_pointers = set()  # a new straight-line stretch begins at every branch
        # Track argument registers pointing at the function's own memory; any other write to
        # them (or to a sub-register) forgets it.
        written = ops[-1] if ops else ""
        arg = next((r for r, names in _REG_ALIASES.items() if written in names), None)
        if arg is not None and base_mnemonic not in ("call", "callq", "jmp", "jmpq", "push", "pushq", "cmp", "test"):
            own_pointers.discard(arg)
            if base_mnemonic in ("mov", "movq") and ops[0] == "%rsp" and written == arg:
                own_pointers.add(arg)  # the frame's base
            if base_mnemonic in ("lea", "leaq") and written == arg and len(ops) == 2:
                src = _MEM.search(ops[0])
                if src is not None and src.group("index") is None:
                    if src.group("base") == "%rsp" and -128 <= _int(src.group("disp")) < func.max_frame:
                        own_pointers.add(arg)
                    elif src.group("base") == "%rip":
                        pending_lea = arg
        if base_mnemonic in _FORBIDDEN:
            report("host-instruction", where, f"{base_mnemonic}: {_FORBIDDEN[base_mnemonic]}")
            continue
        if base_mnemonic in ("call", "callq", "jmp", "jmpq") and ops and ops[0].startswith("*"):
            report("indirect-call", where, f"`{m.group('text').split('#')[0].strip()}`: calls through a pointer; "
                                           "the editable part may only call functions it names")
            continue
        if base_mnemonic.startswith("ret"):
            if func.frame > 0:
                report("indirect-call", where, f"returns with {func.frame} bytes of its own still on the stack: "
                                               "a jump to a pushed address")
            continue
        if ops and ops[-1] == "%rsp" and not _IMM_RSP.match(f"{base_mnemonic} {','.join(ops)}") \
                and not base_mnemonic.startswith(("push", "pop", "cmp", "test")) \
                and not (base_mnemonic.startswith("lea") and _MEM.search(ops[0]) and
                         (_MEM.search(ops[0]).group("base") == "%rsp")):
            report("indirect-call", where, f"`{m.group('text').split('#')[0].strip()}`: moves the stack pointer "
                                           "somewhere else (a stack pivot)")
            continue
        if r := _IMM_RSP.match(f"{base_mnemonic} {','.join(ops)}"):
            delta = _int(r.group("imm"))
            func.frame += delta if r.group(1) == "sub" else -delta
            func.max_frame = max(func.max_frame, func.frame)
            continue
        if base_mnemonic.startswith("push"):
            func.frame += 8
            func.max_frame = max(func.max_frame, func.frame)
            continue
        if base_mnemonic.startswith("pop"):
            func.frame -= 8
            continue
        if _STRING_STORE.match(mnemonic.replace("rep ", "rep")) or _STRING_STORE.match(base_mnemonic):
            report("foreign-store", where, f"`{base_mnemonic}`: a string instruction writes through a pointer")
            continue
        if not ops or _READ_ONLY.match(base_mnemonic):
            continue
        mems = [(i, _MEM.search(op)) for i, op in enumerate(ops)]
        dest = mems[-1][1] if mems and mems[-1][1] is not None and not ops[-1].startswith("$") else None
        if base_mnemonic.startswith("xchg") or base_mnemonic.startswith("cmpxchg") or base_mnemonic.startswith("xadd"):
            dest = next((mm for _, mm in mems if mm is not None), dest)
        if dest is None:
            continue
        seg, base, index, disp = dest.group("seg"), dest.group("base"), dest.group("index"), _int(dest.group("disp"))
        text = m.group("text").split("#")[0].strip()
        if seg:
            report("foreign-store", where, f"`{text}`: stores through segment {seg} (thread-local storage)")
        elif base == "%rip":
            pending_store = (where, text)  # judged by the relocation line that follows
        elif base == "%rsp" and index is None:
            if not -128 <= disp < func.max_frame:
                report("foreign-store", where, f"`{text}`: stores outside its own stack frame "
                                               f"({func.max_frame} bytes): into its caller's frame or return address")
        else:
            report("foreign-store", where, f"`{text}`: stores through a computed pointer; the editable part's host "
                                           "code may write only its own stack frame and its own globals")
    return violations
