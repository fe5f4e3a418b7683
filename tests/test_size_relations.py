"""Sizes drawn at verify time keep the relations every declared option shows between size() calls
(kl::related_size): kept-aside set 13's group norm checks `C % group == 0` and aborted at every
independent draw that broke it, which the verifier blamed on the candidate. Built with nvcc and
run on the host: no GPU needed."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from kernelloop.tools.nvcc import harness_include_dir

PROGRAM = Path(__file__).parent / "harness" / "size_relations.cu"


@pytest.fixture(scope="module")
def draws(tmp_path_factory) -> dict[str, list[int]]:
    binary = tmp_path_factory.mktemp("sizes") / "size_relations"
    built = subprocess.run(["nvcc", "-std=c++17", "-I", str(harness_include_dir()), str(PROGRAM), "-o", str(binary)],
                           capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr[-2000:]
    ran = subprocess.run([str(binary)], capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr
    return {words[1]: [int(w) for w in words[2:]] for words in (line.split() for line in ran.stdout.splitlines())}


pytestmark = [pytest.mark.nvcc, pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")]


def test_relations_no_size_keeps_together_are_kept_one_kind_at_a_time(draws):
    # N drawn 5, C 36: the group count (options 32 and 6: even, a multiple of N, a divisor of C) has no
    # size keeping both (a multiple of 10 dividing 36); the divisors of 36 that are even and in
    # [3, 40] keep C % group == 0, the even multiples of 5 keep the other.
    assert set(draws["group_norm"]) == {0}
    assert set(draws["group_norm_divisors"]) == {4, 6, 12, 18, 36}
    assert set(draws["group_norm_multiples"]) == {10, 20, 30, 40}


def test_one_relation_at_a_time(draws):
    # numbered in call order: C of N (1), HxW of N (2), the group count of N (3) and of C (4)
    assert set(draws["group_norm_only_3"]) == {10, 20, 30, 40}
    assert set(draws["group_norm_only_4"]) == {4, 6, 12, 18, 36}
    # relation 1 is C's: the group count keeps none, its span alone (even, 4 to 40)
    assert set(draws["group_norm_only_1"]) == set(range(4, 41, 2))
    assert set(draws["group_norm_all_but_3"]) == {4, 6, 12, 18, 36}
    assert set(draws["group_norm_all_but_4"]) == {10, 20, 30, 40}


def test_an_equal_pair_stays_equal(draws):
    assert set(draws["square"]) == {777}


def test_without_a_relation_the_whole_span_is_drawn(draws):
    got = draws["free"]
    # 64 and 33 share no factor: any size from half the smallest to 1.25x the largest
    assert set(got) == set(range(16, 81))


def test_a_relation_no_size_keeps_gives_none(draws):
    assert set(draws["none"]) == {0}


def test_a_floating_size_is_no_relation(draws):
    # as an integer size, 5 would ask for a multiple of 160 (none in the span); as a scale, nothing
    assert set(draws["floating"]) == {32, 64, 96}


def test_the_gate_numbers_relations_as_the_harness_does():
    from kernelloop.verify.size_draws import ALL_RELATIONS, relation_of, size_relations, with_relation

    # group norm: C of N, HxW of N, the group count of N and of C (tests/harness/size_relations.cu)
    assert size_relations([[16, 3], [128, 60], [4096, 1155], [32, 6]]) == 4
    assert size_relations([[1000, 777], [64, 33]]) == 0
    assert size_relations([[1024, 333], [1024, 333]]) == 1  # equal: one relation
    draw = (1 << 62) | (5 << 56) | 12345
    assert relation_of(with_relation(draw, 0)) == 0 and with_relation(draw, 0) & (1 << 62) == 0
    assert relation_of(with_relation(draw, ALL_RELATIONS)) == ALL_RELATIONS
    assert with_relation(draw, 3) & ((1 << 56) - 1) == 12345


def test_kept_orderings_bound_a_leading_dimension_below_by_its_rows(draws):
    # lda is at least m (700), n (300) and k (900) in every declared option: at least 900 when kept
    assert draws["gemm_lda_bounds"] == [900, -1]
    got = set(draws["gemm_lda"])
    assert min(got) >= 900 and max(got) <= 1280 and len(got) > 300


def test_an_inner_count_is_bounded_above_by_the_smaller_outer_one(draws):
    assert draws["gemm_k_bounds"] == [0, 300]


def test_equal_sizes_and_impossible_bounds(draws):
    assert draws["square_bounds"] == [0, -1]
    assert draws["tight"] == [0]


def test_the_gate_keeps_orderings_from_the_first_redraw_on():
    from kernelloop.verify.size_draws import (
        ALL_RELATIONS, KEEP_ORDERINGS, relation_of, relation_order, size_orderings, with_relation)

    gemm = [[1024, 333], [1024, 257], [1024, 129], [1024, 337], [1024, 131], [1024, 335]]
    assert size_orderings(gemm) > 0
    assert size_orderings([[1024, 333], [1024, 333]]) == 0  # equal is a relation, not an ordering
    assert size_orderings([[1000, 20], [64, 33]]) == 0  # crossing: none
    order = relation_order(0, size_orderings(gemm))
    assert order[0] == KEEP_ORDERINGS and all(r & KEEP_ORDERINGS for r in order)
    assert order[-1] == KEEP_ORDERINGS | ALL_RELATIONS
    assert relation_order(2) == [1, 2, 1, 2, ALL_RELATIONS]  # no orderings: as before
    draw = with_relation(12345, KEEP_ORDERINGS | 3)
    assert draw >> 62 & 1 and relation_of(draw) == KEEP_ORDERINGS | 3 and draw < 1 << 63


def test_a_drawn_size_that_turns_an_ordering_the_options_show_is_seen():
    """Kept-aside set 22's histogram: the pitch is at least the width in every option; a draw putting it below
    has the baseline read past its image, so the gate asks whether its outputs follow the bytes there."""
    from kernelloop.verify.size_draws import breaks_an_ordering

    pitched = [[1024, 333], [1088, 352], [512, 97]]  # width, pitch, height
    assert breaks_an_ordering(pitched, [700, 640, 300])
    assert not breaks_an_ordering(pitched, [700, 704, 300]) and not breaks_an_ordering(pitched, [700, 700, 300])
    assert breaks_an_ordering([[352, 1088], [333, 1024]], [600, 700])  # the later call the smaller
    assert not breaks_an_ordering([[1000, 20], [64, 33]], [1, 5000])  # crossing options: no ordering to break
    assert not breaks_an_ordering(pitched, [700])  # sizes the run did not reach


def test_a_round_draw_is_a_multiple_of_a_large_power_of_two_and_no_declared_option(draws):
    """Red team round 240: a matmul fast path keyed on n % 64 == 0 was wrong at 12 of 781 evenly drawn sizes and
    at every power of two a caller runs. A round draw is a multiple of 2^k, k secret from 3 to the largest (round
    244: a transpose writing 128-column strips wherever cols % 32 == 0 met no round draw but multiples of 128)."""
    got = draws["round_matmul"]
    assert all(500 <= n <= 1280 and n % 8 == 0 and n not in (1024, 1001) for n in got)
    assert sum(n % 64 == 0 for n in got) > 0.4 * len(got)
    assert sum(n % 32 == 0 and n % 128 != 0 for n in got) > 0.1 * len(got)
    assert {512, 768, 1280} <= set(got)
    rows = draws["round_rows"]
    assert all(1024 <= n <= 5120 and n % 128 == 0 and n not in (4096, 2064) for n in rows), sorted(set(rows))
    assert any(n % 1024 for n in rows)
    assert draws["round_none"] == [0]  # no multiple of 2 in [3, 5] but the declared 4: none


def test_the_gate_asks_for_round_draws_besides_the_even_ones():
    from kernelloop.config import VerifySettings
    from kernelloop.verify.size_draws import KEEP_SHIFT, ROUND_SIZE, as_round, with_relation

    assert VerifySettings().round_size_draws == 3
    draw = (1 << 62) | ROUND_SIZE | (0b101 << KEEP_SHIFT) | 12345
    assert with_relation(draw, 0) & ROUND_SIZE == 0  # drawn evenly: bits 39-55 cleared
    assert (with_relation(draw, 0) >> KEEP_SHIFT) & 0xFFFF == 0
    assert as_round(draw) & ROUND_SIZE and (as_round(draw) >> 56) == 0 and (as_round(draw) >> KEEP_SHIFT) & 0xFFFF == 0
    assert (as_round(draw, 0b10) >> KEEP_SHIFT) & 0xFFFF == 0b10


def test_round_draws_keep_each_size_at_its_default_in_one_draw_while_the_others_move(draws):
    """Red team round 242: a softmax launched the preamble's ROWS blocks wherever cols == 2048 (its default), and no
    draw kept cols there while rows moved. The second round draw keeps a subset of the sizes at their defaults, the
    third its complement; the harness keeps a size where asked and moves it where not."""
    from kernelloop.verify.size_draws import round_keeps

    for count in (2, 3, 5):
        every = (1 << count) - 1
        for pick in range(40):
            first, second, third = round_keeps(count, 3, pick)
            assert first == 0 and 0 < second < every and third == every & ~second
    assert round_keeps(1, 3, 7) == [0, 0, 0]  # one size: keeping it would repeat the default experiment
    assert round_keeps(4, 1, 7) == [0]
    kept, moved = draws["keep_default"]
    assert kept == 2048 and moved == 512  # not kept: rows' 4096 / 8, the defaults' ratio (below)


def test_a_round_draw_carries_the_defaults_ratios_over_but_not_from_a_size_kept_at_its_default(draws):
    """Red team round 243: a softmax fast path wherever rows == 8 x cols (its defaults 16384 x 2048) met few
    draws, and a transpose path wherever rows == 8192 never did: a keep draw holding rows at 8192 copied it into
    cols (equal defaults), so no draw had rows at its default while cols moved."""
    assert draws["ratio_default"] == [512]
    moved = draws["kept_not_copied"][0]
    assert moved != 8192 and 2499 <= moved <= 10240


def test_a_round_draw_keeps_the_equalities_the_default_shows(draws):
    """Red team round 241: a transpose fast path keyed on rows == cols using the preamble's ROWS was right at the
    default 8192^2 and no draw made the 3001 x 4999 alternative square. The second side of a round draw is the
    first's where their defaults are equal (and it lies in the span); not where they differ or it does not."""
    assert draws["square_default"] == [4096, 0, 0]


