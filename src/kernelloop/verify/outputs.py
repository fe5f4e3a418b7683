"""Reading what a kernel program prints, and comparing two outputs number by number.

The tolerance model (docs/verifier.md, "Tolerance model"). Every compared value b (baseline)
and c (candidate) must satisfy

    |c - b| <= rtol * max(|b|, |c|, floor) + atol

- rtol and atol are the user's when given: for one output buffer by its name (--rtol out=1e-4,
  [verify.tolerances.out]), else for every output (--rtol 1e-4), else the defaults of the value's
  dtype (DEFAULT_TOLERANCES): float64 2^-44, float32 2^-15, float16 2^-9, bfloat16 2^-6,
  integers exact. They are sized to the rounding noise of honest rewrites (reordered long sums,
  other tilings, fused kernels) and far below the errors of lower-precision arithmetic (bf16/tf32
  inputs, fp16 accumulation, subsampling);
- floor, for a buffer of the output dump, is the baseline buffer's RMS (at least the dtype's
  smallest normal): a value that is near zero by cancellation is judged against the magnitude
  of the buffer, not its own (so an output that crosses zero needs no setting of its own); at
  most 1% of a buffer's values may lean on it grossly (see GROSS). Printed numbers have no
  floor, but each is allowed half a unit of its last printed digit (the print's own resolution),
  and they take the loosest rtol/atol any output is given (they are derived from the outputs);
- NaN and infinity never pass; integers are compared exactly unless the user sets a tolerance.

A Comparison states the error seen against the error allowed: `worst_ratio` (max of
error/allowance over every value: <= 1 passes), `max_ulps` and `allowed_ulps` (the largest
error in units in the last place of its dtype, and the allowance there), and per buffer the
rtol/atol actually used.
"""

from __future__ import annotations

import math
import re
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import ml_dtypes
import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from ..config import OutputTolerance
from ..errors import InputError

_NUMBER = re.compile(
    r"(?<![\w.])[-+]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|nan|inf(?:inity)?)(?![\w.])", re.I
)
_KERNEL_MS = re.compile(r"^\s*KERNEL_MS:\s*(\S+)\s*$", re.M)


def numbers_in(text: str) -> list[float]:
    """Every number printed, in order (labels are skipped; 'nan'/'inf' are numbers)."""
    return [float(m.group(0)) for m in _NUMBER.finditer(text)]


def _half_unit(text: str) -> float | None:
    """Half a unit of the last printed digit of a number's text ("0.000512" -> 5e-7,
    "1.5e-3" -> 5e-5); None for a plain integer ("123", exact as printed) and 0 for nan/inf."""
    t = text.lower().lstrip("+-")
    if t.startswith(("n", "i")):
        return 0.0
    mantissa, _, exponent = t.partition("e")
    if "." not in mantissa and not exponent:
        return None
    decimals = len(mantissa.partition(".")[2])
    return 0.5 * 10.0 ** (int(exponent or 0) - decimals)


def _printed(text: str) -> list[tuple[float, float | None]]:
    """(value, half unit of its last digit) of every number printed, in order."""
    return [(float(m.group(0)), _half_unit(m.group(0))) for m in _NUMBER.finditer(text)]


def _print_allowance(hb: float | None, hc: float | None) -> float:
    """What the two prints' rounding alone can make them differ by. Both come from the same
    format at the same place, so each was rounded at least as finely as the finer of the two
    last digits ("%.9g" drops trailing zeros: "0.5" beside "0.500000012" was printed to 9
    digits too); a plain integer beside a decimal takes the decimal's resolution."""
    if hb is None and hc is None:
        return 0.0
    if hb is None or hc is None:
        return 2 * (hc if hb is None else hb)
    return 2 * min(hb, hc)


class KernelMs(BaseModel):
    value: float | None
    count: int
    problem: str | None = None


def parse_kernel_ms(stderr: str) -> KernelMs:
    """The program's one `KERNEL_MS: <float>` line on stderr."""
    found = _KERNEL_MS.findall(stderr)
    if not found:
        return KernelMs(value=None, count=0, problem="no 'KERNEL_MS: <ms>' line on stderr")
    if len(found) > 1:
        return KernelMs(value=None, count=len(found), problem=f"'KERNEL_MS:' printed {len(found)} times")
    if stderr.count("KERNEL_MS:") > 1:  # a second one inside a line: the harness's own, hidden (round 110)
        return KernelMs(value=None, count=stderr.count("KERNEL_MS:"),
                        problem=f"'KERNEL_MS:' printed {stderr.count('KERNEL_MS:')} times (one inside another line)")
    try:
        value = float(found[0])
    except ValueError:
        return KernelMs(value=None, count=1, problem=f"KERNEL_MS value {found[0]!r} is not a number")
    if not math.isfinite(value) or value <= 0:
        return KernelMs(value=None, count=1, problem=f"KERNEL_MS value {found[0]} is not a positive finite time")
    return KernelMs(value=value, count=1)


# -- dtypes and their default tolerances ---------------------------------------------------


class DumpError(ValueError):
    """The dump file is malformed (a candidate cannot write it: the frozen harness does)."""


