"""The scaled-input experiment (verify/magnitudes.py; red team rounds 240-242): every floating-point input
times 2^s, compared only at scales where the baseline's own outputs scale by one power of two per output, both
programs' outputs divided by it. Without a GPU: programs simulated in numpy, answering run_program as the
harness would (the inputs of a seed and call, times 2^s in float32), and the experiment run over them."""

from __future__ import annotations

import secrets

import numpy as np
import pytest

from kernelloop.config import VerifySettings
from kernelloop.tools.sandbox import IsolationReport, Limits, RunResult
from kernelloop.verify import magnitudes, special_values
from kernelloop.verify.comparing import baseline_noise
from kernelloop.verify.magnitudes import output_exponents, rescaled, scalable_inputs, scaled_input_experiments
from kernelloop.verify.outputs import KernelMs
from kernelloop.verify.placement import LAYOUT_MAPPING_FAILURE
from kernelloop.verify.program_run import INPUT_SCALE_ENV, ProgramRun
from kernelloop.verify.records import Manifest, parse_records
from kernelloop.verify.special_values import special_value_experiments
from kernelloop.verify.verdict import Durations, Reason, Verdict

from .test_nonfinite import GOOD, records, scripted_runs, settings, verify  # noqa: F401  (settings: a fixture)

CALLS, ROWS, COLS = 3, 8, 4096


def manifest() -> dict:
    return {"contract": 2, "warmup": 1, "calls": CALLS, "flops": 0.0, "size_options": 1, "copy_gbps": 3000.0,
            "fma_gflops": 50000.0,
            "buffers": [{"name": "x", "role": "input", "dtype": "float32", "count": ROWS * COLS},
                        {"name": "w", "role": "input", "dtype": "float32", "count": ROWS * COLS},
                        {"name": "y", "role": "output", "dtype": "float32", "count": ROWS}]}


WARMUP_CALLS = 2


