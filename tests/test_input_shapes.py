"""Inputs of other shapes on their own range (kl::shaped_element, red team rounds 246-248): in half the heavy stressed
calls of correctness runs a spiked input's values are mapped onto [lo, hi) by an order-keeping map drawn in secret
(a power, a Pareto tail, a truncated exponential, a bell; continuous parameters), one per buffer, blended along it
between knots, or one per element, so a path keyed on the bulk's shape meets the shapes a caller's data has, and
no one parametric family per stretch describes what the verifier's runs hold. Built with nvcc, run on the host."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from kernelloop.tools.nvcc import harness_include_dir

PROGRAM = Path(__file__).parent / "harness" / "shapes.cu"
pytestmark = [pytest.mark.nvcc, pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")]
LO, HI = -1.0, 3.0


@pytest.fixture(scope="module")
def shaped(tmp_path_factory):
    binary = tmp_path_factory.mktemp("shapes") / "shapes"
    built = subprocess.run(["nvcc", "-std=c++17", "-I", str(harness_include_dir()), str(PROGRAM), "-o", str(binary)],
                           capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr[-2000:]

    def run(mode: int, key: int, n: int = 1000, knot: int = 64, grid: bool = True, lo: float = LO,
            hi: float = HI) -> np.ndarray:
        ran = subprocess.run([str(binary), str(mode), str(knot), str(key), str(n), str(int(grid)), str(lo), str(hi)],
                             capture_output=True, text=True, timeout=60)
        assert ran.returncode == 0, ran.stderr
        return np.array([float(x) for x in ran.stdout.split()])
    return run


def family(key: int) -> int:
    return key % 4  # kl::shape_unit: the key's residue picks the family


def test_one_map_per_buffer_keeps_the_order_the_half_open_range_and_a_step_above_lo(shaped):
    for key in range(40):
        values = shaped(0, key * 2654435761 + key)
        assert np.all(np.diff(values) >= 0), key
        assert values.min() >= LO and values.max() < HI, key
        # round 247: nothing closer to lo than the generator's own step (2^-24 of the range): no subnormal, no zero
        assert np.all(values - LO >= (HI - LO) * 2.0**-24 * 0.99), key


def test_values_a_power_drives_to_lo_stay_distinct_above_it(shaped):
    """Round 248: at P = 16 every value near lo became the same floor, one value repeated: a signature. On [0, 1)
    (where floats resolve that step) they stay distinct, in order, and at least 2^-24 above 0."""
    keys = [k for k in range(400) if family(k) == 0][:40]
    for key in keys:
        values = shaped(0, key, 4096, grid=True, lo=0.0, hi=1.0)
        low = values[values < 2.0**-22]
        assert np.all(np.diff(low) > 0) and (not len(low) or low.min() >= 2.0**-24), key
    lows = [v[v < 2.0**-22] for v in (shaped(2, k, 4096, grid=False, lo=0.0, hi=1.0) for k in keys[:10])]
    assert sum(map(len, lows)) > 100
    assert all(len(np.unique(low)) > 0.95 * len(low) and (not len(low) or low.min() >= 2.0**-24) for low in lows)


def test_the_families_have_the_bulks_and_tails_callers_data_has(shaped):
    """The round 246 key (more than 16 of 256 probed values above 2.5x their median, values shifted positive)
    trips on most shapes; a Pareto tail puts a few values far above a bulk near lo; a bell bunches them mid-range."""
    def trips(values: np.ndarray) -> bool:
        probe = np.random.default_rng(1).choice(values - values.min() + 1e-6, 256)
        return int((probe > 2.5 * np.median(probe)).sum()) > 16
    assert not trips(np.linspace(LO, HI, 1000, endpoint=False))
    runs = {key: shaped(0, key, 4096, grid=False) for key in range(64)}
    assert sum(trips(v) for v in runs.values()) >= 16
    tails = [v - LO for k, v in runs.items() if family(k) == 1]
    assert any(np.median(t) < 0.01 * (HI - LO) and t.max() > 0.5 * (HI - LO) for t in tails)
    bells = [v - LO for k, v in runs.items() if family(k) == 3]
    assert any(np.quantile(t, 0.75) - np.quantile(t, 0.25) < 0.2 * (HI - LO) for t in bells)


def _power_law_stretches(values: np.ndarray, stretch: int = 64) -> float:
    """The share of STRETCH-element stretches whose sorted values fit one power of a uniform's order statistics
    (log t against log rank on a line, R^2 > 0.995): round 248's test of the verifier's shaped inputs."""
    t = np.maximum(values - LO, 1e-30) / (HI - LO)
    x = np.log(np.arange(1, stretch + 1) / (stretch + 1))
    fits = 0
    n = len(t) // stretch
    for s in range(n):
        y = np.log(np.sort(t[s * stretch:(s + 1) * stretch]))
        r = np.corrcoef(x, y)[0, 1]
        fits += r * r > 0.995
    return fits / n


def test_no_one_power_per_stretch_describes_the_shaped_inputs(shaped):
    """Round 248: one of seven powers per 64-element stretch put every stretch's sorted log-values on a line; a part
    that tested for it told the verifier's inputs apart. Across the modes, most shaped buffers have few such
    stretches, as a caller's data has; a buffer of one power (mode 0, the power family) is one shape among many."""
    uniform = (np.array([(i * 2654435761) % 2**24 for i in range(8192)]) / 2**24) * (HI - LO) + LO
    assert _power_law_stretches(uniform) > 0.5  # the test does see a uniform's (P = 1) stretches
    shares = [_power_law_stretches(shaped(mode, key, 8192, knot=16 << (key % 9), grid=False))
              for mode in (0, 1, 2) for key in range(1, 25)]
    mostly_fitting = sum(share > 0.5 for share in shares)
    assert mostly_fitting <= len(shares) // 3, sorted(shares)
    per_element = [_power_law_stretches(shaped(2, key, 8192, grid=False)) for key in range(1, 9)]
    assert max(per_element) < 0.2, per_element


