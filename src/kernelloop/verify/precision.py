"""The precision-downgrade scan: does the candidate compute in a narrower float type than
the baseline?

Inputs in [0, 1) are kind to reduced precision: a bf16 tensor-core matmul stays inside rtol
1e-3 on them, so the output comparison alone would accept a kernel that answers a different
(cheaper) question. This scan reads the device code the candidate's editable object really
contains and sorts its instructions into classes:

- `half`: fp16/bf16 arithmetic (HADD2, HFMA2, HMUL2, HMNMX2, HSETP2, their .BF16_V2 forms,
  HADD2.F32 which widens a half value; PTX: any non-move instruction typed .f16/.bf16);
- `narrowing`: conversions to a narrower float type (F2FP.*, F2F.F16.F32, F2F.BF16.F32,
  fp8/tf32 conversions; PTX: cvt to f16/bf16/tf32/e4m3/...);
- `tensor`: reduced-precision matrix or dot-product units (HMMA incl. .TF32/.BF16, HGMMA,
  IMMA, IGMMA, QGMMA, BMMA, OMMA, their tcgen05 forms, IDP; PTX: mma/wmma/wgmma/tcgen05.mma
  on narrow types, dp4a/dp2a);
- `fp64`: fp64 arithmetic (DADD, DFMA, DMUL, DMMA).

A `half`, `narrowing` or `tensor` class the candidate uses and the baseline does not, a class
both use where the candidate's narrowest format has fewer significand or exponent bits than the
baseline's (fp16 11/5, tf32 11/8, bf16 8/8, int8 7/0, e4m3 4/4, ...; red team rounds 262-263: int8
or fp8 tensor cores for bf16 ones, fp16 for tf32 ones, passed, the classes being the same), a
tensor accumulator narrower than the baseline's, or fp64 arithmetic the baseline does and the
candidate does not, is a `reduced_precision` violation (unless `allow_reduced_precision`). The
comparison is relative to the baseline's own editable object, so a half-precision baseline may
have half-precision rewrites in its formats. A float converted to an 8-bit integer is `narrowing`
too (int8 quantisation); a half value widened to fp32 is exact and in no class. A PTX statement
that starts like an instruction the reader cannot parse is `unread`, refused (fail closed).

Not covered (documented in docs/verifier.md): precision cut by integer bit masking
(`__float_as_uint(x) & 0xffff0000`) uses no float instruction at all; the output tolerance is
the only check on it.

The device code is read from SASS (`cuobjdump -sass` on the editable object: what will run)
when cuobjdump and nvdisasm are available (the CUDA toolkit's, on PATH, or the
nvidia-cuda-cuobjdump / nvidia-cuda-nvdisasm wheels kernelloop depends on), else from PTX
(`nvcc -ptx` of the same translation unit, in the sandbox), read token by token as ptxas reads
it. Baseline and candidate are always read the same way. Device statics come from the PTX and,
on the SASS path, from the cubin too: every object in its global memory that the object's own
registration code does not name (tools/registered.py).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from ..tools.nvcc import UNFORTIFIED, Toolchain, language_flags, ptxas_report, ptxas_saves_registers
from ..tools.module_memory import STATE_SECTION  # module memory a kernel can keep values in from launch to launch
from ..tools.nvcc import __file__ as nvcc_file
from ..tools.ptx_module import __file__ as ptx_module_file
from ..tools.ptx_module import read_ptx
from ..tools.ptx_writes import __file__ as ptx_writes_file
from ..tools.ptx_writes import body_memory, written_variables
from ..tools.registered import __file__ as registered_file
from ..tools.registered import registered_device_names
from ..tools.sandbox import Limits, private_workdir, run_sandboxed
from ..tools.symbols import demangle
from ..tools.toolkit import find_toolkit_program
from .policy import Violation

# A cached profile answers for the code that read it: the version and the reading modules' own text (ptx_writes
# changed in every red-team round from 316 on while the hand-kept version stood still, so a profile cached before a
# fix answered after it)
PRECISION_SCAN_VERSION = "18-" + hashlib.sha256(b"".join(
    Path(module).read_bytes() for module in (__file__, nvcc_file, ptx_module_file, ptx_writes_file, registered_file))
).hexdigest()[:16]
ClassName = Literal["half", "narrowing", "tensor", "fp64"]
REDUCED: tuple[ClassName, ...] = ("half", "narrowing", "tensor")
DESCRIPTION: dict[str, str] = {
    "half": "fp16/bf16 arithmetic",
    "narrowing": "conversions to a narrower float type",
    "tensor": "reduced-precision tensor-core or dot-product instructions",
    "fp64": "fp64 arithmetic",
}


class PrecisionProfile(BaseModel):
    """Which precision classes one object's device code uses, with the opcodes seen."""

    source: Literal["sass", "ptx"]
    classes: dict[str, list[str]] = {}  # class -> sorted distinct opcodes
    instructions: int = 0  # how many instructions were read (0: no device code)
    # SASS: the objects the cubin keeps in global memory from launch to launch that the object's host stub does not
    # register (so the state check never reads them), each named by what it is (object_identity)
    unregistered: list[str] = []
    # SASS: the constant bank 0 words the code reads (-1: a read at a register's offset), and the lowest kernel
    # parameter's offset there (EIATTR_PARAM_CBANK): below it lie the driver's words for the launch
    bank0: list[int] = []
    parameter_base: int | None = None


# ---------------------------------------------------------------------------------- SASS

# `/*0150*/   @!P0 HGMMA.64x8x16.F32.BF16 R24, gdesc[UR4], RZ, !UPT, gsb0 ;`
_SASS_LINE = re.compile(r"^\s*/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P(?:T|\d+)\s+)?([A-Z][A-Za-z0-9_.]*)\s*([^;]*);")
_SASS_HALF = re.compile(r"^H(?:ADD|FMA|MUL|MNMX|MIN|MAX|SET|SETP)2$")
_SASS_TENSOR = re.compile(r"^(?:UTC)?[HIQBO]G?MMA$|^IDP\d?A?$")
_SASS_FP64 = {"DADD", "DFMA", "DMUL", "DMMA"}
# bits of each float format an F2F / I2F modifier names
_WIDTH = {"F64": 64, "F32": 32, "TF32": 19, "F16": 16, "BF16": 16, "E4M3": 8, "E5M2": 8, "E3M2": 6, "E2M3": 6,
          "E2M1": 4, "UE8M0": 8}


_SASS_BYTE_INTEGERS = {"S8", "U8", "S4", "U4"}