class UnknownDtype(DumpError, KeyError):
    """A dtype name the output dump format does not have."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


# The dump format's dtype names (docs/contract.md), little-endian. bfloat16 is ml_dtypes' numpy
# dtype (numpy has none of its own).
_DUMP_DTYPES: dict[str, np.dtype] = {
    "float32": np.dtype("<f4"), "float64": np.dtype("<f8"), "float16": np.dtype("<f2"),
    "bfloat16": np.dtype(ml_dtypes.bfloat16),
    "int8": np.dtype("i1"), "uint8": np.dtype("u1"), "int16": np.dtype("<i2"), "uint16": np.dtype("<u2"),
    "int32": np.dtype("<i4"), "uint32": np.dtype("<u4"), "int64": np.dtype("<i8"), "uint64": np.dtype("<u8"),
}

# Explicit mantissa bits and the exponent of the smallest normal number, per floating dtype.
_FLOAT_FORMATS: dict[str, tuple[int, int]] = {
    "float64": (52, -1022), "float32": (23, -126), "float16": (10, -14), "bfloat16": (7, -126),
}

# (rtol, atol) by output dtype; docs/verifier.md "Tolerance model" gives the measurements.
# float32/float64: 2^9 unit roundoffs (2^-15, 2^-44): the rounding noise of the longest honest
# reordering in the suite (a 2^26-element float32 sum accumulated with 2^18 atomics, against other
# orders: up to 2.4e-5 in 60 seeds, rms 7.3e-6) fits; bf16- or tf32-rounded matmul inputs (up to
# 4.4e-4 and 5.5e-5), fp16 accumulation and sums that skip input do not. float16/bfloat16: 4 unit
# roundoffs (2^-9, 2^-6; 2 to 4 ulps): such outputs are accumulated in fp32 and rounded once, so
# honest rewrites differ by a rounding flip (1 ulp), plus one intermediate rounding a fused rewrite
# may drop. Integers: exact.
DEFAULT_TOLERANCES: dict[str, tuple[float, float]] = {
    "float64": (2.0**-44, 0.0), "float32": (2.0**-15, 0.0),
    "float16": (2.0**-9, 0.0), "bfloat16": (2.0**-6, 0.0),
    **{name: (0.0, 0.0) for name in ("int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64")},
}


def dump_dtype(name: str) -> np.dtype:
    """The numpy dtype of one of the dump format's dtype names ("float32", "bfloat16", ...).
    Raises UnknownDtype (a DumpError and a KeyError) for any other name."""
    try:
        return _DUMP_DTYPES[name]
    except KeyError:
        known = ", ".join(_DUMP_DTYPES)
        raise UnknownDtype(f"unknown output dtype {name!r} (the dump format has {known})") from None


def dtype_name(dtype: np.dtype | type | str) -> str:
    """The dump format's name of a numpy dtype (the inverse of dump_dtype)."""
    dt = np.dtype(dtype)
    for name, known in _DUMP_DTYPES.items():
        if dt == known:
            return name
    raise UnknownDtype(f"no output dtype of the dump format is {dt}")


class Tolerance(BaseModel):
    """rtol/atol for every compared value; None: the value's dtype's default (DEFAULT_TOLERANCES).
    A value set here (the user's --rtol/--atol) applies to every floating dtype; integer outputs stay
    exact unless named (red team round 262: an rtol meant for a float output let a histogram drop
    counts and argmax indices round down). `outputs` overrides either one for the output buffer of
    that name (the name the harness gives it: `h.output<float>("out", n)`); a value an override
    leaves unset is the one above (for an integer output: exact)."""

    rtol: float | None = Field(None, ge=0)
    atol: float | None = Field(None, ge=0)
    scale: float = Field(1.0, ge=1.0)  # widens everything allowed: calls on stressed inputs (see comparing.compare_experiment)
    outputs: dict[str, OutputTolerance] = {}

    def for_dtype(self, dtype: str, output: str | None = None) -> tuple[float, float]:
        rtol, atol = DEFAULT_TOLERANCES[dtype]
        own = self.outputs.get(output) if output is not None else None
        every = dtype in _FLOAT_FORMATS  # the every-output values reach floating outputs only
        r = own.rtol if own is not None and own.rtol is not None else self.rtol if every else None
        a = own.atol if own is not None and own.atol is not None else self.atol if every else None
        return ((rtol if r is None else r) * self.scale, (atol if a is None else a) * self.scale)

    def overrides(self, output: str | None) -> bool:
        """Whether a per-output setting applies to the output of this name."""
        own = self.outputs.get(output) if output is not None else None
        return own is not None and (own.rtol is not None or own.atol is not None)

    def for_printed(self, dtype: str) -> tuple[float, float]:
        """Printed numbers are derived from the outputs: the tolerance of `dtype` (the dump's loosest
        floating dtype), widened to the loosest rtol and atol any per-output setting gives."""
        r, a = self.for_dtype(dtype)
        for own in self.outputs.values():
            r = max(r, (own.rtol or 0.0) * self.scale)
            a = max(a, (own.atol or 0.0) * self.scale)
        return r, a

    def describe(self) -> str:
        parts = [] if self.rtol is None and self.atol is None else \
            [", ".join(f"{k} {v:g}" for k, v in (("rtol", self.rtol), ("atol", self.atol)) if v is not None)]
        for name, own in self.outputs.items():
            if own.rtol is not None or own.atol is not None:
                parts.append(f"{name}: " + ", ".join(f"{k} {v:g}" for k, v in (("rtol", own.rtol), ("atol", own.atol))
                                                    if v is not None))
        if not parts:
            return "tolerance by output dtype"
        return "; ".join(parts) + (" (the rest by dtype)" if self.rtol is None or self.atol is None else "")


def _tolerance(tolerance: Tolerance | None, rtol: float | None, atol: float | None) -> Tolerance:
    tol = tolerance or Tolerance()
    if rtol is not None or atol is not None:
        tol = Tolerance(rtol=tol.rtol if rtol is None else rtol, atol=tol.atol if atol is None else atol,
                        scale=tol.scale, outputs=tol.outputs)
    return tol


def check_output_names(tolerance: Tolerance, outputs: list[str] | None, inputs: list[str] = ()) -> None:
    """Raise InputError (one line) when a per-output tolerance names no output of the program:
    `outputs` are the names of its output (and in-out) buffers, None when its harness declares
    none (contract v1); `inputs` its other buffers, named in the message when one is meant."""
    named = [n for n in tolerance.outputs if tolerance.overrides(n)]
    if not named:
        return
    if outputs is None:
        raise InputError(f"a per-output tolerance ({', '.join(named)}) needs a contract v2 harness, whose output "
                         "buffers have names; this program's do not: give --rtol/--atol without a name "
                         "(every output)")
    unknown = [n for n in named if n not in outputs]
    if unknown:
        which = "; ".join(f"{n!r} is an input, not an output" if n in inputs else f"{n!r} is not one" for n in unknown)
        raise InputError(f"a per-output tolerance names no output of the program ({which}); its outputs: "
                         f"{', '.join(dict.fromkeys(outputs)) or 'none'}")


