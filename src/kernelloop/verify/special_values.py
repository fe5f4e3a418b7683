"""The special-value experiments: NaN, +-inf and zeros among the inputs (v2, floating-point inputs the harness
spikes). On finite inputs a baseline's handling of them (a sanitising pass, an overflow flag) never runs and so is
never checked (red team rounds 45-47); here it runs, and the candidate must match wherever the baseline's output
stays finite.

One sequence, the same wherever it is made (red team round 254: made whole only at the generator's own
magnitude, in one drawn placement, it left a cheat that met no special value at the scales it was keyed on, and
one keyed on buffers packed in order):
- every spiked input at once; then, with several inputs (or where the baseline fails on them all, or leaves an
  output wholly NaN or inf, so nothing of it is compared), each input alone; where that too falls short, each
  kind of value alone in it (rounds 47-50);
- each experiment in a placement drawn in secret, the candidate then run again in every other caller placement
  against the same baseline run (round 247: once met packing in declaration order in 1 of 6);
- at the default size and at one other size drawn in secret (round 250), with the inputs as drawn and, from
  magnitudes.py, at every power of two the baseline's outputs scale with (rounds 250-254), both programs'
  outputs divided by it; and light at every other size the baseline ran at (round 255: a path for one class of
  sizes, a decode step's one row, met special values only where the secret size fell in it, 66-84 % passed):
  in the drawn placement only, each input alone only where all at once fall short.
"""

from __future__ import annotations

from pathlib import Path

from ..tools.sandbox import Limits
from .comparing import BaselineNoise, compare_experiment, experiment_secret, fresh_seeds, log_tail, run_failure
from .experiment import outputs_all_nonfinite
from .magnitudes import Scaling, rescaled
from .placement import Placement, fails_with_the_baseline, other_caller_placements, placed_pair
from .program_run import ProgramRun, output_digest, run_program
from .records import Manifest
from .verdict import Durations, Progress, Reason, SeedCheck, Verdict

# KERNELLOOP_NONFINITE's kinds (kernelloop_harness.cuh), all at once and one at a time.
NONFINITE_KINDS = {15: "NaN, +-inf and zero", 1: "NaN", 2: "+inf", 4: "-inf", 8: "zero"}

# An experiment made at one other size the baseline ran at, drawn in secret: ((size index, draw), its sizes as
# words). A candidate right on every special or scaled input at the default size and wrong on them elsewhere met no
# such input at any other size (red team round 249).
OtherSizeDrawn = tuple[tuple[int, int | None], str]