def _sass_class(opcode: str, operands: str) -> ClassName | None:
    parts = opcode.split(".")
    mnemonic = parts[0]
    if _SASS_TENSOR.match(mnemonic):
        return "tensor"
    if mnemonic in _SASS_FP64:
        return "fp64"
    if _SASS_HALF.match(mnemonic):
        ops = [o.strip() for o in operands.split(",")]
        # `HFMA2.MMA R5, -RZ, RZ, 0, 2.38e-07`: 0 * 0 + c, the compiler's way to load a
        # constant into a register, in plain fp32 code too.
        if mnemonic == "HFMA2" and len(ops) >= 3 and ops[1].lstrip("-|") == "RZ" and ops[2].lstrip("-|") == "RZ":
            return None
        # `HADD2.F32 R9, -RZ, R3.H0_H0`: -0 + h into fp32, a half value widened (exact; licenses nothing)
        if mnemonic == "HADD2" and "F32" in parts[1:] and len(ops) >= 2 and ops[1].lstrip("-|") == "RZ":
            return None
        return "half"
    if mnemonic == "F2FP":  # float to packed narrower float (f16x2, bf16x2, fp8x2, ...)
        return "narrowing"
    if mnemonic in ("F2I", "F2IP") and any(p in _SASS_BYTE_INTEGERS for p in parts[1:]):
        return "narrowing"  # a float quantised to 8 bits
    if mnemonic in ("F2F", "I2F", "I2FP"):
        types = [p for p in parts[1:] if p in _WIDTH]
        if mnemonic != "F2F":
            return "narrowing" if types and _WIDTH[types[0]] < 32 else None
        if len(types) >= 2:
            dst, src = _WIDTH[types[0]], _WIDTH[types[1]]
            if dst < src and dst < 32:
                return "narrowing"  # F2F.F32.F64 is the fp64 check's business
    return None  # a half value widened is exact, and licenses nothing (round 263: it licensed HFMA2 accumulation)


# The GPU's clocks read in device code: the date (%globaltimer, which cuda::std::chrono's clocks read)
# and the SM's cycle count since the GPU started. A kernel that reads one can compute otherwise later
# than while verified (red team round 66: honest before 2027-01-01, wrong after), so a candidate may
# read one only where its baseline does.
_SASS_CLOCK = re.compile(r"\bSR_(?:GLOBALTIMER\w*|CLOCK\w*)")
_PTX_CLOCK = re.compile(r"%(?:globaltimer\w*|clock\w*)\b")
# Constant bank 0 holds a kernel's parameters and, below them, the driver's words for the launch: the block and grid
# sizes a kernel may read, and `%gridid`, `%current_graph_exec`, the `%envreg`s it may not (device-register).
# A parameter read at a negative offset (`ld.param [p+-480]`) or at a register's reaches those words with no
# register named (red team round 269), so SASS's bank-0 reads are judged by offset.
_SASS_BANK0 = re.compile(r"\bc\[0x0\]\[([^\]]+)\]")
_PARAM_CBANK = re.compile(r"EIATTR_PARAM_CBANK\s*\n\s*Format:[^\n]*\n\s*Value:\s*0x[0-9a-f]+\s+0x([0-9a-f]+)")
# The device heap (in-kernel malloc/new): memory no variable or allocation of the part's names, so
# the harness's state check cannot see what is kept there from call to call (red team round 70: a
# call counter behind a __device__ pointer). A candidate may use it only where its baseline does.
_DEVICE_HEAP = re.compile(r"\b(?:malloc|free|__nv_aligned_device_malloc)\b")
# PTX special registers a kernel may read freely: where it runs and how it was launched. Any other
# (`%gridid`, the context's launch count; `%current_graph_exec`, a graph launch told from a direct
# one; `%pm*` performance counters; `%envreg*`) only where the baseline reads it: it tells a process
# that makes many calls, or launches another way, from the verifier's (red team round 73). The
# clocks have their own rule (device-clock). Read from PTX, where a special register is named as such.
_GEOMETRY_REGISTERS = frozenset({
    "tid", "ntid", "laneid", "warpid", "nwarpid", "ctaid", "nctaid", "smid", "nsmid", "is_explicit_cluster",
    "clusterid", "nclusterid", "cluster_ctaid", "cluster_nctaid", "cluster_ctarank", "cluster_nctarank",
    "lanemask_eq", "lanemask_le", "lanemask_lt", "lanemask_ge", "lanemask_gt", "total_smem_size",
    "aggr_smem_size", "dynamic_smem_size"})
# Every special register the PTX ISA names: a `.reg` declaration cannot make one of these an
# ordinary register for the scan (a declared `%gridid<1>` makes `%gridid0`, not `%gridid`).
_SPECIAL_REGISTER = re.compile(
    r"^(?:tid|ntid|laneid|warpid|nwarpid|ctaid|nctaid|smid|nsmid|gridid|is_explicit_cluster|clusterid|nclusterid"
    r"|cluster_ctaid|cluster_nctaid|cluster_ctarank|cluster_nctarank|lanemask_(?:eq|le|lt|ge|gt)|clock|clock_hi"
    r"|clock64|pm\d+(?:_64)?|envreg\d+|globaltimer(?:_lo|_hi)?|reserved_smem_offset_\w+|total_smem_size"
    r"|aggr_smem_size|dynamic_smem_size|current_graph_exec)$")
_PTX_REGISTER_USE = re.compile(r"%([A-Za-z_][\w$]*)")


def classify_sass(text: str) -> PrecisionProfile:
    classes: dict[str, set[str]] = {}
    words: set[int] = set()
    count = 0
    for line in text.splitlines():
        m = _SASS_LINE.match(line)
        if not m:
            continue
        count += 1
        kind = _sass_class(m.group(1), m.group(2))
        if kind:
            classes.setdefault(kind, set()).add(m.group(1))
        for register in _SASS_CLOCK.findall(m.group(2)):
            classes.setdefault("clock", set()).add(register)
        if m.group(1).startswith("CALL") and (heap := _DEVICE_HEAP.search(m.group(2))):
            classes.setdefault("device_heap", set()).add(heap.group(0))
        for word in _SASS_BANK0.findall(m.group(2)):
            fixed = re.fullmatch(r"(?:U?RZ)?\+?(0x[0-9a-f]+)?", word.replace(" ", ""))  # RZ: the zero register
            words.add(int(fixed.group(1) or "0", 16) if fixed else -1)  # -1: a read at a register's offset
    return PrecisionProfile(source="sass", classes={k: sorted(v) for k, v in classes.items()}, instructions=count,
                            bank0=sorted(words))


# ----------------------------------------------------------------------------------- PTX

_PTX_OPCODE_NAME = re.compile(r"[a-z][a-z0-9_]*(?:\.|$)")
_PTX_WIDTH = {"f64": 64, "f32": 32, "tf32": 19, "f16": 16, "f16x2": 16, "bf16": 16, "bf16x2": 16, "e4m3": 8,
              "e5m2": 8, "e4m3x2": 8, "e5m2x2": 8, "e4m3x4": 8, "e5m2x4": 8, "e2m1": 4, "e2m1x2": 4, "e3m2": 6,
              "e2m3": 6, "e3m2x2": 6, "e2m3x2": 6, "ue8m0": 8, "ue8m0x2": 8}
_PTX_NARROW_OPERAND = {"f16", "f16x2", "bf16", "bf16x2", "tf32", "e4m3", "e5m2", "e2m1", "e3m2", "e2m3", "s8", "u8",
                       "s4", "u4", "b1", "kind::f16", "kind::tf32", "kind::f8f6f4", "kind::i8", "kind::mxf8f6f4",
                       "kind::mxf4", "kind::mxf4nvf4"}  # tcgen05.mma names its kind instead of types
