"""The scaled-input experiment: every floating-point input times one power of two, at scales where the
baseline's own outputs scale exactly, compared through the same power of two (red team rounds 240-242;
docs/verifier.md, "Values only on the generator's grid").

`kl::Uniform<float>{0, 1}` draws multiples of 2^-24 and nothing below 2^-24: a sum in 64-bit fixed point
at 2^32 is exact on every value the harness draws and 22 % low on a caller's 3e-10s. Scaling the inputs
catches it, but a scale the baseline itself does not take (a cosine's `sqrtf(na * nb)` underflowing, a
skewness's `m2 * m2 * m2` overflowing) refused honest rewrites (rounds 241-242), and an absolute noise
allowance measured at one scale lets anything through at a much smaller one. So the baseline is probed
first: at each scale 2^s tried, its outputs must be its outputs of the same experiment unscaled times
2^(k s') for one power of two per output buffer (a sum's 2^s, a product's 2^2s, a cosine's 1), within the
tolerance and its own noise; a scale it does not take ends the probe in that direction. The candidate is
then compared at every scale the baseline took, both programs' outputs divided by the buffer's power of two
(exact), so the tolerance holds as it is. Every run of one experiment also multiplies its inputs by one factor
F in (1, 2), drawn in secret (round 245: powers of two alone left the largest value just below a power of two,
a key a path can read); the reference run is at F x 2^0, run twice for the noise allowance."""

from __future__ import annotations

import secrets
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import numpy as np

from ..tools.sandbox import Limits
from .comparing import (
    BaselineNoise,
    baseline_noise,
    calls_kept_as_before,
    compare_experiment,
    experiment_secret,
    fresh_seeds,
    log_tail,
    run_failure,
)
from .experiment import outputs_computing_nan
from .outputs import frozen
from .program_run import ProgramRun, output_digest, run_program
from .placement import GUARDED, Placement, drawn_placement, other_caller_placements, fails_with_the_baseline
from .records import Manifest, Sample
from .verdict import Durations, Progress, Reason, SeedCheck, Verdict

# The probe's scales, each drawn in secret from its band, tried in order away from 1 until the baseline does not
# take one: near 1 (a caller's values sit there: red team round 245 keyed a path on the largest value lying in the
# octave below a power of two the bands skipped) and down to 2^-20, where a sum in 64-bit fixed point at 2^32
# loses 2^-12 of every value (the last band is narrow so every verification reaches it); up to 2^11. Not past
# 2^-20 (nor 2^11 up): there an honest rewrite whose intermediates have a higher degree than the baseline's (a fused
# rsqrtf(na * nb) for sqrtf(na) * sqrtf(nb), a cube of a variance) over- or underflows where the baseline does not,
# at scales no caller's values reach (round 245: such a cosine was refused in 99.5 % of verifications with bands to
# 2^-100 and 2^63). Fixed points finer than about 2^-44 are not reached (docs/verifier.md, Known limits).
SCALE_BANDS_DOWN = ((-7, -1), (-12, -8), (-17, -13), (-20, -18))
# Up, only to 2^11: the stressed calls' spikes, (|v| + 1) x 2^16, are scaled too (mixed magnitudes in one call),
# and a product of four at 2^17 x 2^20 left float's range (round 246: the fused cosine refused again, its first
# and last rows spiked in both inputs).
SCALE_BANDS_UP = ((1, 5), (6, 11))
SCALABLE_DTYPES = ("float32", "float64", "bfloat16")  # fp16's exponent ends at 2^-24: not scaled

# (what, the baseline's run, the candidate's, the scale s, both runs again: the gate's _confirm) in one placement
Timed = Callable[[str, ProgramRun, ProgramRun, int, tuple[Callable[..., ProgramRun], Callable[..., ProgramRun]]], None]


class Scaling(NamedTuple):
    """Every floating-point input times FACTOR x 2^SCALE ; each output buffer divided by its power
    of two, 2^EXPONENTS[i] (the baseline's outputs scale exactly so), before it is compared."""
    scale: int
    factor: float
    exponents: list[int]

    def kwargs(self) -> dict:
        return {"input_scale": self.scale, "input_factor": self.factor}

    def words(self) -> str:
        return f", every floating-point input times {self.factor:.6g} x 2^{self.scale}"



def scalable_inputs(manifest: Manifest) -> list[str]:
    """The inputs the harness scales (KERNELLOOP_INPUT_SCALE): floating point but fp16, read by the part."""
    return [b.name for b in manifest.buffers if b.role in ("input", "inout") and b.dtype in SCALABLE_DTYPES]