def printed_dtype(dump: list[np.ndarray] | None) -> str:
    """The dtype whose tolerance the printed numbers get: the loosest floating dtype of the
    output dump (printed numbers are derived from the outputs), float32 without one."""
    names = [dtype_name(b.dtype) for b in dump or [] if b.dtype in _DUMP_DTYPES.values()]
    floats = [n for n in names if n in _FLOAT_FORMATS]
    return max(floats, key=lambda n: DEFAULT_TOLERANCES[n][0]) if floats else "float32"


def _ulp(x: np.ndarray, dtype: str) -> np.ndarray:
    """Unit in the last place of each value in its dtype (subnormal spacing below the smallest
    normal; 1 for integers), in x's own float type."""
    if dtype not in _FLOAT_FORMATS:
        return np.ones_like(x)
    nmant, emin = _FLOAT_FORMATS[dtype]
    _, e = np.frexp(x)
    e = np.where(x == 0, emin, np.maximum(e.astype(np.int32) - 1, emin))
    return np.ldexp(np.ones_like(x), e - nmant)


# -- the comparison result ------------------------------------------------------------------


# inf (NaN or inf seen, or an error where none is allowed) goes to JSON as the string "Infinity",
# which reads back as inf (plain JSON has no infinity; pydantic's default, null, would not read back).
_JSON_INF = ConfigDict(ser_json_inf_nan="strings")


class Mismatch(BaseModel):
    model_config = _JSON_INF

    index: int  # position among the printed numbers, or among all elements of the dump
    baseline: float
    candidate: float
    rel_error: float
    allowed: float | None = None  # the absolute error allowed there
    ulps: float | None = None  # the error in units in the last place of its dtype, at the magnitude judged


class BufferCheck(BaseModel):
    """One compared group: the printed numbers, or one buffer of the output dump."""

    model_config = _JSON_INF

    what: str  # "stdout" or "buffer <n>"
    output: str | None = None  # the output buffer's name in the harness (contract v2)
    override: bool = False  # a per-output tolerance set for this output applied
    dtype: str  # the dtype whose tolerance applied (printed numbers: the dump's loosest, else float32)
    count: int
    rtol: float
    atol: float
    floor: float = 0.0  # near-zero values are judged against this magnitude (the baseline buffer's RMS)
    max_abs_error: float = 0.0
    max_ulps: float = 0.0
    allowed_ulps: float = 0.0  # the allowance, in ulps, where max_ulps was seen
    worst_ratio: float = 0.0  # max over values of error / allowance (inf: NaN/inf, or an error where none is allowed)
    mismatches: int = 0
    floored: int = 0  # values within the allowance only thanks to the floor (grossly wrong at their own
    # magnitude: by more than GROSS.error(rtol) of it)
    drifted: int = 0  # values within the allowance only thanks to the floor and wrong at their own
    # magnitude by more than DRIFT.error(rtol) of it (floored ones included)

    def tolerance_label(self) -> str:
        if self.rtol == 0 and self.atol == 0:
            return f"{self.dtype} exact"
        return f"{self.dtype} rtol {self.rtol:.3g}" + (f" atol {self.atol:.3g}" if self.atol else "")


def _g(x: float) -> str:
    return f"{x:.3g}"


class Comparison(BaseModel):
    model_config = _JSON_INF

    match: bool
    baseline_count: int
    candidate_count: int
    compared: int
    nonfinite: bool = False
    max_rel_error: float = 0.0  # max |c - b| / max(|b|, |c|), whatever the tolerance
    worst_ratio: float = 0.0  # max over every compared value of error / allowance: <= 1 passes
    max_ulps: float = 0.0  # the largest error, in units in the last place of its dtype at the magnitude
    # it is judged at (max(|b|, |c|), or the buffer's RMS when larger)
    allowed_ulps: float = 0.0  # the allowance, in ulps, where max_ulps was seen
    buffers: list[BufferCheck] = []  # per compared group: the tolerance used and the error seen
    first_mismatches: list[Mismatch] = []
    problem: str | None = None

    def tolerance_summary(self) -> str:
        """Each tolerance used; when a per-output setting applied, which outputs got which one."""
        if not any(b.override for b in self.buffers):
            return "; ".join(dict.fromkeys(b.tolerance_label() for b in self.buffers))
        groups: dict[str, list[str]] = {}
        for b in self.buffers:
            who = groups.setdefault(b.tolerance_label(), [])
            name = b.output or ("printed numbers" if b.what == "stdout" else b.what)
            if name not in who:
                who.append(name)
        return "; ".join(f"{', '.join(who)}: {label}" for label, who in groups.items())

    def describe(self) -> str:
        if self.match:
            if not self.buffers:
                return f"{self.compared} numbers match (max rel err {self.max_rel_error:.2e})"
            if self.worst_ratio == 0:
                return f"{self.compared} numbers match exactly ({self.tolerance_summary()})"
            return (f"{self.compared} numbers match: max error {_g(self.max_ulps)} ulp (allowed {_g(self.allowed_ulps)}), "
                    f"worst {self.worst_ratio:.2g} of the allowance ({self.tolerance_summary()})")
        if self.problem:
            return self.problem
        shown = ", ".join(
            f"#{m.index}: baseline {m.baseline:.9g} vs candidate {m.candidate:.9g}" for m in self.first_mismatches[:3]
        )
        suffix = f" (worst {self.worst_ratio:.3g}x the allowance; {self.tolerance_summary()})" if self.buffers else ""
        return f"mismatch at {shown}{suffix}"

    def merged(self, other: Comparison) -> Comparison:
        """Two matching parts (printed numbers, the dump, per-call samples) as one result."""
        worst_ulps = other if other.max_ulps > self.max_ulps else self
        return self.model_copy(update={
            "match": self.match and other.match,
            "baseline_count": self.baseline_count + other.baseline_count,
            "candidate_count": self.candidate_count + other.candidate_count,
            "compared": self.compared + other.compared,
            "nonfinite": self.nonfinite or other.nonfinite,
            "max_rel_error": max(self.max_rel_error, other.max_rel_error),
            "worst_ratio": max(self.worst_ratio, other.worst_ratio),
            "max_ulps": worst_ulps.max_ulps, "allowed_ulps": worst_ulps.allowed_ulps,
            "buffers": self.buffers + other.buffers,
            "first_mismatches": self.first_mismatches + other.first_mismatches,
            "problem": self.problem or other.problem,
        })