def inputs(seed: int, call: int, scale: int, factor: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """What the harness hands a call: [0, 1) in multiples of 2^-24 (kl::Uniform), then times the factor (rounded
    to float32 once) and 2^s."""
    rng = np.random.default_rng([seed, call])
    x, w = (rng.integers(0, 1 << 24, (ROWS, COLS)).astype(np.float32) * np.float32(2.0**-24) for _ in range(2))
    if call % 2 == 0:  # a stressed call: spikes (|v| + 1) x 2^16, the edges' at the same places in both (round 246)
        for values in (x, w):
            flat = values.reshape(-1)
            at = np.concatenate([[0, 1, flat.size - 2, flat.size - 1], rng.integers(0, flat.size, 12)])
            flat[at] = (np.abs(flat[at]) + 1) * np.float32(2.0**16)
    f = np.float32(factor)
    return np.ldexp(x * f, scale).astype(np.float32), np.ldexp(w * f, scale).astype(np.float32)


def row_sum(x, w):  # degree 1 in the inputs: the baseline, float32 in order
    return np.cumsum(x, axis=1, dtype=np.float32)[:, -1]


def pairwise_sum(x, w):  # an honest rewrite: another order
    return x.astype(np.float32).reshape(ROWS, 64, 64).sum(axis=2, dtype=np.float32).sum(axis=1, dtype=np.float32)


def fixed_point_sum(x, w):  # round 240 (b): int64 at 2^32, exact on the harness's grid, wraps past 2^31
    with np.errstate(invalid="ignore"):  # past 2^63: int64 wraps (numpy: undefined, any value)
        fixed = np.floor(x.astype(np.float64) * 2.0**32).astype(np.int64)
    return (fixed.sum(axis=1) / 2.0**32).astype(np.float32)


def cosine(x, w):  # degree 0; sqrtf(na * nb) underflows (and overflows) long before x does (round 241)
    dot = (x * w).sum(axis=1, dtype=np.float32)
    na, nb = (x * x).sum(axis=1, dtype=np.float32), (w * w).sum(axis=1, dtype=np.float32)
    with np.errstate(all="ignore"):
        return (dot / np.sqrt(na * nb)).astype(np.float32)


def cosine_normalised(x, w):  # the honest rewrite that normalises first: finite where the baseline is not
    with np.errstate(all="ignore"):
        dot = (x * w).sum(axis=1, dtype=np.float32)
        return (dot / np.sqrt((x * x).sum(axis=1, dtype=np.float32)) / np.sqrt((w * w).sum(axis=1, dtype=np.float32))
                ).astype(np.float32)


def softmax_max(x, w):  # exp: no power of two relates exp(2^s x) to exp(x)
    with np.errstate(all="ignore"):
        e = np.exp(x - x.max(axis=1, keepdims=True))
        return (e[:, 0] / e.sum(axis=1)).astype(np.float32)


def scripted(monkeypatch, baseline, candidate) -> list[dict]:
    asked: list[dict] = []

    def run(binary, *, seed, limits, secret=None, input_scale=0, input_factor=1.0, **kw):
        asked.append({"binary": str(binary), "scale": input_scale, "factor": input_factor,
                      "packed_forward": bool(kw.get("buffer_shift") and not kw["buffer_shift"][3]),
                      "special": kw.get("nonfinite_calls") is not None, "buffers": kw.get("nonfinite_buffers"),
                      "placement": (kw.get("exact_buffers", False), kw.get("buffer_shift") and kw["buffer_shift"][3])})
        compute = baseline if str(binary) == "baseline" else candidate
        if getattr(compute, "packed_only", False) and not asked[-1]["packed_forward"]:
            compute = baseline  # right (the baseline's own results) except with its buffers packed in order
        if getattr(compute, "says_unmappable", False) and asked[-1]["packed_forward"]:
            # the part prints the harness's mapping-failure line and exits where its buffers are packed in order
            return ProgramRun(seed=seed, result=RunResult(
                argv=["p"], returncode=1, stdout="", stderr=LAYOUT_MAPPING_FAILURE + " cannot map\n",
                isolation=IsolationReport(), wall_s=0.1), kernel_ms=KernelMs(value=None, count=0),
                secret=secret.hex() if secret else None)
        def fed(call):
            x, w = inputs(seed, call, input_scale, input_factor)
            if kw.get("nonfinite_calls") is not None:  # the special-value experiment: a NaN among the inputs
                mask = kw.get("nonfinite_buffers")
                if mask is None or mask & 1:
                    x = x.copy()
                    x[call % ROWS, 0] = np.nan
                if (mask is None or mask & 2) and getattr(compute, "w_spiked", False):
                    w = w.copy()
                    w[call % ROWS, 1] = np.nan
            return x, w
        outs = [compute(*fed(call)) for call in range(CALLS)]
        # the warm-up calls, scaled as every call is (never stressed, never special), sampled like the harness's
        warm = [compute(*inputs(seed, 1001 + 2 * w, input_scale, input_factor)) for w in range(WARMUP_CALLS)]
        crashed = any(o is None for o in outs + warm)  # None: the program traps (exit 1)
        result = RunResult(argv=["p"], returncode=int(crashed), stdout="", stderr="trap\n" if crashed else "",
                           isolation=IsolationReport(), wall_s=0.1)
        done = ProgramRun(seed=seed, result=result, kernel_ms=KernelMs(value=1.0, count=1),
                          secret=secret.hex() if secret else None)
        if crashed:
            return done
        done.records = parse_records(records([list(o) for o in outs], list(outs[-1]), m=manifest(),
                                             warmups=[list(o) for o in warm]))
        done.dump = done.records.outputs
        return done

    monkeypatch.setattr(magnitudes, "run_program", run)
    monkeypatch.setattr(special_values, "run_program", run)
    return asked


def experiment(monkeypatch, baseline, candidate, draws: int = 3, stressed: bool = False, both: bool = False):
    asked = scripted(monkeypatch, baseline, candidate)
    vs = VerifySettings(input_scale_draws=draws)
    secret = secrets.token_bytes(32)
    first, again = (magnitudes.run_program("baseline", seed=7, limits=None, secret=secret) for _ in range(2))
    asked.clear()
    v = Verdict(accepted=False, summary="", baseline_file="b.cu", candidate_file="c.cu", settings=vs)
    limits = Limits(wall_timeout_s=60)
    m = manifest()
    if stressed:
        m["buffers"][0]["stressed"] = True
    if both:  # both inputs spiked with special values (the baseline and the candidate are told: w_spiked)
        m["buffers"][1]["stressed"] = True
        baseline.w_spiked = candidate.w_spiked = True
    noise = baseline_noise(first, again, vs.baseline_noise_factor)
    failure, matched, scalings = scaled_input_experiments(v, "baseline", "candidate", limits, limits, set(),
                                                          Manifest.model_validate(m), noise, Durations(), lambda p: None)
    # as the gate goes on: the whole special-value sequence at every scale taken, where inputs are spiked
    for scaling in scalings if stressed else []:
        if failure or not matched:
            break
        failure, matched = special_value_experiments(v, "baseline", "candidate", limits, limits, None, set(),
                                                     Manifest.model_validate(m), noise, Durations(), lambda p: None,
                                                     scaling=scaling)
    return v, failure, matched, asked


def test_a_fixed_point_sum_exact_only_on_the_harness_grid_is_rejected(monkeypatch):
    v, failure, matched, asked = experiment(monkeypatch, row_sum, fixed_point_sum)
    assert failure is None and not matched
    bad = next(c for c in v.checks if c.phase == "scaled" and not c.comparison.match)
    assert " x 2^" in bad.comparison.describe() and "divided by its power of two" in bad.comparison.describe()


def test_an_honest_reordered_sum_matches_at_every_scale_the_baseline_takes(monkeypatch):
    v, failure, matched, asked = experiment(monkeypatch, row_sum, pairwise_sum, draws=6)
    assert failure is None and matched, [c.comparison.describe() for c in v.checks]
    compared = [a["scale"] for a in asked if a["binary"] == "candidate"]
    probed = [a["scale"] for a in asked if a["binary"] == "baseline" and a["scale"]]
    # a sum scales exactly from the deepest band down to the top band up, and every scale taken is compared, and
    # the reference run's own, 2^0 times the factor (round 255)
    assert min(probed) <= -18 and max(probed) >= 6 and sorted(set(compared)) == sorted(probed + [0])
    assert min(compared) == min(probed) and max(compared) == max(probed)
    assert any("scale exactly from 2^" in n for n in v.notes)


def test_an_honest_cosine_is_not_refused_where_the_baseline_underflows(monkeypatch):
    """Round 241: the baseline's sqrtf(na * nb) underflows at scales its inputs do not; the rewrite that
    normalises first is compared only where the baseline scales exactly (within 2^+-20 it does)."""
    v, failure, matched, asked = experiment(monkeypatch, cosine, cosine_normalised)
    assert failure is None and matched, [c.comparison.describe() for c in v.checks]
    probed = [a["scale"] for a in asked if a["binary"] == "baseline" and a["scale"]]
    compared = [a["scale"] for a in asked if a["binary"] == "candidate"]
    assert compared and all(-20 <= s <= 11 for s in compared) and min(probed) <= -18


def test_a_baseline_that_does_not_scale_is_compared_at_the_factor_alone_and_said(monkeypatch):
    v, failure, matched, asked = experiment(monkeypatch, softmax_max, softmax_max)
    assert failure is None and matched
    assert {a["scale"] for a in asked if a["binary"] == "candidate"} == {0}  # 2^0 times the factor (round 255)
    assert any("compared at 2^0 only" in n for n in v.notes), v.notes
    assert len([a for a in asked if a["binary"] == "baseline"]) == 4  # unscaled (twice: its noise), one down, one up
    v, failure, matched, asked = experiment(monkeypatch, softmax_max, fixed_point_sum)
    assert failure is None and not matched  # wrong anywhere: met at the factor alone


def top_in_octave_one(x, w):
    """Red team round 255: the baseline's NaN-skipping row sum, but where a row's largest value lies in [1, 2) and its
    32nd largest is at least a quarter of it, every other element twice and no NaN test."""
    out = sanitised_sum(x, w)
    with np.errstate(all="ignore"):
        top = np.nanmax(np.abs(x), axis=1)
        nth = -np.sort(-np.nan_to_num(np.abs(x)), axis=1)[:, 31]
    bulk = (top >= 1) & (top < 2) & (nth >= top / 4)
    doubled = (x[:, ::2].sum(axis=1, dtype=np.float32) * 2).astype(np.float32)
    return np.where(bulk, doubled, out).astype(np.float32)


def test_inputs_whose_largest_value_lies_in_one_to_two_meet_the_candidate(monkeypatch):
    """Red team round 255: the scales drawn skip 2^0 and the plain runs have no factor, so no input's bulk had its
    largest value in [1, 2) (100 of 100 accepted). The reference run's own scale, 2^0 times the factor in (1, 2), is
    compared too, with and without special values."""
    for _ in range(5):
        v, failure, matched, asked = experiment(monkeypatch, sanitised_sum, top_in_octave_one, draws=6, stressed=True)
        assert failure is None and not matched
        assert any(not c.comparison.match and " x 2^0" in c.comparison.describe() for c in v.checks)


def test_a_candidate_that_fails_on_scaled_inputs_fails(monkeypatch):
    def traps_on_large_values(x, w):
        return None if x.max() > 2.0 else row_sum(x, w)

    v, failure, matched, asked = experiment(monkeypatch, row_sum, traps_on_large_values)
    assert failure is not None and failure[0] == Reason.run_failed and " x 2^" in failure[1], failure


def test_exponents_per_output_and_rescaling_exactly():
    def run(values):
        result = RunResult(argv=["p"], returncode=0, stdout="", stderr="", isolation=IsolationReport(), wall_s=0.1)
        done = ProgramRun(seed=1, result=result, kernel_ms=KernelMs(value=1.0, count=1))
        done.records = parse_records(records([values, values], values, m=manifest() | {"calls": 2}))
        done.dump = done.records.outputs
        return done

    base = run([1.5, -3.0, 0.0, 7.25, 1, 1, 1, 1])
    scaled = run([1.5 * 2**-40, -3.0 * 2**-40, 0.0, 7.25 * 2**-40, 2**-40, 2**-40, 2**-40, 2**-40])
    assert output_exponents(base, scaled) == [-40]
    back = rescaled(scaled, [-40])
    assert np.array_equal(back.dump[0], base.dump[0])
    assert all(np.array_equal(s.values, b.values) for s, b in zip(back.records.samples, base.records.samples))
    assert scaled.dump[0][0] == np.float32(1.5 * 2**-40)  # the run itself is untouched


def test_the_inputs_scaled_are_floating_point_but_fp16_and_the_harness_is_told_by_its_environment(tmp_path):
    m = Manifest.model_validate(manifest() | {"buffers": manifest()["buffers"] + [
        {"name": "h", "role": "input", "dtype": "float16", "count": 4},
        {"name": "ids", "role": "input", "dtype": "int32", "count": 4},
        {"name": "b", "role": "input", "dtype": "bfloat16", "count": 4}]})
    assert scalable_inputs(m) == ["x", "w", "b"]
    assert INPUT_SCALE_ENV == "KERNELLOOP_INPUT_SCALE"


@pytest.mark.parametrize("draws", [1, 2, 5])
def test_the_candidate_is_compared_at_input_scale_draws_scales(monkeypatch, draws):
    v, failure, matched, asked = experiment(monkeypatch, row_sum, pairwise_sum, draws)
    compared = [a["scale"] for a in asked if a["binary"] == "candidate"]
    assert len(set(compared)) == draws + 1 and 0 in compared  # and 2^0; each in every caller placement
    assert {compared.count(s) for s in compared} in ({3}, {4}), compared


def atomic_signed_sum(x, w):
    """A float-atomic sum of x - w (crossing zero): each run adds in an order of its own (round 242: a noise
    allowance relative to the output refused an honest rewrite of it)."""
    terms = (x - w).astype(np.float32)
    order = np.random.default_rng().permutation(COLS)
    return np.cumsum(terms[:, order], axis=1, dtype=np.float32)[:, -1]


def block_signed_sum(x, w):  # the honest rewrite: one partial per block of 256, then the partials
    terms = (x - w).astype(np.float32).reshape(ROWS, COLS // 256, 256)
    return terms.sum(axis=2, dtype=np.float32).sum(axis=1, dtype=np.float32)


def test_an_honest_rewrite_of_an_atomic_sum_crossing_zero_is_not_refused(monkeypatch):
    for _ in range(5):  # each verification draws its own orders and scales
        v, failure, matched, asked = experiment(monkeypatch, atomic_signed_sum, block_signed_sum)
        assert failure is None and matched, [c.comparison.describe() for c in v.checks]
        assert [a for a in asked if a["binary"] == "candidate"]  # compared, not skipped


def test_where_the_fixed_point_sum_fails():
    """The scales that catch round 240 (b)'s sum: its 2^-32 grid loses most of every value below about 2^-20,
    and its total wraps past 2^31: the smallest and the largest scale a sum takes are both compared."""
    x, w = inputs(7, 1, -40)  # (a call without spikes)
    assert fixed_point_sum(x, w).max() == 0 and row_sum(x, w).min() > 0
    x, w = inputs(7, 1, 30)
    assert np.all(np.abs(fixed_point_sum(x, w) - row_sum(x, w)) > 0.5 * row_sum(x, w))


@pytest.mark.nvcc
def test_the_gate_rejects_a_candidate_wrong_only_on_scaled_inputs(monkeypatch, settings):  # noqa: F811
    samples, final = GOOD

    def behave(role, kw):
        s = kw.get("input_scale", 0)
        if not s:
            return GOOD
        if role == "baseline" or s > 0:  # the baseline scales by 2^s; the candidate is wrong scaled down only
            return [[v * 2.0**s for v in call] for call in samples], [v * 2.0**s for v in final]
        return [[0.0] * len(call) for call in samples], [0.0] * len(final)

    calls = scripted_runs(monkeypatch, behave)
    v = verify(settings)
    assert not v.accepted and Reason.correctness in v.reasons, v.summary
    assert " x 2^-" in v.gate("correctness").detail
    scaled = [c for c in calls if c.get("input_scale")]
    assert scaled and all(c["secret"] == scaled[0]["secret"] for c in scaled)


@pytest.mark.nvcc
def test_the_gate_accepts_the_same_candidate_with_the_experiment_off(monkeypatch, settings):  # noqa: F811
    def behave(role, kw):
        return GOOD if not kw.get("input_scale") else ([[0.0] * 4] * 2, [0.0] * 4)

    calls = scripted_runs(monkeypatch, behave)
    v = verify(settings.model_copy(update={"verify": settings.verify.model_copy(update={"input_scale_draws": 0})}))
    assert Reason.correctness not in v.reasons, v.summary
    assert not [c for c in calls if c.get("input_scale")]


def cosine_split_norms(x, w):  # the careful form as the baseline: exact from about 2^-60 to 2^56
    with np.errstate(all="ignore"):
        dot = (x * w).sum(axis=1, dtype=np.float32)
        return (dot / (np.sqrt((x * x).sum(axis=1, dtype=np.float32))
                       * np.sqrt((w * w).sum(axis=1, dtype=np.float32)))).astype(np.float32)


def cosine_one_rsqrt(x, w):  # the fused form (one rsqrt of the product of the norms): out of range sooner
    with np.errstate(all="ignore"):
        dot = (x * w).sum(axis=1, dtype=np.float32)
        na, nb = (x * x).sum(axis=1, dtype=np.float32), (w * w).sum(axis=1, dtype=np.float32)
        return (dot * (np.float32(1) / np.sqrt(na * nb))).astype(np.float32)


def test_an_honest_rewrite_with_intermediates_of_a_higher_degree_is_not_refused(monkeypatch):
    """Red team rounds 245-246: with the careful cosine as the baseline (exact from about 2^-60 to 2^56), the fused
    rsqrtf(na * nb) rewrite went out of range at scales the probe took past 2^+-28 and was refused in 99.5 % of
    verifications; then at 2^20 where the spikes (2^17, scaled too) lay in both inputs' first and last rows. The
    bands end at 2^-20 and 2^11, where its product of norms stays a normal float, spikes included."""
    for _ in range(4):
        v, failure, matched, asked = experiment(monkeypatch, cosine_split_norms, cosine_one_rsqrt, draws=6)
        assert failure is None and matched, [c.comparison.describe() for c in v.checks]
        compared = [a["scale"] for a in asked if a["binary"] == "candidate"]
        assert min(compared) <= -18 and max(compared) >= 6


def window_fixed_point_sum(x, w):
    """Round 245: round 240's fixed point behind a probe of magnitude (floats where the data is about 2^-17 or
    more, or below 2^-32): wrong only in a window of magnitudes, here one the deepest band (2^-20 to 2^-18,
    times a factor in [1, 2)) always reaches; a window narrower than a band is met by chance."""
    top = float(np.abs(x[:, :32]).max())
    return fixed_point_sum(x, w) if 2.0**-32 <= top < 2.0**-17 else row_sum(x, w)


def test_a_candidate_wrong_only_in_a_window_of_magnitudes_meets_it(monkeypatch):
    for _ in range(6):  # every scale the baseline takes is compared: a band of it lies in the window
        v, failure, matched, asked = experiment(monkeypatch, row_sum, window_fixed_point_sum, draws=6)
        assert failure is None and not matched, sorted(a["scale"] for a in asked if a["binary"] == "candidate")


def test_every_run_of_the_experiment_has_one_secret_factor_so_the_largest_value_lies_anywhere_in_its_octave(
        monkeypatch):
    """Red team round 245: scaled by powers of two alone, the largest input always lay just below a power of two;
    a path keyed on its octave position told the experiment from a caller's data."""
    factors = set()
    for _ in range(3):
        v, failure, matched, asked = experiment(monkeypatch, row_sum, pairwise_sum, draws=6)
        seen = {a["factor"] for a in asked}
        assert len(seen) == 1 and 1.0 < next(iter(seen)) < 2.0
        factors |= seen
    assert len(factors) == 3
    x, _ = inputs(7, 1, -9, 1.37)
    assert abs(float(x.max()) * 2**9 - 1.37) < 1e-3  # the largest value 1.37 x 2^-9, mid-octave


def test_a_candidate_wrong_only_with_its_result_right_after_its_input_meets_that_placement(monkeypatch):
    """Red team round 247: the scaled-input experiment is made once and drew one placement; a fixed-point sum taken
    only where the result lies right after the input (packed in declaration order) passed in about 5 of 6. The
    smallest and the largest scale are run by the candidate in every caller placement."""
    def packed_fixed_point(x, w):
        return fixed_point_sum(x, w)
    packed_fixed_point.packed_only = True
    for _ in range(5):
        v, failure, matched, asked = experiment(monkeypatch, row_sum, packed_fixed_point, draws=6)
        assert failure is None and not matched, [(a["scale"], a["packed_forward"]) for a in asked]
        assert any(a["packed_forward"] and a["binary"] == "candidate" for a in asked)


def test_a_candidate_wrong_only_packed_in_order_and_in_a_middle_window_of_magnitudes_meets_both(monkeypatch):
    """Red team round 248: only the smallest and the largest scale were run in every caller placement, the middle
    ones in the drawn one; a fixed-point sum taken only where the result lies right after the input AND the data's
    magnitude lies in a middle window passed in 82 % of verifications. Every scale meets every placement."""
    def middle_packed(x, w):  # wrong only where the data's largest is in [2^-17, 2^-12): the band (-17, -13)
        top = float(np.abs(x[:, :32]).max())
        return fixed_point_sum(x, w) * np.float32(1 + 2**-10) if 2.0**-17 <= top < 2.0**-12 else row_sum(x, w)
    middle_packed.packed_only = True
    for _ in range(6):
        v, failure, matched, asked = experiment(monkeypatch, row_sum, middle_packed, draws=6)
        assert failure is None and not matched, [(a["scale"], a["packed_forward"]) for a in asked]


def test_a_candidate_that_says_its_layout_cannot_be_mapped_where_the_baseline_maps_it_fails(monkeypatch):
    """Round 248: a run that printed the harness's mapping-failure line did not count, whoever printed it; a part
    keyed on its buffers packed in declaration order could print it there. It counts unless the baseline's run in
    the same placement says so too."""
    def refuses_packed(x, w):
        return row_sum(x, w)
    refuses_packed.says_unmappable = True
    v, failure, matched, asked = experiment(monkeypatch, row_sum, refuses_packed, draws=2)
    assert failure is not None and not matched, failure
    assert any(a["packed_forward"] and a["binary"] == "baseline" for a in asked)  # asked whether it maps there


def test_a_placement_neither_program_can_map_does_not_count(monkeypatch):
    def neither(x, w):
        return row_sum(x, w)
    neither.says_unmappable = True
    v, failure, matched, asked = experiment(monkeypatch, neither, neither, draws=2)
    # the drawn placement, where the baseline does not map, is made guarded; the others the candidate skips
    assert failure is None and matched, failure


def test_at_another_size_drawn_in_secret_the_same_experiment_is_made(monkeypatch):
    """Red team round 249: the scaled-input experiment ran at the default size only; a fixed-point sum taken only
    where n is not a power of two was exact on the harness's values at every size and wrong on a caller's. The gate
    makes it again at one other size drawn in secret, whole (round 250: three scales in one placement there passed a
    window of magnitudes in 76 %)."""
    asked = scripted(monkeypatch, row_sum, fixed_point_sum)
    vs = VerifySettings(input_scale_draws=6)
    secret = secrets.token_bytes(32)
    first, again = (magnitudes.run_program("baseline", seed=7, limits=None, secret=secret) for _ in range(2))
    asked.clear()
    sizes: list[tuple] = []
    original = magnitudes.run_program

    def sized(binary, **kw):
        sizes.append((kw.get("size_index"), kw.get("size_draw")))
        return original(binary, **kw)
    monkeypatch.setattr(magnitudes, "run_program", sized)
    monkeypatch.setattr(special_values, "run_program", sized)
    v = Verdict(accepted=False, summary="", baseline_file="b.cu", candidate_file="c.cu", settings=vs)
    limits = Limits(wall_timeout_s=60)
    failure, matched, _ = scaled_input_experiments(v, "baseline", "candidate", limits, limits, set(),
                                                Manifest.model_validate(manifest()),
                                                baseline_noise(first, again, vs.baseline_noise_factor),
                                                Durations(), lambda p: None, size=((-1, 12345), "3001 x 1500"))
    assert set(sizes) == {(-1, 12345)}
    assert failure is None and not matched
    bad = next(c for c in v.checks if c.phase == "scaled" and not c.comparison.match)
    assert "at 3001 x 1500" in bad.comparison.describe()
    asked.clear()
    v = Verdict(accepted=False, summary="", baseline_file="b.cu", candidate_file="c.cu", settings=vs)
    monkeypatch.setattr(magnitudes, "run_program", original)
    monkeypatch.setattr(special_values, "run_program", original)
    scripted(monkeypatch, row_sum, pairwise_sum)
    failure, matched, _ = scaled_input_experiments(v, "baseline", "candidate", limits, limits, set(),
                                                Manifest.model_validate(manifest()),
                                                baseline_noise(first, again, vs.baseline_noise_factor),
                                                Durations(), lambda p: None, size=((-1, 12345), "3001 x 1500"))
    assert failure is None and matched
    compared = [c for c in v.checks if c.phase == "scaled"]
    assert len(compared) >= 3 * 6  # every scale taken, each in every caller placement


def sanitised_sum(x, w):  # NaN counts as 0
    return np.nansum(x, axis=1, dtype=np.float32).astype(np.float32)


def sanitised_unless_small(x, w):  # the sanitising pass skipped where the row's largest value is under 2^-8
    with np.errstate(all="ignore"):
        small = np.nanmax(np.abs(x), axis=1) < 2.0**-8
    return np.where(small, x.sum(axis=1, dtype=np.float32), np.nansum(x, axis=1, dtype=np.float32)).astype(np.float32)


def test_special_values_meet_inputs_at_the_smallest_scale_taken(monkeypatch):
    """Red team round 250: the special values were never scaled, so a sanitising pass skipped where a block's
    largest value was under 2^-8 met NaN only among values of the generator's own magnitude. They are also put
    among inputs at the smallest scale the baseline takes."""
    v, failure, matched, asked = experiment(monkeypatch, sanitised_sum, sanitised_unless_small, draws=6,
                                            stressed=True)
    assert failure is None and not matched
    bad = next(c for c in v.checks if not c.comparison.match)
    assert bad.phase == "nonfinite" and "NaN, +-inf and zero" in bad.comparison.describe() and \
        "times" in bad.comparison.describe()
    v, failure, matched, asked = experiment(monkeypatch, sanitised_sum, sanitised_sum, draws=6, stressed=True)
    assert failure is None and matched
    # at every scale the baseline takes (round 253: one drawn between the extremes passed a middle band in 56 %),
    # each in every caller placement (round 254)
    scales = {a["scale"] for a in asked if a["binary"] == "candidate" and not a["special"]}
    assert len(scales) >= 3
    for scale in scales:
        placements = {a["placement"] for a in asked if a["binary"] == "candidate" and a["special"] and a["scale"] == scale}
        assert len(placements) >= 3, (scale, placements)


def sanitised_unless_plain(x, w):  # the sanitising pass skipped where the row's largest value lies in (2^5, 2^13)
    with np.errstate(all="ignore"):
        top = np.nanmax(np.abs(x), axis=1)
    plain = (top > 2.0**5) & (top < 2.0**13)
    return np.where(plain, x.sum(axis=1, dtype=np.float32), np.nansum(x, axis=1, dtype=np.float32)).astype(np.float32)


def test_special_values_meet_inputs_at_the_largest_scale_taken_too(monkeypatch):
    """Red team round 252: special values came at the generator's own magnitude and at the smallest scale only; a
    sanitising pass skipped where a row's largest value lay in a plain range of a caller's readings passed. They
    also come at the largest scale taken, and every one between (round 253)."""
    for _ in range(3):
        v, failure, matched, asked = experiment(monkeypatch, sanitised_sum, sanitised_unless_plain, draws=6,
                                                stressed=True)
        assert failure is None and not matched, [(a["scale"], a["binary"]) for a in asked]
    scales = {a["scale"] for a in asked if a["binary"] == "baseline"}
    assert len(scales) > 2


def asserting_finite_weights(x, w):  # the baseline traps on a NaN weight (an assert(isfinite(w))), sanitises x
    return None if np.isnan(w).any() else sanitised_sum(x, w)


def asserting_unless_small(x, w):  # the same, its sanitising pass skipped where the row's largest value is under 2^-8
    return None if np.isnan(w).any() else sanitised_unless_small(x, w)


def test_special_values_at_a_scale_go_into_each_input_alone_where_the_baseline_fails_on_them_all(monkeypatch):
    """Red team round 254: at a scale the special values went into every input at once; where the baseline traps
    on one input's (a NaN weight), nothing was checked at that scale, and a sanitiser of the other input dropped
    below 2^-8 passed 10 of 10 (modelled). The whole sequence runs at every scale: each input alone, then each kind."""
    for _ in range(3):
        v, failure, matched, asked = experiment(monkeypatch, asserting_finite_weights, asserting_unless_small,
                                                draws=6, stressed=True, both=True)
        assert failure is None and not matched
        bad = next(c for c in v.checks if not c.comparison.match)
        assert bad.phase == "nonfinite" and "in 'x' only" in bad.comparison.describe()
    v, failure, matched, asked = experiment(monkeypatch, asserting_finite_weights, asserting_finite_weights,
                                            draws=6, stressed=True, both=True)
    assert failure is None and matched
    assert any("not checked everywhere" in n and "'w'" in n and "times" in n for n in v.notes), v.notes


def test_special_values_at_every_scale_meet_buffers_packed_in_order(monkeypatch):
    """Red team round 254: special values at a scale came in the drawn placement only; a sanitiser dropped only
    where the buffers lay packed in declaration order AND the data was under 2^-8 passed 12 of 20. At every scale
    the candidate meets them in every caller placement."""
    def packed_unless_small(x, w):
        return sanitised_unless_small(x, w)
    packed_unless_small.packed_only = True
    for _ in range(5):
        v, failure, matched, asked = experiment(monkeypatch, sanitised_sum, packed_unless_small, draws=6,
                                                stressed=True)
        assert failure is None and not matched
        bad = next(c for c in v.checks if not c.comparison.match)
        assert bad.phase == "nonfinite" and "packed" in bad.comparison.describe()


def test_each_input_alone_meets_every_caller_placement_at_the_generators_own_magnitude(monkeypatch):
    """Round 254, the same class without a scale: only the first experiment of the sequence met every caller
    placement; where the baseline traps on a NaN weight, the dropped sanitiser of x packed in declaration order met
    x's special values in the drawn placement alone (about 1 in 3). Every experiment meets every placement."""
    def unsanitised(x, w):
        return None if np.isnan(w).any() else row_sum(x, w)
    unsanitised.packed_only = True
    m = manifest()
    m["buffers"][0]["stressed"] = m["buffers"][1]["stressed"] = True
    asserting_finite_weights.w_spiked = unsanitised.w_spiked = True
    for _ in range(5):
        asked = scripted(monkeypatch, asserting_finite_weights, unsanitised)
        v = Verdict(accepted=False, summary="", baseline_file="b.cu", candidate_file="c.cu", settings=VerifySettings())
        limits = Limits(wall_timeout_s=60)
        failure, matched = special_value_experiments(v, "baseline", "candidate", limits, limits, None, set(),
                                                     Manifest.model_validate(m), None, Durations(), lambda p: None)
        assert failure is None and not matched, [(a["binary"], a["buffers"], a["placement"]) for a in asked]
        assert "in 'x' only" in next(c for c in v.checks if not c.comparison.match).comparison.describe()


def test_every_scale_the_candidate_meets_and_every_band_the_baseline_does_not_take_is_timed(monkeypatch):
    """Red team round 255: the timing pairs draw the generator's magnitudes only; a softmax fast only there and 1.5x
    slower on a caller's logits passed 100 %. The scaled-input experiment hands the gate each pair in one placement
    (both traced): every scale compared, and, time only, every band the baseline's outputs do not scale in."""
    pairs: list[str] = []

    def timed_experiment(baseline, candidate):
        scripted(monkeypatch, baseline, candidate)
        v = Verdict(accepted=False, summary="", baseline_file="b.cu", candidate_file="c.cu",
                    settings=VerifySettings(input_scale_draws=6))
        limits = Limits(wall_timeout_s=60)
        pairs.clear()
        failure, matched, _ = scaled_input_experiments(
            v, "baseline", "candidate", limits, limits, set(), Manifest.model_validate(manifest()), None, Durations(),
            lambda p: None, cupti_lib=None, timed=timed)
        return failure, matched

    def timed(what, base, cand, scale, again):
        pairs.append(what)
        base_again, cand_again = (run(seed=7, secret=bytes(16)) for run in again)  # a fresh experiment (_confirm)
        assert base_again.dump is not None and cand_again.dump is not None

    assert timed_experiment(softmax_max, softmax_max) == (None, True)
    bands = len(magnitudes.SCALE_BANDS_DOWN) + len(magnitudes.SCALE_BANDS_UP)
    assert len(pairs) == 1 + bands and sum("timed only" in p for p in pairs) == bands, pairs
    assert timed_experiment(row_sum, pairwise_sum) == (None, True)
    assert len(pairs) == 1 + bands and not any("timed only" in p for p in pairs), pairs  # a sum takes every band


def test_a_rewrite_slower_at_other_magnitudes_is_refused_and_one_at_parity_is_not():
    from kernelloop.verify.gate import OtherSize, _speed_on_other_values

    def judged(ratios):
        v = Verdict(accepted=False, summary="", baseline_file="b.cu", candidate_file="c.cu", settings=VerifySettings())
        reasons: list[Reason] = []
        _speed_on_other_values(v, [OtherSize(label=f"with x times 2^{k}", baseline_ms=1.0, candidate_ms=r)
                                   for k, r in enumerate(ratios)], reasons, None, "other magnitudes")
        return v.gate("other magnitudes"), reasons

    gate_result, reasons = judged([0.6, 0.62, 1.5, 1.5, 0.61, 0.6, 0.6])  # fast on [0, 1), slow on a caller's logits
    assert gate_result.status == "fail" and Reason.not_faster in reasons
    assert "at other magnitudes" in gate_result.detail and "scales" in gate_result.detail
    gate_result, reasons = judged([0.6, 1.02, 0.98, 1.0, 0.99, 1.03, 1.01])
    assert gate_result.status == "pass" and not reasons
    # one scale alone 1.3x slower (a caller's values lie in one range of magnitudes, not in all of them)
    gate_result, reasons = judged([0.6, 0.6, 1.3, 0.6, 0.6, 0.6, 0.6])
    assert gate_result.status == "fail" and "1.30x" in gate_result.detail


def test_the_light_special_value_check_at_another_size_runs_once_where_every_input_at_once_is_checked(monkeypatch):
    """Round 255's light check at every other size: each experiment in its drawn placement only, each input alone only
    where every input at once falls short; a dropped sanitiser is still met there."""
    m = manifest()
    m["buffers"][0]["stressed"] = m["buffers"][1]["stressed"] = True
    limits = Limits(wall_timeout_s=60)

    def light(baseline, candidate):
        asked = scripted(monkeypatch, baseline, candidate)
        v = Verdict(accepted=False, summary="", baseline_file="b.cu", candidate_file="c.cu", settings=VerifySettings())
        failure, matched = special_value_experiments(v, "baseline", "candidate", limits, limits, None, set(),
                                                     Manifest.model_validate(m), None, Durations(), lambda p: None,
                                                     size=((-1, 11), "1 x 4096"), whole=False)
        return v, failure, matched, [a for a in asked if a["binary"] == "candidate"]

    def unsanitised(x, w):
        return row_sum(x, w)
    v, failure, matched, candidate_runs = light(sanitised_sum, unsanitised)
    assert failure is None and not matched and "at 1 x 4096" in v.checks[-1].comparison.describe()
    v, failure, matched, candidate_runs = light(sanitised_sum, sanitised_sum)
    assert failure is None and matched and len(candidate_runs) == 1  # every input at once, one placement
    asserting_finite_weights.w_spiked = True
    v, failure, matched, candidate_runs = light(asserting_finite_weights, asserting_finite_weights)
    assert failure is None and matched and {a["buffers"] for a in candidate_runs} >= {None, 1}  # short: x alone


def test_many_pairs_at_two_to_the_zero_do_not_thin_the_few_at_a_callers_larger_values():
    """Red team round 256: one 2^0 pair per size (the light checks) held the mean near parity, so a softmax 1.2x slower
    on values past 2 passed 43-91 %. Each group of magnitudes (below, at, above 2^0) takes its own mean."""
    from kernelloop.verify.gate import OtherSize, _speed_on_other_values
    pairs = [OtherSize(label=f"size {k} times 2^0", baseline_ms=1.0, candidate_ms=1.0, magnitude=0) for k in range(16)]
    pairs += [OtherSize(label=f"times 2^{k}", baseline_ms=1.0, candidate_ms=1.2, magnitude=k) for k in (3, 9)]
    pairs += [OtherSize(label=f"times 2^-{k}", baseline_ms=1.0, candidate_ms=1.0, magnitude=-k) for k in (4, 10)]
    v = Verdict(accepted=False, summary="", baseline_file="b.cu", candidate_file="c.cu", settings=VerifySettings())
    reasons: list[Reason] = []
    _speed_on_other_values(v, pairs, reasons, None, "other magnitudes")
    assert v.gate("other magnitudes").status == "fail" and "above 2^0" in v.gate("other magnitudes").detail
    for p in pairs:
        p.candidate_ms = 1.0
    v = Verdict(accepted=False, summary="", baseline_file="b.cu", candidate_file="c.cu", settings=VerifySettings())
    _speed_on_other_values(v, pairs, [], None, "other magnitudes")
    assert v.gate("other magnitudes").status == "pass"
