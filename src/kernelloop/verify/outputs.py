"""Reading what a kernel program prints, and comparing two outputs number by number."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
from pydantic import BaseModel

_NUMBER = re.compile(
    r"(?<![\w.])[-+]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|nan|inf(?:inity)?)(?![\w.])", re.I
)
_KERNEL_MS = re.compile(r"^\s*KERNEL_MS:\s*(\S+)\s*$", re.M)


def numbers_in(text: str) -> list[float]:
    """Every number printed, in order (labels are skipped; 'nan'/'inf' are numbers)."""
    return [float(m.group(0)) for m in _NUMBER.finditer(text)]


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
    try:
        value = float(found[0])
    except ValueError:
        return KernelMs(value=None, count=1, problem=f"KERNEL_MS value {found[0]!r} is not a number")
    if not math.isfinite(value) or value <= 0:
        return KernelMs(value=None, count=1, problem=f"KERNEL_MS value {found[0]} is not a positive finite time")
    return KernelMs(value=value, count=1)


class Mismatch(BaseModel):
    index: int  # position among the printed numbers
    baseline: float
    candidate: float
    rel_error: float


class Comparison(BaseModel):
    match: bool
    baseline_count: int
    candidate_count: int
    compared: int
    nonfinite: bool = False
    max_rel_error: float = 0.0
    first_mismatches: list[Mismatch] = []
    problem: str | None = None

    def describe(self) -> str:
        if self.match:
            return f"{self.compared} numbers match (max rel err {self.max_rel_error:.2e})"
        if self.problem:
            return self.problem
        shown = ", ".join(
            f"#{m.index}: baseline {m.baseline:.7g} vs candidate {m.candidate:.7g}" for m in self.first_mismatches[:3]
        )
        return f"mismatch at {shown}"


def compare_outputs(baseline: str, candidate: str, *, rtol: float, atol: float = 0.0, keep: int = 5) -> Comparison:
    """Every number the candidate prints must equal the baseline's within the tolerance."""
    b, c = numbers_in(baseline), numbers_in(candidate)
    result = Comparison(match=False, baseline_count=len(b), candidate_count=len(c), compared=0)
    if not b:
        result.problem = "the baseline printed no numbers on stdout; nothing to compare"
        return result
    if not all(math.isfinite(x) for x in b):
        result.problem = "the baseline itself prints NaN or inf; fix the baseline first"
        return result
    if len(b) != len(c):
        result.problem = f"the candidate printed {len(c)} numbers, the baseline {len(b)}"
        return result
    worst = 0.0
    for i, (x, y) in enumerate(zip(b, c)):
        if not math.isfinite(y):
            result.nonfinite = True
            result.first_mismatches.append(Mismatch(index=i, baseline=x, candidate=y, rel_error=math.inf))
            continue
        diff = abs(x - y)
        scale = max(abs(x), abs(y))
        rel = diff / scale if scale > 0 else 0.0
        worst = max(worst, rel)
        if diff > rtol * scale + atol:
            result.first_mismatches.append(Mismatch(index=i, baseline=x, candidate=y, rel_error=rel))
    result.compared = len(b)
    result.max_rel_error = worst
    result.first_mismatches = result.first_mismatches[:keep]
    result.match = not result.first_mismatches
    if result.nonfinite:
        result.problem = "the candidate printed NaN or inf" + (
            f" (#{result.first_mismatches[0].index})" if result.first_mismatches else ""
        )
    return result


# -- the full output dump (docs/contract.md): every element, not just what is printed ------

_DUMP_HEADER = re.compile(rb"kernelloop-output 1 (float32|float64|int32|uint32|int64) (\d+)\n")
_DTYPES = {"float32": "<f4", "float64": "<f8", "int32": "<i4", "uint32": "<u4", "int64": "<i8"}


class DumpError(ValueError):
    """The dump file is malformed (a candidate cannot write it: the frozen harness does)."""


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
        dtype = np.dtype(_DTYPES[m.group(1).decode()])
        count = int(m.group(2))
        start, end = m.end(), m.end() + count * dtype.itemsize
        if end > len(data):
            raise DumpError(f"output dump ends inside a buffer ({count} {m.group(1).decode()} declared)")
        buffers.append(np.frombuffer(data, dtype=dtype, count=count, offset=start))
        offset = end
    return buffers


def compare_dumps(baseline: list[np.ndarray], candidate: list[np.ndarray], *, rtol: float, atol: float = 0.0,
                  keep: int = 5) -> Comparison:
    """Every element of every output buffer, within the tolerance; NaN and inf never pass."""
    total = sum(b.size for b in baseline)
    result = Comparison(match=False, baseline_count=total, candidate_count=sum(c.size for c in candidate), compared=0)
    if len(baseline) != len(candidate) or any(b.shape != c.shape or b.dtype != c.dtype
                                              for b, c in zip(baseline, candidate)):
        result.problem = "the output dumps have different buffers (count, size or type)"
        return result
    worst, offset = 0.0, 0
    for b, c in zip(baseline, candidate):
        # float32 arithmetic is exact enough for a 1e-3-scale tolerance and halves the memory
        work = np.float32 if b.dtype == np.float32 else np.float64
        b64, c64 = b.astype(work, copy=False), c.astype(work, copy=False)
        if not np.isfinite(b64).all():
            result.problem = "the baseline's own output holds NaN or inf; fix the baseline first"
            return result
        finite = np.isfinite(c64)
        diff = np.abs(b64 - c64)
        scale = np.maximum(np.abs(b64), np.abs(c64))
        bad = ~finite | (diff > rtol * scale + atol)
        with np.errstate(invalid="ignore", divide="ignore"):
            rel = np.where(scale > 0, diff / np.where(scale > 0, scale, 1), 0.0)
        if finite.any():
            worst = max(worst, float(np.max(rel[finite])))
        for i in np.flatnonzero(bad)[: keep - len(result.first_mismatches)]:
            result.first_mismatches.append(Mismatch(index=offset + int(i), baseline=float(b64[i]),
                                                    candidate=float(c64[i]), rel_error=float(rel[i]) if finite[i] else math.inf))
        result.nonfinite |= not finite.all()
        offset += b.size
    result.compared = total
    result.max_rel_error = worst
    result.match = not result.first_mismatches
    if result.nonfinite:
        result.problem = "the candidate's output holds NaN or inf" + (
            f" (element {result.first_mismatches[0].index})" if result.first_mismatches else "")
    elif not result.match:
        shown = ", ".join(f"element {m.index}: baseline {m.baseline:.7g} vs candidate {m.candidate:.7g}"
                          for m in result.first_mismatches[:3])
        result.problem = f"{int(sum(1 for _ in result.first_mismatches))}+ of {total} elements differ ({shown})"
    return result