# -- printed numbers -------------------------------------------------------------------------


def compare_outputs(baseline: str, candidate: str, *, tolerance: Tolerance | None = None, dtype: str = "float32",
                    rtol: float | None = None, atol: float | None = None, keep: int = 5,
                    noise: list[float] | None = None) -> Comparison:
    """Every number the candidate prints must equal the baseline's within the tolerance of
    `dtype` (rtol/atol here override `tolerance`'s; widened to the loosest per-output setting:
    printed numbers are derived from the outputs), plus the print's own resolution, plus
    `noise[i]`: what the baseline itself varies by between two runs of the same experiment."""
    tol = _tolerance(tolerance, rtol, atol)
    r, a = tol.for_printed(dtype)
    b, c = _printed(baseline), _printed(candidate)
    result = Comparison(match=False, baseline_count=len(b), candidate_count=len(c), compared=0)
    if not b:
        result.problem = "the baseline printed no numbers on stdout; nothing to compare"
        return result
    if not all(math.isfinite(x) for x, _ in b):
        result.problem = "the baseline itself prints NaN or inf; fix the baseline first"
        return result
    if len(b) != len(c):
        result.problem = f"the candidate printed {len(c)} numbers, the baseline {len(b)}"
        return result
    check = BufferCheck(what="stdout", dtype=dtype, count=len(b), rtol=r, atol=a,
                        override=(r, a) != tol.for_dtype(dtype))
    worst_rel, mismatches = 0.0, []
    for i, ((x, hx), (y, hy)) in enumerate(zip(b, c)):
        if not math.isfinite(y):
            result.nonfinite = True
            check.worst_ratio = math.inf
            mismatches.append(Mismatch(index=i, baseline=x, candidate=y, rel_error=math.inf))
            continue
        diff = abs(x - y)
        scale = max(abs(x), abs(y))
        rel = diff / scale if scale > 0 else 0.0
        worst_rel = max(worst_rel, rel)
        # 4 double ulps: the decimal texts' conversion to binary must not decide an exact tie
        allowed = r * scale + a + _print_allowance(hx, hy) + 4 * math.ulp(scale) + tol.scale * (noise[i] if noise else 0.0)
        ratio = diff / allowed if allowed > 0 else (math.inf if diff > 0 else 0.0)
        ulp = float(_ulp(np.float64(scale), dtype)) if dtype in _FLOAT_FORMATS else 1.0
        ulps = diff / ulp
        check.max_abs_error = max(check.max_abs_error, diff)
        check.worst_ratio = max(check.worst_ratio, ratio)
        if ulps >= check.max_ulps:
            check.max_ulps, check.allowed_ulps = ulps, allowed / ulp
        if diff > allowed:
            mismatches.append(Mismatch(index=i, baseline=x, candidate=y, rel_error=rel, allowed=allowed, ulps=ulps))
    check.mismatches = len(mismatches)
    result.compared = len(b)
    result.max_rel_error = worst_rel
    result.worst_ratio, result.max_ulps, result.allowed_ulps = check.worst_ratio, check.max_ulps, check.allowed_ulps
    result.buffers = [check]
    result.first_mismatches = mismatches[:keep]
    result.match = not mismatches
    if result.nonfinite:
        result.problem = "the candidate printed NaN or inf" + (
            f" (#{result.first_mismatches[0].index})" if result.first_mismatches else ""
        )
    return result


# -- the full output dump (docs/contract.md): every element, not just what is printed ------

_DUMP_HEADER = re.compile(rb"kernelloop-output 1 (" + b"|".join(n.encode() for n in _DUMP_DTYPES) + rb") (\d+)\n")
_CHUNK = 1 << 22  # elements compared at a time (bounded memory for 2 GiB dumps)


def read_dump(path: Path, *, max_bytes: int = 4 << 30) -> list[np.ndarray]:
    """The output buffers a harness wrote to KERNELLOOP_OUTPUT_FILE, in order."""
    size = path.stat().st_size
    if size > max_bytes:
        raise DumpError(f"output dump is {size} bytes, over the {max_bytes}-byte cap")
    data = path.read_bytes()
    buffers, offset = [], 0
    while offset < len(data):
        m = _DUMP_HEADER.match(data, offset)
        if not m:
            raise DumpError(f"malformed output dump header at byte {offset}")
        dtype = dump_dtype(m.group(1).decode())
        count = int(m.group(2))
        start, end = m.end(), m.end() + count * dtype.itemsize
        if end > len(data):
            raise DumpError(f"output dump ends inside a buffer ({count} {m.group(1).decode()} declared)")
        buffers.append(np.frombuffer(data, dtype=dtype, count=count, offset=start))
        offset = end
    return buffers


def _rms(values: np.ndarray) -> float:
    """Root mean square, scaled by the largest magnitude first so float64 squares cannot overflow."""
    if values.size == 0:
        return 0.0
    top = _largest_magnitude(values)
    if top == 0.0:
        return 0.0
    squares = 0.0
    scaled = np.empty(min(values.size, _CHUNK))
    for s in range(0, values.size, _CHUNK):  # a float64 sum per chunk: the sum depends on where the chunks end
        z = np.divide(values[s:s + _CHUNK], top, out=scaled[:min(_CHUNK, values.size - s)], dtype=np.float64)
        squares += float(np.dot(z, z))
    return top * math.sqrt(squares / values.size)


