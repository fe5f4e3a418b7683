"""Red team round 131 (tests/fixtures/redteam/round131/): (a) after one drawn size the baseline
refused, every later draw kept every relation the declared sizes showed, chance ones too: a
candidate wrong exactly where a chance relation breaks (`cols | rows` with its own check on `group
| cols`) was accepted for 282 of 400 first draws (host replay of the gate and the harness); now a
redraw keeps one relation at a time; (b) a raw string holding a line splice: nvcc joins it, the
standard and every reader keep it, so a `break` after it was built by nvcc and read as string data
by the optimizer (the row tier's wrong rewrite); now such a program is not read, and a candidate
holding one is refused by the policy."""

from __future__ import annotations

import random
import shutil
import subprocess

import pytest

from kernelloop.optimizers.base import NoMoreCandidates
from kernelloop.program.phases import spliced_raw_string
from kernelloop.verify.size_draws import (
    next_relation, relation_of, relation_order, size_draws, size_relations, with_relation)
from kernelloop.verify.policy import scan_source

from .conftest import FIXTURES, ROOT
from .test_redteam_round109 import _first_proposal

ROUND = FIXTURES / "redteam" / "round131"
PAIR = ROUND / "a_one_refusal_relates_every_later_draw"


def test_a_raw_string_holding_a_splice_makes_the_program_unread():
    with pytest.raises(NoMoreCandidates) as caught:
        _first_proposal((ROUND / "b_raw_string_splice_nvcc_joins" / "baseline.cu").read_text())
    assert "raw string holding a line splice" in str(caught.value), str(caught.value)


@pytest.mark.parametrize("text, spliced", [
    ('x = R"(a\\\nb)";', True),
    ('x = R"d(a\\  \nb)d";', True),
    ('x = R"(a\nb)";', False),                # a raw string over lines, no splice
    ('x = KL_R"(a\\\nb)";', False),           # not a raw string: a name, then a plain string
    ('x = "a"; // R"(\\\n', False),
])
def test_a_spliced_raw_string_is_found(text, spliced):
    assert (spliced_raw_string(text) is not None) == spliced


def test_the_policy_refuses_a_candidate_holding_a_spliced_raw_string():
    found = scan_source('__global__ void k(int* p) { const char* s = R"(x\\\n)"; p[0] = 1; }\n')
    assert any(v.rule == "character" and "raw string" in v.detail for v in found), found


def test_the_relations_are_tried_one_at_a_time():
    order = relation_order(3)
    assert order == [1, 2, 3, 32, 33, 34, 1, 2, 3, 63]  # alone, all but one (round 132), alone, all
    assert next_relation(0, 0, order, 0) == (1, 1)      # a size drawn on its own refused: the first
    assert next_relation(1, 0, order, 1) == (2, 2)      # that refused too: the next
    assert next_relation(0, 3, order, 3) == (3, 3)      # the one the baseline last ran at, first
    assert next_relation(63, 3, order, 10) == (1, 11)   # round again
    assert relation_order(0) == [63]
    assert relation_order(2) == [1, 2, 1, 2, 63]


@pytest.mark.nvcc
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_the_pair_wrong_where_a_chance_relation_breaks_is_caught(tmp_path):
    """The helper's pair walked through the gate's own draw and relation choices and the harness's
    own draw (replay/sim_after.cu): the baseline refuses where the group count does not divide
    cols; the candidate is wrong where cols does not divide rows. Before: 282 of 400 accepted."""
    binary = tmp_path / "sim"
    built = subprocess.run(["nvcc", "-std=c++17", "-I", str(ROOT / "src" / "kernelloop" / "harness"),
                            str(PAIR / "replay" / "sim_after.cu"), "-o", str(binary)],
                           capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr[-2000:]
    cache: dict[int, tuple[int, ...]] = {}

    def sizes(draws: list[int]) -> None:
        missing = [d for d in draws if d not in cache]
        if missing:
            out = subprocess.run([str(binary), *map(str, missing)], capture_output=True, text=True).stdout.split("\n")
            for d, line in zip(missing, out):
                cache[d] = tuple(map(int, line.split()))

    order = relation_order(size_relations([[8192, 1000], [256, 250], [32, 50]]))

    def walk(first: int, count: int = 2, cap: int = 12) -> str:
        draws = size_draws(first, count + cap)
        queue, redraws = [with_relation(d, 0) for d in draws[:count]], draws[count:]
        kept = tried = k = 0
        while k < len(queue):
            draw = queue[k]
            k += 1
            sizes([draw])
            rows, cols, group = cache[draw]
            if cols % group:  # the baseline refuses it
                if not redraws:
                    return "input-error"
                following, tried = next_relation(relation_of(draw), kept, order, tried)
                queue.append(with_relation(redraws.pop(0), following))
                continue
            kept = relation_of(draw) or kept
            if rows % cols:
                return "caught"
        return "accepted"

    rng = random.Random(131)
    outcomes = [walk(rng.getrandbits(62) | 1) for _ in range(400)]
    # measured: 30 accepted, 350 caught, 20 stopped by the baseline (was 282 accepted); the rest is
    # the known limit of drawn sizes that keep a relation (docs/verifier.md)
    assert outcomes.count("accepted") <= 40, {o: outcomes.count(o) for o in set(outcomes)}
    assert outcomes.count("caught") >= 320, {o: outcomes.count(o) for o in set(outcomes)}
