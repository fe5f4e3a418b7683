"""The tolerance model (docs/verifier.md, "Tolerance model"): its rules, and numpy simulations of
the suite's computations that measure it. Honest rewrites (other summation orders, tilings, the
online softmax, fused stencils) must pass; approximations (subsampled or skipping sums, bf16/tf32
matmul inputs, fp16 accumulation, fp16 exponentials) must fail.

`python3 tests/test_tolerance.py [seeds]` prints the measured table of docs/verifier.md at the
suite's full sizes (1024^3 matmul, 60 seeds of the 2^26-element sum by default).
"""

from __future__ import annotations

import json
import math
import sys

import ml_dtypes
import numpy as np
import pytest

from kernelloop.verify.outputs import (
    DEFAULT_TOLERANCES, Comparison, DumpError, Tolerance, compare_dumps, compare_outputs, dtype_name, dump_dtype,
    printed_dtype, read_dump,
)

F32, F64 = np.float32, np.float64
BF16 = np.dtype(ml_dtypes.bfloat16)


# == the rules ====================================================================================


def test_defaults_by_dtype_are_far_tighter_than_1e3_for_float32():
    assert Tolerance().for_dtype("float32") == (2.0**-15, 0.0)  # 3.05e-5: 256-512 ulps
    assert Tolerance().for_dtype("float64") == (2.0**-44, 0.0)
    assert Tolerance().for_dtype("float16") == (2.0**-9, 0.0)
    assert Tolerance().for_dtype("bfloat16") == (2.0**-6, 0.0)
    integers = ("int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64")
    for integer in integers:
        assert Tolerance().for_dtype(integer) == (0.0, 0.0)
    assert set(DEFAULT_TOLERANCES) == {"float32", "float64", "float16", "bfloat16", *integers}


def test_dump_dtype_maps_every_format_name_and_refuses_others():
    assert dump_dtype("float32") == np.dtype("<f4") and dump_dtype("float64") == np.dtype("<f8")
    assert dump_dtype("float16") == np.dtype("<f2") and dump_dtype("bfloat16") == BF16
    assert dump_dtype("int32") == np.dtype("<i4") and dump_dtype("uint32") == np.dtype("<u4")
    assert dump_dtype("int64") == np.dtype("<i8") and dump_dtype("uint8") == np.dtype("u1")
    for name in DEFAULT_TOLERANCES:
        assert dtype_name(dump_dtype(name)) == name
    with pytest.raises(DumpError, match="unknown output dtype 'float8'"):
        dump_dtype("float8")
    with pytest.raises(KeyError):  # callers written against a KeyError keep working
        dump_dtype("half")


def _write(path, *buffers):
    with path.open("wb") as f:
        for name, values in buffers:
            arr = np.asarray(values).astype(dump_dtype(name))
            f.write(f"kernelloop-output 1 {name} {arr.size}\n".encode() + arr.tobytes())
    return path


def test_bf16_and_fp16_dumps_round_trip_and_use_their_own_tolerance(tmp_path):
    values = [1.0, -2.5, 0.333, 1000.0, 6.1e-5]
    dumped = read_dump(_write(tmp_path / "d", ("bfloat16", values), ("float16", values), ("float32", values)))
    assert [b.dtype for b in dumped] == [BF16, np.dtype("<f2"), np.dtype("<f4")]
    assert np.array_equal(dumped[0].view("u2"), np.asarray(values).astype(BF16).view("u2"))
    assert np.array_equal(dumped[1], np.asarray(values, dtype=np.float16))
    assert dumped[0][3] == 1000.0 and float(dumped[0][2]) == pytest.approx(0.333, rel=2**-8)
    r = compare_dumps(dumped, dumped)
    assert r.match and r.worst_ratio == 0 and [b.dtype for b in r.buffers] == ["bfloat16", "float16", "float32"]

    def bump(arr, ulps):  # the same values moved by `ulps` units in the last place
        return (arr.view(f"u{arr.dtype.itemsize}") + ulps).view(arr.dtype)

    for dtype, ok_ulps, bad_ulps in ((BF16, 1, 8), (np.dtype("<f2"), 1, 8)):
        base = [np.linspace(0.5, 3.0, 64).astype(dtype)]
        assert compare_dumps(base, [bump(base[0], ok_ulps)]).match  # one rounding flip: honest
        off = compare_dumps(base, [bump(base[0], bad_ulps)])
        assert not off.match and off.buffers[0].rtol == DEFAULT_TOLERANCES[dtype_name(dtype)][0]


def test_float32_allows_reordering_noise_not_reduced_precision():
    b = np.linspace(1.0, 100.0, 10_000).astype(F32)
    few_ulps = (b.view("u4") + np.arange(b.size, dtype=np.uint32) % 5).view(F32)  # 0-4 ulps
    r = compare_dumps([b], [few_ulps])
    assert r.match and r.max_ulps == 4 and 256 <= r.allowed_ulps <= 512 and r.worst_ratio < 4 / 256
    bf16_rounded = b.astype(BF16).astype(F32)
    tf32_rounded = (((b.view("u4") + 0x1000) >> 13) << 13).view(F32)
    assert not compare_dumps([b], [bf16_rounded]).match
    assert not compare_dumps([b], [tf32_rounded]).match
    assert not compare_dumps([b], [b * F32(1 + 2**-14)]).match  # a uniform 6e-5 error


def test_float64_rejects_float32_arithmetic():
    b = np.linspace(0.1, 10.0, 1000)
    assert compare_dumps([b], [b * (1 + 2**-50)]).match
    assert not compare_dumps([b], [b.astype(F32).astype(F64)]).match


def test_nan_and_inf_never_pass_whatever_the_tolerance():
    for dtype in (F32, F64, np.float16, BF16):
        base = [np.array([1.0, 2.0, 3.0]).astype(dtype)]
        for bad in (np.nan, np.inf, -np.inf):
            cand = [np.array([1.0, bad, 3.0]).astype(dtype)]
            r = compare_dumps(base, cand, rtol=1e30, atol=1e30)
            assert not r.match and r.nonfinite and r.worst_ratio == math.inf and "NaN or inf" in r.problem
            # a baseline's NaN is no reference; its infinity is one (compared exactly: tests/test_nonfinite.py)
            if np.isnan(bad):
                assert "baseline's own output" in compare_dumps(cand, cand).problem
            else:
                assert compare_dumps(cand, cand).match
    assert compare_outputs("x 1 2", "x 1 nan", rtol=1e30, atol=1e30).nonfinite
    assert not compare_outputs("x 1 2", "x 1 -inf", rtol=1e30).match
    assert "baseline itself" in compare_outputs("x 1 inf", "x 1 inf").describe()