def _largest_magnitude(values: np.ndarray) -> float:
    """max |v| of finite values, exactly: max(v) or -min(v) for float32/float64 (no temporary); the others chunk by
    chunk, 16-bit floats in float32 (their own max is slow), integers in float64 (|-128| is no int8)."""
    if values.dtype in (np.float32, np.float64):
        return float(max(np.max(values), -np.min(values)))
    wide = np.float64 if values.dtype.kind in "iu" else np.float32
    return max(float(np.max(np.abs(values[s:s + _CHUNK].astype(wide)))) for s in range(0, values.size, _CHUNK))


_FROZEN_HERE: dict[int, weakref.ref] = {}  # arrays frozen() made, by id, while they live (arrays are not hashable)


def frozen(array: np.ndarray) -> np.ndarray:
    """ARRAY, fresh and not shared, made read-only and known to nothing else as writable: the floor's RMS may be kept
    for it as for a dump as read."""
    array.flags.writeable = False
    key = id(array)
    _FROZEN_HERE[key] = weakref.ref(array, lambda _, key=key: _FROZEN_HERE.pop(key, None))
    return array


def _frozen(array: np.ndarray) -> bool:
    """Whether nothing writes ARRAY's values: it and every array it views are read-only, down to an immutable bytes
    object (a dump as read) or an array frozen() made. Not any read-only array owning its memory: a writable alias
    made before its flag was cleared could still change it (red team round 259)."""
    base = array
    while isinstance(base, np.ndarray):
        if base.flags.writeable:
            return False
        known = _FROZEN_HERE.get(id(base))
        if known is not None and known() is base:
            return True
        base = base.base
    return isinstance(base, bytes)


class _RmsCache:
    """The near-zero floor's RMS (two passes over a whole buffer) per baseline buffer and experiment kind: one
    baseline run is compared with many candidate runs (every caller placement, every scale). An RMS is kept only
    for a frozen buffer, and only while the buffer lives."""

    def __init__(self) -> None:
        self._known: dict[tuple[int, bool], tuple[weakref.ref, float]] = {}

    def get(self, buffer: np.ndarray, nonfinite_inputs: bool, compute: Callable[[], float]) -> float:
        key = (id(buffer), nonfinite_inputs)
        known = self._known.get(key)
        if known is not None and known[0]() is buffer:
            return known[1]
        rms = compute()
        if _frozen(buffer):
            self._known[key] = (weakref.ref(buffer, lambda _, key=key: self._known.pop(key, None)), rms)
        return rms


_FLOOR_RMS = _RmsCache()

# Within each _CHUNK (the unit of the bit-identical skip and of max_ulps' tie rule) the elements are evaluated
# _BLOCK at a time, so a dozen temporaries stay in the CPU's cache; a chunk reports what it reported evaluated whole.
_BLOCK = 1 << 16

# The exponent field of a float's bits: the power of two of a normal number, as a number of that type.
_EXPONENT_BITS = {np.dtype(np.float32): np.uint32(0x7F800000), np.dtype(np.float64): np.uint64(0x7FF0000000000000)}


@dataclass(frozen=True)
class _Rule:
    """What every element of one buffer is held to, as numbers of the work type: float64 for float64 and integers;
    float32 for float32/float16/bfloat16 (every value exact in it, and the differences that matter are far above
    its rounding). Each operation rounds as the tolerance model's `rtol * judged + atol + noise` does."""

    name: str  # the dump's dtype
    work: type
    exact: bool  # rtol and atol 0
    floor: np.floating
    rtol: np.floating
    atol: np.floating
    noise: np.floating
    tiny: np.floating  # the dtype's smallest normal number (0 for integers): a flushed subnormal is no loss
    drift: np.floating  # DRIFT.error(rtol)
    gross: np.floating  # GROSS.error(rtol), never below `drift`

    @classmethod
    def of(cls, check: BufferCheck, floor: float, noise: float) -> _Rule:
        name, rtol, atol = check.dtype, check.rtol, check.atol
        work = np.float32 if name in ("float32", "float16", "bfloat16") else np.float64
        tiny = 2.0 ** _FLOAT_FORMATS[name][1] if name in _FLOAT_FORMATS else 0.0
        with np.errstate(over="ignore"):  # a tolerance beyond float32's range is inf in it, as before
            return cls(name=name, work=work, exact=rtol == 0 and atol == 0, floor=work(floor), rtol=work(rtol),
                       atol=work(atol), noise=work(noise), tiny=work(tiny), drift=work(DRIFT.error(rtol)),
                       gross=work(GROSS.error(rtol)))


class _Block(NamedTuple):
    """One block of elements compared, in the work type."""

    x: np.ndarray  # the baseline's values
    y: np.ndarray  # the candidate's
    finite: np.ndarray  # where y is finite
    all_finite: bool
    diff: np.ndarray  # |x - y|; integers compared exactly: at least 1 where they differ
    mag: np.ndarray  # max(|x|, |y|)
    judged: np.ndarray  # the magnitude the element is judged at: max(mag, floor)
    allowed: np.ndarray  # rtol * judged + atol + noise
    bad: np.ndarray  # y not finite, or off by more than allowed


def _evaluate(b: np.ndarray, c: np.ndarray, rule: _Rule) -> _Block:
    """The baseline's values B and the candidate's C compared element by element (the module docstring)."""
    x, y = b.astype(rule.work, copy=False), c.astype(rule.work, copy=False)
    finite = np.isfinite(y)
    all_finite = bool(finite.all())
    diff = np.subtract(x, y)
    np.abs(diff, out=diff)
    mag = np.abs(x)
    np.maximum(mag, np.abs(y), out=mag)
    judged = np.maximum(mag, rule.floor)
    allowed = judged * rule.rtol
    allowed += rule.atol
    allowed += rule.noise
    bad = np.less_equal(diff, allowed)
    np.logical_not(bad, out=bad)  # NaN is never within
    if not all_finite:
        bad |= ~finite
    if rule.exact and rule.name not in _FLOAT_FORMATS:
        bad = b != c  # exact in the integers themselves (64-bit beyond 2^53 included)
        diff = np.where(bad & (diff == 0), 1.0, diff)  # at least one unit where they differ
    return _Block(x, y, finite, all_finite, diff, mag, judged, allowed, bad)


