"""The wider-integer experiment: integer inputs whose range nobody stated (`kernelloop init`'s guess,
[0, 16)) drawn wider, one at a time and together, at every size checked; wherever the baseline takes
the values the candidate must give its results, no slower than the baseline (red team rounds 219-236; docs/verifier.md, "Known
limits", "Guessed integer ranges")."""

from __future__ import annotations

import itertools
import secrets
from collections.abc import Callable
from pathlib import Path

from ..tools.sandbox import Limits
from ..tools.sanitizer import BOUNDS_PADDING_BYTES, find_compute_sanitizer, global_access_errors, memcheck_argv
from .comparing import (
    GUARD_CONTRAST_BYTES,
    BaselineNoise,
    calls_kept_as_before,
    compare_experiment,
    experiment_secret,
    fresh_seeds,
    log_tail,
    run_failure,
    tolerance_for,
)
from .experiment import outputs_computing_nan, outputs_following_guards
from .placement import Placement, placed_pair
from .program_run import ProgramRun, WideDraw, output_digest, run_program
from .records import Manifest
from .verdict import Durations, Progress, Reason, SeedCheck, Verdict

# The wider-integer experiment's stretched bands (kernelloop_harness.cuh, KERNELLOOP_WIDE_INTS), tried
# in order until the baseline takes one; then one band for the whole buffer (mode 3).
WIDE_INT_MODES = {1: "bands of every width up to every value of its type",
                  2: "bands of every width up to every non-negative value of its type"}
WIDE_INT_BAND_TRIES = 3  # one-band experiments at a width the baseline ran at but read past a buffer: step down
# One-band widths compared (up to the widest the baseline takes), besides a secret one: a candidate keyed on
# a statistic of its whole input meets narrow bands of several sizes (round 221: a maximum below 2^9).
WIDE_INT_LADDER = (5, 8, 12, 16, 24, 32, 48, 64)
WIDE_INT_LADDER_ELSEWHERE = 3  # of those, compared at each other size checked (drawn in secret), besides a secret one
WIDE_INT_NEGATIVE = (5, 12, 24)  # negative bands (padding ids), for signed inputs, where the baseline takes them
# Bisections of the largest bound the baseline takes (a table's size), between 2^(k-1) and 2^(k+1) around the
# widest band it took: what is left between the bound found and the real one is 2^(k+1) / 2^steps wide.
WIDE_INT_BOUND_STEPS = 14
WIDE_INT_BOUND_STEPS_ELSEWHERE = 8  # ... at the other sizes checked, after doubling or halving from the default's
WIDE_INT_JOINT_PAIRS = 6  # pairs of guessed inputs drawn wide together (besides all of them), drawn where more
# Where inputs are bounded only together: one drawn below (1 - 2^-k) of its bound, the others below 2^-k of theirs
WIDE_INT_JOINT_EDGE = (1, 2, 4, 8, 16, 32)
WIDE_INT_JOINT_BASES = 4  # joint draws compared beside which each input's own draws (stretches, negatives) come again
WIDE_INT_JOINT_MOVED_UP = 2  # other inputs moved up beside a signed one's negative bands (drawn where more)
_INTEGER_BITS = {"int8": 8, "uint8": 8, "int16": 16, "uint16": 16, "int32": 32, "uint32": 32, "int64": 64, "uint64": 64}
_GUESSED_BITS = 4  # init's guess, [0, 16)