def special_value_experiments(v: Verdict, base_bin: Path, cand_bin: Path, base_limits: Limits, cand_limits: Limits,
                              cupti_lib: Path | None, used_seeds: set[int], manifest: Manifest,
                              noise: BaselineNoise | None, durations: Durations, say,
                              size: OtherSizeDrawn | None = None, scaling: Scaling | None = None,
                              whole: bool = True) -> tuple[tuple[Reason, str] | None, bool]:
    """The whole sequence (the module's docstring) at SIZE (the default where None) and SCALING (the inputs as
    drawn where None): (a candidate failure, whether every comparison matched). Where the baseline's output is
    finite the candidate's must match; what the baseline leaves NaN or inf is not compared. Not WHOLE (the gate's
    light check at every other size, red team round 255): each experiment in its drawn placement only, and each
    input alone only where every input at once falls short."""
    vs = v.settings
    at_size = {"size_index": size[0][0], "size_draw": size[0][1]} if size else {}
    scaled = scaling.kwargs() if scaling else {}
    spiked = [(i, b.name) for i, b in enumerate(manifest.buffers) if b.stressed and b.role in ("input", "inout")]
    unchecked: list[str] = []

    def divided(run: ProgramRun) -> ProgramRun:
        return rescaled(run, scaling.exponents) if scaling else run

    def experiment(buffers: int | None, kinds: int, where: str) -> tuple[str | None, tuple[Reason, str] | None, bool]:
        """(why the experiment did not cover everything: the baseline failed, or left outputs wholly NaN
        or inf; None when it did), a candidate failure, and whether what was compared matched. Every
        output the baseline left a finite element in is compared, whatever another output did (round
        51: a norm of the raw input, NaN, voided the check of the sanitised output beside it)."""
        what = f"{NONFINITE_KINDS[kinds]} {where}" + (scaling.words() if scaling else "") + \
            (f" at {size[1]}" if size else "")
        seed, secret = fresh_seeds(1, used_seeds)[0], experiment_secret()
        say(Progress(stage="correctness", message=f"seed {seed} with {what}: candidate, then baseline"))
        special = {"nonfinite_calls": manifest.calls, "nonfinite_kinds": kinds, "nonfinite_buffers": buffers,
                   **at_size, **scaled}

        def run(binary: Path, limits: Limits, placement: Placement, **traced) -> ProgramRun:
            done = run_program(binary, seed=seed, limits=limits if not placement.exact else base_limits,
                               secret=secret, **traced, **special, **placement.kwargs())
            durations.program_runs_s += done.result.wall_s
            return done
        # where its buffers lie, drawn (placement.py: round 245)
        cand, base, placement = placed_pair(lambda at: run(cand_bin, cand_limits, at, cupti_library=cupti_lib),
                                            lambda at: run(base_bin, base_limits, at),
                                            lambda done: not run_failure(done))
        if run_failure(base):
            return "fails", None, True
        expected, base_sha256 = divided(base), output_digest(base)  # the same in every placement
        # the candidate where the draw put its buffers, then in every other caller placement against the same
        # baseline run (its results do not depend on where its buffers lie: it reads nothing past them)
        for at in [placement] + (other_caller_placements(placement) if whole else []):
            if at is not placement:
                cand = run(cand_bin, cand_limits, at, cupti_library=cupti_lib)
            there = what + at.words()
            if at is not placement and fails_with_the_baseline(cand, lambda: run(base_bin, base_limits, at)):
                continue  # the placement's, not the candidate's
            if (failure := run_failure(cand)) is not None:
                v.failure_excerpt = log_tail(cand.result.stderr, 12)
                return None, (failure[0], f"with {there} (the baseline runs on them): {failure[1]}"), False
            cmp = compare_experiment(expected, divided(cand), vs, noise)
            if not cmp.match:
                cmp = cmp.model_copy(update={"problem": f"with {there}" + (
                    ", each output divided by its power of two" if scaling else "") + f": {cmp.describe()} (where "
                    "the baseline's output stays finite; --allow-nonfinite-differences if your inputs never hold "
                    "NaN or inf)"})
            v.checks.append(SeedCheck(seed=seed, comparison=cmp, phase="nonfinite", secret=secret.hex(),
                                      baseline_sha256=base_sha256, candidate_sha256=output_digest(cand)))
            if not cmp.match:
                return None, None, False
        masked = outputs_all_nonfinite(base.records) if base.records is not None else []
        return (f"leaves {', '.join(repr(m) for m in masked)} wholly NaN or inf" if masked else None), None, True

    short, failure, matched = experiment(None, 15, "among the inputs")
    if failure or not matched:
        return failure, matched
    # With several inputs each also goes alone: one input's special values can reach, and so hide, every
    # element another's would (round 50: a NaN weight made each touched row NaN, the untouched rows were
    # all that was compared, and the dropped sanitiser of the gradient input passed).
    if short is not None or (whole and len(spiked) > 1):
        for index, name in spiked:
            short, failure, matched = experiment(1 << index, 15, f"in '{name}' only")
            if failure or not matched:
                return failure, matched
            if short is None:
                continue
            for kinds in (1, 2, 4, 8):
                short, failure, matched = experiment(1 << index, kinds, f"in '{name}' only")
                if failure or not matched:
                    return failure, matched
                if short is not None:
                    unchecked.append(f"{NONFINITE_KINDS[kinds]} in '{name}' (the baseline {short})")
    if unchecked:
        where = (scaling.words() if scaling else "") + (f" at {size[1]}" if size else "")
        v.notes.append(f"special input values{where} not checked everywhere, because the baseline itself fails on "
                       f"them or leaves an output wholly NaN or inf: {'; '.join(unchecked)}")
    return None, True