def _worst_ratio(block: _Block) -> float:
    """The block's largest error / allowance: inf where the candidate is not finite or errs where nothing is
    allowed; NaN where an error and its allowance are both infinite, as np.max has it."""
    if block.all_finite and np.min(block.allowed) > 0:
        return float(np.max(block.diff / block.allowed))
    allowed, diff = block.allowed, block.diff
    ratio = np.where(allowed > 0, diff / np.where(allowed > 0, allowed, 1), np.where(diff > 0, np.inf, 0.0))
    ratio[~block.finite] = np.inf
    return float(np.max(ratio))


def _judged_ulp(judged: np.ndarray, name: str) -> np.ndarray:
    """_ulp(judged, name), read off the exponent bits: a judged magnitude is at least the floor, so never below the
    dtype's smallest normal number, and its ulp is 2^(its exponent - the dtype's mantissa bits), exactly."""
    if name not in _FLOAT_FORMATS:
        return _ulp(judged, name)
    mask = _EXPONENT_BITS[judged.dtype]
    ulp = (judged.view(mask.dtype) & mask).view(judged.dtype)
    ulp *= 2.0 ** -_FLOAT_FORMATS[name][0]
    return ulp


def _finite_extremes(block: _Block, rule: _Rule) -> tuple[float, float, tuple[float, float]] | None:
    """Over the elements the candidate holds finite: (the largest relative error, the largest absolute error, and
    (ulps, allowed ulps) at the first largest error in ulps); None where it holds none."""
    diff, mag, judged, allowed = block.diff, block.mag, block.judged, block.allowed
    if not block.all_finite:
        finite = np.flatnonzero(block.finite)
        if not finite.size:
            return None
        diff, mag, judged, allowed = diff[finite], mag[finite], judged[finite], allowed[finite]
    # 0 / 0 (both values zero, no error) is NaN, which fmax passes over; every other quotient is a number
    worst_rel = float(np.fmax.reduce(diff / mag))
    ulp = _judged_ulp(judged, rule.name)
    ulps = diff / ulp
    j = int(np.argmax(ulps))
    return (0.0 if math.isnan(worst_rel) else worst_rel), float(np.max(diff)), \
        (float(ulps[j]), float(allowed[j] / ulp[j]))


def _leaning(block: _Block, rule: _Rule) -> tuple[int, int]:
    """(floored, drifted): elements within the allowance only thanks to the floor, off at their own magnitude by
    over GROSS.error(rtol) and DRIFT.error(rtol) of it (plus the smallest normal number). The gross bound is never
    below the drift bound, so the floored are found among the few drifted."""
    bound = block.mag * rule.drift
    bound += rule.atol
    bound += rule.noise
    bound += rule.tiny
    within = np.less_equal(block.diff, bound)
    within |= block.bad  # a bad element is counted as bad only
    drifted = np.flatnonzero(~within)
    if not drifted.size:
        return 0, 0
    gross = block.mag[drifted] * rule.gross + rule.atol + rule.noise + rule.tiny
    return int(np.count_nonzero(~(block.diff[drifted] <= gross))), int(drifted.size)


def _mismatch(block: _Block, i: int, index: int, rule: _Rule) -> Mismatch:
    """Element I of the block, element INDEX of the dump."""
    rel = ulps = math.inf
    if block.finite[i]:
        diff, mag = block.diff[i], block.mag[i]
        rel = float(diff / mag) if mag > 0 else 0.0
        ulps = float(diff / _judged_ulp(block.judged[i:i + 1], rule.name)[0])
    return Mismatch(index=index, baseline=float(block.x[i]), candidate=float(block.y[i]), rel_error=rel,
                    allowed=float(block.allowed[i]), ulps=ulps)


def _note_mismatches(block: _Block, rule: _Rule, start: int, keep: int, mismatches: list[Mismatch]) -> int:
    """How many of the block's elements are bad; the first of them appended to MISMATCHES while it holds fewer
    than KEEP (START: the block's first element in the dump)."""
    count = int(np.count_nonzero(block.bad))
    room = keep - len(mismatches)
    if count and room > 0:
        for i in np.flatnonzero(block.bad)[:room]:
            mismatches.append(_mismatch(block, int(i), start + int(i), rule))
    return count


def _bit_identical(b: np.ndarray, c: np.ndarray) -> bool:
    """Whether B and C (unsigned integer views) hold the same values. Where they differ they mostly differ in their
    first block already: it is looked at first, alone."""
    return np.array_equal(b[:_BLOCK], c[:_BLOCK]) and np.array_equal(b[_BLOCK:], c[_BLOCK:])


