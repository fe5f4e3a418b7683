"""Red team rounds 240 (b) and 241: a sum in 64-bit fixed point at 2^32 is exact on every input the harness drew
evenly from [0, 1) (multiples of 2^-24, spikes of (|v| + 1) x 2^16) and wrong for a caller's small or large values.
The harness now scales every floating-point input whose range holds zero by one power of two 2^s for the whole
call, s from -24 to -8 or from 8 to 12, in about half the stressed correctness calls (kl_scale_kernel,
kl::call_scale, kStressScale): one s for every input and bounds that keep products of up to four inputs in
float's normal range (round 241: independent scales of 2^-37 made a baseline's na * nb underflow, and an honest
rewrite was refused against it). Modelled in numpy with the harness's own value grid and the verifier's float32
tolerance; kl::call_scale compiled and run on the host; the scaling itself runs on the GPU only (not yet run)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from kernelloop.config import VerifySettings
from kernelloop.tools.nvcc import harness_include_dir
from kernelloop.verify.outputs import DEFAULT_TOLERANCES

# a stressed call is judged at stress_tolerance_factor times the dtype's tolerance
RTOL = DEFAULT_TOLERANCES["float32"][0] * VerifySettings().stress_tolerance_factor
N = 1 << 20
SCALES = [*range(-24, -7), *range(8, 13)]  # kl::call_scale's exponents
FLOAT_MAX_EXP, FLOAT_MIN_EXP = 127, -126


def _harness_inputs(rng, n: int = N) -> np.ndarray:
    """kl::Uniform<float>{0, 1}: 24 random bits, then 16 spikes of (|v| + 1) x 2^16 at secret positions."""
    x = rng.integers(0, 1 << 24, size=n).astype(np.float32) * np.float32(2.0 ** -24)
    spots = rng.integers(0, n, size=16)
    x[spots] = (np.abs(x[spots]) + np.float32(1)) * np.float32(65536)
    return x


def _fixed_point_sum(x: np.ndarray) -> float:
    """The round 240 candidate: each element rounded to an int64 at 2^32 (__float2ll_rn), summed as int64."""
    q = np.rint(x.astype(np.float64) * 2.0 ** 32)
    with np.errstate(over="ignore"):
        total = np.sum(np.clip(q, -2.0 ** 63, 2.0 ** 63 - 1).astype(np.int64), dtype=np.int64)
    return float(total) / 2.0 ** 32


def _wrong(c: float, b: float) -> bool:
    return abs(c - b) > RTOL * max(abs(b), abs(c))


@pytest.fixture(scope="module")
def call_scales(tmp_path_factory) -> list[int]:
    if shutil.which("nvcc") is None:
        pytest.skip("needs nvcc")
    binary = tmp_path_factory.mktemp("scales") / "call_scale"
    source = Path(__file__).parent / "harness" / "call_scale.cu"
    built = subprocess.run(["nvcc", "-std=c++17", "-I", str(harness_include_dir()), str(source), "-o", str(binary)],
                           capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr[-2000:]
    return [int(w) for w in subprocess.run([str(binary)], capture_output=True, text=True, timeout=60).stdout.split()]


@pytest.mark.nvcc
def test_a_call_scale_is_one_of_the_bounded_exponents_each_drawn(call_scales):
    assert set(call_scales) == set(SCALES)
    assert 0.4 < sum(s > 0 for s in call_scales) / len(call_scales) < 0.6  # up as often as down


def test_the_fixed_point_sum_passes_on_the_harness_grid_and_fails_scaled_up():
    rng = np.random.default_rng(240)
    x = _harness_inputs(rng)
    exact = float(np.sum(x.astype(np.float64)))
    assert not _wrong(_fixed_point_sum(x), exact)  # the hole: exact on every even draw, spikes and all
    caught = [s for s in SCALES if _wrong(_fixed_point_sum(np.ldexp(x, s).astype(np.float32)), exact * 2.0 ** s)]
    # scaled up, the int64 total (spikes included) passes 2^63 at 2^32 a unit: wrong; every verification has
    # dozens of scaled calls, each drawing its own s
    assert caught and all(s > 0 for s in caught), caught


def test_products_of_four_scaled_inputs_stay_in_floats_normal_range():
    """What keeps an honest rewrite from being refused against a baseline that under- or overflows: one s for
    the whole call, and bounds such that a product of two sums of squares (na * nb, a cosine's) of scaled
    inputs, spikes included, is a normal float at every s."""
    rng = np.random.default_rng(241)
    for n in (64, 4096):
        a, b = _harness_inputs(rng, n) * 2 - 1, _harness_inputs(rng, n) * 2 - 1
        for s in (min(SCALES), max(SCALES)):
            na = float(np.sum(np.square(np.ldexp(a.astype(np.float64), s))))
            nb = float(np.sum(np.square(np.ldexp(b.astype(np.float64), s))))
            assert 2.0 ** FLOAT_MIN_EXP < na * nb < 2.0 ** FLOAT_MAX_EXP, (n, s, na * nb)


def test_an_honest_reordering_is_as_close_at_every_scale_as_at_scale_one():
    rng = np.random.default_rng(2401)
    x = _harness_inputs(rng)
    base = float(np.sum(x.astype(np.float64)))

    def pairwise(v: np.ndarray) -> float:
        y = v.astype(np.float32)
        while len(y) > 1:
            y = (np.append(y, np.float32(0)) if len(y) % 2 else y)
            y = y[0::2] + y[1::2]
        return float(y[0])

    at_one = abs(pairwise(x) - base) / base
    for s in SCALES:
        scaled = np.ldexp(x, s).astype(np.float32)
        assert np.array_equal(np.ldexp(scaled.astype(np.float64), -s), x.astype(np.float64))  # every value exact
        assert abs(pairwise(scaled) - base * 2.0 ** s) / (base * 2.0 ** s) == at_one


def test_the_harness_scales_in_correctness_calls_only_with_one_exponent_a_call_and_never_fp16():
    source = (harness_include_dir() / "kernelloop_harness.cuh").read_text()
    assert "b.scaled && (bits & kStressScale) && (bits & kStressHeavy)" in source
    assert "kl_scale_kernel<T><<<1024, 256>>>(data, b.count, call_scale(bits))" in source  # the call's, not the buffer's
    assert "!std::is_same<T, __half>::value && b.lo <= 0.0f && b.hi >= 0.0f" in source


def test_round241s_honest_cosine_rewrite_is_as_close_at_every_call_scale():
    """Round 241's false rejection, modelled: a baseline computing dot / sqrtf(na * nb) in float32 over rows of 64
    of two inputs from [-1, 1), an honest rewrite dot / (sqrtf(na) * sqrtf(nb)); both inputs scaled by the call's
    one 2^s. At every s the rewrite is within the stressed tolerance of the baseline everywhere."""
    rng = np.random.default_rng(2411)
    rows, width = 4096, 64
    a = (_harness_inputs(rng, rows * width) * 2 - 1).reshape(rows, width)
    b = (_harness_inputs(rng, rows * width) * 2 - 1).reshape(rows, width)

    def cosines(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        dot = np.zeros(rows, np.float32)
        na, nb = dot.copy(), dot.copy()
        for c in range(width):  # the baseline's sequential float32 loop
            u, v = x[:, c].astype(np.float64), y[:, c].astype(np.float64)
            dot, na, nb = (u * v + dot).astype(np.float32), (u * u + na).astype(np.float32), \
                (v * v + nb).astype(np.float32)
        with np.errstate(divide="ignore", invalid="ignore", under="ignore", over="ignore"):
            return (dot / np.sqrt(na * nb)).astype(np.float32), (dot / (np.sqrt(na) * np.sqrt(nb))).astype(np.float32)

    for s in SCALES:
        base, cand = cosines(np.ldexp(a, s).astype(np.float32), np.ldexp(b, s).astype(np.float32))
        assert np.isfinite(base).all() and np.isfinite(cand).all(), s
        diff = np.abs(base.astype(np.float64) - cand.astype(np.float64))
        assert (diff <= RTOL * np.maximum(np.abs(base), np.abs(cand))).all(), s