_PTX_INTEGERS = {"s8", "u8", "s16", "u16", "s32", "u32", "s64", "u64"}
_PTX_MOVES = {"ld", "ldu", "st", "mov", "cvta", "shfl", "prmt", "cp", "ldmatrix", "stmatrix", "movmatrix",
              "tex", "tld4", "suld", "sust", "isspacep", "selp"}
_PTX_FP64_ARITH = {"add", "sub", "mul", "fma", "mad", "div", "rcp", "sqrt", "rsqrt", "min", "max", "neg", "abs"}


def _ptx_class(opcode: str) -> ClassName | None:
    parts = opcode.split(".")
    base = parts[0]
    mods = set(parts[1:])
    is_mma = (base == "mma" or (base == "wmma" and "mma" in mods) or (base == "wgmma" and any(
        p.startswith("mma_async") for p in mods)) or (base == "tcgen05" and "mma" in mods))
    if is_mma:  # `wmma.mma...m16n16k16.f32.f32` names no input type: f16 inputs
        return "fp64" if "f64" in mods and not mods & _PTX_NARROW_OPERAND else "tensor"
    if base in ("dp4a", "dp2a"):
        return "tensor"
    if base == "cvt":
        named = [p for p in parts[1:] if p in _PTX_WIDTH or p in _PTX_INTEGERS]
        if len(named) >= 2 and named[0] in ("s8", "u8") and named[1] in _PTX_WIDTH:
            return "narrowing"  # a float quantised to 8 bits
        types = [p for p in parts[1:] if p in _PTX_WIDTH]
        if len(types) >= 2:
            dst, src = _PTX_WIDTH[types[0]], _PTX_WIDTH[types[1]]
            if dst < src and dst < 32:
                return "narrowing"
        return None  # a widening is exact (round 263: cvt.f32.f16 of the inputs licensed f16x2 accumulation)
    if base in _PTX_MOVES or (base == "wmma" and not mods & {"mma"}):
        return None
    if mods & {"f16", "f16x2", "bf16", "bf16x2"}:
        return "half"
    if "f64" in mods and base in _PTX_FP64_ARITH:
        return "fp64"
    return None


