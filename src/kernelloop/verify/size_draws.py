"""The problem sizes drawn at verify time (contract v2, `KERNELLOOP_SIZE_DRAW`): the draws the gate hands the harness
(Harness::drawn_size reads them), all following from one number in the verdict, and the redraws after a size the
baseline refuses. Red team rounds 131-132 (relations between sizes), 240-247 (round sizes, sizes kept at their
defaults, sizes moved alone, odd, at their smallest); docs/verifier.md, "more than one size"."""

from __future__ import annotations

import hashlib
import math
from typing import NamedTuple

from ..config import VerifySettings


# Bits 56-61 of a draw: which relations between sizes the declared options show it keeps
# (kl::related_size): 0 none; k in 1-31 the k-th alone (numbered in the order of the size() calls);
# ALL_BUT + k every one but the k-th; ALL_RELATIONS every one. Bit 62 (KEEP_ORDERINGS): every
# ordering the options show too (kl::size_order_bounds: a leading dimension at least its rows).
RELATION_SHIFT = 56
ALL_BUT = 31
ALL_RELATIONS = 63
KEEP_ORDERINGS = 64
# Bit 55: a round size (kl::round_size: a multiple of 2^k for a k drawn in secret from the top half of
# the span's powers of two, no declared option, in the whole ratios the defaults show), as callers' sizes mostly are
# (red team rounds 240-243). Bits 39-54: the size() calls such a draw keeps at their defaults (rounds 242-243).
ROUND_SIZE = 1 << 55
KEEP_SHIFT, KEEP_CALLS = 39, 16
# Bit 37: the size() call numbered in bits 32-35 takes the size in bits 0-31, chosen here (explicit_size), where
# every call's options and the kept defaults are known (the harness draws each size before it meets the later
# calls): a size moved alone, round, odd, or its smallest (red team rounds 244-245); the others are kept (bits
# 39-54) or drawn by the harness, round with bit 55, evenly without.
EXPLICIT = 1 << 37
EXPLICIT_VALUE = (1 << 32) - 1
EXPLICIT_CALL_SHIFT = 32
# Bit 38, with bit 37: the value is an odd multiple of the options' common factor (a size moved alone off every
# round multiple: red team round 245, a batch tiled by 8 at the default M x N), drawn again odd where refused.
ODD = 1 << 38
_DRAW_SHAPE_BITS = (((1 << KEEP_CALLS) - 1) << KEEP_SHIFT) | EXPLICIT | ODD


def with_relation(draw: int, relation: int) -> int:
    """DRAW asking the harness to keep RELATION (bits 56-62 replaced), drawn evenly (bits 37-55 cleared)."""
    cleared = draw & ~(255 << (RELATION_SHIFT - 1)) & ~_DRAW_SHAPE_BITS
    return cleared | (relation << RELATION_SHIFT)


def as_round(draw: int, keep: int = 0) -> int:
    """DRAW asking the harness for a round size, on its own (no relation kept), with the size() calls in the
    mask KEEP at their defaults."""
    return with_relation(draw, 0) | ROUND_SIZE | ((keep & ((1 << KEEP_CALLS) - 1)) << KEEP_SHIFT)


def as_explicit(draw: int, keep: int, value: int, call: int, relation: int = 0, odd: bool = False,
                round_size: bool = True) -> int:
    """A draw keeping the calls in KEEP at their defaults and moving CALL to VALUE (bits 0-31, the call in 32-35),
    the others (none, in a single draw) drawn round (ROUND_SIZE) or evenly; marked with RELATION (a redraw that
    kept the relations: explicit_size's RELATED) and ODD (an odd multiple)."""
    return (with_relation(draw, relation) & ~((1 << 37) - 1)) | (ROUND_SIZE if round_size else 0) | EXPLICIT | (
        ODD if odd else 0) | ((keep & ((1 << KEEP_CALLS) - 1)) << KEEP_SHIFT) | (
        (call & 15) << EXPLICIT_CALL_SHIFT) | (value & EXPLICIT_VALUE)


def explicit_call(draw: int) -> int | None:
    """The size() call an explicit draw sets (bits 32-35); None for any other draw."""
    return (draw >> EXPLICIT_CALL_SHIFT) & 15 if draw & EXPLICIT else None