def test_integers_are_exact_by_default():
    base = [np.array([7, 8, 262_144], dtype=np.uint32)]
    assert compare_dumps(base, [base[0].copy()]).match
    off = compare_dumps(base, [np.array([7, 8, 262_145], dtype=np.uint32)])
    assert not off.match and off.buffers[0].tolerance_label() == "uint32 exact" and off.max_ulps == 1
    big = np.array([2**62, 2**53], dtype=np.int64)  # off by one where float64 cannot tell
    assert not compare_dumps([big], [big + np.array([1, 1], dtype=np.int64)]).match
    assert not compare_dumps([np.array([5], np.int32)], [np.array([-5], np.int32)]).match
    huge = np.array([2**64 - 1], dtype=np.uint64)
    r = compare_dumps([huge], [huge - np.uint64(1)])
    assert not r.match and r.worst_ratio == math.inf and "(uint64 exact)" in r.problem
    assert not compare_dumps([np.array([200], np.uint8)], [np.array([201], np.uint8)]).match


def test_user_override_wins_over_every_default():
    b = np.linspace(1.0, 2.0, 100).astype(F32)
    bf16 = b.astype(BF16).astype(F32)
    assert not compare_dumps([b], [bf16]).match
    loose = compare_dumps([b], [bf16], tolerance=Tolerance(rtol=1e-2))
    assert loose.match and loose.buffers[0].rtol == 1e-2
    assert compare_dumps([b], [bf16], rtol=1e-2).match  # the keyword shorthand
    nudged = (b.view("u4") + 1).view(F32)
    assert compare_dumps([b], [nudged]).match and not compare_dumps([b], [nudged], rtol=0).match  # bit-exact
    ints = [np.array([100, 200], np.int32)]
    # integers stay exact under an every-output value (red team round 262: an rtol meant for a float output let a
    # histogram drop counts); only a value given by the output's name loosens one
    assert not compare_dumps(ints, [np.array([101, 200], np.int32)], atol=1).match
    assert compare_dumps(ints, [np.array([101, 200], np.int32)], names=["counts"],
                         tolerance=Tolerance(outputs=_named(counts={"atol": 1}))).match
    only_atol = Tolerance(atol=1e-3)
    assert only_atol.for_dtype("float32") == (2.0**-15, 1e-3) and only_atol.for_dtype("int32") == (0.0, 0.0)
    assert compare_outputs("v 1.0", "v 1.002").match is False
    assert compare_outputs("v 1.0", "v 1.002", tolerance=Tolerance(rtol=1e-2)).match


def test_values_near_zero_by_cancellation_are_judged_against_the_buffer_rms():
    rng = np.random.default_rng(5)
    b = rng.normal(0, 10, 4096).astype(F32)
    b[17] = F32(3e-6)  # a cancellation: terms of size ~10 summing to ~0
    c = b.copy()
    c[17] = F32(3e-6 + 2e-5)  # 2e-6 of the RMS: ordinary rounding noise of terms that size
    r = compare_dumps([b], [c])
    assert r.match and r.buffers[0].floor == pytest.approx(10, rel=0.05) and r.max_rel_error > 0.8
    c[17] = F32(3e-6 + 1e-3)  # 1e-4 of the RMS: not noise
    assert not compare_dumps([b], [c]).match
    # the floor is the baseline's RMS: a candidate cannot widen it by writing large values
    wild = b.copy()
    wild[0] = F32(1e30)
    assert not compare_dumps([b], [wild]).match


def test_printed_numbers_get_the_resolution_of_their_last_digit():
    # "%.6f" of 0.000512 keeps 3 significant digits: a last-digit flip is not a mismatch
    assert compare_outputs("v 0.000512", "v 0.000513").match
    assert not compare_outputs("v 0.000512", "v 0.000515").match
    # "%.9e": half a unit of the 9th decimal of the mantissa each side
    assert compare_outputs("c 5.123456789e-04", "c 5.123456790e-04").match
    assert not compare_outputs("c 5.123456789e-04", "c 5.123656789e-04").match
    # "%.9g" drops trailing zeros: "0.5" beside "0.52" was printed to the same 9 digits, so 0.52 is far
    assert not compare_outputs("h 0.5", "h 0.52").match
    assert compare_outputs("h 0.5", "h 0.500000012").match
    # plain integers are exact as printed; a decimal beside one lends it its resolution
    assert not compare_outputs("bins 3 4", "bins 3 5").match
    assert compare_outputs("g 10", "g 9.99999999", rtol=0).match
    assert not compare_outputs("g 10", "g 9.9999990", rtol=0).match


def test_printed_numbers_take_the_dumps_loosest_float_dtype():
    assert printed_dtype(None) == "float32"
    assert printed_dtype([np.zeros(2, np.uint32)]) == "float32"
    assert printed_dtype([np.zeros(2, F64)]) == "float64"
    assert printed_dtype([np.zeros(2, F64), np.zeros(2, BF16), np.zeros(2, np.float16)]) == "bfloat16"
    r = compare_outputs("s 1.0", "s 1.001", dtype="bfloat16")
    assert r.match and r.buffers[0].tolerance_label() == "bfloat16 rtol 0.0156"


def test_the_result_states_the_error_seen_against_the_error_allowed():
    b = np.full(1000, 256.0, F32)
    c = b.copy()
    c[3] += F32(3 * 2**-15)  # 3 ulps at 256
    r = compare_dumps([b, np.arange(4, dtype=np.int32)], [c, np.arange(4, dtype=np.int32)])
    assert r.match and r.max_ulps == 3 and r.allowed_ulps == pytest.approx(256) and r.worst_ratio == pytest.approx(3 / 256)
    assert [(k.dtype, k.rtol, k.atol) for k in r.buffers] == [("float32", 2.0**-15, 0.0), ("int32", 0.0, 0.0)]
    line = r.describe()
    assert "\n" not in line and "max error 3 ulp (allowed 256)" in line and "int32 exact" in line
    c[5] += F32(600 * 2**-15)
    bad = compare_dumps([b], [c])
    assert not bad.match and bad.first_mismatches[0].index == 5 and bad.first_mismatches[0].ulps == 600
    assert "1 of 1000 elements differ, the worst by 2.34x the allowance" in bad.describe()
    assert "\n" not in bad.describe()
    printed = compare_outputs("s 256.000000", "s 256.000031")
    both = printed.merged(r)
    assert both.match and both.compared == 1005 and both.max_ulps == 3 and len(both.buffers) == 3
    assert "numbers match exactly" in compare_dumps([b], [b.copy()]).describe()


