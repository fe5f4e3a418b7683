"""Output comparison and the speedup decision."""

from __future__ import annotations

import math
import random

import pytest

from kernelloop.verify.outputs import compare_outputs, numbers_in, parse_kernel_ms
from kernelloop.verify.stats import decide, median_interval


def test_numbers_in_reads_labels_nan_inf_and_exponents():
    text = "checksum 12.5\ncorners 1 -2.5e3 +.5 nan -nan inf -inf sm_90 row2 x=3"
    got = numbers_in(text)
    assert got[:4] == [12.5, 1.0, -2500.0, 0.5]
    assert math.isnan(got[4]) and math.isnan(got[5]) and got[6] == math.inf and got[7] == -math.inf
    assert got[8:] == [3.0]  # sm_90 and row2 are words; "x=3" prints the number 3


@pytest.mark.parametrize("line, value, problem", [
    ("KERNEL_MS: 0.4150\n", 0.415, None),
    ("warming up\nKERNEL_MS:   2e-3  \n", 0.002, None),
    ("", None, "no 'KERNEL_MS"),
    ("KERNEL_MS: 1\nKERNEL_MS: 0.001\n", None, "printed 2 times"),
    # round 110: a forged line first, the harness's own continuing a line left open
    ("KERNEL_MS: 0.01\nkl: launch failed: KERNEL_MS: 0.843000\n", None, "inside another line"),
    ("KERNEL_MS: nan\n", None, "positive finite"),
    ("KERNEL_MS: 0\n", None, "positive finite"),
    ("KERNEL_MS: fast\n", None, "not a number"),
])
def test_parse_kernel_ms(line, value, problem):
    k = parse_kernel_ms(line)
    assert k.value == (pytest.approx(value) if value else None)
    assert (problem is None and k.problem is None) or problem in k.problem


def test_compare_within_rtol_and_reports_first_mismatches():
    base = "checksum 1000.0\ncorners 1 2 3 4"
    assert compare_outputs(base, "checksum 1000.9\ncorners 1 2 3 4", rtol=1e-3).match
    bad = compare_outputs(base, "checksum 1002.0\ncorners 1 2 3 4.5", rtol=1e-3)
    assert not bad.match and [m.index for m in bad.first_mismatches] == [0, 4]
    assert "#0: baseline 1000 vs candidate 1002" in bad.describe()


def test_compare_rejects_nan_inf_and_count_changes_and_needs_numbers():
    assert compare_outputs("a 1 2", "a 1 nan", rtol=1).nonfinite
    assert not compare_outputs("a 1 2", "a 1 inf", rtol=1).match
    assert "printed 3 numbers" in compare_outputs("a 1 2", "a 1 2 3", rtol=1).describe()
    assert "no numbers" in compare_outputs("nothing", "nothing", rtol=1).describe()
    assert "baseline itself" in compare_outputs("x nan", "x nan", rtol=1).describe()
    assert compare_outputs("z 0 0", "z 0 0", rtol=0).match  # exact zeros are equal


def test_atol_allows_small_absolute_differences():
    # printed to 1e-12 (12 decimals) and 1e-10: the prints' own resolution cannot hide 1e-9
    assert not compare_outputs("v 0.000000000000", "v 1.0e-9", rtol=1e-3).match
    assert compare_outputs("v 0.000000000000", "v 1.0e-9", rtol=1e-3, atol=1e-8).match
    # "0.0" and "1e-9" are both prints of a value within 5e-10 of 5e-10: the same number as printed
    assert compare_outputs("v 0.0", "v 1e-9", rtol=1e-3).match


def test_median_interval_coverage():
    assert median_interval([5, 1, 3, 2, 4], 0.9) == (1, 5, 0.9375)
    lo, hi, cov = median_interval(list(range(15)), 0.9)
    assert (lo, hi) == (3, 11) and cov >= 0.9


def test_clear_speedup_is_faster():
    d = decide([1.0, 1.01, 0.99, 1.0, 1.0], [0.5, 0.51, 0.5, 0.49, 0.5], threshold=1.2, confidence=0.9)
    assert d.outcome == "faster" and d.speedup == pytest.approx(2.0, rel=0.02)
    assert d.separated and d.false_accept_bound == pytest.approx(1 / 252)