VALUE_SETS = Path(__file__).parent / "harness" / "value_sets.cu"


@pytest.fixture(scope="module")
def value_set(tmp_path_factory):
    binary = tmp_path_factory.mktemp("value_sets") / "value_sets"
    built = subprocess.run(["nvcc", "-std=c++17", "-I", str(harness_include_dir()), str(VALUE_SETS), "-o", str(binary)],
                           capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr[-2000:]

    def run(kind: int, key: int, n: int = 4096, lo: float = -3.0, hi: float = 5.0) -> np.ndarray:
        ran = subprocess.run([str(binary), str(kind), str(key), str(n), str(lo), str(hi)],
                             capture_output=True, text=True, timeout=60)
        assert ran.returncode == 0, ran.stderr
        return np.array([float(x) for x in ran.stdout.split()], dtype=np.float32)
    return run


def test_other_value_sets_are_what_callers_data_holds_and_stay_in_range(value_set):
    """Red team round 249: a probe of 128 values that found integers, bf16 values or a sorted run (0 of 90,000
    modelled verifier buffers, every caller's count, mask, upcast tensor and position array) told the verifier's
    inputs apart. In half the heavy stressed calls a spiked input takes one of these value sets instead."""
    for key in range(1, 6):
        sets = {kind: value_set(kind, key * 7919) for kind in range(7)}
        for kind, values in sets.items():
            assert values.min() >= -3.0 and values.max() < 5.0, kind
        assert len(np.unique(sets[0])) <= 4096 and np.all(np.unique(sets[0]) * 0 == 0)  # a coarse grid
        assert np.all(sets[1] == np.round(sets[1])) and len(np.unique(sets[1])) > 2  # integers
        as_bits = sets[2].view(np.uint32)
        assert np.all((as_bits & 0xFFFF) == 0)  # exactly bf16
        assert np.all(sets[3].astype(np.float16).astype(np.float32) == sets[3])  # exactly fp16
        assert 2 <= len(np.unique(sets[4])) <= 64  # a pool
        zeros = float(np.mean(sets[6] == 0))
        assert 0.15 < zeros < 0.35  # a quarter of the positions
    # sorted runs, rising or falling, in every run
    runs = value_set(5, 12345, 8192)
    diffs = np.sign(np.diff(runs))
    assert np.mean(diffs == diffs[0]) > 0.9


def test_a_range_without_two_integers_or_zero_keeps_its_values_in_range(value_set):
    for kind in range(7):
        values = value_set(kind, 99, 2048, lo=0.25, hi=0.75)
        assert values.min() >= 0.25 and values.max() < 0.75, kind


def test_each_call_gets_a_secret_non_empty_subset_of_the_special_kinds(tmp_path):
    """Red team round 251: the kinds went round in every call, so a NaN always came beside an infinity, and a
    finiteness flag taken from a max by fmaxf (which drops NaN) was right wherever the verifier looked."""
    binary = tmp_path / "kinds"
    source = Path(__file__).parent / "harness" / "kinds.cu"
    built = subprocess.run(["nvcc", "-std=c++17", "-I", str(harness_include_dir()), str(source), "-o", str(binary)],
                           capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr[-2000:]
    ran = subprocess.run([str(binary), "15", "6", "8"], capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr
    drawn = {int(line.split()[0]): [int(x) for x in line.split()[1:]] for line in ran.stdout.splitlines()}
    assert set(drawn[15]) == set(range(1, 16))  # every non-empty subset, NaN alone (1) among them
    assert drawn[15].count(1) > 30
    assert set(drawn[6]) == {2, 4, 6} and set(drawn[8]) == {8}  # within what was asked for, never empty
