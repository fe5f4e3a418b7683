"""Deciding "faster" from noisy interleaved timings without a coin toss.

Runs come in adjacent pairs (baseline, candidate), the order alternating pair by pair
(ABBA) so a slow drift of the GPU clock hits both sides alike. Each pair gives a ratio
baseline/candidate. The speedup is median(baseline)/median(candidate); the decision uses
a distribution-free confidence interval for the median pair ratio from order statistics
(the sign-test interval): accept only when its lower end clears the threshold, call it
not faster when its upper end is below, and inconclusive otherwise (more runs help).
With 5 pairs the interval is [min, max] at 93.75 %: every pair must clear the bar.
"Faster" also needs the two samples to be separated (the slowest candidate run beats
the fastest baseline run). For a program compared with itself the runs are exchangeable,
so separation happens with probability exactly 1/C(2n, n) whatever the noise: that bounds
the false acceptance of an A/A comparison at any threshold (n = 7 pairs, the default:
under 0.03 %). At the default threshold of 1.2 the pair ratios alone already make it
vanish (tests/test_outputs_stats.py measures both).
"""

from __future__ import annotations

import math
import statistics
from typing import Literal

from pydantic import BaseModel


class Spread(BaseModel):
    median: float
    minimum: float
    maximum: float
    iqr: float
    relative_iqr: float  # iqr / median

    @classmethod
    def of(cls, xs: list[float]) -> "Spread":
        q = statistics.quantiles(xs, n=4, method="inclusive") if len(xs) >= 2 else [xs[0]] * 3
        med = statistics.median(xs)
        return cls(median=med, minimum=min(xs), maximum=max(xs), iqr=q[2] - q[0],
                   relative_iqr=(q[2] - q[0]) / med if med else math.inf)


class SpeedupDecision(BaseModel):
    speedup: float
    lower: float
    upper: float
    confidence: float  # achieved coverage of [lower, upper]
    pairs: int
    pair_ratios: list[float]
    baseline: Spread
    candidate: Spread
    outcome: Literal["faster", "not_faster", "inconclusive"]
    threshold: float
    separated: bool = False  # every candidate run beat every baseline run
    false_accept_bound: float = 1.0  # P(accept) for a program against itself, any noise: 1/C(2n, n)

    def describe(self) -> str:
        return (
            f"{self.speedup:.2f}x (interval {self.lower:.2f}-{self.upper:.2f} at {self.confidence:.0%}, "
            f"{self.pairs} pairs) vs bar {self.threshold:.2f}x"
        )


def _binom_cdf(k: int, n: int) -> float:
    return sum(math.comb(n, i) for i in range(k + 1)) / 2**n


def median_interval(values: list[float], confidence: float) -> tuple[float, float, float]:
    """Order-statistic interval for the median: (lower, upper, achieved coverage)."""
    xs = sorted(values)
    n = len(xs)
    alpha = 1 - confidence
    k = 1  # 1-based rank of the lower end; k=1 is [min, max]
    while k + 1 <= n // 2 and 2 * _binom_cdf(k, n) <= alpha:
        k += 1
    coverage = 1 - 2 * _binom_cdf(k - 1, n)
    return xs[k - 1], xs[n - k], coverage


def decide(baseline_ms: list[float], candidate_ms: list[float], *, threshold: float,
           confidence: float) -> SpeedupDecision:
    if len(baseline_ms) != len(candidate_ms) or len(baseline_ms) < 2:
        raise ValueError("need at least two timing pairs of equal length")
    ratios = [b / c for b, c in zip(baseline_ms, candidate_ms)]
    lower, upper, coverage = median_interval(ratios, confidence)
    speedup = statistics.median(baseline_ms) / statistics.median(candidate_ms)
    separated = max(candidate_ms) < min(baseline_ms)
    if lower >= threshold and speedup >= threshold and separated:
        outcome = "faster"
    elif upper < threshold:
        outcome = "not_faster"
    else:
        outcome = "inconclusive"
    return SpeedupDecision(
        speedup=speedup, lower=lower, upper=upper, confidence=coverage, pairs=len(ratios),
        pair_ratios=ratios, baseline=Spread.of(baseline_ms), candidate=Spread.of(candidate_ms),
        outcome=outcome, threshold=threshold, separated=separated,
        false_accept_bound=1 / math.comb(2 * len(ratios), len(ratios)),
    )