def output_exponents(unscaled: ProgramRun, scaled: ProgramRun) -> list[int] | None:
    """Per output buffer, the power of two k with SCALED's values about 2^k times UNSCALED's (the median over
    the elements finite and non-zero in both; 0 for integers and for a buffer with no such element); None
    where either run wrote no dump or the dumps differ in shape."""
    if unscaled.dump is None or scaled.dump is None or len(unscaled.dump) != len(scaled.dump):
        return None
    exponents: list[int] = []
    for before, after in zip(unscaled.dump, scaled.dump):
        if before.shape != after.shape:
            return None
        if before.dtype.kind != "f" and str(before.dtype) != "bfloat16":
            exponents.append(0)
            continue
        x, y = _numpy_float(before), _numpy_float(after)
        both = np.isfinite(x) & np.isfinite(y) & (x != 0) & (y != 0)
        if both.any():
            ratio = np.abs(y[both]).astype(np.float64)  # float64 quotients, as of float64 copies of the whole
            ratio /= np.abs(x[both])
            np.log2(ratio, out=ratio)
        else:
            ratio = np.zeros(1)
        exponents.append(int(np.rint(np.median(ratio))))
    return exponents


def _numpy_float(values: np.ndarray) -> np.ndarray:
    """VALUES in a numpy float type, exactly: bfloat16 as float32, the others as they are."""
    return values if values.dtype.kind == "f" else values.astype(np.float32)


def _divided(values: np.ndarray, k: int) -> np.ndarray:
    """VALUES / 2^k, exact where the result stays normal; integers as they are."""
    if k == 0 or (values.dtype.kind != "f" and str(values.dtype) != "bfloat16"):
        return values
    return frozen(np.ldexp(_numpy_float(values), -k).astype(values.dtype))  # as the dump it stands for


def rescaled(run: ProgramRun, exponents: list[int]) -> ProgramRun:
    """RUN with every output buffer's values (the dump, every timed call's samples and every warm-up call's: the
    warm-up inputs are scaled too) divided by 2^k, its buffer's power of two: what it would have computed
    unscaled, where it scales exactly."""
    if run.records is None or run.dump is None:
        return run
    outputs = [_divided(values, k) for values, k in zip(run.dump, exponents)]

    def divided(samples: list[Sample]) -> list[Sample]:
        seen: dict[int, int] = {}  # per call, the samples so far: the n-th sample of a call is the n-th output's
        out = []
        for sample in samples:
            n = seen.get(sample.call, 0)
            seen[sample.call] = n + 1
            k = exponents[n] if n < len(exponents) else 0
            out.append(Sample(call=sample.call, buffer=sample.buffer, values=_divided(sample.values, k)))
        return out

    records = run.records.model_copy(update={"outputs": outputs, "samples": divided(run.records.samples),
                                             "warmup_samples": divided(run.records.warmup_samples)})
    return run.model_copy(update={"records": records, "dump": outputs})


def _scale_in(band: tuple[int, int]) -> int:
    low, high = band
    return low + secrets.randbelow(high - low + 1)