def size_span(options: list[int]) -> tuple[int, int, int]:
    """(g, first, last): a size() call's drawn sizes are multiples of g, the options' common factor, from
    first * g to last * g (half the smallest option to 1.25x the largest, as Harness::drawn_size draws)."""
    g = math.gcd(*(abs(v) for v in options))
    lo, hi = min(options), max(options)
    return g, max(1, (lo // 2 + g - 1) // g), (hi + hi // 4) // g


def explicit_size(size_values: list[list[int]], call: int, pick: int, related: bool = False,
                  odd: bool = False) -> int | None:
    """A size for CALL moved alone, every other call at its default: a multiple of g 2^k in its span, k drawn from
    PICK from 3 to the largest (lowered until one fits), or with ODD an odd multiple of g (round 245: sizes off
    every multiple of 8 came only from draws moving every size), no declared option; with RELATED, keeping every relation
    the options show with the other calls' defaults (a multiple of each whose options divide its own, a divisor of
    each whose options are multiples, at least or at most each it is at least or at most in every option), for a
    baseline that refused it on its own (its check `hidden % heads == 0` with heads kept at 12: red team round
    244). None where no such size is."""
    options = size_values[call]
    if len(options) < 2 or min(options) <= 0:
        return None
    g, first, last = size_span(options)
    multiple_of, divisor_of, at_least, at_most = 1, 0, 0, last * g
    for other, theirs in enumerate(size_values if related else []):
        if other == call or len(theirs) != len(options) or min(theirs) <= 0:
            continue
        if all(m % t == 0 for m, t in zip(options, theirs)):
            multiple_of = math.lcm(multiple_of, theirs[0])
        if all(t % m == 0 for m, t in zip(options, theirs)):
            divisor_of = math.gcd(divisor_of, theirs[0])
        if theirs != options and all(m >= t for m, t in zip(options, theirs)):
            at_least = max(at_least, theirs[0])
        if theirs != options and all(m <= t for m, t in zip(options, theirs)):
            at_most = min(at_most, theirs[0])
    top = last.bit_length() - 1
    least = min(3, top)
    for k in ([0] if odd else range(top - pick % (top - least + 1) if top >= 0 else 0, -1, -1)):
        step = math.lcm(g << k, multiple_of)
        fits = _Fits.of(range(max(1, -(-max(first * g, at_least) // step)) * step, min(last * g, at_most) + 1, step),
                     options, divisor_of, g if odd else 0)
        if len(fits):
            if odd:  # past the default where there are such: where a tail beyond whole tiles is largest
                fits = fits.above(options[0]) or fits
            value = fits[(pick >> 8) % len(fits)]
            return value if value <= EXPLICIT_VALUE else None
    return None


class _Fits:
    """Sizes in order, indexed without listing them: VALUES (a range or a list) less the places SKIPPED (sorted)."""

    def __init__(self, values: range | list[int], skipped: list[int]) -> None:
        self.values, self.skipped = values, skipped

    @classmethod
    def of(cls, span: range, options: list[int], divisor_of: int, odd_of: int) -> _Fits:
        """The values of SPAN (multiples of a step) that are no declared option, divide DIVISOR_OF where it is set
        and, with ODD_OF set, are odd multiples of it (a span of millions of sizes with a step of 1 is normal: an
        odd-sized default)."""
        if odd_of and span:
            odd_start = (span.start // odd_of) % 2 == 1
            span = range(0) if (span.step // odd_of) % 2 == 0 else span[::2] if odd_start else span[1::2]
        if divisor_of:
            root = math.isqrt(divisor_of)
            divisors = {d for i in range(1, root + 1) if divisor_of % i == 0 for d in (i, divisor_of // i)}
            return cls(sorted(d for d in divisors if d in span and d not in options), [])
        return cls(span, sorted(span.index(o) for o in set(options) if o in span))

    def __len__(self) -> int:
        return len(self.values) - len(self.skipped)

    def __getitem__(self, at: int) -> int:
        for skipped in self.skipped:  # each declared option at or before the place moves it one on
            at += skipped <= at
        return self.values[at]

    def above(self, value: int) -> _Fits | None:
        """The fits greater than VALUE, or None where there are none."""
        if isinstance(self.values, list):
            above = _Fits([v for v in self.values if v > value], [])
        else:
            start = max(0, -(-(value + 1 - self.values.start) // self.values.step)) if self.values else 0
            above = _Fits(self.values[start:], [i - start for i in self.skipped if i >= start])
        return above if len(above) else None


def redraw(refused: int, fresh: int, relation: int, size_values: list[list[int]]) -> int:
    """The draw after the baseline refused REFUSED (FRESH: a spare draw; RELATION: the next to keep). A size
    moved alone (explicit) the first time is moved again keeping every relation the options show with the kept
    defaults (explicit_size's RELATED); otherwise, or where none such is, `redrawn`."""
    keep = (refused >> KEEP_SHIFT) & ((1 << KEEP_CALLS) - 1)
    call = explicit_call(refused)
    moving = [c for c in range(min(len(size_values), KEEP_CALLS)) if not (keep >> c) & 1]
    if call is not None and refused & ROUND_SIZE and not relation_of(refused) and moving == [call]:
        odd = bool(refused & ODD)
        if value := explicit_size(size_values, call, fresh >> 8, related=True, odd=odd):
            return as_explicit(fresh, keep, value, call, ALL_RELATIONS | KEEP_ORDERINGS, odd=odd)
    return redrawn(refused, fresh, relation)


def redrawn(refused: int, fresh: int, relation: int) -> int:
    """The draw after the baseline refused REFUSED: FRESH, keeping RELATION, and round with the same sizes kept at
    their defaults where REFUSED was (a refused round draw came back as an even one: red team round 243); a
    size moved alone to a value chosen here (bit 37) comes back drawn by the harness, round."""
    return with_relation(fresh, relation) | (refused & (ROUND_SIZE | (((1 << KEEP_CALLS) - 1) << KEEP_SHIFT)))


def round_keeps(count: int, draws: int, pick: int) -> list[int]:
    """The defaults each of DRAWS round draws keeps, over COUNT size() calls: none in the first; then a
    subset drawn from PICK (neither empty nor every call) and its complement, in turn, so each size stays at
    its default while the others move in one draw or the other (red team round 242)."""
    calls = min(count, KEEP_CALLS)
    every = (1 << calls) - 1
    keeps = [0]
    for j in range(1, draws):
        if calls < 2:
            keeps.append(0)
        elif j % 2:
            keeps.append(1 + (pick + j) % (every - 1))  # 1 .. every - 1: a proper, non-empty subset
        else:
            keeps.append(every & ~keeps[-1])
    return keeps[:draws]


def single_size_keeps(size_values: list[list[int]], cap: int, pick: int, taken: list[int]) -> list[int]:
    """Keep masks that move one size() call alone, every other call at its default: one per call with options to
    move among (up to CAP of them, a secret choice from PICK where there are more), none already in TAKEN. A fast
    path keyed on any set of sizes at their defaults is wrong where some other size moves; the draw moving that
    size alone keeps the set at its defaults, whatever it is (red team round 243: M and N at their defaults
    while a batch dimension moved, met by a kept subset in about a third of verifications)."""
    calls = min(len(size_values), KEEP_CALLS)
    movable = [c for c in range(calls) if len(size_values[c]) > 1]
    if len(movable) < 2:
        return []  # one size that moves: the round draw keeping nothing moves it alone
    every = (1 << calls) - 1
    order = sorted(movable, key=lambda c: hashlib.sha256(f"{pick}:{c}".encode()).digest())
    masks = [every & ~(1 << c) for c in sorted(order[:cap])]
    return [m for m in masks if m not in taken]


def smallest_size_calls(size_values: list[list[int]], cap: int, pick: int) -> list[int]:
    """The size() calls a draw of their own moves to their smallest size (the options' common factor), every
    other call at its default: each with options to move among whose default is not that size already (up to
    CAP, a secret choice from PICK where there are more). Evenly drawn and round sizes lie in [half the smallest
    option, 1.25x the largest]: one token, one row, batch 1, where rewrites keep special paths, came only where
    declared (red team round 244: a linear layer whose m == 1 path dropped the bias passed every draw)."""
    calls = min(len(size_values), KEEP_CALLS)
    movable = [c for c in range(calls) if len(size_values[c]) > 1 and min(size_values[c]) > 0
               and size_span(size_values[c])[0] < size_values[c][0]]
    order = sorted(movable, key=lambda c: hashlib.sha256(f"{pick}:least:{c}".encode()).digest())
    return sorted(order[:cap])


FLAG_BESIDE = ("defaults", "round", "even")


def flag_values(size_values: list[list[int]]) -> list[tuple[int, int, str]]:
    """(call, value, beside) for each value of a flag or a mode: a size() call whose options include a value below 1
    (any `h.size<bool>`), which the harness draws from its options. Each value is planned beside every other size at
    its default, beside round sizes (multiples of large powers of two, where fast paths are keyed) and beside sizes
    drawn evenly (the default value at the defaults is the timed run): by chance alone a flag's other value missed
    the sizes a candidate keyed on in one verification in eight (red team round 276)."""
    out = []
    for call in range(min(len(size_values), KEEP_CALLS)):
        options = size_values[call]
        if len(options) < 2 or min(options) >= 1:
            continue
        for value in dict.fromkeys(options):
            if 0 <= value < 2**31:  # an explicit value is 32 bits, read back unsigned
                out += [(call, value, beside) for beside in FLAG_BESIDE if beside != "defaults" or value != options[0]]
    return out


def at_a_smallest(size_values: list[list[int]], sizes: list[int]) -> bool:
    """Whether a run's SIZES put some size() call at its smallest (its options' common factor, below its default),
    however it got there: drawn, or a declared alternative (red team round 250: `h.size({4096, 1})`'s declared
    m == 1 was held to another size's limit, the same size drawn was not)."""
    return any(len(options) > 1 and min(options) > 0 and size == size_span(options)[0] < options[0]
               for options, size in zip(size_values, sizes))


class SizePlan(NamedTuple):
    """The sizes drawn at verify time (planned_size_draws): DRAWS in order, SPARE ones for sizes the baseline
    refuses; SINGLE, the draws that move one size alone (not among the wider-integer experiment's sizes);
    SMALLEST, those at a size's smallest (extra launches allowed on top: SMALLEST_SIZE_LAUNCH_MS)."""
    draws: list[int]
    spare: list[int]
    single: set[int]
    smallest: set[int]


def planned_size_draws(size_draw: int, size_values: list[list[int]], vs: VerifySettings) -> SizePlan:
    """The sizes drawn at verify time, as draws for the harness, all following from SIZE_DRAW (so one number in a
    verdict reproduces them): `size_draws` drawn evenly; `round_size_draws` round ones (bit 55: a size drawn evenly
    is rarely one a caller runs, a power of two or a multiple of a large one, where a fast path keyed on it goes
    wrong: red team round 240), the second and third keeping a secret subset of the sizes at their defaults, then
    the others; then `single_size_draws` each moving one size alone, round (explicit_size), the others at their
    defaults (a fast path keyed on any set of sizes at their defaults meets the draw that moves a size outside
    it: round 243), and the same sizes moved alone once more to an odd multiple of their common factor (round
    245); then `smallest_size_draws` moving one size alone to its smallest (round 244). The draws that
    move one size alone are left out of the wider-integer experiment (they look for size-keyed paths, and values
    are drawn wide at every other size)."""
    keeps = round_keeps(len(size_values), vs.round_size_draws, size_draw >> 8)
    singles = single_size_keeps(size_values, vs.single_size_draws, size_draw >> 16, keeps)
    every = (1 << min(len(size_values), KEEP_CALLS)) - 1
    beside = 2 if sum(len(o) > 1 for o in size_values) > 1 else 1  # beside others drawn evenly only where there are
    least = [c for c in smallest_size_calls(size_values, vs.smallest_size_draws, size_draw >> 24) for _ in range(beside)]
    alone_calls = [next(c for c in range(KEEP_CALLS) if not (keep >> c) & 1) for keep in singles]
    odd = [(keep, next(c for c in range(KEEP_CALLS) if not (keep >> c) & 1))  # every size moved alone, off round
           for keep in single_size_keeps(size_values, vs.single_size_draws, size_draw >> 16, [])]
    flags = flag_values(size_values)
    evenly = vs.size_draws
    rounds = evenly + len(keeps) + len(flags) + len(singles) + len(odd) + len(least)
    drawn = size_draws(size_draw, rounds + vs.size_redraws)

    def alone(draw: int, keep: int, call: int, odd: bool = False) -> int:  # moved alone (harness-drawn if none fits)
        value = explicit_size(size_values, call, draw >> 8, odd=odd)
        return as_explicit(draw, keep, value, call, odd=odd) if value else as_round(draw, keep)
    planned = [with_relation(d, 0) for d in drawn[:evenly]] + [
        as_round(d, keep) for d, keep in zip(drawn[evenly:evenly + len(keeps)], keeps)] + [
        # each value of a flag at the others' defaults, and beside sizes drawn evenly (keep bits from the secret)
        as_explicit(d, every & ~(1 << c) if beside == "defaults" else (d >> 8) & ~every, v, c,
                    round_size=beside != "even")
        for d, (c, v, beside) in zip(drawn[evenly + len(keeps):], flags)] + [
        alone(d, keep, c) for d, keep, c in zip(drawn[evenly + len(keeps) + len(flags):], singles, alone_calls)] + [
        alone(d, keep, c, odd=True) for d, (keep, c) in zip(drawn[evenly + len(keeps) + len(flags) + len(singles):],
                                                           odd)] + [
        # each size at its smallest with the others at their defaults, then with the others drawn evenly (round
        # 246: m == 1 came only beside n and k at their defaults, never beside an n off every multiple of 8), from
        # a secret the draw carries in the keep bits of calls the program does not make (round 247: without it the
        # harness drew the others from the explicit value alone, the same in every verification)
        as_explicit(d, every & ~(1 << c) if k % beside == 0 else (d >> 8) & ~every, size_span(size_values[c])[0], c,
                    round_size=k % beside == 0)
        for k, (d, c) in enumerate(zip(drawn[rounds - len(least):rounds], least))]
    return SizePlan(planned, drawn[rounds:], set(planned[rounds - len(singles) - len(odd) - len(least):]),
                    set(planned[rounds - len(least):]))


def relation_of(draw: int) -> int:
    return (draw >> RELATION_SHIFT) & 127


def size_relations(size_values: list[list[int]]) -> int:
    """How many relations the harness may number among the declared sizes (kl::size_relation: call
    c's options all multiples, or all divisors, of an earlier call's). Sizes of a floating type are
    no relation to the harness; read here as numbers, they can only add to the count."""
    count = 0
    for c, mine in enumerate(size_values):
        for theirs in size_values[:c]:
            if len(mine) == len(theirs) and all(a > 0 and b > 0 for a, b in zip(mine, theirs)) and (
                    all(a % b == 0 for a, b in zip(mine, theirs)) or all(b % a == 0 for a, b in zip(mine, theirs))):
                count += 1
    return count


def _orderings(size_values: list[list[int]]) -> list[tuple[int, int, int]]:
    """Every pair of declared sizes that shows an ordering in every option (kl::size_order_bounds: one at least,
    or at most, the other, not equal in all), as (call, earlier call, sign): sign 1 where the call's size is the
    larger, -1 the smaller."""
    found = []
    for c, mine in enumerate(size_values):
        for e, theirs in enumerate(size_values[:c]):
            if len(mine) == len(theirs) and mine != theirs:
                if all(a >= b for a, b in zip(mine, theirs)):
                    found.append((c, e, 1))
                elif all(a <= b for a, b in zip(mine, theirs)):
                    found.append((c, e, -1))
    return found


def size_orderings(size_values: list[list[int]]) -> int:
    """How many pairs of declared sizes show an ordering in every option."""
    return len(_orderings(size_values))


def breaks_an_ordering(size_values: list[list[int]], sizes: list[int]) -> bool:
    """Whether SIZES (what a run's size() calls returned) put two sizes the other way round from how every
    declared option orders them (a pitch drawn below the width)."""
    return any(c < len(sizes) and (sizes[c] - sizes[e]) * sign < 0 for c, e, sign in _orderings(size_values))


def relation_order(count: int, orderings: int = 0) -> list[int]:
    """The relations a size drawn again after the baseline refused one keeps, in turn: each alone;
    then every one but one (a program may need two at once: red team round 132); each alone again
    (a refusal may come from another check, the other sizes drawn anew); then every one at once
    (which keeps chance relations too, at whose breaking a candidate may be wrong). Where the options
    show orderings, the first redraw keeps them all (a baseline that reads or writes past a buffer
    where a leading dimension falls below its rows needs several at once), and so does every later
    one (kept-aside set 20's DGEMM needs lda >= m, ldb >= k and ldc >= m at once). The sizes judged
    then keep chance orderings too (docs/verifier.md, "Known limits"): the first draws, each on its
    own, check sizes where they break whenever the baseline takes them."""
    singles = list(range(1, min(count, ALL_BUT) + 1))
    all_but = [ALL_BUT + k for k in singles] if count > 2 else []  # with two, all but one is one alone
    order = singles + all_but + singles + [ALL_RELATIONS]
    return [KEEP_ORDERINGS] + [KEEP_ORDERINGS | r for r in order] if orderings else order


def next_relation(refused: int, kept: int, order: list[int], tried: int) -> tuple[int, int]:
    """The relation the next draw keeps after the baseline refused a draw keeping REFUSED (0: a size
    drawn on its own), and how many of ORDER are used: after a size drawn on its own, KEPT (the
    relation the baseline last ran at) where there is one; else the next of ORDER, round again."""
    if refused == 0 and kept:
        return kept, tried
    return order[tried % len(order)], tried + 1


def size_draws(first: int, count: int) -> list[int]:
    """The draws behind the sizes chosen at verify time: `first`, then `count - 1` more that
    follow from it (so one number in a verdict reproduces them all)."""
    return [first] + [int.from_bytes(hashlib.sha256(f"{first}:{k}".encode()).digest()[:8], "little") >> 1 | 1
                      for k in range(1, count)]