def _compare_buffer(b: np.ndarray, c: np.ndarray, check: BufferCheck, offset: int, keep: int,
                    mismatches: list[Mismatch], noise: float = 0.0,
                    floor_rms: Callable[[], float] | None = None) -> tuple[float, bool]:
    """Fills `check` and appends up to `keep` mismatches; returns (max rel error, candidate finite).
    The near-zero floor is the RMS `floor_rms` gives (default: the baseline's values'), asked for once a chunk
    differs."""
    name = check.dtype
    bits = np.dtype(f"u{b.dtype.itemsize}")
    rule: _Rule | None = None
    worst_rel, all_finite = 0.0, True
    for s in range(0, b.size, _CHUNK):
        bc, cc = b[s:s + _CHUNK], c[s:s + _CHUNK]
        if _bit_identical(bc.view(bits), cc.view(bits)):
            continue  # bit-identical (the baseline's finiteness was checked before)
        if rule is None:
            # integers have no near-zero floor: no rounding makes a count or an index of a large buffer near zero
            # (red team round 262: under a named rtol a histogram's empty bins took the RMS's allowance)
            floor = 0.0
            if name in _FLOAT_FORMATS:
                floor = max(floor_rms() if floor_rms is not None else _rms(b), 2.0 ** _FLOAT_FORMATS[name][1])
            check.floor = floor
            rule = _Rule.of(check, floor, noise)
        ratios: list[float] = []
        top: tuple[float, float] | None = None  # (ulps, allowed ulps) at the chunk's first largest error in ulps
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            for t in range(0, bc.size, _BLOCK):
                block = _evaluate(bc[t:t + _BLOCK], cc[t:t + _BLOCK], rule)
                all_finite &= block.all_finite
                ratios.append(_worst_ratio(block))
                if (extremes := _finite_extremes(block, rule)) is not None:
                    rel, abs_error, ulps = extremes
                    worst_rel = max(worst_rel, rel)
                    check.max_abs_error = max(check.max_abs_error, abs_error)
                    if top is None or ulps[0] > top[0]:
                        top = ulps
                if not rule.exact:
                    floored, drifted = _leaning(block, rule)
                    check.floored += floored
                    check.drifted += drifted
                check.mismatches += _note_mismatches(block, rule, offset + s + t, keep, mismatches)
        check.worst_ratio = max(check.worst_ratio, float(np.max(ratios)))  # NaN-propagating, as over the chunk whole
        if top is not None and top[0] >= check.max_ulps:  # an equal in a later chunk takes over
            check.max_ulps, check.allowed_ulps = top
    return worst_rel, all_finite


# In the non-finite experiment, baseline values beyond this magnitude (made of an infinity) are left
# out of a buffer's near-zero floor; the stresses' own large values (spikes of |v| x 2^16, their
# squares) stay far below it.
NONFINITE_FLOOR_LIMIT = 2.0 ** 64


def _floor_source(compared: np.ndarray, name: str, nonfinite_inputs: bool) -> np.ndarray:
    """The values the near-zero floor is the RMS of: the baseline's compared (finite) values."""
    if not (nonfinite_inputs and name in _FLOAT_FORMATS):
        return compared
    # A value the baseline made of an infinity (+-FLT_MAX from a nan_to_num) is no scale for
    # the rest: in the RMS it would lift the floor to ~FLT_MAX / sqrt(n) (red team round 47).
    exact = compared if compared.dtype in (np.float32, np.float64) else compared.astype(np.float32)
    big = np.abs(exact) > NONFINITE_FLOOR_LIMIT  # 2^64: exact in float32 as in float64
    return compared[~big] if big.any() else compared


def _floor_rms(original: np.ndarray, compared: np.ndarray, name: str, nonfinite_inputs: bool) -> Callable[[], float]:
    """The near-zero floor's RMS for the baseline buffer ORIGINAL (its finite values: COMPARED), for _compare_buffer
    to ask for where the candidate differs: computed once per frozen buffer (_RmsCache)."""
    return lambda: _FLOOR_RMS.get(original, nonfinite_inputs,
                                  lambda: _rms(_floor_source(compared, name, nonfinite_inputs)))