def strip_ptx_comments(text: str) -> str:
    """PTX without its comments, string literals kept whole: a `/*` inside a `.pragma "..."` opens
    no comment (red team round 74 hid `%gridid` between two such pragmas). A string ends at the next
    `"` as ptxas reads it, across lines and with no escapes (round 268: a string run over a newline, or
    ended by what looked like an escaped quote, took code ptxas assembles for a comment or a string)."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == '"':
            j = text.find('"', i + 1)
            j = n if j < 0 else j
            out.append(text[i:j + 1])
            i = j + 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
            out.append(" ")
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            i = n if j < 0 else j + 2
            out.append(" ")
        else:
            out.append(c)
            i += 1
    return "".join(out)


def special_registers(code: str) -> set[str]:
    """The PTX ISA's special registers that PTX reads, but launch geometry and the clocks (device-clock's).
    By name alone: a `.reg` declaration cannot make one an ordinary register (a declared `%gridid<1>`
    makes `%gridid0`; red team round 74), and a register no `.reg` declares is no register ptxas takes."""
    found: set[str] = set()
    for m in _PTX_REGISTER_USE.finditer(code):
        base = m.group(1).split(".")[0]
        if _SPECIAL_REGISTER.match(base) and base not in _GEOMETRY_REGISTERS and not _PTX_CLOCK.fullmatch(f"%{base}"):
            found.add(base)
    return found


# PTX read as ptxas reads it (red team round 266: a `.loc 1 1 0` on the instruction's own line, a label written
# `lab :`, a space or a comment inside an opcode's modifiers, `cvt.rn .f16.f32`, each hid an instruction, a call
# counter's `.global` or a clock read from a reader that split statements at lines and read opcodes up to a space):
# whitespace and comments only separate tokens, an opcode is an identifier with its `.modifier`s however spaced, and
# what an instruction is comes from every opcode in the text, wherever a statement or a directive puts it. A number
# is lexed as PTX writes one and ends where it ends (round 267: `.loc 1 1 0mma.sync...` glued an opcode to a number
# that took every word character).
_PTX_TOKEN = re.compile(r"""
    (?P<string>"[^"]*"?)
  | (?P<opcode>[A-Za-z_][\w$]*(?:\s*\.\s*[A-Za-z0-9_$]+(?:::[A-Za-z0-9_$]+)*)*)
  | (?P<register>[%$][\w$]*(?:\.[A-Za-z0-9_]+)*)
  | (?P<directive>\.[A-Za-z_][\w$]*)
  | (?P<number>0[fF][0-9a-fA-F]{8}|0[dD][0-9a-fA-F]{16}|0[xX][0-9a-fA-F]+U?|0[bB][01]+U?
      |[0-9]+\.[0-9]*(?:[eE][+-]?[0-9]+)?|[0-9]+(?:[eE][+-]?[0-9]+)?U?)
  | (?P<punct>\S)""", re.X)


class PtxToken(BaseModel):
    kind: Literal["string", "opcode", "register", "directive", "number", "punct"]
    text: str  # an opcode's with the whitespace between its modifiers taken out


def ptx_tokens(code: str) -> list[PtxToken]:
    """The tokens of comment-free PTX CODE."""
    return [PtxToken(kind=m.lastgroup, text=re.sub(r"\s+", "", m.group(0)) if m.lastgroup == "opcode" else m.group(0))
            for m in _PTX_TOKEN.finditer(code)]


def _ptx_pieces(tokens: list[PtxToken]):
    """(brace depth, tokens) of each piece between `;` and braces: a statement, labels and a guard still on it."""
    depth, piece = 0, []
    for token in tokens:
        if token.kind == "punct" and token.text in ";{}":
            yield depth, piece
            piece = []
            depth = depth + 1 if token.text == "{" else max(0, depth - 1) if token.text == "}" else depth
        else:
            piece.append(token)
    yield depth, piece


def _state_spaces(opcode: str) -> set[str]:
    """The modifiers of a PTX opcode, each without its `::` sub-qualifier (`ld.param::entry.u64`: param)."""
    return {part.split("::")[0] for part in opcode.split(".")[1:]}


def _ptx_int(text: str) -> int | None:
    """An integer literal as ptxas reads it into a 32-bit address offset (wrapping), or None."""
    t = text.rstrip("Uu")
    try:
        value = int(t, 16) if t[:2] in ("0x", "0X") else int(t, 2) if t[:2] in ("0b", "0B") else \
            int(t, 8) if len(t) > 1 and t.startswith("0") else int(t)
    except ValueError:
        return None
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


_PTX_TYPE_BYTES = {"8": 1, "16": 2, "32": 4, "64": 8, "128": 16}


def _param_sizes(tokens: list[PtxToken]) -> dict[str, int | None]:
    """Every `.param` name with its size in bytes (`.param .u64 p`, `.param .align 8 .b8 p[24]`; None where
    it cannot be read)."""
    sizes: dict[str, int | None] = {}
    for i, token in enumerate(tokens):
        if token.kind != "directive" or token.text != ".param":
            continue
        j, width = i + 1, None
        while j < len(tokens) and j < i + 8 and tokens[j].kind in ("directive", "number"):
            m = re.fullmatch(r"\.[bsuf](8|16|32|64|128)", tokens[j].text)
            width = _PTX_TYPE_BYTES[m.group(1)] if m else width
            j += 1
        if j >= len(tokens) or tokens[j].kind != "opcode":
            continue
        name, count = tokens[j].text, 1
        if j + 3 < len(tokens) and tokens[j + 1].text == "[" and tokens[j + 2].kind == "number" \
                and tokens[j + 3].text == "]":
            count = _ptx_int(tokens[j + 2].text) or 0
        size = None if width is None or count <= 0 else width * count
        # a name declared again (call sites reuse `param0`; an asm's braces may shadow a kernel parameter: red
        # team round 271) is as large as its smallest declaration; an unreadable one is None
        sizes[name] = None if size is None or (name in sizes and sizes[name] is None) else \
            min(size, sizes[name]) if name in sizes else size
    return sizes


def _without_labels(piece: list[PtxToken]) -> list[PtxToken]:
    """PIECE past its labels (`_L:`, `$L :`, `%L:`), however spaced."""
    i = 0
    while i + 1 < len(piece) and piece[i].kind in ("opcode", "register") and "." not in piece[i].text \
            and piece[i + 1].text == ":":
        i += 2
    return piece[i:]


def _declared_global(piece: list[PtxToken]) -> str | None:
    """The name a `.global` or `.const` declaration in PIECE declares (after a `.loc` or a label too), else None.
    `ld.global` is one opcode token, so only a declaration has `.global` as a directive of its own."""
    for i, token in enumerate(piece):
        if token.kind == "directive" and token.text in (".global", ".const"):  # .const: round 271
            names = [t.text for t in piece[i + 1:] if t.kind in ("opcode", "register")]
            return names[0] if names else "(unnamed)"
    return None


def scoped_globals(code: str) -> set[str]:
    """The `.global` variables comment-free PTX CODE declares inside a function body. nvcc declares its
    variables at module scope, where the host stub registers them; a declaration inside a body comes from
    inline assembly, and ptxas makes it a module object nothing registers (red team round 78: a call
    counter declared in a braced scope of an `asm`; round 266: behind a `.loc` or a spaced label)."""
    return {name for depth, piece in _ptx_pieces(ptx_tokens(code)) if depth > 0
            and (name := _declared_global(piece)) is not None}


def classify_ptx(text: str, *, register_saves: bool = True) -> PrecisionProfile:
    """What a PTX module computes in and keeps; REGISTER_SAVES: whether ptxas stores registers in local memory
    itself for it (tools.nvcc.ptxas_saves_registers; yes where unknown)."""
    classes: dict[str, set[str]] = {}
    count = 0
    code = strip_ptx_comments(text)
    tokens = ptx_tokens(code)
    for depth, piece in _ptx_pieces(tokens):
        # a .global declared in a body (an asm statement's) or a C++ function-scope static (`_ZZ...`, which nvcc
        # declares at module scope): globals the host stub never registers, so the state check never reads them
        # (red team rounds 72 and 78: call counters kept there). A candidate may have one only where its baseline does.
        name = _declared_global(piece)
        if name is not None and (depth > 0 or name.startswith("_ZZ")):
            classes.setdefault("device_static", set()).add(name)
    # the module memory device code may write (tools.ptx_writes): a baseline's `static const` table is only
    # read; a candidate that writes into it keeps state out of the state check's sight as surely as one with a
    # static of its own (init admits such baselines). Every variable here; where the object is read (the SASS
    # path), only those its registration does not name are kept (red team round 316: libdevice's own
    # `__cudart_i2opi_f`, neither a static nor a string)
    module = read_ptx(text)
    for name in written_variables(module, set(module.variables), register_saves=register_saves) | body_memory(module):
        classes.setdefault("device_static_written", set()).add(object_identity(name))
    for name in special_registers(code):
        classes.setdefault("special_register", set()).add(f"%{name}")
    for token in tokens:
        if token.kind == "register" and _PTX_CLOCK.fullmatch(token.text.split(".")[0]):
            classes.setdefault("clock", set()).add(token.text.split(".")[0])
        elif token.kind == "opcode" and (kind := _ptx_class(token.text)):
            # every opcode, wherever it stands (an operand named like an instruction is read as one: fail closed)
            classes.setdefault(kind, set()).add(token.text)
    for _, piece in _ptx_pieces(tokens):
        statement = _without_labels(piece)
        if statement and statement[0].text == "@":  # a guard: `@%p1`, `@p`, `@!q`, however spaced
            rest = statement[1:]
            rest = rest[1:] if rest and rest[0].text == "!" else rest
            statement = rest[1:] if rest and rest[0].kind in ("opcode", "register") else [statement[0]]
        if statement and (statement[0].text in ("@", "!") or (
                statement[0].kind == "opcode" and not _PTX_OPCODE_NAME.match(statement[0].text))):
            # fail closed: a guard or an opcode the scan cannot read (PTX's instructions are lower case)
            classes.setdefault("unread", set()).add(re.sub(r" ([,;\])])", r"\1", " ".join(t.text for t in statement))[:80])
            continue
        while statement and statement[0].kind in ("directive", "number", "string") or statement[:1] and \
                statement[0].text == "," and statement[1:2] and statement[1].kind == "number":
            statement = statement[1:]  # a directive with no `;` and its numbers (`.loc 1 3 0`)
        count += bool(statement) and statement[0].kind == "opcode"
    declared = _param_sizes(tokens)  # every `.param` name: a kernel's and a function's parameters, a call's
    for i, token in enumerate(tokens):  # the parameter space read past its parameters (rounds 269, 270)
        spaces = _state_spaces(token.text) if token.kind == "opcode" else set()
        opcode = token.text.split(".")[0] if token.kind == "opcode" else ""
        if opcode in ("ld", "ldu") and "param" in spaces:
            # the address: the first [...] before the statement's `;` (a vector's braces come first)
            rest = tokens[i + 1:]
            stop = next((j for j, t in enumerate(rest) if t.text == ";"), len(rest))
            opened = next((j for j, t in enumerate(rest[:stop]) if t.text == "["), None)
            closed = next((j for j, t in enumerate(rest[:stop]) if t.text == "]"), None)
            address = rest[opened + 1:closed] if opened is not None and closed is not None and closed > opened else []
            # nvcc reads a parameter as `[k_param_0]` or `[k_param_0+8]`, inside the parameter; anything else is
            # an address computed (a number as ptxas reads it: `+4294966816` is -480)
            size = declared.get(address[0].text) if address and address[0].kind == "opcode" else None
            offset = 0 if len(address) == 1 else (
                _ptx_int(address[2].text) if len(address) == 3 and address[1].text == "+"
                and address[2].kind == "number" else None)
            if size is None or offset is None or not 0 <= offset < max(size, 1):
                classes.setdefault("driver_word", set()).add(f"{token.text} at a computed offset")
        elif opcode == "cvta" and spaces & {"param", "const"}:  # a window's generic base: a driver word in SASS
            classes.setdefault("driver_word", set()).add(token.text)
    for _, piece in _ptx_pieces(tokens):  # a call behind a directive on its line (`.loc 1 1 0 call.uni ...malloc`)
        opcodes = [t.text for t in piece if t.kind == "opcode"]
        calls = [i for i, op in enumerate(opcodes) if op.split(".")[0] == "call"]
        for op in (opcodes[calls[0] + 1:] if calls else []):
            if _DEVICE_HEAP.fullmatch(op):
                classes.setdefault("device_heap", set()).add(op)
    return PrecisionProfile(source="ptx", classes={k: sorted(v) for k, v in classes.items()}, instructions=count)


# ---------------------------------------------------------------------------- comparison

# Each number format an instruction names (PTX or SASS, lower-cased): (significand bits, the implicit one counted;
# exponent bits). An 8-bit integer scaled per row or block keeps 7 significand bits and no exponent. Both must be no
# narrower than the baseline's (red team round 263: tf32 and fp16 have 11 significand bits each, and an fp16
# tensor-core rewrite of a tf32 one, its inputs scaled by a power of two, passed). kind::f16 (tcgen05) may be bf16.
_FORMATS: dict[str, tuple[int, int]] = {
    "f64": (53, 11), "f32": (24, 8), "tf32": (11, 8), "f16": (11, 5), "f16x2": (11, 5), "bf16": (8, 8),
    "bf16x2": (8, 8), "bf16_v2": (8, 8), "e4m3": (4, 4), "e4m3x2": (4, 4), "e4m3x4": (4, 4), "e5m2": (3, 5),
    "e5m2x2": (3, 5), "e5m2x4": (3, 5), "e2m3": (4, 2), "e2m3x2": (4, 2), "e3m2": (3, 3), "e3m2x2": (3, 3),
    "e2m1": (2, 2), "e2m1x2": (2, 2), "ue8m0": (1, 8), "ue8m0x2": (1, 8), "s8": (7, 0), "u8": (7, 0), "s4": (3, 0),
    "u4": (3, 0), "b1": (1, 0)}
# tcgen05 names a kind, not the types (its descriptor holds them): the narrowest the kind admits
_KINDS: dict[str, tuple[int, int]] = {
    "kind::f16": (8, 5), "kind::tf32": (11, 8), "kind::i8": (7, 0), "kind::f8f6f4": (2, 2), "kind::mxf8f6f4": (2, 2),
    "kind::mxf4": (2, 2), "kind::mxf4nvf4": (2, 2)}
# where an instruction names no narrow format: by its unit (SASS: HMMA f16, IMMA int8, QGMMA fp8, OMMA fp4, BMMA
# 1 bit; PTX: wmma.mma names no f16 input type; dp4a/dp2a take bytes)
_UNIT_FORMATS = {"h": (11, 5), "i": (7, 0), "q": (3, 4), "o": (2, 2), "b": (1, 0)}
_FP16 = (11, 5)


def number_format(opcode: str) -> tuple[int, int]:
    """The narrowest number format OPCODE (one classified instruction, PTX or SASS) computes on or converts to:
    (significand bits, exponent bits), each the least among the narrow formats it names (fp32 and wider are an
    accumulator's or a source's); the types an instruction spells out win over its kind:: (round 263)."""
    parts = opcode.lower().split(".")
    named = [_FORMATS[p] for p in parts[1:] if p in _FORMATS and _FORMATS[p][0] < 24] or \
        [_KINDS[p] for p in parts[1:] if p in _KINDS]
    if named:
        return min(n[0] for n in named), min(n[1] for n in named)
    unit = re.match(r"(?:utc)?([hiqob])g?mma$", parts[0])
    if unit:
        return _UNIT_FORMATS[unit.group(1)]
    if parts[0] in ("dp4a", "dp2a", "idp"):
        return _FORMATS["s8"]
    return _FP16  # fp16 arithmetic, the widest narrow format


def significand_bits(opcode: str) -> int:
    return number_format(opcode)[0]


_ACCUMULATOR_BITS = {"f64": 53, "s32": 31, "f32": 24, "f16": 11}


def accumulator_bits(opcode: str) -> int:
    """A tensor-core instruction's accumulator, in significand bits (the first type it names, PTX's d and SASS's
    HMMA.16816.F16 alike, past any kind::; f32 where it names none): fp16 accumulation under a bf16 output's loose
    tolerance is a downgrade its inputs' format does not show."""
    for part in opcode.lower().split(".")[1:]:
        if part in _ACCUMULATOR_BITS:
            return _ACCUMULATOR_BITS[part]
        if part in _FORMATS:
            break
    return 24


