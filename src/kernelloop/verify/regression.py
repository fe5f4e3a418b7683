"""Deciding "did this kernel get slower?" from interleaved timings (`kernelloop bench check`).

The question differs from the speedup gate's ("is the candidate at least 1.2x faster?"): a CI
job wants to know whether the current program is slower than its recorded reference by more
than a regression threshold t (default 3 %), and must not cry wolf on noise. Runs come in
interleaved (current, reference) pairs on the same GPU in the same job; each pair gives a time
ratio current/reference. The distribution-free (sign-test) confidence interval [lo, hi] for the
median pair ratio then decides, in the spirit of nvbench's robust compare:

    SLOWER     lo > 1 + t                  the whole interval is past the regression bar
    FASTER     hi < 1 / (1 + t)            the whole interval is past the bar the other way
    SAME       1/(1+t) <= lo, hi <= 1 + t  the whole interval lies within the bar (equivalence)
    AMBIGUOUS  otherwise                   the interval straddles a bar: more pairs, or noise

SAME is an equivalence test, not "no difference found": a noisy measurement that could hide a
regression is AMBIGUOUS, never SAME. For a program compared with itself the pair ratios are
symmetric around 1, so SLOWER needs every ratio of the interval's rank past 1 + t: with 9
pairs at 95 % that is the 2nd smallest of 9 ratios above the bar, which noise smaller than t
essentially never does (tests/test_regression_rule.py simulates it).
"""

from __future__ import annotations

import statistics
from typing import Literal

from pydantic import BaseModel

from .stats import Spread, median_interval

Outcome = Literal["faster", "slower", "same", "ambiguous"]


class RegressionDecision(BaseModel):
    outcome: Outcome
    ratio: float  # the median pair ratio current/reference (inside its interval, unlike a ratio of medians): above 1 is slower
    lower: float  # sign-test interval of the median pair ratio current/reference
    upper: float
    confidence: float  # achieved coverage of [lower, upper]
    pairs: int
    pair_ratios: list[float]
    reference: Spread
    current: Spread
    threshold: float  # the regression threshold t: 0.03 is 3 %

    def describe(self) -> str:
        change = self.ratio - 1
        return (f"{self.outcome.upper()}: {abs(change):.1%} {'slower' if change > 0 else 'faster'} "
                f"(time ratio {self.ratio:.3f}, interval {self.lower:.3f}-{self.upper:.3f} at "
                f"{self.confidence:.0%}, {self.pairs} pairs; bar ±{self.threshold:.0%})")


def compare_times(reference_ms: list[float], current_ms: list[float], *, threshold: float,
                  confidence: float) -> RegressionDecision:
    """The verdict of `bench check` for one kernel, from paired kernel times (same length)."""
    if len(reference_ms) != len(current_ms) or len(reference_ms) < 2:
        raise ValueError("need at least two timing pairs of equal length")
    if threshold <= 0:
        raise ValueError("the regression threshold must be positive")
    if any(x <= 0 for x in (*reference_ms, *current_ms)):
        raise ValueError("kernel times must be positive")
    ratios = [c / r for r, c in zip(reference_ms, current_ms)]
    lower, upper, coverage = median_interval(ratios, confidence)
    slow_bar, fast_bar = 1 + threshold, 1 / (1 + threshold)
    outcome: Outcome
    if lower > slow_bar:
        outcome = "slower"
    elif upper < fast_bar:
        outcome = "faster"
    elif lower >= fast_bar and upper <= slow_bar:
        outcome = "same"
    else:
        outcome = "ambiguous"
    return RegressionDecision(
        outcome=outcome, ratio=statistics.median(ratios), lower=lower,
        upper=upper, confidence=coverage, pairs=len(ratios), pair_ratios=ratios,
        reference=Spread.of(reference_ms), current=Spread.of(current_ms), threshold=threshold)