def test_a_refused_round_draw_is_drawn_again_round_with_the_same_sizes_kept():
    """Red team round 243: where the baseline refused a round draw (a check of its own the draw broke), the
    redraw came back even, and keep draws lost about a tenth of their checks on such baselines."""
    from kernelloop.verify.size_draws import KEEP_SHIFT, ROUND_SIZE, as_round, redrawn, relation_of, with_relation

    refused = as_round(0x1234567, 0b10)
    again = redrawn(refused, 0x7654321, 5)
    assert again & ROUND_SIZE and (again >> KEEP_SHIFT) & 0xFFFF == 0b10 and relation_of(again) == 5
    even = redrawn(with_relation(0x1234567, 0), 0x7654321, 5)
    assert not even & ROUND_SIZE and (even >> KEEP_SHIFT) & 0xFFFF == 0


def test_a_draw_moves_each_size_alone_with_every_other_at_its_default(draws):
    """Red team round 243: a batched GEMM fast path keyed on M and N at their defaults (using the preamble's
    constants) while the batch moved met a kept subset in about a third of verifications. A draw per size moves
    that size alone, round, every other kept at its default: any set of sizes keyed on at their defaults meets
    the draw that moves one outside it. The harness keeps the others and moves the one (not copied from an equal
    default kept)."""
    from kernelloop.verify.size_draws import single_size_keeps

    n_moved, m_kept = draws["single_mover"]
    assert n_moved != 1024 and 166 <= n_moved <= 1280 and m_kept == 1024
    bmn = [[8, 3], [1024, 333], [1024, 333]]
    for pick in range(20):
        assert sorted(single_size_keeps(bmn, 8, pick, [0])) == [0b011, 0b101, 0b110]
    # masks the subset draws already hold are not drawn twice; two sizes: the subset and its complement are both
    assert sorted(single_size_keeps(bmn, 8, 3, [0, 0b101])) == [0b011, 0b110]
    assert single_size_keeps([[8, 3], [64, 33]], 8, 3, [0, 0b01, 0b10]) == []
    assert single_size_keeps([[4096, 333]], 8, 3, [0]) == []  # one size: the round draw keeping nothing moves it
    # more sizes than the cap: a secret choice of them, different picks moving different ones
    many = [[64 * (c + 1), 33] for c in range(10)]
    chosen = {tuple(single_size_keeps(many, 3, pick, [0])) for pick in range(30)}
    assert all(len(masks) == 3 for masks in chosen) and len(chosen) > 5
    assert all(bin(m).count("1") == 9 for masks in chosen for m in masks)