def _narrowest(opcodes: list[str]) -> tuple[tuple[int, int], str]:
    """The least significand and the least exponent over OPCODES, and the opcode that is narrowest in either."""
    formats = [(number_format(op), op) for op in opcodes]
    least = (min(f[0] for f, _ in formats), min(f[1] for f, _ in formats))
    return least, min(formats, key=lambda f: (f[0][0] > least[0] and f[0][1] > least[1], f[0]))[1]


def compare_profiles(baseline: PrecisionProfile, candidate: PrecisionProfile) -> list[Violation]:
    """A reduced-precision class the candidate uses and the baseline does not, or fp64
    arithmetic the baseline does and the candidate does not."""
    where = f"object ({candidate.source.upper()})"
    found: list[Violation] = []
    new = [k for k in REDUCED if candidate.classes.get(k) and not baseline.classes.get(k)]
    if new:
        what = "; ".join(f"{DESCRIPTION[k]} ({', '.join(_few(candidate.classes[k]))})" for k in new)
        found.append(Violation(rule="reduced_precision", where=where,
                               detail=f"uses {what}, which the baseline does not: the candidate computes in a "
                                      "narrower float type (pass --allow-reduced-precision if the task allows it)"))
    for kind in REDUCED:
        if kind in new or not candidate.classes.get(kind) or not baseline.classes.get(kind):
            continue
        (cand_format, cand_op), (base_format, base_op) = (_narrowest(candidate.classes[kind]),
                                                          _narrowest(baseline.classes[kind]))
        cand_acc, base_acc = (min((accumulator_bits(op), op) for op in profile.classes[kind])
                              for profile in (candidate, baseline))
        if cand_format[0] < base_format[0] or cand_format[1] < base_format[1]:
            found.append(Violation(rule="reduced_precision", where=where, detail=(
                f"uses {DESCRIPTION[kind]} in {cand_format[0]} significand and {cand_format[1]} exponent bits "
                f"({cand_op}), narrower than the baseline's {base_format[0]} and {base_format[1]} ({base_op}): the "
                "candidate computes in a narrower number format (pass --allow-reduced-precision if the task allows "
                "it)")))
        elif kind == "tensor" and cand_acc[0] < base_acc[0]:
            found.append(Violation(rule="reduced_precision", where=where, detail=(
                f"uses {DESCRIPTION[kind]} accumulating in {cand_acc[0]} significand bits ({cand_acc[1]}), narrower "
                f"than the baseline's {base_acc[0]} ({base_acc[1]}): the candidate computes in a narrower number "
                "format (pass --allow-reduced-precision if the task allows it)")))

    def only_candidate(kind: str) -> list[str]:
        return sorted(set(candidate.classes.get(kind, [])) - set(baseline.classes.get(kind, [])))

    unread = only_candidate("unread")
    if unread:
        found.append(Violation(rule="device-unread", where=where, detail=(
            f"device code has statements the precision scan cannot read as instructions ({'; '.join(_few(unread, 3))}), "
            "which the baseline does not: what they compute in is unknown (fail closed)")))
    clocks = only_candidate("clock")
    if clocks:
        found.append(Violation(rule="device-clock", where=where, detail=(
            f"device code reads the GPU's clock ({', '.join(clocks)}), which the baseline does not: a kernel that "
            "reads the date or the time since the GPU started can compute otherwise later than while verified. The "
            "toolkit's waits that back off or time out read it too (cuda::barrier's wait, timed waits): wait with "
            "__syncthreads or cooperative_groups::wait instead")))
    registers = only_candidate("special_register")
    if registers:
        found.append(Violation(rule="device-register", where=where, detail=(
            f"device code reads {', '.join(registers)}, which the baseline does not: a special register other than "
            "where the kernel runs and how it was launched (a launch count, a graph's handle, performance "
            "counters) can tell the verifier's process from a program that makes more calls or launches otherwise")))
    driver = only_candidate("driver_word")
    if driver:
        found.append(Violation(rule="device-register", where=where, detail=(
            f"device code reads the driver's words for the launch in constant bank 0 ({', '.join(_few(driver))}), "
            "below the kernel's parameters, which the baseline does not: past the block and grid sizes they hold "
            "the launch count and the graph a kernel runs in, which tell the verifier's process from another "
            "(a parameter read at a negative or a register's offset reaches them)")))
    statics = only_candidate("device_static")
    if statics:
        found.append(Violation(rule="device-static", where=where, detail=(
            f"device code keeps module memory the program never registers ({', '.join(_few(demangle(statics)))}: a "
            "C++ static inside a function, a .global an asm statement declares, a string literal's storage), which "
            "the baseline does not: what a kernel keeps there from call to call is out of the verifier's sight; use "
            "a __device__ variable at namespace scope or a workspace")))
    written = only_candidate("device_static_written")
    if written and not statics:
        found.append(Violation(rule="device-static", where=where, detail=(
            f"device code may write module memory the program never registers ({', '.join(_few(demangle(written)))}: "
            "a C++ static inside a function, a string literal's storage), which the baseline only reads: what a kernel "
            "keeps there from call to call is out of the verifier's sight; use a __device__ variable at namespace "
            "scope or a workspace")))
    heap = only_candidate("device_heap")
    if heap and not baseline.classes.get("device_heap"):
        found.append(Violation(rule="device-heap", where=where, detail=(
            f"device code allocates from the device heap ({', '.join(heap)}), which the baseline does not: what a "
            "kernel keeps there from call to call is out of the verifier's sight (its state check reads the part's "
            "variables and allocations); use a workspace the launcher allocates")))
    if baseline.classes.get("fp64") and not candidate.classes.get("fp64"):
        found.append(Violation(rule="reduced_precision", where=where,
                               detail=f"the baseline computes in fp64 ({', '.join(_few(baseline.classes['fp64']))}) "
                                      "and the candidate has no fp64 arithmetic: fp64 -> fp32 downgrade "
                                      "(pass --allow-reduced-precision if the task allows it)"))
    return found


