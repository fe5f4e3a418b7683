"""The rule `bench check` decides by (verify/regression.py), on synthetic timings."""

import random

import pytest

from kernelloop.verify.regression import compare_times


def _pairs(rng: random.Random, n: int, slowdown: float, noise: float, base_ms: float = 0.5):
    """n interleaved (reference, current) kernel times: multiplicative noise on each run."""
    reference = [base_ms * rng.lognormvariate(0, noise) for _ in range(n)]
    current = [base_ms * (1 + slowdown) * rng.lognormvariate(0, noise) for _ in range(n)]
    return reference, current


def _outcomes(slowdown: float, noise: float, trials: int = 2000, n: int = 9, most: int = 21,
              threshold: float = 0.03):
    """Outcomes of `bench check`'s procedure (verify/gate.py's pair loop with the bench defaults):
    n pairs, then 2 more at a time while AMBIGUOUS, up to `most`."""
    rng = random.Random(1234)
    counts = {"same": 0, "faster": 0, "slower": 0, "ambiguous": 0}
    for _ in range(trials):
        reference, current = _pairs(rng, n, slowdown, noise)
        while True:
            outcome = compare_times(reference, current, threshold=threshold, confidence=0.95).outcome
            if outcome != "ambiguous" or len(reference) >= most:
                break
            more_reference, more_current = _pairs(rng, 2, slowdown, noise)
            reference, current = reference + more_reference, current + more_current
        counts[outcome] += 1
    return counts


@pytest.mark.parametrize("noise", [0.002, 0.01, 0.02])
def test_a_program_against_itself_is_never_slower_or_faster(noise):
    counts = _outcomes(0.0, noise)
    assert counts["slower"] == 0 and counts["faster"] == 0
    if noise <= 0.01:  # quiet enough for a 3 % bar: SAME almost always
        assert counts["same"] >= 0.99 * sum(counts.values())


def test_noise_as_large_as_the_bar_is_ambiguous_not_same():
    """SAME is an equivalence claim: a measurement too noisy to see a 3 % regression says so."""
    counts = _outcomes(0.0, 0.05)
    assert counts["ambiguous"] > 0.8 * sum(counts.values())
    assert counts["slower"] <= 0.005 * sum(counts.values())  # a false alarm needs noise beyond the bar


@pytest.mark.parametrize("slowdown", [0.10, 0.25, 1.0])
def test_a_clear_regression_is_slower(slowdown):
    counts = _outcomes(slowdown, 0.01)
    assert counts["slower"] == sum(counts.values())


def test_a_clear_gain_is_faster():
    counts = _outcomes(-0.2, 0.01)
    assert counts["faster"] == sum(counts.values())


def test_a_regression_at_the_bar_in_noise_is_not_called_either_way():
    """3 % slower with 3 % noise: neither SAME (it could be a regression) nor reliably SLOWER."""
    counts = _outcomes(0.03, 0.03)
    assert counts["same"] < 0.05 * sum(counts.values())
    assert counts["ambiguous"] > 0.5 * sum(counts.values())


def test_within_the_bar_is_same_even_when_measured_exactly():
    decision = compare_times([1.0] * 9, [1.02] * 9, threshold=0.03, confidence=0.95)
    assert decision.outcome == "same" and decision.ratio == pytest.approx(1.02)
    assert "2.0% slower" in decision.describe()


def test_the_interval_uses_order_statistics_of_the_pair_ratios():
    reference = [1.0] * 9
    current = [1.10, 1.11, 1.12, 1.13, 1.14, 1.15, 1.16, 1.17, 0.5]  # one wild pair cannot rescue it
    decision = compare_times(reference, current, threshold=0.03, confidence=0.95)
    assert decision.lower == pytest.approx(1.10) and decision.upper == pytest.approx(1.16)
    assert decision.outcome == "slower" and decision.confidence > 0.95


@pytest.mark.parametrize("reference,current,threshold", [
    ([1.0], [1.0], 0.03), ([1.0, 1.0], [1.0], 0.03), ([1.0, 1.0], [1.0, 1.0], 0.0), ([1.0, 0.0], [1.0, 1.0], 0.03)])
def test_bad_input_is_refused(reference, current, threshold):
    with pytest.raises(ValueError):
        compare_times(reference, current, threshold=threshold, confidence=0.95)


def test_the_point_estimate_lies_inside_its_interval():
    # A ratio of medians can fall outside the interval of the median pair ratio (an H200 check showed
    # "+0.1% (-0.0% to +0.0%)"); the median pair ratio cannot.
    rng = random.Random(13)
    for _ in range(200):
        reference = [20.0 + rng.gauss(0, 0.4) for _ in range(9)]
        current = [r * (1 + rng.gauss(0, 0.0003)) + rng.choice([0, 0, 0.5]) for r in reference]
        d = compare_times(reference, current, threshold=0.03, confidence=0.95)
        assert d.lower <= d.ratio <= d.upper