def test_the_planned_draws_move_each_size_alone_and_to_its_smallest():
    from kernelloop.config import VerifySettings
    from kernelloop.verify.size_draws import (
        EXPLICIT, EXPLICIT_VALUE, KEEP_SHIFT, ODD, ROUND_SIZE, explicit_call, planned_size_draws, size_draws)

    vs = VerifySettings()
    bmn = [[8, 3], [1024, 333], [1024, 333]]
    plan = planned_size_draws(12345, bmn, vs)
    keeps = [(d >> KEEP_SHIFT) & 0xFFFF for d in plan.draws]
    assert not any(d & (ROUND_SIZE | EXPLICIT) for d in plan.draws[:vs.size_draws])
    assert all(d & ROUND_SIZE for d in plan.draws[vs.size_draws:] if d not in plan.smallest)
    assert {0b011, 0b101, 0b110} <= set(keeps[vs.size_draws:])  # each size moved alone in one draw
    least = sorted(((d >> KEEP_SHIFT) & 0b111, d & EXPLICIT_VALUE, explicit_call(d)) for d in plan.smallest)
    # each to its smallest, the options' common factor: the others at their defaults, then drawn evenly
    assert least == [(0, 1, 0), (0, 1, 1), (0, 1, 2), (0b011, 1, 2), (0b101, 1, 1), (0b110, 1, 0)], least
    assert all(bool(d & ROUND_SIZE) == bool(d >> KEEP_SHIFT & 0b111) for d in plan.smallest)
    # beside the others drawn evenly, from a secret in the keep bits of calls the program does not make (round 247)
    salts = {d >> KEEP_SHIFT & 0xFFF8 for seed in range(20) for d in planned_size_draws(seed * 7919 + 1, bmn, vs).smallest
             if not d & ROUND_SIZE}
    assert len(salts) > 10
    assert all(d & EXPLICIT for d in plan.single)
    moved = [((d >> KEEP_SHIFT) & 0xFFFF, d & EXPLICIT_VALUE, bool(d & ODD)) for d in plan.single - plan.smallest]
    assert sorted(keep for keep, _, odd in moved if odd) == [0b011, 0b101, 0b110]  # every size, off round too
    assert {keep for keep, _, odd in moved if not odd} <= {0b011, 0b101, 0b110}  # (one a round keep draw holds)
    for keep, value, odd in moved:  # round (the batch's span [1, 10] holds 4 below its option 8), or odd; no option
        assert value % 2 == 1 if odd else value % (4 if keep == 0b110 else 8) == 0, moved
        assert value not in (8, 3, 1024, 333), moved
    assert plan.smallest <= plan.single and len(plan.spare) == vs.size_redraws
    assert len(plan.draws) == vs.size_draws + vs.round_size_draws + len(plan.single)
    assert not any(d & EXPLICIT for d in plan.draws[:vs.size_draws + vs.round_size_draws])
    assert plan.draws[0] & ((1 << 37) - 1) == size_draws(12345, 1)[0] & ((1 << 37) - 1)  # the verdict's one draw first
    none = planned_size_draws(12345, bmn, vs.model_copy(update={"single_size_draws": 0, "smallest_size_draws": 0}))
    assert not none.single and len(none.draws) == vs.size_draws + vs.round_size_draws