def wide_integer_experiments(v: Verdict, base_bin: Path, cand_bin: Path, base_limits: Limits, cand_limits: Limits,
                              cupti_lib: Path | None, used_seeds: set[int], manifest: Manifest,
                              noise_by_size: dict[tuple[int, int | None], BaselineNoise], durations: Durations,
                              nvcc: Path, say, other_sizes: list[tuple[int, int | None]],
                              timed: Callable[..., None] | None = None
                              ) -> tuple[tuple[Reason, str] | None, bool]:
    """Integer inputs whose range nobody stated (`kernelloop init`'s guess, [0, 16)) drawn wider, the
    other inputs as usual; wherever the baseline takes the values (it runs clean, computes no NaN of
    them and, where the candidate differs or fails, reads no byte past a buffer under compute-sanitizer)
    the candidate must give its results. A guessed range is no statement that other values never
    come: a kernel that kept each word's low four bits passed on [0, 16) (red team round 219).
    Several kinds of draw, so that no experiment looks unlike a real input (round 220: a warp vote on
    `w < 2^24` took the cheap path only where every neighbour was small, which per-element wide draws
    never give): (1) the buffer in stretches, each in a band of its own width, up to every value of
    the type (else every non-negative one); (2) the whole buffer in one band, at a ladder of widths
    and a secret one up to the widest the baseline takes (every width where it took the stretches; else
    found by halving, stepping down where it reads past a buffer under compute-sanitizer: a table index,
    round 220), and negative bands for signed inputs (padding ids); every band's top lies anywhere in
    its octave (round 221: a maximum at the octave's top, or below the widths compared, told the draws
    apart); (3) where the baseline takes no band as wide as the type, the largest bound it takes, found
    to WIDE_INT_BOUND_STEPS bisections (a table's size: round 223 compared no id between 2^k and it),
    and bands of that bound: whole, moved up from zero (values far from it), of multiples of a power of
    two, and non-decreasing in runs (round 223: every draw was uniform from zero), these also at scales far
    below the bound (round 234: only the bound's scale was drawn); (4) at every other
    size checked (the declared alternatives and the drawn ones), the stretches, or a band of the bound
    and one moved up from zero, halving the bound where the baseline does not take it there (round 223:
    only the default size was drawn wide); (5) where several inputs were taken wide, all of them together
    and each pair, each as the baseline took it alone, along the edge of what it takes where it takes them
    only together, with each input's own stretches and negative bands beside the others, and negative
    offsets beside a base moved up (rounds 228-230: a product or a sum wrong only where two inputs are wide
    at once). An input the baseline takes no wider band of is named in a note, as are inputs never taken
    wide together and negative values compared nowhere. Each draw compared is handed to TIMED with both
    programs' runs (the gate's `wider values`: rounds 234-235). Returns (a candidate failure, whether every comparison
    matched)."""
    vs = v.settings
    guessed = [(i, b.name, b.dtype) for i, b in enumerate(manifest.buffers)
               if b.guessed_range and b.role in ("input", "inout") and b.dtype in _INTEGER_BITS]
    unchecked: list[str] = []
    slow: dict[str, int] = {}  # input -> the smallest bound at which the baseline ran past its time cap
    names = {1 << i: name for i, name, _ in guessed}
    Size = tuple[int, int | None]

    def taken(run: ProgramRun) -> bool:
        return not run_failure(run) and run.records is not None and \
            not outputs_computing_nan(run.records, poison_byte=None, kept_calls=calls_kept_as_before(run))

    def experiment(wide: WideDraw, what: str, size: Size = (0, None)) -> str | tuple[Reason, str] | None:
        """"refused" where the baseline does not take these values, a candidate failure, "mismatch"
        (recorded in v.checks), or None where the candidate matched."""
        seed, secret = fresh_seeds(1, used_seeds)[0], experiment_secret()
        where = "" if size == (0, None) else f" (size {size[0]})" if size[0] > 0 else " (a size drawn at verify time)"
        what += where
        say(Progress(stage="correctness", message=f"seed {seed} with {what}: candidate, then baseline"))

        def run(binary: Path, limits: Limits, placement: Placement, fresh: tuple[int, bytes] | None = None) -> ProgramRun:
            # traced alike, so their KERNEL_MS compare (round 234: speed on wide values is judged too); FRESH: another
            # experiment of the same draw (the gate's _confirm)
            run_seed, run_secret = fresh or (seed, secret)
            done = run_program(binary, seed=run_seed, limits=base_limits if placement.exact else limits,
                               cupti_library=cupti_lib, secret=run_secret, wide_ints=wide, size_index=size[0],
                               size_draw=size[1], **placement.kwargs())
            durations.program_runs_s += done.result.wall_s
            return done
        # where the buffers lie, drawn (placement.py: round 245); the refusals below are read guarded
        cand, base, placement = placed_pair(lambda at: run(cand_bin, cand_limits, at),
                                            lambda at: run(base_bin, base_limits, at), taken)
        what += placement.words()
        if not taken(base):
            return "refused"
        failure = run_failure(cand)
        cmp = compare_experiment(base, cand, vs, noise_by_size.get(size)) if not failure else None
        if (failure or (cmp is not None and not cmp.match)) and \
                baseline_reads_past_buffers(base_bin, seed, secret, wide, vs, nvcc, durations, size):
            return "refused"  # the baseline reads memory no buffer holds at these values: not its to take
        if failure:
            v.failure_excerpt = log_tail(cand.result.stderr, 12)
            return failure[0], f"with {what} (the baseline runs on them): {failure[1]}"
        assert cmp is not None
        if not cmp.match:
            cmp = cmp.model_copy(update={"problem": f"with {what}: {cmp.describe()} (the baseline takes these "
                                                    "values; --range NAME=LO,HI states the range your inputs "
                                                    "really hold)"})
        v.checks.append(SeedCheck(seed=seed, comparison=cmp, phase="wide_ints", secret=secret.hex(),
                                  baseline_sha256=output_digest(base), candidate_sha256=output_digest(cand)))
        if cmp.match and timed is not None and base.kernel_ms.value and cand.kernel_ms.value:
            # its speed is judged too, its traces audited (rounds 234-235), both run again where it looks slow
            timed(what, base, cand, again=(
                lambda seed, secret: run(base_bin, base_limits, placement, (seed, secret)),
                lambda seed, secret: run(cand_bin, cand_limits, placement, (seed, secret))))
        return None if cmp.match else "mismatch"

    def probe(wide: WideDraw, size: Size = (0, None)) -> bool:
        """Whether the baseline alone takes this draw (nothing compared): it runs clean, computes no NaN,
        and its outputs do not follow the bytes past its inputs (run again with large finite values
        there: an integer table read past its end gives no NaN; round 224)."""
        seed, secret = fresh_seeds(1, used_seeds)[0], experiment_secret()

        def run(guard: int | None) -> ProgramRun:
            done = run_program(base_bin, seed=seed, limits=base_limits, secret=secret, wide_ints=wide,
                               size_index=size[0], size_draw=size[1], fixed_poison=True, guard_byte=guard)
            durations.program_runs_s += done.result.wall_s
            return done
        first = run(None)
        if first.result.timed_out:  # values it takes too long on: not checked past them, and said so
            if (slow_name := names.get(wide.buffers)) is not None:  # one input's draw (a joint one: not named)
                slow[slow_name] = min(slow.get(slow_name, 1 << 64), wide.top or 1 << wide.bits)
        if not taken(first):
            return False
        second = run(GUARD_CONTRAST_BYTES[1])
        if not taken(second):
            return False
        moved = set(outputs_following_guards(first.records, second.records, tolerance_for(vs)))
        if not moved:
            return True
        # Outputs that also differ between two runs with the same bytes past the inputs vary on their own
        # (atomics racing on wide values): not a read past a buffer (round 226: a bound set where a hash
        # table's collisions began, below the table, left the ids past it uncompared). The comparisons
        # then meet that variation (fail closed); a read past is still found by the sanitizer's check.
        again = run(GUARD_CONTRAST_BYTES[1])
        return taken(again) and not moved - set(outputs_following_guards(second.records, again.records, tolerance_for(vs)))

    def reads_past(wide: WideDraw, size: Size) -> bool:
        """Whether the baseline reads past a buffer on this draw under compute-sanitizer (the judge the
        excusal uses: a table read only for its truth, `allowed[id] ? x : 0`, gives the same outputs on
        every guard byte; round 225)."""
        seed, secret = fresh_seeds(1, used_seeds)[0], experiment_secret()
        return baseline_reads_past_buffers(base_bin, seed, secret, wide, vs, nvcc, durations, size)

    def confirmed_bound(size: Size, start: int, cap: int, steps: int) -> int:
        """find_bound with the probes, then, where the baseline reads past a buffer at the bound found,
        found again below it with compute-sanitizer as the judge."""
        bound = find_bound(size, start, cap, steps)
        if bound and reads_past(WideDraw(3, mask, top=bound, exact=True), size):
            bound = find_bound(size, bound, bound, steps, sanitized=True)
        return bound

    def find_bound(size: Size, start: int, cap: int, steps: int, sanitized: bool = False) -> int:
        """The largest bound the baseline takes at SIZE (0: none above the guess), from START up by
        doubling or down by halving, then STEPS bisections; never above CAP. `sanitized`: a bound is
        taken where the baseline reads past no buffer under compute-sanitizer."""
        def takes(bound: int) -> bool:
            wide = WideDraw(3, mask, top=bound, exact=True)
            return not reads_past(wide, size) if sanitized else probe(wide, size)
        if takes(start):
            low_bound, high_bound = start, 0
            while not high_bound and low_bound < cap:
                upper = min(2 * low_bound, cap)
                if takes(upper):
                    low_bound = upper
                else:
                    high_bound = upper
            if not high_bound:
                return low_bound
        else:
            low_bound, high_bound = 0, start
            while not low_bound:
                lower = high_bound // 2
                if lower <= 1 << _GUESSED_BITS:
                    return 0
                if takes(lower):
                    low_bound = lower
                else:
                    high_bound = lower
        for _ in range(steps):
            if high_bound - low_bound <= 1:
                break
            middle = (low_bound + high_bound) // 2
            if takes(middle):
                low_bound = middle
            else:
                high_bound = middle
        return low_bound

    def decided(outcome) -> tuple[tuple[Reason, str] | None, bool] | None:
        """A failure or mismatch ends the experiment (None: go on)."""
        if outcome in ("refused", None):
            return None
        return (outcome, False) if isinstance(outcome, tuple) else (None, False)

    # index -> (name, stretched mode, bound, widest negative band, signed, bits) of each input taken wide
    wide_taken: dict[int, tuple[str, int, int, int, bool, int]] = {}
    elsewhere: dict[Size, dict[int, tuple[int, int]]] = {}  # size -> index -> its draw compared there (top, mode)
    for index, name, dtype in guessed:
        mask = 1 << index
        top = _INTEGER_BITS[dtype] - (0 if dtype.startswith("u") else 1)  # the widest non-negative band
        stretched_mode = 0
        for mode, words in WIDE_INT_MODES.items():
            outcome = experiment(WideDraw(mode, mask), f"'{name}' in {words}")
            if outcome == "refused":
                continue
            if (done := decided(outcome)) is not None:
                return done
            stretched_mode = mode
            break
        # the largest bound the baseline takes (its shapes' draws stay below it); every non-negative value
        # where it takes a band as wide as the type
        bound = 1 << min(top, 62)
        if stretched_mode:  # the widest band the baseline takes: every width
            low = top
        else:  # the widest band the baseline runs clean at, by halving
            low, high = _GUESSED_BITS, top  # low: taken (the guess itself); high: the widest to try
            while low < high:
                middle = (low + high + 1) // 2
                if probe(WideDraw(3, mask, middle)):
                    low = middle
                else:
                    high = middle - 1
            # then the bound itself, from 2^low, every call at it
            bound = confirmed_bound((0, None), 1 << min(low, 62), 1 << min(top, 62), WIDE_INT_BOUND_STEPS) \
                or 1 << _GUESSED_BITS
            low = min(low, max(bound.bit_length() - 1, _GUESSED_BITS))  # the bands below: none past the bound
        # one band over the whole buffer (a check of the whole input sees a narrow one): narrow bands of
        # several widths up to the widest taken, a width drawn in secret, and the widest itself, stepping
        # down where the baseline reads past a buffer there
        ladder = sorted({w for w in WIDE_INT_LADDER if _GUESSED_BITS < w < low} |
                        ({secrets.randbelow(low - _GUESSED_BITS) + _GUESSED_BITS + 1} if low > _GUESSED_BITS else set()))
        banded = False
        for bits in ladder:
            outcome = experiment(WideDraw(3, mask, bits), f"'{name}' all in one band below 2^{bits}")
            if (done := decided(outcome)) is not None:
                return done
            banded |= outcome is None
        for bits in range(low, max(low - WIDE_INT_BAND_TRIES, _GUESSED_BITS), -1):
            outcome = experiment(WideDraw(3, mask, bits), f"'{name}' all in one band below 2^{bits}")
            if outcome == "refused":
                continue
            if (done := decided(outcome)) is not None:
                return done
            banded = True
            break
        for wide, what in bound_shapes(mask, bound) + shapes_at_scales(mask, bound):
            outcome = experiment(wide, f"'{name}' {what}")
            if (done := decided(outcome)) is not None:
                return done
            banded |= outcome is None
        negative = 0  # the widest negative band the baseline took
        if not dtype.startswith("u"):  # negative values (padding ids, ignore_index) on their own
            for bits in (w for w in WIDE_INT_NEGATIVE if w <= top):
                outcome = experiment(WideDraw(3, mask, -bits), f"'{name}' all in one negative band above -2^{bits}")
                if (done := decided(outcome)) is not None:
                    return done
                if outcome is None:
                    negative = bits
        for size in other_sizes:  # the other sizes: their bound may differ (a table of V rows)
            if stretched_mode:
                draws = [(WideDraw(stretched_mode, mask), f"'{name}' in {WIDE_INT_MODES[stretched_mode]}")]
            else:  # the bound there, from the default size's, up or down (round 224: a table of V rows)
                there = confirmed_bound(size, bound, 1 << min(top, 62), WIDE_INT_BOUND_STEPS_ELSEWHERE)
                draws = [(WideDraw(3, mask, top=there), f"'{name}' all in one band below {there} (the largest bound "
                                                        "the baseline takes there)")] if there else []
            compared = False
            for wide, what in draws:
                outcome = experiment(wide, what, size)
                if outcome == "refused":
                    continue
                if (done := decided(outcome)) is not None:
                    return done
                compared = True
                elsewhere.setdefault(size, {})[index] = (wide.top, 3) if wide.top else (0, stretched_mode)
                if wide.top:  # and one moved up from zero, within the bound taken there
                    for shaped, how in bound_shapes(mask, wide.top)[1:2]:
                        if (done := decided(experiment(shaped, f"'{name}' {how}", size))) is not None:
                            return done
                # the shapes (moved up, multiples, runs) at one scale drawn in secret below the bound there
                for shaped, how in shapes_at_scales(mask, wide.top or bound, scales=1):
                    if (done := decided(experiment(shaped, f"'{name}' {how}", size))) is not None:
                        return done
                # narrow bands there too, and its negative band (round 232: a candidate wrong on a narrow maximum
                # only off the default size met none): a secret few of the ladder's widths and a secret one
                for bits in ladder_elsewhere((wide.top or bound).bit_length() - 1):
                    if (done := decided(experiment(WideDraw(3, mask, bits), f"'{name}' all in one band below "
                                                                           f"2^{bits}", size))) is not None:
                        return done
                if negative:
                    if (done := decided(experiment(WideDraw(3, mask, -negative), f"'{name}' all in one negative "
                                                   f"band above -2^{negative}", size))) is not None:
                        return done
                break
            if not compared and (stretched_mode or banded):
                unchecked.append(f"{name} (size {size[0]})" if size[0] > 0 else f"{name} (a drawn size)")
        if not stretched_mode and not banded:
            unchecked.append(name)
        else:
            wide_taken[index] = (name, stretched_mode, bound, negative, not dtype.startswith("u"), top)

    # Inputs drawn wide together: one at a time, every other input kept init's [0, 16), and a candidate wrong
    # only where two are wide at once (a product of two factors each of 16 bits and more, an offset plus a
    # length past 2^32) met none (round 228): all of them at once, then every pair (up to WIDE_INT_JOINT_PAIRS),
    # at every size checked. Each input drawn as the baseline took it alone (its own stretches, with their
    # negative values and top bits, or one band below its own bound; round 229: a joint draw of bands from
    # zero left every negative value and every 64-bit value past 2^62 uncompared beside another wide input);
    # where the baseline refuses that (inputs bounded only together: `first + pos < slots`), all halved
    # together and points along the edge of what it takes, one input below (1 - 2^-k) of its bound beside
    # the others below 2^-k of theirs (round 229: halving alone never drew one input past half its bound
    # beside another wide one); negative bands together; and bands of the ladder's widths, all at once.
    Spec = tuple[int, int]  # a draw of one input: (top, mode), mode 1 or 2 its stretches, 3 a band below top

    def described(spec: Spec) -> str:
        top, mode = spec
        return WIDE_INT_MODES[mode] if mode in WIDE_INT_MODES else f"below {top}"

    negatives_compared: set[int] = set()  # signed inputs whose negative values were compared beside others

    def together(indices: list[int], size: Size, specs: dict[int, Spec]) -> str | tuple[Reason, str] | None:
        """The inputs INDICES drawn wide at once (a failure or "mismatch"; "refused" where the baseline took
        none of these draws; None where every draw it took matched)."""
        joint_mask = sum(1 << i for i in indices)
        who = " and ".join(repr(wide_taken[i][0]) for i in indices)
        Entry = tuple[int, int, int, int]  # one input's draw: (top, mode, bits, lo)
        compared: list[dict[int, Entry]] = []  # the draws compared

        def draw(entries: dict[int, Entry], what: str) -> str | tuple[Reason, str] | None:
            wide = WideDraw(3, joint_mask, tops=tuple((i, *entries[i]) for i in sorted(entries)))
            outcome = experiment(wide, f"{who} together, {what}", size)
            if outcome is None:
                compared.append(entries)
            return outcome

        def ends(outcome) -> bool:  # a failure or a mismatch
            return outcome not in ("refused", None)

        def name(i: int) -> str:
            return repr(wide_taken[i][0])

        alone: dict[int, Entry] = {i: (top, mode, 0, 0) for i, (top, mode) in specs.items()}
        if ends(outcome := draw(alone, "each as the baseline takes it alone (" + ", ".join(
                f"{name(i)} {described(specs[i])}" for i in indices) + ")")):
            return outcome
        full = {i: specs[i][0] or wide_taken[i][2] for i in indices}  # a stretched input: every value as a bound
        if outcome == "refused":
            for step in range(1, WIDE_INT_BAND_TRIES):  # all halved together
                tops = {i: (max(full[i] >> step, 1 << _GUESSED_BITS), 3, 0, 0) for i in indices}
                outcome = draw(tops, "each all in one band below " + ", ".join(str(t[0]) for t in tops.values()))
                if ends(outcome):
                    return outcome
                if outcome is None:
                    break
            for i in indices:  # points along the edge of what the baseline takes: one input near its bound,
                # (1 - 2^-k) of it, the others at 2^-k of theirs (halved where refused): `first + pos < slots`
                # takes first up to 3/4 of the pool beside pos up to a quarter
                for k in (k for k in WIDE_INT_JOINT_EDGE if k < full[i].bit_length() - _GUESSED_BITS):
                    for back in range(WIDE_INT_BAND_TRIES):
                        entries = {j: (max(full[j] >> (k + back), 1 << _GUESSED_BITS), 3, 0, 0) for j in indices}
                        entries[i] = (full[i] - (full[i] >> k), 3, 0, 0)
                        outcome = draw(entries, f"{name(i)} all in one band below {entries[i][0]}, the others below "
                                       + ", ".join(str(entries[j][0]) for j in indices if j != i))
                        if ends(outcome):
                            return outcome
                        if outcome is None:
                            break
        # Each input's own draws beside the others as compared (round 230: where the baseline refused the
        # joint draw, the draws it took were bands from zero, and a mode-1 input's negative values never met
        # two wide inputs): its stretches (negative values, top bits) and its negative band
        bases = compared[:WIDE_INT_JOINT_BASES]
        for i in indices:
            mode, negative = wide_taken[i][1], wide_taken[i][3]
            own = ([((0, mode, 0, 0), f"in {WIDE_INT_MODES[mode]}")] if mode else []) + \
                ([((0, 3, -negative, 0), f"in one negative band above -2^{negative}")] if negative and mode != 1 else [])
            for entry, how in own:
                for base in bases:
                    if base[i] == entry:
                        continue
                    outcome = draw({**base, i: entry}, f"{name(i)} {how}, the others " + ", ".join(
                        f"below {base[j][0]}" if base[j][0] else "in its stretches" for j in indices if j != i))
                    if ends(outcome):
                        return outcome
                    if outcome is None and (entry[1] == 1 or entry[2] < 0):
                        negatives_compared.add(i)
        # A signed input the baseline took no negative values of alone (beside the others at init's guess: an
        # offset below a base, `pool[first + pos]`, reads before the pool) beside each other input moved up past
        # them (round 230: no negative offset was ever compared, and no note said so)
        # (round 231: uncapped, this grew with the square of the inputs: up to WIDE_INT_JOINT_MOVED_UP others,
        # drawn in secret, and a pair's bands stop at the first the baseline refuses)
        for i in indices:
            if not (wide_taken[i][4] and not wide_taken[i][3] and wide_taken[i][1] != 1):
                continue
            movable = [j for j in indices if j != i]
            secrets.SystemRandom().shuffle(movable)
            for j in movable[:WIDE_INT_JOINT_MOVED_UP]:
                for bits in (b for b in WIDE_INT_NEGATIVE if b < wide_taken[i][5] and full[j] >= 1 << (b + 1)):
                    base = bases[0] if bases else alone
                    entries = {**base, i: (0, 3, -bits, 0), j: (1 << bits, 3, 0, 1 << bits)}
                    outcome = draw(entries, f"{name(i)} in one negative band above -2^{bits}, {name(j)} in a band from "
                                            f"2^{bits} up to 2^{bits + 1}")
                    if ends(outcome):
                        return outcome
                    if outcome == "refused":
                        break
                    negatives_compared.add(i)
        if len(indices) == len(wide_taken):  # (at every size checked: round 232; elsewhere a secret few widths)
            def width_of(i: int) -> int:  # a secret width of an input's own, past the guess, within its bound
                return _GUESSED_BITS + 1 + secrets.randbelow(max(1, full[i].bit_length() - 1 - _GUESSED_BITS))

            def ladder(limit: int) -> list[int]:
                if size != (0, None):
                    return ladder_elsewhere(limit)
                return sorted({w for w in WIDE_INT_LADDER if _GUESSED_BITS < w < limit})
            widest = max(full[i].bit_length() - 1 for i in indices)
            for bits in sorted(set(ladder(widest)) | {width_of(indices[0])}):
                entries = {i: (min(full[i], 1 << bits), 3, 0, 0) for i in indices}  # narrow bands of one width
                if ends(outcome := draw(entries, f"each all in one band below 2^{bits} (or its bound)")):
                    return outcome
            # each input in narrow bands beside the others as the first joint draw took them, and every input a
            # width of its own (round 231: a candidate keyed on a narrow maximum of one input beside a wide other,
            # `max(col) < 256` beside rows past 2^24, met only bands of one width)
            base = bases[0] if bases else None
            for i in indices if base is not None else ():
                for bits in ladder(full[i].bit_length() - 1):
                    entries = {**base, i: (1 << bits, 3, 0, 0)}
                    if ends(outcome := draw(entries, f"{name(i)} all in one band below 2^{bits}, the others as "
                                                     "drawn together first")):
                        return outcome
            own_widths = {i: (min(full[i], 1 << width_of(i)), 3, 0, 0) for i in indices}
            if ends(outcome := draw(own_widths, "each all in one band of a width of its own (" + ", ".join(
                    f"{name(i)} below {own_widths[i][0]}" for i in indices) + ")")):
                return outcome
        return None if compared else "refused"

    joint_unchecked: list[str] = []
    groups = [sorted(wide_taken)] if len(wide_taken) >= 2 else []
    if len(wide_taken) >= 3:
        pairs = list(itertools.combinations(sorted(wide_taken), 2))
        secrets.SystemRandom().shuffle(pairs)  # which pairs, where there are more than the cap: not known ahead
        groups += [list(pair) for pair in pairs[:WIDE_INT_JOINT_PAIRS]]
    for group in groups:
        specs = {i: (0, wide_taken[i][1]) if wide_taken[i][1] else (wide_taken[i][2], 3) for i in group}
        outcome = together(group, (0, None), specs)
        if (done := decided(outcome)) is not None:
            return done
        if outcome == "refused":
            joint_unchecked.append(" and ".join(repr(wide_taken[i][0]) for i in group))
    if len(wide_taken) >= 2:  # all together at every other size, each as compared there alone
        for size, drawn in elsewhere.items():
            if len(there := sorted(i for i in drawn if i in wide_taken)) >= 2:
                if (done := decided(together(there, size, {i: drawn[i] for i in there}))) is not None:
                    return done
    if negatives_left := [wide_taken[i][0] for i in sorted(wide_taken) if wide_taken[i][4] and not wide_taken[i][3]
                          and wide_taken[i][1] != 1 and i not in negatives_compared]:
        v.notes.append(f"negative values of {', '.join(repr(n) for n in negatives_left)} were not compared: the baseline "
                       "takes them neither alone nor beside the other inputs moved up (state the range: --range "
                       "NAME=LO,HI)")
    if joint_unchecked:
        v.notes.append(f"integer inputs {'; '.join(joint_unchecked)} were not drawn wide together: the baseline takes "
                       "no such draw (it fails, computes NaN or reads past a buffer on them)")
    if unchecked:
        v.notes.append(f"integer input(s) {', '.join(repr(n) for n in unchecked)} checked only in the range init "
                       "guessed: the baseline takes no wider values (it fails, computes NaN or reads past a buffer "
                       "on them)")
    if slow:
        v.notes.append("the baseline ran past its time cap on wide values of " + ", ".join(
            f"{name!r} (values up to {top})" for name, top in slow.items()) + ": values past the bound found "
            "there were not compared; state the range (--range NAME=LO,HI) or raise verify.run_timeout_s")
    if guessed:
        v.notes.append(f"integer input(s) {', '.join(repr(n) for _, n, _ in guessed)} have a range nobody stated: "
                       "also checked on wider draws (bands from zero up to the bound the baseline takes, moved up from "
                       "zero, of multiples of a power of two, non-decreasing runs, at several scales; one input at a time "
                       "and together; at every size checked; their speed too), which leave "
                       "narrow gaps (docs/verifier.md, Known limits); state the range your inputs hold (--range "
                       "NAME=LO,HI) to check it")
    return None, True