def test_overlapping_samples_are_not_faster_even_with_good_pair_ratios():
    # pairs all clear 1.2, but one candidate run is slower than one baseline run
    d = decide([1.0, 2.0, 1.0, 2.0, 1.0], [0.8, 1.6, 0.8, 1.6, 0.8], threshold=1.2, confidence=0.9)
    assert d.lower >= 1.2 and not d.separated and d.outcome != "faster"


def test_a_pair_under_the_bar_makes_it_a_coin_toss_not_a_pass():
    d = decide([1.0] * 5, [0.8, 0.8, 0.8, 0.8, 0.86], threshold=1.2, confidence=0.9)
    assert d.outcome == "inconclusive"


def test_clearly_slower_is_not_faster():
    d = decide([1.0] * 5, [0.95, 0.96, 0.94, 0.95, 0.97], threshold=1.2, confidence=0.9)
    assert d.outcome == "not_faster"


def _a_versus_a(rng, noise, pairs, threshold):
    a = [1 + rng.gauss(0, noise) for _ in range(pairs)]
    b = [1 + rng.gauss(0, noise) for _ in range(pairs)]
    return decide(a, b, threshold=threshold, confidence=0.9)


@pytest.mark.parametrize("noise", [0.005, 0.02, 0.05, 0.10])
def test_a_versus_a_never_passes_at_the_default_threshold(noise):
    rng = random.Random(1234)
    for _ in range(5000):
        d = _a_versus_a(rng, noise, 7, 1.2)
        assert d.outcome != "faster"
        assert d.speedup == pytest.approx(1.0, abs=6 * noise)


@pytest.mark.parametrize("threshold", [1.01, 1.05])
def test_a_versus_a_false_accepts_stay_under_the_separation_bound_at_any_threshold(threshold):
    rng = random.Random(99)
    trials = 20000
    passes = sum(_a_versus_a(rng, 0.05, 7, threshold).outcome == "faster" for _ in range(trials))
    bound = 1 / math.comb(14, 7)
    assert passes <= 2 * bound * trials + 3  # ~6 expected at most; pair ratios alone gave ~90 in 200k at 5 pairs


def _dump(tmp_path, name, *buffers):
    import numpy as np
    path = tmp_path / name
    with path.open("wb") as f:
        for dtype, values in buffers:
            arr = np.asarray(values, dtype={"float32": "<f4", "uint32": "<u4"}[dtype])
            f.write(f"kernelloop-output 1 {dtype} {arr.size}\n".encode() + arr.tobytes())
    return path


def test_dump_round_trip_and_element_wise_comparison(tmp_path):
    from kernelloop.verify.outputs import compare_dumps, read_dump

    base = read_dump(_dump(tmp_path, "b", ("float32", [1.0, 2.0, 3.0, 4.0]), ("uint32", [7, 8])))
    same = read_dump(_dump(tmp_path, "s", ("float32", [1.0005, 2.0, 3.0, 4.0]), ("uint32", [7, 8])))
    assert [b.size for b in base] == [4, 2]
    assert compare_dumps(base, same, rtol=1e-3).match
    off = read_dump(_dump(tmp_path, "o", ("float32", [1.0, 2.0, 0.0, 4.0]), ("uint32", [7, 9])))
    r = compare_dumps(base, off, rtol=1e-3)
    assert not r.match and [m.index for m in r.first_mismatches] == [2, 5]
    nan = read_dump(_dump(tmp_path, "n", ("float32", [1.0, float("nan"), 3.0, 4.0]), ("uint32", [7, 8])))
    assert compare_dumps(base, nan, rtol=1).nonfinite
    shape = read_dump(_dump(tmp_path, "x", ("float32", [1.0, 2.0, 3.0]), ("uint32", [7, 8])))
    assert "different buffers" in compare_dumps(base, shape, rtol=1).problem


def test_malformed_dumps_are_refused(tmp_path):
    from kernelloop.verify.outputs import DumpError, read_dump

    (tmp_path / "bad").write_bytes(b"not a dump")
    with pytest.raises(DumpError):
        read_dump(tmp_path / "bad")
    (tmp_path / "short").write_bytes(b"kernelloop-output 1 float32 10\n\x00\x00")
    with pytest.raises(DumpError, match="ends inside"):
        read_dump(tmp_path / "short")