def test_a_size_moved_alone_keeps_the_relations_with_the_kept_defaults_once_refused():
    from kernelloop.verify.size_draws import (
        ALL_RELATIONS, EXPLICIT, EXPLICIT_VALUE, KEEP_ORDERINGS, KEEP_SHIFT, ODD, ROUND_SIZE, as_explicit, explicit_size, redraw, relation_of, smallest_size_calls, with_relation)

    head_split = [[4096, 3001], [768, 320], [12, 5]]
    alone = [explicit_size(head_split, 1, pick) for pick in range(300)]
    assert all(v is not None and 160 <= v <= 960 and v % 64 == 0 and v not in (768, 320) for v in alone)
    related = [explicit_size(head_split, 1, pick, related=True) for pick in range(300)]
    assert all(v % 192 == 0 and v != 768 for v in related), set(related)  # a multiple of 12 too
    # equal in every option: the only size keeping the relation is the default; none
    assert explicit_size([[1024, 333], [1024, 333]], 1, 5, related=True) is None
    # at least the rows (a leading dimension), where kept
    assert all(v >= 1024 for v in (explicit_size([[1024, 333], [1024, 337]], 1, p, related=True) for p in range(50)))
    refused = as_explicit(0x1234567, 0b101, 512, 1)
    assert refused & EXPLICIT and refused & ROUND_SIZE and refused & EXPLICIT_VALUE == 512
    again = redraw(refused, 0x7654321, 1, head_split)
    assert again & EXPLICIT and (again >> KEEP_SHIFT) & 0xFFFF == 0b101 and (again & EXPLICIT_VALUE) % 192 == 0
    assert relation_of(again) == ALL_RELATIONS | KEEP_ORDERINGS
    third = redraw(again, 0x1111111, 1, head_split)  # refused again: drawn by the harness, round, heads kept
    assert not third & EXPLICIT and third & ROUND_SIZE and (third >> KEEP_SHIFT) & 0xFFFF == 0b101
    assert not with_relation(refused, 0) & EXPLICIT
    odd = redraw(as_explicit(0x1234567, 0b101, 448, 1, odd=True), 0x7654321, 1, head_split)  # 448 = 7 x 64
    assert odd & ODD and (odd & EXPLICIT_VALUE) == 960  # an odd multiple of 64 that 12 divides, past the default
    assert smallest_size_calls([[1, 5], [4096, 3001], [64, 32], [0, 1]], 8, 3) == [1, 2]
    assert len(smallest_size_calls([[64 * (c + 1), 33] for c in range(10)], 4, 3)) == 4