def _few(opcodes: list[str], limit: int = 6) -> list[str]:
    return opcodes[:limit] + ([f"+{len(opcodes) - limit} more"] if len(opcodes) > limit else [])


# ----------------------------------------------------------------------------- the tools

class Disassembler(BaseModel):
    cuobjdump: Path
    nvdisasm_dir: Path


def find_disassembler(toolchain: Toolchain) -> Disassembler | None:
    """cuobjdump (and the nvdisasm it runs for -sass), as the toolkit search finds them for this nvcc."""
    cuobjdump, nvdisasm = find_toolkit_program("cuobjdump", toolchain.nvcc), find_toolkit_program("nvdisasm", toolchain.nvcc)
    if cuobjdump is None or nvdisasm is None:
        return None
    return Disassembler(cuobjdump=cuobjdump, nvdisasm_dir=nvdisasm.parent)


class ScanFailed(Exception):
    pass


def sass_profile(obj: Path, tool: Disassembler) -> PrecisionProfile:
    env = {**os.environ, "PATH": f"{tool.nvdisasm_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
    try:
        run = subprocess.run([str(tool.cuobjdump), "-sass", str(obj)], capture_output=True, text=True,
                             timeout=120, env=env)
    except (OSError, subprocess.SubprocessError) as exc:
        raise ScanFailed(f"cuobjdump -sass failed ({exc})") from exc
    if run.returncode != 0:
        if "does not contain device code" in run.stderr:
            return PrecisionProfile(source="sass")
        raise ScanFailed(f"cuobjdump -sass exit {run.returncode}: {run.stderr.strip()[:200]}")
    profile = classify_sass(run.stdout)
    # SASS calls an extern function by address, unnamed: the device heap's functions are named in the
    # cubin's EIATTR_EXTERNS attribute (`externs: malloc(0x37)` in `cuobjdump -elf`).
    try:
        elf = subprocess.run([str(tool.cuobjdump), "-elf", str(obj)], capture_output=True, text=True, timeout=120,
                             env=env)
    except (OSError, subprocess.SubprocessError) as exc:
        raise ScanFailed(f"cuobjdump -elf failed ({exc})") from exc
    if elf.returncode != 0:
        raise ScanFailed(f"cuobjdump -elf exit {elf.returncode}: {elf.stderr.strip()[:200]}")
    heap = device_heap_externs(elf.stdout)
    if heap:
        profile.classes["device_heap"] = heap
    bases = [int(v, 16) & 0xFFFF for v in _PARAM_CBANK.findall(elf.stdout)]
    profile.parameter_base = min(bases) if bases else None
    registered = registered_device_names(obj)
    profile.unregistered = sorted({object_identity(o) for o in global_objects(elf.stdout) if o not in registered})
    return profile


def object_identity(name: str) -> str:
    """What an unregistered device object is, apart from the names a compile gives it: `$str$3` is a string
    literal's storage (`$str`), `__unnamed_2` an unnamed one, an internal-linkage name loses its
    `_INTERNAL_<hash>_<file>_<hash>` (two compiles of one unit differ there: round 267)."""
    name = re.sub(r"\d+_INTERNAL_[0-9a-f]+_\d+_\w*?_[0-9a-f]{8}", "_INTERNAL_", name)
    name = re.sub(r"^\$str(?:\$\d+)?$", "$str", name)
    name = re.sub(r"^(\$__\w+?)__\d+(?:\$\d+)?$", r"\1", name)  # an asm statement's `.global`: ptxas's scope suffix
    return re.sub(r"^__unnamed_\d+$", "__unnamed", name)


_ELF_SECTION = re.compile(r"^\s*([0-9a-f]+)\s+[0-9a-f]+\s+[0-9a-f]+\s.*\s(\.\S+)$")
_ELF_SYMBOL = re.compile(r"^\s*(?:0x)?[0-9a-f]+\s+\S+\s+\S+\s+(\w+)\s+\S+\s+\S+\s+\S+\s+(?:0x)?([0-9a-f]+)\s+(\S+)$")




def global_objects(elf_text: str) -> list[str]:
    """The symbols in the module memory sections (`.nv.global`, `.nv.global.init`, the module's `.nv.constantN`) of
    each cubin `cuobjdump -elf` prints: every device variable the module keeps from launch to launch, however its
    PTX was spelled."""
    found: set[str] = set()
    sections: dict[int, str] = {}
    block = ""
    for line in elf_text.splitlines():
        if line.startswith(("64-bit ELF", "32-bit ELF")):
            sections, block = {}, ""  # a fat binary holds one cubin per architecture
        elif line.startswith("Sections:"):
            block = "sections"
        elif line.startswith(".section .symtab"):
            block = "symbols"
        elif not line.strip() or line.startswith(".section"):
            block = "" if block == "sections" or line.startswith(".section") else block
        elif block == "sections" and (section := _ELF_SECTION.match(line)):
            sections[int(section.group(1), 16)] = section.group(2)
        elif block == "symbols" and (symbol := _ELF_SYMBOL.match(line)) and symbol.group(1) != "SECTION" \
                and STATE_SECTION.match(sections.get(int(symbol.group(2), 16), "")):
            found.add(symbol.group(3))
    return sorted(found)


def device_heap_externs(elf_text: str) -> list[str]:
    """The device heap's functions among the extern functions a cubin's kernels call (`cuobjdump -elf`)."""
    found: set[str] = set()
    for line in elf_text.splitlines():
        if "externs:" in line:
            found.update(m.group(0) for m in _DEVICE_HEAP.finditer(line.split("externs:", 1)[1]))
    return sorted(found)


def ptx_profile(unit: str, *, arch: str, toolchain: Toolchain, limits: Limits) -> PrecisionProfile:
    """`nvcc -ptx` of the translation unit, in the sandbox (what ptxas would turn into SASS)."""
    with private_workdir() as work:
        (work / "unit.cu").write_text(unit)
        shutil.chown(work / "unit.cu", user=work.stat().st_uid, group=work.stat().st_gid)
        # the shipped build's settings (round 267: without -U_FORTIFY_SOURCE, Ubuntu's gcc preprocessed another unit)
        run = run_sandboxed([str(toolchain.nvcc), "-O3", *language_flags(toolchain, arch), *UNFORTIFIED,
                             "-diag-suppress", "177,550", "-ptx", "unit.cu", "-o", "unit.ptx"], workdir=work, limits=limits)
        if not run.ok or not (work / "unit.ptx").is_file():
            raise ScanFailed(f"nvcc -ptx failed ({run.failure() or 'no output'})")
        ptx = (work / "unit.ptx").read_text(errors="replace")
    # whether ptxas parks registers in local memory itself (a spill, a callee's saved registers): what a stale
    # local read may return then (tools.ptx_writes.written_variables)
    saves = ptxas_saves_registers(ptxas_report(ptx, arch=arch, toolchain=toolchain, limits=limits))
    return classify_ptx(ptx, register_saves=saves)


# What an honest kernel reads of the driver's words in constant bank 0, on one architecture: each geometry register
# the scan allows (block and grid sizes, shared memory sizes, cluster shape), a stack frame, global and shared memory,
# an atomic. Compiled and read once per toolkit and architecture (the offsets are the compiler's to choose).
_GEOMETRY_PROBE = r"""
__global__ void kl_geometry_probe(unsigned* out, int n) {
  unsigned v = blockDim.x + 3u * blockDim.y + 5u * blockDim.z + 7u * gridDim.x + 11u * gridDim.y + 13u * gridDim.z;
  unsigned s;
  asm volatile("mov.u32 %0, %%dynamic_smem_size;" : "=r"(s)); v ^= s;
  asm volatile("mov.u32 %0, %%total_smem_size;" : "=r"(s)); v ^= s;
#if __CUDA_ARCH__ >= 900
  asm volatile("mov.u32 %0, %%aggr_smem_size;" : "=r"(s)); v ^= s;
  asm volatile("mov.u32 %0, %%cluster_nctaid.x;" : "=r"(s)); v ^= s;
  asm volatile("mov.u32 %0, %%cluster_nctaid.y;" : "=r"(s)); v ^= s;
  asm volatile("mov.u32 %0, %%cluster_nctaid.z;" : "=r"(s)); v ^= s;
  asm volatile("mov.u32 %0, %%nclusterid.x;" : "=r"(s)); v ^= s;
  asm volatile("mov.u32 %0, %%nclusterid.y;" : "=r"(s)); v ^= s;
  asm volatile("mov.u32 %0, %%nclusterid.z;" : "=r"(s)); v ^= s;
  asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(s)); v ^= s;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(s)); v ^= s;
  asm volatile("mov.u32 %0, %%cluster_ctaid.x;" : "=r"(s)); v ^= s;
  asm volatile("mov.u32 %0, %%cluster_ctaid.y;" : "=r"(s)); v ^= s;
  asm volatile("mov.u32 %0, %%cluster_ctaid.z;" : "=r"(s)); v ^= s;
  asm volatile("mov.u32 %0, %%clusterid.x;" : "=r"(s)); v ^= s;
  asm volatile("mov.u32 %0, %%clusterid.y;" : "=r"(s)); v ^= s;
  asm volatile("mov.u32 %0, %%clusterid.z;" : "=r"(s)); v ^= s;
  asm volatile("{ .reg .pred p; mov.pred p, %%is_explicit_cluster; selp.u32 %0, 1, 0, p; }" : "=r"(s)); v ^= s;
#endif
  asm volatile("mov.u32 %0, %%nsmid;" : "=r"(s)); v ^= s;
  asm volatile("mov.u32 %0, %%nwarpid;" : "=r"(s)); v ^= s;
  volatile unsigned frame[64];
  for (int i = 0; i < 64; ++i) frame[i] = v + i;
  v += frame[n & 63];
  extern __shared__ unsigned dyn[];
  dyn[threadIdx.x] = v;
  __syncthreads();
  out[blockIdx.x * blockDim.x + threadIdx.x] = dyn[(threadIdx.x + 1) % blockDim.x] + atomicAdd(out + n, 1u);
}
"""


def geometry_words(*, arch: str, toolchain: Toolchain, tool: Disassembler, limits: Limits,
                   cache_dir: Path) -> tuple[set[int], int]:
    """The bank-0 words below the parameters that honest code reads on ARCH (_GEOMETRY_PROBE), and where
    the parameters start there (the probe's own EIATTR_PARAM_CBANK: the target's, not a candidate's)."""
    key = hashlib.sha256(json.dumps([PRECISION_SCAN_VERSION, "geometry", toolchain.banner, arch, _GEOMETRY_PROBE])
                         .encode()).hexdigest()[:32]
    path = cache_dir / "precision" / f"{key}.json"
    if path.is_file():
        try:
            words, base = json.loads(path.read_text())
            return set(words), int(base)
        except (ValueError, TypeError):
            pass
    with private_workdir() as work:
        (work / "probe.cu").write_text(_GEOMETRY_PROBE)
        shutil.chown(work / "probe.cu", user=work.stat().st_uid, group=work.stat().st_gid)
        run = run_sandboxed([str(toolchain.nvcc), "-O3", *language_flags(toolchain, arch), "-c", "probe.cu", "-o",
                             "probe.o"], workdir=work, limits=limits)
        if not run.ok:
            raise ScanFailed(f"the geometry probe did not build for {arch} ({run.failure() or 'no output'})")
        probe = sass_profile(work / "probe.o", tool)
    if probe.parameter_base is None:
        raise ScanFailed(f"the geometry probe's object for {arch} names no parameter bank")
    words = {w for w in probe.bank0 if 0 <= w < probe.parameter_base}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps([sorted(words), probe.parameter_base]))
    os.replace(tmp, path)
    return words, probe.parameter_base