def scaled_input_experiments(v: Verdict, base_bin: Path, cand_bin: Path, base_limits: Limits, cand_limits: Limits,
                             used_seeds: set[int], manifest: Manifest, noise: BaselineNoise | None,
                             durations: Durations, say,
                             size: tuple[tuple[int, int | None], str] | None = None,
                             cupti_lib: Path | None = None, timed: Timed | None = None,
                             scales: tuple[int, ...] | None = None
                             ) -> tuple[tuple[Reason, str] | None, bool, list[Scaling]]:
    """Every floating-point input times 2^s, one s per experiment: the baseline probed at scales drawn in
    secret from SCALE_BANDS_DOWN, then SCALE_BANDS_UP, in order until it does not take one (it fails,
    computes NaN of finite inputs, or its outputs are not its unscaled outputs times one power of two per
    buffer, within the tolerance and its noise); then the candidate, on the same experiment, at the smallest
    and the largest scale taken and at `input_scale_draws` - 2 more drawn in secret among those taken, both
    programs' outputs divided by their buffer's power of two. Where the baseline takes no scale (a softmax:
    exp(2^s x) is no power of two of exp(x); a GEMM adding beta C: two degrees in one output), nothing is
    compared and a note says so. At another SIZE ((size index, draw), its sizes: one drawn in secret by the gate, red
    team round 249), the same experiment there (round 250: three scales in one placement there passed a cheat in
    a middle window of magnitudes in 76 %). SCALES given (the gate's light check at every other size, round 255):
    the baseline probed at those only, its noise the one given, the candidate in the drawn placement only.
    TIMED(what, baseline run, candidate run) gets each pair in one placement, both traced (CUPTI_LIB), at every scale
    the candidate ran and at every band the baseline does not take (time only): the timing pairs draw the
    generator's magnitudes alone (round 255: a softmax fast only on them, 1.5x slower on a caller's logits, passed
    100 %). Returns (a candidate failure, whether every comparison matched, every scale the baseline took:
    special_values.py makes its experiments at each, red team rounds 250-254)."""
    at_size = {"size_index": size[0][0], "size_draw": size[0][1]} if size else {}
    where_size = f" at {size[1]}" if size else ""
    vs = v.settings
    seed, secret = fresh_seeds(1, used_seeds)[0], experiment_secret()
    placement = drawn_placement()  # where the buffers lie, drawn (placement.py: round 245)
    factor = 1.0 + (1 + secrets.randbelow((1 << 20) - 1)) / (1 << 20)  # (1, 2): the largest value anywhere in its octave

    def run(binary: Path, limits: Limits, scale: int, at: Placement | None = None, traced: bool = False,
            fresh: tuple[int, bytes] | None = None, **special) -> ProgramRun:
        at = placement if at is None else at
        run_seed, run_secret = fresh or (seed, secret)  # FRESH: another experiment of the same kind (run_again)
        done = run_program(binary, seed=run_seed, limits=base_limits if at.exact else limits, secret=run_secret,
                           input_scale=scale, input_factor=factor, **at_size, **at.kwargs(), **special,
                           cupti_library=cupti_lib if traced and timed else None)
        durations.program_runs_s += done.result.wall_s
        return done

    def run_again(scale: int) -> tuple[Callable[..., ProgramRun], Callable[..., ProgramRun]]:
        """Both programs' traced runs at SCALE, in the drawn placement, to run again with a fresh seed and secret."""
        return tuple(lambda seed, secret, binary=binary, limits=limits: run(
            binary, limits, scale, traced=True, fresh=(seed, secret))
            for binary, limits in ((base_bin, base_limits), (cand_bin, cand_limits)))

    def takes(done: ProgramRun) -> bool:
        return not run_failure(done) and done.records is not None and done.dump is not None and \
            not outputs_computing_nan(done.records, poison_byte=None, kept_calls=calls_kept_as_before(done))

    say(Progress(stage="correctness", message=f"seed {seed} with the inputs scaled{where_size}: the baseline's scales"))
    unscaled = run(base_bin, base_limits, 0, traced=True)
    if placement.exact and not takes(unscaled):  # a placement the baseline does not take: guarded
        placement = GUARDED
        unscaled = run(base_bin, base_limits, 0, traced=True)
    if not takes(unscaled):
        v.notes.append(f"the scaled-input experiment{where_size} did not run: the baseline's unscaled run of it failed")
        return None, True, []
    # the baseline's own variation on these inputs (times the factor, whose outputs are up to 2^degree larger
    # than the unscaled experiment's): the noise allowance every comparison below takes
    if scales is None:
        again = run(base_bin, base_limits, 0)
        noise = baseline_noise(unscaled, again, vs.baseline_noise_factor) if takes(again) else noise
    taken: list[tuple[int, ProgramRun, list[int]]] = []
    untaken: list[tuple[int, ProgramRun]] = []  # bands the baseline does not take, where it ran: timed only
    directions = (SCALE_BANDS_DOWN, SCALE_BANDS_UP) if scales is None else \
        tuple(((s, s),) for s in scales if s)
    for bands in directions:
        stopped = False
        for band in bands:
            if stopped and timed is None:
                break
            scale = _scale_in(band)
            scaled = run(base_bin, base_limits, scale, traced=True)
            if stopped:
                if takes(scaled):
                    untaken.append((scale, scaled))
                continue
            exponents = output_exponents(unscaled, scaled) if takes(scaled) else None
            if exponents is None or not compare_experiment(unscaled, rescaled(scaled, exponents), vs, noise).match:
                stopped = True  # no more scales compared this way; the bands past it are still timed
                if takes(scaled):
                    untaken.append((scale, scaled))
                continue
            taken.append((scale, scaled, exponents))
    names = ", ".join(scalable_inputs(manifest))
    # the reference run's own scale, F x 2^0, whether or not the baseline takes another: the bands skip 2^0 and
    # the plain runs have no factor, so an input's bulk with its largest value in [1, 2) met no candidate (red team
    # round 255: a sum wrong only there passed 100 of 100)
    reference = (0, unscaled, [0] * len(unscaled.dump or []))  # output_exponents(unscaled, unscaled): every buffer 2^0
    if not taken and scales is None:
        v.notes.append(f"inputs scaled by powers of two ({names}){where_size} were compared at 2^0 only (times "
                       f"{factor:.6g}): the baseline's outputs do not scale by a power of two with them (exp, a sum of "
                       "two degrees, a constant added); values off the harness's grid ([0, 1) in multiples of 2^-24) "
                       "are checked only as drawn")
    others = sorted(taken, key=lambda t: t[0])
    # every scale taken (a candidate exact only in a window of magnitudes meets it: round 245), the extremes first
    chosen = ([others[0], others[-1]] if len(others) > 1 else others[:1]) + others[1:-1]
    chosen = [reference] + chosen[:max(1, vs.input_scale_draws)] if scales is None else \
        [t for t in others if t[0] in scales] or [reference]
    by_scale = sorted([reference] + others, key=lambda t: t[0])
    # the candidate at every scale taken, each in every caller placement, against the same baseline run: a part
    # keyed on buffers side by side AND on a window of magnitudes meets both only where every scale meets every
    # placement (rounds 247-248: the extremes alone in the other placements passed a cheat in the middle scales,
    # packed in declaration order, in 82 % of verifications)
    runs = [(scale, scaled, exponents, at) for scale, scaled, exponents in chosen
            for at in [placement] + (other_caller_placements(placement) if scales is None else [])]
    # each scale's baseline run divided by its powers of two, and its digest: the same in every placement, made once
    # per scale (the runs go scale by scale) and only the latest kept, so that no more than one rescaled dump lives
    expected: dict[int, tuple[ProgramRun, str]] = {}
    for scale, scaled, exponents, at in runs:
        if scale not in expected:
            expected = {scale: (rescaled(scaled, exponents), output_digest(scaled))}
        what = f"every floating-point input ({names}) times {factor:.6g} x 2^{scale}{where_size}{at.words()}"
        say(Progress(stage="correctness", message=f"seed {seed} with {what}: candidate"))
        cand = run(cand_bin, cand_limits, scale, at, traced=at is placement)
        if at is placement and timed and not run_failure(cand):
            timed(what, scaled, cand, scale, run_again(scale))
        if at is not placement and fails_with_the_baseline(cand, lambda: run(base_bin, base_limits, scale, at)):
            continue  # the placement's, not the candidate's
        if (failure := run_failure(cand)) is not None:
            v.failure_excerpt = log_tail(cand.result.stderr, 12)
            return (failure[0], f"with {what} (the baseline runs on them and its outputs scale exactly): "
                                f"{failure[1]}"), False, []
        baseline, baseline_sha256 = expected[scale]
        cmp = compare_experiment(baseline, rescaled(cand, exponents), vs, noise)
        if not cmp.match:
            cmp = cmp.model_copy(update={"problem": f"with {what}, each output divided by its power of two "
                                                    f"({', '.join(f'2^{k}' for k in exponents)}): {cmp.describe()} "
                                                    "(the baseline's outputs scale exactly there)"})
        v.checks.append(SeedCheck(seed=seed, comparison=cmp, phase="scaled", secret=secret.hex(),
                                  baseline_sha256=baseline_sha256, candidate_sha256=output_digest(cand)))
        if not cmp.match:
            return None, False, []
    for scale, scaled in untaken if timed else []:  # time only: the baseline's outputs do not scale there
        what = f"every floating-point input ({names}) times {factor:.6g} x 2^{scale}{where_size}{placement.words()}"
        say(Progress(stage="correctness", message=f"seed {seed} with {what}: candidate, timed only"))
        if not run_failure(cand := run(cand_bin, cand_limits, scale, traced=True)):
            timed(what + " (timed only: the baseline's outputs do not scale there)", scaled, cand, scale, run_again(scale))
    matched = True
    low, high = by_scale[0][0], by_scale[-1][0]
    if others and scales is None:
        v.notes.append(f"inputs scaled by powers of two ({names}){where_size}: the baseline's outputs scale exactly from 2^{low} to "
                       f"2^{high} of the scales probed; the candidate compared at {len(chosen)} of them (2^0 among them), "
                       f"each times {factor:.6g}")
    return None, matched, [Scaling(scale, factor, exponents) for scale, _, exponents in by_scale]