def compare_dumps(baseline: list[np.ndarray], candidate: list[np.ndarray], *, tolerance: Tolerance | None = None,
                  rtol: float | None = None, atol: float | None = None, keep: int = 5,
                  noise: list[float] | None = None, names: list[str] | None = None,
                  nonfinite_inputs: bool = False) -> Comparison:
    """Every element of every output buffer, within the tolerance of its dtype (rtol/atol
    here override `tolerance`'s), plus `noise[n]` for buffer n (the baseline's own variation
    between two runs of one experiment); NaN never passes, and an infinity only where the baseline
    holds the same one (a causal mask's -inf, on finite inputs). `names[n]` is buffer n's name
    in the harness (contract v2: the manifest's output buffers, in order): a per-output
    tolerance of `tolerance` applies to the buffer of that name. With `nonfinite_inputs` (the
    non-finite experiment: NaN and +-inf among the inputs) an element the baseline leaves NaN or
    inf is not compared (how NaN propagates is no contract); every element the baseline keeps
    finite must be finite and within the tolerance in the candidate too."""
    tol = _tolerance(tolerance, rtol, atol)
    total = sum(b.size for b in baseline)
    result = Comparison(match=False, baseline_count=total, candidate_count=sum(c.size for c in candidate), compared=0)
    if len(baseline) != len(candidate) or any(b.shape != c.shape or b.dtype != c.dtype
                                              for b, c in zip(baseline, candidate)):
        result.problem = "the output dumps have different buffers (count, size or type)"
        return result
    try:
        dtypes = [dtype_name(b.dtype) for b in baseline]
    except UnknownDtype as exc:
        result.problem = f"cannot compare the output dumps: {exc}"
        return result
    mismatches: list[Mismatch] = []
    offset = 0
    skipped = 0
    for n, (original, c, name) in enumerate(zip(baseline, candidate, dtypes)):
        b, c = np.ascontiguousarray(original).reshape(-1), np.ascontiguousarray(c).reshape(-1)
        whole_size = b.size
        compared: np.ndarray | None = None  # a mask of the compared elements, when not all are
        infinities: list[Mismatch] = []
        if name in _FLOAT_FORMATS and not all(np.isfinite(b[s:s + _CHUNK]).all() for s in range(0, b.size, _CHUNK)):
            special = ~np.isfinite(b)
            if not nonfinite_inputs:
                if (b[special] != b[special]).any():
                    result.problem = "the baseline's own output holds NaN; fix the baseline first"
                    return result
                # +-inf the baseline makes of finite inputs (a causal mask's -inf) is a value like any
                # other, kept exactly: the candidate must hold the same infinity at the same places.
                bits = np.dtype(f"u{b.dtype.itemsize}")
                wrong = np.flatnonzero(special & (b.view(bits) != c.view(bits)))
                infinities = [Mismatch(index=offset + int(i), baseline=float(b[i]), candidate=float(c[i]),
                                       rel_error=math.inf, allowed=0.0, ulps=math.inf) for i in wrong]
            else:
                skipped += int(np.count_nonzero(special))
            compared = ~special
            b, c = b[compared], c[compared]
        output = names[n] if names is not None and n < len(names) else None
        r, a = tol.for_dtype(name, output)
        check = BufferCheck(what=f"buffer {n}", dtype=name, count=b.size, rtol=r, atol=a, output=output,
                            override=tol.overrides(output))
        found: list[Mismatch] = []
        rel, finite = _compare_buffer(b, c, check, 0, keep, found,
                                      tol.scale * (noise[n] if noise and n < len(noise) else 0.0),
                                      _floor_rms(original, b, name, nonfinite_inputs))
        positions = np.flatnonzero(compared) if compared is not None and found else None
        for m in found[:max(0, keep - len(mismatches))]:  # indices into the whole buffer, and the whole dump
            m.index = offset + (int(positions[m.index]) if positions is not None else m.index)
            mismatches.append(m)
        if infinities:
            check.mismatches += len(infinities)
            check.worst_ratio = math.inf
            mismatches.extend(infinities[:max(0, keep - len(mismatches))])
        result.max_rel_error = max(result.max_rel_error, rel)
        result.nonfinite |= not finite
        result.buffers.append(check)
        offset += whole_size
    result.compared = total - skipped
    result.first_mismatches = mismatches[:keep]
    result.worst_ratio = max((k.worst_ratio for k in result.buffers), default=0.0)
    top = max(result.buffers, key=lambda k: k.max_ulps, default=None)
    if top is not None:
        result.max_ulps, result.allowed_ulps = top.max_ulps, top.allowed_ulps
    bad = sum(k.mismatches for k in result.buffers)
    leaning = [k for k in result.buffers if k.floored > GROSS.limit(k.count)]
    drifting = [k for k in result.buffers if k.drifted > DRIFT.limit(k.count)]
    result.match = bad == 0 and not leaning and not drifting
    if result.nonfinite:
        result.problem = "the candidate's output holds NaN or inf" + (
            f" (element {mismatches[0].index})" if mismatches else "")
    elif bad:
        shown = ", ".join(f"element {m.index}: baseline {m.baseline:.9g} vs candidate {m.candidate:.9g}"
                          for m in result.first_mismatches[:3])
        worst = f", the worst by {result.worst_ratio:.3g}x the allowance" if math.isfinite(result.worst_ratio) else ""
        result.problem = f"{bad} of {total} elements differ{worst} ({result.tolerance_summary()}): {shown}"
    elif leaning:
        k = leaning[0]
        result.problem = (f"{k.floored} of {k.count} values of {k.what} are wrong at their own magnitude (by over "
                          f"{GROSS.error(k.rtol):.2g} of it) and pass "
                          f"only by the near-zero floor ({k.floor:.3g}); an honest rewrite needs it for a few values, "
                          f"not {100 * k.floored / k.count:.2g}% (small values flushed or approximated)")
    elif drifting:
        k = drifting[0]
        result.problem = (f"{k.drifted} of {k.count} values of {k.what} are wrong at their own magnitude (by over "
                          f"{DRIFT.error(k.rtol):.2g} of it) and pass only by the near-zero floor ({k.floor:.3g}); "
                          f"an honest rewrite's rounding needs that for at most {100 * DRIFT_FRACTION:.2g}%, "
                          f"not {100 * k.drifted / k.count:.2g}% (small values computed at a lower precision)")
    return result


# The floor (the buffer's RMS) lets values near zero differ by rtol x RMS, because cancellation
# makes their relative error meaningless. Honest rewrites lean on it heavily for a sliver of the
# values; a kernel that flushes or approximates every small value leans on it for many (a red
# team zeroed 84% of a softmax's nonzero outputs inside it).
FLOOR_RELIANCE_FRACTION = 0.01

# What counts as leaning on the floor: an error above GROSS_FACTOR x rtol of the value's own
# magnitude (at most half of it: a value lost entirely always counts). Honest noise near zero is
# the rounding of the terms that cancelled, about one size d for every value of the buffer, so it
# is over k x rtol of a value's magnitude only where |b| < d / (k rtol): a band around zero holding
# a fraction 2 p(0) d / (k rtol) of the values (p: the values' density). With d within the
# allowance (rtol x RMS) that is at most 2 p(0) RMS / k: under 1% at k = 100 for a normal
# distribution (p(0) RMS = 0.4) or anything no more peaked at zero. At k = 1 (the rule before) an
# honest reordering of a difference of two 64-term float32 sums (an output crossing zero) leaned
# on the floor for 3-5% of its values and was rejected, at 0.3 of the allowance.
GROSS_FACTOR = 100.0


@dataclass(frozen=True)
class FloorBudget:
    """How many values of a buffer may pass only by the near-zero floor while wrong at their own
    magnitude by over `factor` x rtol (at most half of it: a value lost entirely always counts)."""

    factor: float
    fraction: float

    def error(self, rtol: float) -> float:
        """The relative error at a value's own magnitude above which a value counts."""
        return min(self.factor * rtol, 0.5)

    def limit(self, count: int) -> float:
        """How many values of a buffer of `count` may count (at least 8)."""
        return max(8.0, self.fraction * count)


GROSS = FloorBudget(GROSS_FACTOR, FLOOR_RELIANCE_FRACTION)


# The same budget one step closer: values wrong at their own magnitude by over DRIFT_FACTOR x rtol
# (8 x 2^-15 in float32, about 4000 units in the last place). By the argument above the honest share
# is 2 p(0) RMS c / k for noise at c of the allowance: 0.8 c / 8 for a normal distribution, so 5% holds
# honest rounding up to half the allowance. What it stops is a lower precision kept for the small
# values only (red team round 107: softmax outputs under 2e-4, 97% of them, rounded to fp16's 10
# mantissa bits, 16 x rtol at their own size, passed both the allowance and the gross count).
DRIFT_FACTOR = 8.0
DRIFT_FRACTION = 0.05
DRIFT = FloorBudget(DRIFT_FACTOR, DRIFT_FRACTION)