def test_comparisons_with_infinities_survive_json():
    r = compare_dumps([np.ones(3, F32)], [np.array([1, np.inf, 1], F32)])
    again = Comparison.model_validate(json.loads(r.model_dump_json()))
    assert again.worst_ratio == math.inf and again.first_mismatches[0].rel_error == math.inf


# == measurements: numpy simulations of the suite's computations ===================================
# Each case computes the baseline program's result and a candidate's in the order (and precision)
# each uses, and runs them through compare_dumps with the default tolerance.


def _inputs(rng: np.random.Generator, shape) -> np.ndarray:
    """What the harnesses draw: uniform in [0, 1) with 24 random bits."""
    return (rng.integers(0, 1 << 24, shape, dtype=np.int64) * 2.0**-24).astype(F32)


# -- sum_reduction: 2^26 floats ----------------------------------------------------------------


def _pairwise(x: np.ndarray) -> np.ndarray:
    """The interleaved-addressing tree along the last axis (a power of two): neighbours first."""
    while x.shape[-1] > 1:
        x = x[..., 0::2] + x[..., 1::2]
    return x[..., 0]


def _in_order(x: np.ndarray) -> F32:
    """A float32 running sum, one rounding per addition, in the order given (atomicAdd)."""
    return np.add.accumulate(x, dtype=F32)[-1]


def sum_baseline(x, rng) -> F32:
    """kernels/sum_reduction.cu: a 256-element tree per block, one atomicAdd per block (2^18),
    the blocks arriving in any order."""
    blocks = _pairwise(x.reshape(-1, 256))
    return _in_order(blocks[rng.permutation(blocks.size)])