def judge_driver_words(profile: PrecisionProfile, allowed: set[int], parameter_base: int) -> None:
    """Record in PROFILE the driver's words its code reads past what honest code reads: a bank-0 word below
    PARAMETER_BASE (the target's, read from the geometry probe: a part whose kernels take no parameters names
    none, red team round 270) other than ALLOWED, and any bank-0 read at a register's offset (which may reach
    any of them)."""
    words = sorted({"at a register's offset" if w < 0 else f"c[0x0][{w:#x}]" for w in profile.bank0
                    if w < 0 or (w < parameter_base and w not in allowed)})
    if profile.parameter_base is not None and profile.parameter_base != parameter_base:  # not the target's layout
        words.append(f"parameters at c[0x0][{profile.parameter_base:#x}], where the target's start at "
                     f"{parameter_base:#x}")
    if words:
        profile.classes["driver_word"] = words


class PrecisionScan(BaseModel):
    source: Literal["sass", "ptx"]
    baseline: PrecisionProfile
    candidate: PrecisionProfile
    violations: list[Violation] = []


def scan_precision(*, baseline_object: Path, candidate_object: Path, baseline_unit: str, candidate_unit: str,
                   arch: str, toolchain: Toolchain, limits: Limits, cache_dir: Path) -> PrecisionScan:
    """Profile both editable objects the same way (SASS if it can be read here, else PTX)
    and compare. Fails closed: a candidate that cannot be read is a violation."""
    tool = find_disassembler(toolchain)

    def cached(kind: str, key_parts: list[str], make) -> PrecisionProfile:
        key = hashlib.sha256(json.dumps([PRECISION_SCAN_VERSION, kind, *key_parts]).encode()).hexdigest()[:32]
        path = cache_dir / "precision" / f"{key}.json"
        if path.is_file():
            try:
                return PrecisionProfile.model_validate_json(path.read_text())
            except ValueError:
                pass
        profile = make()
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(profile.model_dump_json())
        os.replace(tmp, path)
        return profile

    def digest(obj: Path) -> str:
        return hashlib.sha256(obj.read_bytes()).hexdigest()

    base: PrecisionProfile | None = None
    if tool is not None:
        try:
            base = cached("sass", [digest(baseline_object)], lambda: sass_profile(baseline_object, tool))
        except ScanFailed:
            base = None  # this cuobjdump cannot read these objects: read PTX instead
    if base is not None and tool is not None:
        try:
            cand = cached("sass", [digest(candidate_object)], lambda: sass_profile(candidate_object, tool))
        except ScanFailed as exc:
            return PrecisionScan(source="sass", baseline=base, candidate=PrecisionProfile(source="sass"),
                                 violations=[Violation(rule="reduced_precision", where="object (SASS)",
                                                       detail=f"the candidate's device code could not be read: {exc}")])
    else:
        banner = [toolchain.banner, arch]
        try:
            base = cached("ptx", [*banner, baseline_unit],
                          lambda: ptx_profile(baseline_unit, arch=arch, toolchain=toolchain, limits=limits))
            cand = cached("ptx", [*banner, candidate_unit],
                          lambda: ptx_profile(candidate_unit, arch=arch, toolchain=toolchain, limits=limits))
        except ScanFailed as exc:
            empty = PrecisionProfile(source="ptx")
            return PrecisionScan(source="ptx", baseline=base or empty, candidate=empty,
                                 violations=[Violation(rule="reduced_precision", where="object (PTX)",
                                                       detail=f"the device code could not be read: {exc}")])
    if base.source == "sass":
        # SASS names no variable's scope: the device statics come from the units' PTX (what ptxas reads).
        banner = [toolchain.banner, arch]
        try:
            allowed, parameter_base = geometry_words(arch=arch, toolchain=toolchain, tool=tool, limits=limits,
                                                     cache_dir=cache_dir)
            for profile in (base, cand):
                judge_driver_words(profile, allowed, parameter_base)
            for profile, unit in ((base, baseline_unit), (cand, candidate_unit)):
                ptx = cached("ptx", [*banner, unit], lambda unit=unit: ptx_profile(unit, arch=arch, toolchain=toolchain,
                                                                                   limits=limits))
                for kind in ("device_static", "device_static_written", "special_register"):  # PTX names them
                    if ptx.classes.get(kind):
                        profile.classes[kind] = ptx.classes[kind]
                # written module memory that the state check reads (registered) is its business, not this rule's
                unregistered = set(profile.unregistered) | set(profile.classes.get("device_static", []))
                written = [n for n in profile.classes.pop("device_static_written", []) if n in unregistered]
                if written:
                    profile.classes["device_static_written"] = written
                # and the object decides what lasts from launch to launch: an object the cubin keeps in global
                # memory that the object's own host stub does not register is out of the state check's sight,
                # however it came there (red team round 266: an asm `.global` behind a `.loc`; round 267: a counter
                # in a string literal's storage)
                if profile.unregistered:
                    profile.classes["device_static"] = sorted(set(profile.classes.get("device_static", []))
                                                              | set(profile.unregistered))
        except ScanFailed as exc:
            return PrecisionScan(source="sass", baseline=base, candidate=cand,
                                 violations=[Violation(rule="reduced_precision", where="object (PTX)",
                                                       detail=f"the device code could not be read: {exc}")])
    return PrecisionScan(source=base.source, baseline=base, candidate=cand, violations=compare_profiles(base, cand))