def ladder_elsewhere(limit: int) -> list[int]:
    """One-band widths compared at a size other than the default: WIDE_INT_LADDER_ELSEWHERE of the ladder's
    widths below 2^LIMIT, drawn in secret, and a secret width of its own."""
    widths = [w for w in WIDE_INT_LADDER if _GUESSED_BITS < w < limit]
    secrets.SystemRandom().shuffle(widths)
    own = {_GUESSED_BITS + 1 + secrets.randbelow(limit - _GUESSED_BITS - 1)} if limit > _GUESSED_BITS + 1 else set()
    return sorted(set(widths[:WIDE_INT_LADDER_ELSEWHERE]) | own)


def bound_shapes(mask: int, bound: int) -> list[tuple[WideDraw, str]]:
    """Draws within a bound the baseline takes (`bound`: it takes [0, bound)), each call's top in
    (bound/2, bound]: the whole band; a narrow band moved up from zero (lo from a quarter to a half of
    the bound, a width below half of lo) and one moved up anywhere (lo and width in octaves drawn
    apart); multiples of 2^s (s from 1 to 8); non-decreasing runs. None below 2^6."""
    if bound < 64:
        return []
    lo_narrow = bound // 4 + secrets.randbelow(bound // 4)
    narrow = 1 << (_GUESSED_BITS + secrets.randbelow(max(1, lo_narrow.bit_length() - 1 - _GUESSED_BITS)))
    # lo's octave drawn first, then lo within it (round 234: lo uniform on [16, bound) was almost always
    # within a factor of a thousand of the bound, so a band far below it never came)
    octave = _GUESSED_BITS + secrets.randbelow(max(1, (bound - 1).bit_length() - 1 - _GUESSED_BITS))
    lo_any = min((1 << octave) + secrets.randbelow(1 << octave), bound - (1 << _GUESSED_BITS))
    room = bound - lo_any
    width_any = max(2, min(room, 1 << (1 + secrets.randbelow(max(1, room.bit_length())))))
    shift = 1 + secrets.randbelow(min(8, bound.bit_length() - _GUESSED_BITS - 1))
    return [(WideDraw(3, mask, top=bound), f"all in one band below {bound} (the largest bound the baseline takes)"),
            (WideDraw(3, mask, top=min(narrow, lo_narrow // 2), lo=lo_narrow),
             f"in a narrow band from {lo_narrow} (values far from zero)"),
            (WideDraw(3, mask, top=width_any, lo=lo_any), f"in a band from {lo_any} up to {lo_any + width_any}"),
            (WideDraw(3, mask, top=bound, shift=shift), f"all multiples of {1 << shift} below {bound}"),
            (WideDraw(3, mask, top=bound, sorted=True), f"in non-decreasing runs below {bound}")]


def shapes_at_scales(mask: int, bound: int, scales: int | None = None) -> list[tuple[WideDraw, str]]:
    """bound_shapes' narrow band moved up, multiples of a power of two and non-decreasing runs at scales
    below BOUND: every ladder width from 2^6 and a secret width (SCALES: that many of them, drawn in
    secret). Shapes drawn only at the bound's scale left a candidate wrong where its input has the shape
    and a maximum far below the bound (round 234: words all multiples of 16 below 2^24, ids in
    [256, 65536), beside a baseline that takes every 32-bit value)."""
    limit = bound.bit_length() - 1  # 2^limit <= bound
    widths = {w for w in WIDE_INT_LADDER if 6 <= w < limit}
    if limit > 6:
        widths.add(6 + secrets.randbelow(limit - 6))
    chosen = sorted(widths)
    if scales is not None:
        secrets.SystemRandom().shuffle(chosen)
        chosen = sorted(chosen[:scales])
    return [shape for w in chosen for k, shape in enumerate(bound_shapes(mask, 1 << w)) if k in (1, 3, 4)]


def baseline_reads_past_buffers(base_bin: Path, seed: int, secret: bytes, wide: WideDraw, vs,
                                 nvcc: Path, durations: Durations, size: tuple[int, int | None] = (0, None)) -> bool:
    """Whether the baseline, on this wide experiment, touches memory no buffer holds (compute-sanitizer
    memcheck, every buffer its own exact allocation): values it reads as indices past its tables are
    not values it takes, and a candidate that differs there is not wrong. A run that does not finish
    excuses nothing (round 220: a baseline whose work grows with its values could run past the cap on
    purpose-chosen inputs); without a sanitizer nothing can be excused either."""
    sanitizer = find_compute_sanitizer(nvcc)
    if sanitizer is None:
        return False
    limits = Limits(wall_timeout_s=vs.memcheck_timeout_s, memory_bytes=None, stdout_cap_bytes=vs.stdout_cap_bytes,
                    file_size_bytes=vs.output_dump_max_bytes)
    run = run_program(base_bin, seed=seed, limits=limits, secret=secret, wide_ints=wide, exact_buffers=True,
                      size_index=size[0], size_draw=size[1],
                      wrapper=memcheck_argv(sanitizer, Path("program"), padding=BOUNDS_PADDING_BYTES,
                                            api_errors=False)[:-1])
    durations.program_runs_s += run.result.wall_s
    if run.result.timed_out:
        return False
    # only an access past global memory: a CUDA call the baseline sees fail and handles (an attribute
    # it cannot have on wide values), or a failure of another kind, is no read past (round 227)
    return global_access_errors(run.result.stdout, run.result.stderr) > 0