def sum_warp_shuffle(x, rng, blocks: int = 528) -> F32:
    """exemplars/reduction_warp_shuffle.cu: a grid-stride float4 loop per thread, warp shuffles,
    one atomicAdd per block (4 blocks per SM of a 132-SM GPU)."""
    threads = blocks * 256
    quads = x[: x.size // 4 * 4].reshape(-1, 4)
    q = (quads[:, 0] + quads[:, 1]) + (quads[:, 2] + quads[:, 3])
    steps = -(-q.size // threads)
    per_thread = np.zeros(steps * threads, F32)
    per_thread[: q.size] = q
    acc = np.add.accumulate(per_thread.reshape(steps, threads), axis=0, dtype=F32)[-1]
    lanes = acc.reshape(blocks, 8, 32)
    for o in (16, 8, 4, 2, 1):
        lanes = lanes[..., :o] + lanes[..., o:2 * o]
    warps = np.concatenate([lanes[..., 0], np.zeros((blocks, 24), F32)], axis=1)
    for o in (16, 8, 4, 2, 1):
        warps = warps[..., :o] + warps[..., o:2 * o]
    return _in_order(warps[:, 0][rng.permutation(blocks)])


_SKIP_SIXTH: dict[int, np.ndarray] = {}


def _sum_candidates(x, rng, seed: int) -> dict[str, F32]:
    n = x.size
    if n not in _SKIP_SIXTH:
        _SKIP_SIXTH[n] = np.arange(n) % 6 != 5
    return {
        "A/A: the baseline again (atomics in another order)": sum_baseline(x, rng),
        "warp shuffles + 528 atomics (the exemplar)": sum_warp_shuffle(x, rng),
        "one pairwise tree over all 2^26": _pairwise(x),
        "numpy pairwise (blocks of 128)": x.sum(dtype=F32),
        # approximations
        "reads a rotating 1/16, x16": F32(sum_warp_shuffle(x[seed % 16::16], rng) * F32(16)),
        "skips 1/6, x1.2 (a 1.2x speedup)": F32(sum_warp_shuffle(x[_SKIP_SIXTH[n]], rng) * F32(1.2)),
    }


SUM_HONEST = ["A/A: the baseline again (atomics in another order)", "warp shuffles + 528 atomics (the exemplar)",
              "one pairwise tree over all 2^26", "numpy pairwise (blocks of 128)"]


def _printed_sum(value: F32) -> str:
    """What kernels/sum_reduction.cu prints."""
    v = float(value)
    return f"sum {v:.9g}\nmean {v / 2**26:.9g}\n"


def measure_sum(seeds: int, n: int = 1 << 26, first_seed: int = 0) -> dict[str, list[Comparison]]:
    """Every candidate against the baseline, one fresh input per seed (a verification compares
    2 correctness seeds and 7 timing pairs: 9 seeds), dump and printed lines both."""
    out: dict[str, list[Comparison]] = {}
    for seed in range(first_seed, first_seed + seeds):
        rng = np.random.default_rng(1000 + seed)
        x = _inputs(rng, n)
        base = sum_baseline(x, rng)
        for name, value in _sum_candidates(x, rng, seed).items():
            dump = compare_dumps([np.array([base])], [np.array([value])])
            printed = compare_outputs(_printed_sum(base), _printed_sum(value))
            out.setdefault(name, []).append(dump.merged(printed) if dump.match and printed.match
                                            else (dump if not dump.match else printed))
    return out


@pytest.fixture(scope="module")
def sum_runs():
    return measure_sum(9)  # one verification's worth of seeds, at the suite's size


def test_sum_reorderings_pass_on_every_seed(sum_runs):
    for name in SUM_HONEST:
        assert all(c.match for c in sum_runs[name]), (name, [c.describe() for c in sum_runs[name]])


def test_sum_approximations_are_rejected_within_one_verification(sum_runs):
    sub = sum_runs["reads a rotating 1/16, x16"]
    assert sum(not c.match for c in sub) >= 6  # rejected on 92% of seeds (55 of 60; error rms 3.2e-4)
    skip = sum_runs["skips 1/6, x1.2 (a 1.2x speedup)"]
    assert any(not c.match for c in skip)  # 32% of seeds (rms 3.1e-5): 97% of 9-seed verifications


# -- naive_matmul: C = A B with K = 1024 ---------------------------------------------------------


def mm_k_order(A, B) -> np.ndarray:
    """kernels/naive_matmul.cu: acc = fmaf(A[i,k], B[k,j], acc) for k = 0..K-1 (float64 holds
    each product exactly; one rounding per step, as an FMA)."""
    acc = np.zeros((A.shape[0], B.shape[1]), F32)
    A64, B64 = A.astype(F64), B.astype(F64)
    for k in range(A.shape[1]):
        acc = (acc + np.outer(A64[:, k], B64[k])).astype(F32)
    return acc


def mm_blocked(A, B, tile: int = 32) -> np.ndarray:
    """Tiled: each K-tile accumulated in registers from zero, the tiles' sums added in turn."""
    total = np.zeros((A.shape[0], B.shape[1]), F32)
    for k0 in range(0, A.shape[1], tile):
        total = total + mm_k_order(A[:, k0:k0 + tile], B[k0:k0 + tile])
    return total


def mm_split_k(A, B, ways: int = 8) -> np.ndarray:
    """Split-K: interleaved k-slices accumulated separately, then added."""
    parts = [mm_k_order(A[:, i::ways], B[i::ways]) for i in range(ways)]
    total = parts[0]
    for p in parts[1:]:
        total = total + p
    return total


def _mantissa(x: np.ndarray, bits: int) -> np.ndarray:
    """float32 rounded to nearest (even) with `bits` explicit mantissa bits (tf32: 10)."""
    u = x.view(np.uint32).astype(np.uint64)
    drop = 23 - bits
    u = ((u + (1 << (drop - 1)) - 1 + ((u >> drop) & 1)) >> drop) << drop
    return u.astype(np.uint32).view(F32)


def mm_fp16_accumulate(A, B) -> np.ndarray:
    """fp16 tensor cores with an fp16 accumulator: 16-deep products exact, the running sum in fp16."""
    Ah, Bh = A.astype(np.float16).astype(F64), B.astype(np.float16).astype(F64)
    acc = np.zeros((A.shape[0], B.shape[1]), np.float16)
    for k0 in range(0, A.shape[1], 16):
        acc = (acc + Ah[:, k0:k0 + 16] @ Bh[k0:k0 + 16]).astype(np.float16)
    return acc.astype(F32)


MM_HONEST = ["K-tiles of 32 summed in turn (tiled kernels)", "split-K, 8 slices", "numpy/BLAS sgemm order"]


def measure_matmul(m: int, seed: int = 3) -> dict[str, Comparison]:
    rng = np.random.default_rng(seed)
    A, B = _inputs(rng, (m, 1024)), _inputs(rng, (1024, m))
    base = mm_k_order(A, B)
    cands = {
        MM_HONEST[0]: mm_blocked(A, B),
        MM_HONEST[1]: mm_split_k(A, B),
        MM_HONEST[2]: A @ B,
        "bf16-rounded inputs, fp32 accumulation": A.astype(BF16).astype(F32) @ B.astype(BF16).astype(F32),
        "tf32-rounded inputs (10-bit mantissa)": _mantissa(A, 10) @ _mantissa(B, 10),
        "fp16 accumulation (fp16 tensor cores)": mm_fp16_accumulate(A, B),
    }
    return {name: compare_dumps([base.reshape(-1)], [c.reshape(-1)]) for name, c in cands.items()}


@pytest.fixture(scope="module")
def matmul_runs():
    return measure_matmul(256)  # K = 1024 as in the suite; 256 x 256 outputs


@pytest.mark.parametrize("name", MM_HONEST)
def test_matmul_reorderings_pass(matmul_runs, name):
    r = matmul_runs[name]
    assert r.match and r.worst_ratio < 0.2, r.describe()


@pytest.mark.parametrize("name", ["bf16-rounded inputs, fp32 accumulation", "tf32-rounded inputs (10-bit mantissa)",
                                  "fp16 accumulation (fp16 tensor cores)"])
def test_matmul_reduced_precision_fails(matmul_runs, name):
    assert not matmul_runs[name].match


# -- row_softmax: two-pass (baseline) vs online (exemplar) ---------------------------------------

_LOG2E = F32(1.4426950408889634)


def exp_rounded(t: np.ndarray) -> np.ndarray:
    """expf, correctly rounded."""
    return np.exp(t.astype(F64)).astype(F32)


def exp_2ulp(rng):
    """expf of another library: within 1 ulp of the correctly rounded value either way (CUDA
    documents expf within 2 ulps of the exact value)."""
    def f(t):
        y = exp_rounded(t)
        return (y.view(np.int32) + rng.integers(-1, 2, y.shape).astype(np.int32)).view(F32)
    return f


def exp_fast(rng):
    """__expf: ex2.approx(x * log2(e)): rounding x*log2(e) to float32 costs ~|x| * 2^-24
    relative, ex2.approx adds up to 2^-22.5 (CUDA: 2 + 1.17|x| ulps)."""
    def f(t):
        t2 = (t * _LOG2E).astype(F32)
        err = rng.uniform(-(2.0**-22.5), 2.0**-22.5, t.shape)
        return (np.exp2(t2.astype(F64)) * (1 + err)).astype(F32)
    return f


def exp_half(t: np.ndarray) -> np.ndarray:
    """hexp: the exponential in fp16."""
    return np.exp(t.astype(np.float16)).astype(F32)


def softmax_two_pass(x: np.ndarray, exp=exp_rounded) -> np.ndarray:
    """kernels/row_softmax.cu: max, then the sum of exp(x - m) in order, then exp(x - m) / s."""
    m = x.max(axis=1, keepdims=True)
    e = exp(x - m)
    s = np.add.accumulate(e, axis=1, dtype=F32)[:, -1:]
    return exp(x - m) / s


def softmax_online(x: np.ndarray, exp) -> np.ndarray:
    """exemplars/softmax_online.cu: per lane of a warp, a running (max, sum) over its float4s,
    a butterfly combine across the 32 lanes, then exp(x - m) * (1 / s)."""
    rows, cols = x.shape
    quads = x.reshape(rows, cols // 4, 4)
    steps = -(-(cols // 4) // 32)
    padded = np.full((rows, steps * 32, 4), -np.inf, F32)
    padded[:, : cols // 4] = quads
    per_lane = padded.reshape(rows, steps, 32, 4)
    m = np.full((rows, 32), -np.inf, F32)
    s = np.zeros((rows, 32), F32)

    def rescale(s_, m_old, m_new):
        with np.errstate(invalid="ignore"):
            return np.where(m_old == -np.inf, F32(0), s_ * exp(np.where(m_old == -np.inf, F32(0), m_old - m_new)))

    for j in range(steps):
        v = per_lane[:, j]  # (rows, 32, 4)
        valid = v[..., 0] > -np.inf
        mn = np.maximum(m, v.max(axis=2))
        safe = np.where(valid[..., None], v - mn[..., None], F32(0))
        e = exp(safe)
        add = (e[..., 0] + e[..., 1]) + (e[..., 2] + e[..., 3])
        s = np.where(valid, rescale(s, m, mn) + add, s)
        m = np.where(valid, mn, m)
    for o in (16, 8, 4, 2, 1):  # lane l takes (l, l ^ o): lane 0's view of the butterfly
        m_lo, m_hi, s_lo, s_hi = m[:, :o], m[:, o:2 * o], s[:, :o], s[:, o:2 * o]
        mn = np.maximum(m_lo, m_hi)
        s = rescale(s_lo, m_lo, mn) + rescale(s_hi, m_hi, mn)
        m = mn
    inv = F32(1) / s[:, :1]
    return exp(x - m[:, :1]) * inv


SOFTMAX_HONEST = ["online, expf of another library (the exemplar)", "two-pass, expf of another library",
                  "online, __expf (fast math)", "online, __expf, inputs in [-16, 16)"]


def measure_softmax(rows: int, seed: int = 11) -> dict[str, Comparison]:
    out: dict[str, Comparison] = {}
    for cols in (1000, 2048, 4096):
        rng = np.random.default_rng(seed + cols)
        x = _inputs(rng, (rows, cols))
        wide = (_inputs(rng, (rows, cols)) * F32(32) - F32(16)).astype(F32)
        base, base_wide = softmax_two_pass(x), softmax_two_pass(wide)
        cands = {
            SOFTMAX_HONEST[0]: (base, softmax_online(x, exp_2ulp(rng))),
            SOFTMAX_HONEST[1]: (base, softmax_two_pass(x, exp_2ulp(rng))),
            SOFTMAX_HONEST[2]: (base, softmax_online(x, exp_fast(rng))),
            SOFTMAX_HONEST[3]: (base_wide, softmax_online(wide, exp_fast(rng))),
            "online, exp in fp16 (hexp)": (base, softmax_online(x, exp_half)),
        }
        for name, (b, c) in cands.items():
            r = compare_dumps([b.reshape(-1)], [c.reshape(-1)])
            out[name] = r if name not in out else _worse(out[name], r)
    return out


def _worse(a: Comparison, b: Comparison) -> Comparison:
    if a.match != b.match:
        return a if not a.match else b
    return a if a.worst_ratio >= b.worst_ratio else b


@pytest.fixture(scope="module")
def softmax_runs():
    return measure_softmax(64)


@pytest.mark.parametrize("name", SOFTMAX_HONEST)
def test_softmax_orders_and_few_ulp_exponentials_pass(softmax_runs, name):
    assert softmax_runs[name].match, softmax_runs[name].describe()
    assert softmax_runs[name].max_ulps < 64


def test_softmax_with_fp16_exponentials_fails(softmax_runs):
    assert not softmax_runs["online, exp in fp16 (hexp)"].match


# -- stencil2d: 5-point average -----------------------------------------------------------------


def stencil(x: np.ndarray, how: str) -> np.ndarray:
    out = x.copy()  # the border is copied
    c, n, s = x[1:-1, 1:-1], x[:-2, 1:-1], x[2:, 1:-1]
    e, w = x[1:-1, 2:], x[1:-1, :-2]
    if how == "baseline":  # 0.2f * (c + n + s + e + w), left to right
        inner = F32(0.2) * ((((c + n) + s) + e) + w)
    elif how == "tree":
        inner = F32(0.2) * (((n + s) + (e + w)) + c)
    elif how == "fma":  # 0.2f*c, then fmaf(0.2f, neighbour, acc) four times
        acc = F32(0.2) * c
        for t in (n, s, e, w):
            acc = (acc.astype(F64) + F64(F32(0.2)) * t.astype(F64)).astype(F32)
        inner = acc
    elif how == "div5":
        inner = ((((c + n) + s) + e) + w) / F32(5)
    elif how == "bf16":
        xb = x.astype(BF16).astype(F32)
        return stencil(xb, "baseline")
    elif how == "fp16":
        h = x.astype(np.float16)
        hc, hn, hs = h[1:-1, 1:-1], h[:-2, 1:-1], h[2:, 1:-1]
        he, hw = h[1:-1, 2:], h[1:-1, :-2]
        inner = (np.float16(0.2) * ((((hc + hn) + hs) + he) + hw)).astype(F32)
    else:
        raise ValueError(how)
    out[1:-1, 1:-1] = inner
    return out


STENCIL_HONEST = {"tree": "(n + s) + (e + w) + c, then x 0.2f", "fma": "fused: fmaf(0.2f, neighbour, acc) chains",
                  "div5": "sum / 5.0f instead of x 0.2f"}


def measure_stencil(size: int, seed: int = 21) -> dict[str, Comparison]:
    x = _inputs(np.random.default_rng(seed), (size, size))
    base = stencil(x, "baseline").reshape(-1)
    names = {**STENCIL_HONEST, "bf16": "bf16-rounded inputs", "fp16": "fp16 arithmetic"}
    return {label: compare_dumps([base], [stencil(x, how).reshape(-1)]) for how, label in names.items()}


@pytest.fixture(scope="module")
def stencil_runs():
    return measure_stencil(1024)


@pytest.mark.parametrize("label", list(STENCIL_HONEST.values()))
def test_stencil_orders_pass(stencil_runs, label):
    r = stencil_runs[label]
    assert r.match and r.max_ulps <= 4, r.describe()


@pytest.mark.parametrize("label", ["bf16-rounded inputs", "fp16 arithmetic"])
def test_stencil_reduced_precision_fails(stencil_runs, label):
    assert not stencil_runs[label].match


# == the table of docs/verifier.md =================================================================


def _row(case: str, r: Comparison, note: str = "") -> str:
    b = r.buffers[0]
    verdict = "pass" if r.match else "**fail**"
    return (f"| {case} | {r.max_rel_error:.2e} | {r.max_ulps:.3g} | {b.allowed_ulps:.3g} ({b.rtol:.3g}) "
            f"| {r.worst_ratio:.3g} | {verdict}{note} |")


def main(seeds: int) -> None:  # pragma: no cover - prints the documentation's table
    print("| case | max rel. error | max error (ulp) | allowed (ulp; rtol) | worst error/allowed | verdict |")
    print("|---|---|---|---|---|---|")
    runs = measure_sum(seeds)
    for name, comps in runs.items():
        worst = max(comps, key=lambda c: c.worst_ratio)
        rejected = sum(not c.match for c in comps)
        print(_row(f"sum 2^26: {name}", worst, f" ({rejected} of {seeds} seeds rejected; "
                   f"rms rel. error {math.sqrt(np.mean([c.max_rel_error ** 2 for c in comps])):.2e})"))
    for name, r in measure_matmul(1024).items():
        print(_row(f"matmul 1024x1024x1024: {name}", r))
    for name, r in measure_softmax(256).items():
        print(_row(f"softmax rows of 1000/2048/4096: {name}", r))
    for name, r in measure_stencil(4096).items():
        print(_row(f"stencil 4096^2: {name}", r))


if __name__ == "__main__":  # pragma: no cover
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 60)


def test_flushing_many_small_values_inside_the_floor_is_a_mismatch():
    # A red team zeroed every small softmax output: each is within rtol x RMS (the floor), but
    # wrong at its own magnitude; honest rewrites need the floor for a sliver of values only.
    rng = np.random.default_rng(3)
    base = np.exp(rng.uniform(-30.0, 0.0, 100_000)).astype(np.float32)
    flushed = np.where(base < 1e-7, np.float32(0.0), base).astype(np.float32)
    result = compare_dumps([base], [flushed])
    assert not result.match and "near-zero floor" in (result.problem or "")
    assert result.buffers[0].floored > 1000


def test_a_few_values_that_need_the_floor_still_match():
    rng = np.random.default_rng(4)
    base = rng.uniform(-1.0, 1.0, 100_000).astype(np.float32)
    cand = base.copy()
    cand[:50] += np.float32(1e-7)  # cancellation noise on 0.05% of the values
    base[:50] = np.float32(1e-6)
    cand[:50] = np.float32(1.05e-6)
    result = compare_dumps([base], [cand])
    assert result.match, result.problem
    assert 0 < result.buffers[0].floored <= 50


def test_flushed_subnormals_are_no_loss():
    base = np.full(10_000, 1e-40, dtype=np.float32)
    base[::2] = 0.5
    result = compare_dumps([base], [np.where(base < 1e-38, np.float32(0), base).astype(np.float32)])
    assert result.match, result.problem


# == per-output tolerances (issue 10) =============================================================


def _named(**outputs):
    from kernelloop.config import OutputTolerance

    return {name: OutputTolerance(**values) for name, values in outputs.items()}


def test_a_per_output_tolerance_applies_to_that_output_only_and_the_verdict_names_it():
    out = np.linspace(1.0, 2.0, 1000).astype(F32)
    dbias = np.linspace(-3.0, -1.0, 500).astype(F32)
    off = lambda a: (a * F32(1 + 5e-4)).astype(F32)  # noqa: E731 - 16x the float32 default
    loose_out = Tolerance(outputs=_named(out={"rtol": 1e-3}))
    r = compare_dumps([out, dbias], [off(out), dbias], tolerance=loose_out, names=["out", "dbias"])
    assert r.match, r.problem
    assert [(b.output, b.rtol, b.override) for b in r.buffers] == [("out", 1e-3, True), ("dbias", 2.0**-15, False)]
    assert "out: float32 rtol 0.001" in r.describe() and "dbias: float32 rtol 3.05e-05" in r.describe()
    # the other output keeps the dtype default: the same error there is a mismatch, named
    r = compare_dumps([out, dbias], [out, off(dbias)], tolerance=loose_out, names=["out", "dbias"])
    assert not r.match and r.buffers[1].mismatches == dbias.size
    assert "dbias: float32 rtol 3.05e-05" in r.problem and "out: float32 rtol 0.001" in r.problem
    # without names (or for a name the override does not give) nothing is loosened
    assert not compare_dumps([out], [off(out)], tolerance=loose_out).match
    assert not compare_dumps([out], [off(out)], tolerance=loose_out, names=["dx"]).match
    # without any per-output setting the description is what it always was
    assert compare_dumps([out], [out], names=["out"]).tolerance_summary() == "float32 rtol 3.05e-05"


def test_a_per_output_value_wins_over_the_every_output_value_and_keeps_the_other_one():
    tol = Tolerance(rtol=1e-5, atol=1e-9, outputs=_named(out={"atol": 1e-6}, idx={"rtol": 0.0}), scale=2.0)
    assert tol.for_dtype("float32", "out") == (2e-5, 2e-6)  # atol its own, rtol everyone's; both scaled
    assert tol.for_dtype("float32", "other") == (2e-5, 2e-9)
    assert tol.for_dtype("int32", "idx") == (0.0, 0.0)  # an integer takes no every-output value, atol included
    assert tol.for_dtype("int32", "other") == (0.0, 0.0)
    assert tol.overrides("out") and not tol.overrides("other") and not tol.overrides(None)
    assert tol.describe() == "rtol 1e-05, atol 1e-09; out: atol 1e-06; idx: rtol 0"
    assert Tolerance(outputs=_named(out={"rtol": 1e-3})).describe() == "out: rtol 0.001 (the rest by dtype)"
    # an integer output given an atol by name: off by one passes there, and only there
    counts = np.array([3, 4, 5], np.int32)
    tol = Tolerance(outputs=_named(hist={"atol": 1}))
    r = compare_dumps([counts, counts], [counts + 1, counts], tolerance=tol, names=["hist", "index"])
    assert r.match and r.buffers[1].tolerance_label() == "int32 exact"
    assert not compare_dumps([counts, counts], [counts, counts + 1], tolerance=tol, names=["hist", "index"]).match


def test_printed_numbers_take_the_loosest_per_output_tolerance():
    # a checksum is derived from the outputs: an output allowed 1e-3 moves it by as much
    loose = Tolerance(outputs=_named(out={"rtol": 1e-3}, dbias={"atol": 0.25}))
    r = compare_outputs("checksum 1000.0", "checksum 1000.5", tolerance=loose)
    assert r.match and r.buffers[0].rtol == 1e-3 and r.buffers[0].atol == 0.25 and r.buffers[0].override
    assert "printed numbers: float32 rtol 0.001 atol 0.25" in r.describe()
    assert not compare_outputs("checksum 1000.0", "checksum 1000.5").match
    assert not compare_outputs("checksum 1000.0", "checksum 1002.0", tolerance=loose).match
    # a tighter per-output value does not tighten them below the dtype default
    tight = Tolerance(outputs=_named(out={"rtol": 0.0}))
    assert compare_outputs("s 1.0", "s 1.00001", tolerance=tight).buffers[0].rtol == 2.0**-15


def test_a_per_output_tolerance_must_name_an_output_of_the_program():
    from kernelloop.errors import InputError
    from kernelloop.verify.outputs import check_output_names

    tol = Tolerance(outputs=_named(out={"rtol": 1e-4}, dbias={"atol": 1e-6}))
    check_output_names(tol, ["out", "dbias", "dx"])  # every name is an output: fine
    check_output_names(Tolerance(rtol=1e-4), None)  # no names given: fine even for a v1 harness
    with pytest.raises(InputError) as err:
        check_output_names(tol, ["out", "dx"], inputs=["x"])
    assert str(err.value) == ("a per-output tolerance names no output of the program ('dbias' is not one); "
                              "its outputs: out, dx")
    with pytest.raises(InputError, match="'x' is an input, not an output"):
        check_output_names(Tolerance(outputs=_named(x={"rtol": 1e-3})), ["out"], inputs=["x"])
    with pytest.raises(InputError, match="needs a contract v2 harness") as err:
        check_output_names(tol, None)
    assert "\n" not in str(err.value) and "out, dbias" in str(err.value)


def test_the_gate_takes_output_names_from_the_manifest_and_refuses_unknown_ones():
    from kernelloop.config import VerifySettings
    from kernelloop.errors import InputError
    from kernelloop.verify.comparing import check_tolerance_names, output_names
    from kernelloop.verify.records import Manifest

    manifest = Manifest(contract=2, warmup=1, calls=2, buffers=[
        {"name": "x", "role": "input", "dtype": "float32", "count": 8},
        {"name": "out", "role": "output", "dtype": "bfloat16", "count": 8},
        {"name": "tmp", "role": "scratch", "dtype": "float32", "count": 8},
        {"name": "state", "role": "inout", "dtype": "float16", "count": 4},
    ])
    assert output_names(manifest) == ["out", "state"]  # the dump's and the samples' order
    assert output_names(None) is None
    check_tolerance_names(VerifySettings(tolerances={"state": {"rtol": 1e-2}}), manifest)
    check_tolerance_names(VerifySettings(rtol=1e-3), None)
    with pytest.raises(InputError, match="'tmp' is an input, not an output.*its outputs: out, state"):
        check_tolerance_names(VerifySettings(tolerances={"tmp": {"rtol": 1e-2}}), manifest)
    with pytest.raises(InputError, match="contract v2"):
        check_tolerance_names(VerifySettings(tolerances={"out": {"atol": 0.0}}), None)


# == outputs that cross zero ======================================================================


def _sequential_rows(a: np.ndarray) -> np.ndarray:
    """Each row summed left to right in float32 (one thread per output, in order)."""
    acc = np.zeros(a.shape[0], F32)
    for k in range(a.shape[1]):
        acc = (acc + a[:, k]).astype(F32)
    return acc


def test_an_output_crossing_zero_passes_honest_reorderings_and_fails_wrong_results():
    # out[i] = sum_k x[i,k] - sum_k y[i,k]: sums of 64 terms near 32 that cancel to values of
    # RMS 3.3, many of them near zero. Their rounding noise is that of terms of size 32: at their
    # own magnitude it is far over rtol, at the buffer's RMS (the floor) it is well inside.
    rng = np.random.default_rng(10)
    x = rng.uniform(0, 1, (1 << 15, 64)).astype(F32)
    y = rng.uniform(0, 1, (1 << 15, 64)).astype(F32)
    base = (_sequential_rows(x) - _sequential_rows(y)).astype(F32)
    assert np.mean(np.abs(base) < 0.1) > 0.02  # many values near zero
    honest = {
        "pairwise sums": (x.sum(axis=1, dtype=F32) - y.sum(axis=1, dtype=F32)).astype(F32),
        "reversed order": (_sequential_rows(x[:, ::-1]) - _sequential_rows(y[:, ::-1])).astype(F32),
        "sum of differences": _sequential_rows((x - y).astype(F32)),
    }
    for name, cand in honest.items():
        r = compare_dumps([base], [cand])
        b = r.buffers[0]
        assert r.match, (name, r.problem)
        assert b.floor == pytest.approx(math.sqrt(64 / 6), rel=0.05) and r.max_rel_error > 100 * 2.0**-15, name
        # the floor carries the near-zero values, and only a sliver of them leans on it grossly
        assert 0 < b.floored < 0.002 * b.count, (name, b.floored)
    wrong = {
        "one term dropped": (_sequential_rows(x[:, :-1]) - _sequential_rows(y[:, :-1])).astype(F32),
        "values under 1% of the RMS flushed": np.where(np.abs(base) < 0.033, F32(0), base).astype(F32),
        "bf16-rounded inputs": (_sequential_rows(x.astype(BF16).astype(F32))
                                - _sequential_rows(y.astype(BF16).astype(F32))).astype(F32),
        "scaled by 1 + 1e-4": (base * F32(1 + 1e-4)).astype(F32),
    }
    for name, cand in wrong.items():
        assert not compare_dumps([base], [cand]).match, name


def test_leaning_on_the_floor_counts_gross_errors_only():
    from kernelloop.verify.outputs import GROSS, GROSS_FACTOR

    assert GROSS.error(2.0**-15) == GROSS_FACTOR * 2.0**-15 and GROSS.error(2.0**-6) == 0.5
    base = np.random.default_rng(11).normal(0.0, 1.0, 100_000).astype(F32)
    # cancellation noise: one absolute error, a third of rtol x RMS, on every value. Over rtol at
    # their own magnitude are the values under 1/3 (26% of them): the rule before counted them all
    # and rejected this; grossly wrong (over 100 rtol) are those under 1/300 (0.3%)
    noisy = (base + F32(2.0**-15 / 3)).astype(F32)
    r = compare_dumps([base], [noisy])
    assert r.match, r.problem
    assert 0 < r.buffers[0].floored < 0.005 * base.size
    assert np.count_nonzero(np.abs(base) < 1 / 3) > 0.2 * base.size
    # values lost (written as 0) inside the floor lean on it, each of them
    small = np.abs(base) < 0.5 * 2.0**-15
    lost = np.where(small, F32(0), base).astype(F32)
    assert compare_dumps([base], [lost]).buffers[0].floored == np.count_nonzero(small & (base != 0)) > 0


def test_bf16_and_fp16_outputs_of_a_v2_harness_are_read_compared_and_named(tmp_path):
    # what kernelloop_harness.cuh writes for h.output<__nv_bfloat16>("db", n) and
    # h.output<__half>("dh", n): per-call samples and the final dump, typed by the manifest
    from kernelloop.verify.experiment import compare_calls
    from kernelloop.verify.comparing import output_names
    from kernelloop.verify.records import parse_records

    def records(db: np.ndarray, dh: np.ndarray) -> bytes:
        manifest = json.dumps({"contract": 2, "warmup": 1, "calls": 1, "buffers": [
            {"name": "x", "role": "input", "dtype": "float32", "count": 64},
            {"name": "db", "role": "output", "dtype": "bfloat16", "count": db.size},
            {"name": "dh", "role": "output", "dtype": "float16", "count": dh.size}]}).encode()
        out = b"kernelloop-manifest 2 %d\n" % len(manifest) + manifest
        out += b"kernelloop-sample 2 0 1 bfloat16 4\n" + db[:4].tobytes()
        out += b"kernelloop-sample 2 0 2 float16 4\n" + dh[:4].tobytes()
        out += b"kernelloop-output 1 bfloat16 %d\n" % db.size + db.tobytes()
        out += b"kernelloop-output 1 float16 %d\n" % dh.size + dh.tobytes()
        return out

    values = np.linspace(-2.0, 2.0, 64)  # crosses zero
    db, dh = values.astype(BF16), values.astype(np.float16)
    base = parse_records(records(db, dh))
    assert [a.dtype for a in base.outputs] == [BF16, np.dtype("<f2")]
    assert [s.values.dtype for s in base.samples] == [BF16, np.dtype("<f2")]
    names = output_names(base.manifest)
    assert names == ["db", "dh"]
    assert np.array_equal(base.outputs[0].view("u2"), db.view("u2"))
    # 2% off in the bf16 output only: over its 2^-6 default; passes where that output is allowed 5%
    off = parse_records(records((values * 1.02).astype(BF16), dh))
    r = compare_dumps(base.outputs, off.outputs, names=names)
    assert not r.match and r.buffers[0].mismatches > 0 and r.buffers[1].mismatches == 0
    loose = Tolerance(outputs=_named(db={"rtol": 0.05}))
    r = compare_dumps(base.outputs, off.outputs, tolerance=loose, names=names)
    assert r.match, r.problem
    assert r.tolerance_summary() == "db: bfloat16 rtol 0.05; dh: float16 rtol 0.00195"
    calls = compare_calls(base, off, lambda b, c, call: compare_dumps(b, c, tolerance=loose, names=names))
    assert calls is not None and calls.match
    strict = compare_calls(base, off, lambda b, c, call: compare_dumps(b, c, names=names))
    assert strict is not None and not strict.match and "timed call 1 of 1" in strict.problem


def _fp16_mantissa(v: np.ndarray) -> np.ndarray:
    """float32 values rounded to 10 mantissa bits (fp16's precision, float32's range)."""
    bits = v.astype(F32).view(np.uint32)
    return ((bits + np.uint32(0x1000)) & ~np.uint32(0x1FFF)).view(F32)


def _softmax_rows(x: np.ndarray, dtype=F32) -> np.ndarray:
    e = np.exp((x - x.max(axis=1, keepdims=True)).astype(dtype)).astype(dtype)
    return (e / e.sum(axis=1, keepdims=True, dtype=dtype)).astype(F32)


def test_small_values_kept_at_a_lower_precision_drift_and_are_a_mismatch():
    # red team round 107 (c): every softmax output under 2e-4 rounded to fp16's 10 mantissa bits,
    # up to 16 x rtol at its own size: inside rtol x RMS, and under the gross count's 100 x rtol
    x = np.random.default_rng(12).uniform(-8.0, 8.0, (512, 1000)).astype(F32)
    base = _softmax_rows(x)
    small = base < 2e-4
    assert np.mean(small) > 0.5
    cand = np.where(small, _fp16_mantissa(base), base).astype(F32)
    r = compare_dumps([base], [cand])
    assert not r.match and "lower precision" in (r.problem or ""), r.problem
    assert r.buffers[0].floored == 0 < r.buffers[0].mismatches + r.buffers[0].drifted
    # honest rewrites of the same softmax: in float64 then rounded, the sum in another order
    honest = {"float64": _softmax_rows(x.astype(np.float64), np.float64),
              "reversed columns": _softmax_rows(x[:, ::-1])[:, ::-1]}
    for name, other in honest.items():
        r = compare_dumps([base], [np.ascontiguousarray(other)])
        assert r.match and r.buffers[0].drifted <= 0.001 * base.size, (name, r.problem, r.buffers[0].drifted)


def test_honest_cancellation_noise_stays_under_the_drift_budget():
    from kernelloop.verify.outputs import DRIFT, DRIFT_FRACTION

    base = np.random.default_rng(13).normal(0.0, 1.0, 100_000).astype(F32)
    # noise of a third of the allowance on every value (as above): the values under 1/24 of the RMS
    # drift, 3.3% of a normal buffer, inside the 5% budget; noise of the whole allowance is not
    third = compare_dumps([base], [(base + F32(2.0**-15 / 3)).astype(F32)])
    assert third.match, third.problem
    assert 0.02 * base.size < third.buffers[0].drifted < DRIFT.limit(base.size) == DRIFT_FRACTION * base.size
    whole = compare_dumps([base], [(base + F32(0.9 * 2.0**-15)).astype(F32)])
    assert not whole.match and "lower precision" in (whole.problem or "")


def test_integer_outputs_have_no_near_zero_floor():
    # red team round 262: under a named rtol the baseline's RMS (large counts) let empty bins take counts
    bins = np.array([0, 0, 1_000_000, 2_000_000] * 64, np.uint32)
    wrong = bins.copy()
    wrong[0] = 3  # an empty bin given three counts
    named = Tolerance(outputs=_named(bins={"rtol": 1e-3}))
    result = compare_dumps([bins], [wrong], tolerance=named, names=["bins"])
    assert not result.match and result.buffers[0].floor == 0.0, result.problem
    close = bins.copy()
    close[2] += 500  # within 1e-3 of its own count: the named rtol still works
    assert compare_dumps([bins], [close], tolerance=named, names=["bins"]).match
