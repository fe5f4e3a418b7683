"""Red team round 240 (b): a sum in 64-bit fixed point at 2^32 is exact on every input the harness drew evenly
from [0, 1) (multiples of 2^-24, spikes of (|v| + 1) x 2^16) and wrong for a caller's small values. The harness
now scales a whole floating-point input whose range holds zero by 2^-e (e from 8 to 40) in about half the
stressed correctness calls (kl_small_scale_kernel, kStressSmall). Modelled in numpy with the harness's own value
grid, the candidate's arithmetic and the verifier's float32 tolerance; the harness kernel itself runs on the GPU
only (tests/gpu/...: not yet run)."""

from __future__ import annotations

import re

import numpy as np

from kernelloop.config import VerifySettings
from kernelloop.tools.nvcc import harness_include_dir
from kernelloop.verify.outputs import DEFAULT_TOLERANCES

# a stressed call is judged at stress_tolerance_factor times the dtype's tolerance
RTOL = DEFAULT_TOLERANCES["float32"][0] * VerifySettings().stress_tolerance_factor
N = 1 << 20
SCALES = range(8, 41)  # kSmallScaleMin .. kSmallScaleMax


def _harness_inputs(rng) -> np.ndarray:
    """kl::Uniform<float>{0, 1}: 24 random bits, then 16 spikes of (|v| + 1) x 2^16 at secret positions."""
    x = rng.integers(0, 1 << 24, size=N).astype(np.float32) * np.float32(2.0 ** -24)
    spots = rng.integers(0, N, size=16)
    x[spots] = (np.abs(x[spots]) + np.float32(1)) * np.float32(65536)
    return x


def _fixed_point_sum(x: np.ndarray) -> float:
    """The candidate: each element rounded to an int64 at 2^32 (__float2ll_rn), summed as integers."""
    return float(np.sum(np.rint(x.astype(np.float64) * 2.0 ** 32).astype(np.int64))) / 2.0 ** 32


def _pairwise_float32_sum(x: np.ndarray) -> float:
    """An honest reordering: float32 pairwise (a tree reduction)."""
    y = x.astype(np.float32)
    while len(y) > 1:
        if len(y) % 2:
            y = np.append(y, np.float32(0))
        y = y[0::2] + y[1::2]
    return float(y[0])


def _wrong(c: float, b: float) -> bool:
    return abs(c - b) > RTOL * max(abs(b), abs(c))


def test_the_fixed_point_sum_passes_on_the_harness_grid_and_fails_at_small_scales():
    rng = np.random.default_rng(240)
    x = _harness_inputs(rng)
    exact = float(np.sum(x.astype(np.float64)))
    assert not _wrong(_fixed_point_sum(x), exact)  # the hole: exact on every even draw, spikes and all
    caught = [e for e in SCALES if _wrong(_fixed_point_sum(np.ldexp(x, -e).astype(np.float32)), exact * 2.0 ** -e)]
    # wrong wherever the values but the spikes fall below the fixed point's step (e >= 33 here: 8 of the 33
    # scales), and a verification has dozens of such calls, each drawing its own e
    assert len(caught) >= 6, caught


def test_an_honest_reordering_is_as_close_at_every_scale_as_at_scale_one():
    rng = np.random.default_rng(2401)
    x = _harness_inputs(rng)
    base = float(np.sum(x.astype(np.float64)))
    at_one = abs(_pairwise_float32_sum(x) - base) / base
    for e in SCALES:
        scaled = np.ldexp(x, -e).astype(np.float32)
        assert np.array_equal(np.ldexp(scaled.astype(np.float64), e), x.astype(np.float64))  # every value exact
        rel = abs(_pairwise_float32_sum(scaled) - base * 2.0 ** -e) / (base * 2.0 ** -e)
        assert rel == at_one and not _wrong(_pairwise_float32_sum(scaled), base * 2.0 ** -e)


def test_the_harness_scales_in_correctness_calls_only_and_never_fp16():
    source = (harness_include_dir() / "kernelloop_harness.cuh").read_text()
    assert re.search(r"small_scale && \(bits & kStressSmall\) && \(bits & kStressHeavy\)", source)
    assert "kSmallScaleMin = 8, kSmallScaleMax = 40" in source
    assert "!std::is_same<T, __half>::value && b.lo <= 0.0f && b.hi >= 0.0f" in source
