"""Reading what a kernel program prints, and comparing two outputs number by number."""

from __future__ import annotations

import math
import re

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