DRAWN_SIZES = Path(__file__).parent / "harness" / "drawn_sizes.cu"


@pytest.fixture(scope="module")
def harness_size(tmp_path_factory):
    """The harness's own size() on the host, answering one draw at a time (tests/harness/drawn_sizes.cu)."""
    binary = tmp_path_factory.mktemp("drawn") / "drawn_sizes"
    built = subprocess.run(["nvcc", "-std=c++17", "-I", str(harness_include_dir()), str(DRAWN_SIZES), "-o", str(binary)],
                           capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr[-2000:]
    running: dict[tuple, subprocess.Popen] = {}

    def size(options: list[list[int]], draw: int) -> list[int]:
        key = tuple(map(tuple, options))
        if key not in running:
            running[key] = subprocess.Popen([str(binary), *(",".join(map(str, o)) for o in options)],
                                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        proc = running[key]
        proc.stdin.write(f"{draw}\n")
        proc.stdin.flush()
        return [int(w) for w in proc.stdout.readline().split()]

    yield size
    for proc in running.values():
        proc.stdin.close()
        proc.wait(timeout=10)


def simulate_verifications(harness_size, options, takes, count: int, seed: int = 1):
    """COUNT verifications' drawn sizes as the gate makes them (planned_size_draws, then a refused draw drawn
    again with redrawn and next_relation while spares last), the baseline taking the sizes TAKES accepts; per
    verification the sizes taken, how many draws went unchecked, and whether verify would stop (spares spent
    with no drawn size taken)."""
    import random

    from kernelloop.config import VerifySettings
    from kernelloop.verify.size_draws import (
        next_relation, planned_size_draws, redraw, relation_of, relation_order, size_orderings, size_relations)

    vs, rng, outcomes = VerifySettings(), random.Random(seed), []
    order = relation_order(size_relations(options), size_orderings(options))
    for _ in range(count):
        plan = planned_size_draws(rng.getrandbits(63) | 1, options, vs)
        queue, spare, kept, tried, taken, unchecked, stopped = list(plan.draws), list(plan.spare), 0, 0, [], 0, False
        for draw in queue:  # grows while walked, as the gate's experiments do
            sizes = harness_size(options, draw)
            if takes(*sizes):
                taken.append(sizes)
                kept = relation_of(draw) or kept
            elif spare:
                following, tried = next_relation(relation_of(draw), kept, order, tried)
                queue.append(redraw(draw, spare.pop(0), following, options))
            elif taken:
                unchecked += 1
            else:
                stopped = True
                break
        outcomes.append((taken, unchecked, stopped))
    return outcomes


HEAD_SPLIT = [[4096, 3001], [768, 320], [12, 5]]  # tokens, hidden, heads: the baseline checks hidden % heads


def test_a_refused_keep_draw_is_drawn_again_with_the_kept_size_at_its_default(harness_size):
    """Red team round 244: a head split with a fast path wherever heads == 12 (the default) that used the
    preamble's HIDDEN: the baseline's own hidden % heads check refused the draws holding heads at 12 while hidden
    moved (round draws are multiples of 2^k, 768 is 3 x 256), and their redraws kept a relation that drew every size
    anew, heads too. Now a kept size stays at its default in every redraw, and the moving one is drawn round again
    until the baseline takes it."""
    outcomes = simulate_verifications(harness_size, HEAD_SPLIT, lambda t, h, n: h % n == 0, 200)
    caught = sum(any(n == 12 and h != 768 for _, h, n in taken) for taken, _, _ in outcomes)
    assert caught >= 0.97 * len(outcomes), caught
    assert not any(stopped for _, _, stopped in outcomes)


def test_chained_relations_do_not_stop_verify(harness_size):
    """Red team round 244: kv_heads divides heads divides hidden (grouped-query attention), every link shown by the
    declared options; the relation-keeping redraws could corner themselves and spend every spare, and verify
    stopped asking for alternatives it already had. Draws left over once spares are spent are named in a note."""
    options = HEAD_SPLIT + [[4, 5]]
    outcomes = simulate_verifications(harness_size, options, lambda t, h, n, kv: h % n == 0 and n % kv == 0, 200)
    assert not any(stopped for _, _, stopped in outcomes)
    assert sum(len(taken) for taken, _, _ in outcomes) > 5 * len(outcomes)


def test_a_smallest_draw_moves_one_size_to_its_common_factor(harness_size):
    """Red team round 244: one token, one row, batch 1 came only where declared (a linear layer whose m == 1 path
    dropped the bias passed every draw); each size goes to its smallest alone, the others at their defaults."""
    from kernelloop.config import VerifySettings
    from kernelloop.verify.size_draws import planned_size_draws

    from kernelloop.verify.size_draws import KEEP_SHIFT

    linear = [[4096, 3001], [1024, 1000], [1024, 999]]
    plan = planned_size_draws(987654321, linear, VerifySettings())
    got = sorted(harness_size(linear, d) for d in plan.smallest if d >> KEEP_SHIFT & 0b111)
    assert got == [[1, 1024, 1024], [4096, 8, 1024], [4096, 1024, 1]]  # N's options share 8
    outcomes = simulate_verifications(harness_size, linear, lambda m, n, k: True, 100)
    assert all([1, 1024, 1024] in taken for taken, _, _ in outcomes)
    # round 246: m == 1 came only beside n and k at their defaults; a one-token path wrong where k is off every
    # multiple of 8 (a tail past whole vectors) met no draw. Each size at its smallest is also drawn beside the
    # others drawn evenly.
    caught = sum(any(m == 1 and k % 8 for m, n, k in taken) for taken, _, _ in outcomes)
    assert caught >= 0.8 * len(outcomes), caught  # k drawn evenly: off every multiple of 8 in about 7 of 8
    # round 247: the sizes beside m == 1 differ from one verification to the next (a one-token path capping k at
    # 1024 is met where a drawn k lies above it, about a third of verifications, not never)
    beside = {(n, k) for taken, _, _ in outcomes for m, n, k in taken if m == 1 and (n, k) != (1024, 1024)}
    assert len(beside) > 50
    assert sum(any(m == 1 and k > 1024 for m, n, k in taken) for taken, _, _ in outcomes) > 0.2 * len(outcomes)


def test_a_size_moved_alone_also_meets_sizes_off_every_round_multiple(harness_size):
    """Red team round 245: at the default M x N a batch processed in tiles of 8 dropped the last batch % 8 matrices;
    every draw moving the batch alone was round (or its smallest, 1), so it passed every verification. Each size
    moved alone is also moved to an odd multiple of its common factor."""
    bmn = [[8, 3], [1024, 333], [1024, 333]]
    outcomes = simulate_verifications(harness_size, bmn, lambda b, m, n: True, 200)
    caught = sum(any(b > 8 and b % 8 and (m, n) == (1024, 1024) for b, m, n in taken) for taken, _, _ in outcomes)
    assert caught == len(outcomes), caught


def test_a_run_is_at_a_smallest_wherever_a_size_is_its_options_common_factor():
    """Red team round 250: a declared m == 1 (`h.size({4096, 1})`) was held to another size's limit where the same
    size drawn was timed as a size's smallest; it is decided from the run's sizes, however they came."""
    from kernelloop.verify.size_draws import at_a_smallest
    assert at_a_smallest([[4096, 1]], [1])  # declared
    assert at_a_smallest([[64, 32], [4096, 3001]], [64, 1])  # drawn: the second call at its common factor
    assert not at_a_smallest([[4096, 1]], [4096])
    assert not at_a_smallest([[64, 33]], [33])  # an alternative, not the common factor (1)
    assert not at_a_smallest([[8]], [8]) and not at_a_smallest([], [])


def test_a_flag_is_drawn_from_its_declared_values_at_drawn_sizes(harness_size):
    """Red team round 275: init's `h.size<bool>({true, false})` (a PyTorch launcher's align_corners) ran `false` at
    the declared alternative size only: a drawn size spans [1, ...], so a candidate that ignored the flag wherever
    n % 4 == 0 passed. A size() whose options include a value below 1 (a flag, a mode; a bool) is drawn from its
    options, evenly, and the verifier plans each value beside the defaults, round sizes and even ones."""
    outcomes = simulate_verifications(harness_size, [[1048576, 6000011], [1, 0]], lambda n, flag: True, 100)
    drawn = [sizes for taken, _, _ in outcomes for sizes in taken]
    flags = [flag for _, flag in drawn]
    assert set(flags) == {0, 1} and min(flags.count(0), flags.count(1)) >= 0.3 * len(flags), flags
    # round 276: in every verification, not by chance: the flag off at the default size, beside a round size (a
    # multiple of 4: where round 275's candidate ignored it)
    for taken, _, _ in outcomes:
        assert [1048576, 0] in taken, taken
        assert any(flag == 0 and n % 4 == 0 and n != 1048576 for n, flag in taken), taken
