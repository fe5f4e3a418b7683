"""Red team round 333 (tools.ptx_writes on round 332's correlated reading): two ways closed by class, two false
refusals fixed, two recorded.

Closed: predicates read as one value that are not. (1) `setp.ne.and.s32 p|q, n, 0, c` was read as q = !p, but with
a combining operation both are false where c is (`.or`: both true); the pointer was set under p and under q, so
under neither, and ptxas's `SEL` left the static's address in the argument registers of the call that wrote
through it. (2) Two `setp`s with one first destination set twice were keyed by that register's name, so their
second destinations, comparing other values, were read as one. Now a comparison is keyed by the values it
compares, or by the statement that makes it (set once, outside every loop); a `|` second destination is the
opposite only without `.and`/`.or`; a guard decides a branch only where its predicate is defined on every path
there, and a `not.pred` only of a predicate defined where it reads it (`early_guard.cu`, `early_not.cu`: holes in
the reading ptxas did not turn into writes). A predicate computed from an undefined value counts wherever it
guards a statement (its bits rebuilt by branches or predicated moves).

False refusals fixed: a value loaded under a two-part condition (`and.pred`, then `not.pred`) and used under it
after a barrier; a value computed where `x > 0` (`setp.leu.f32` around it) and kept where `x > 0` (`setp.gt.f32`),
a float comparison and its unordered complement. An undefined value now counts only where it reaches an address,
a store, a call, a return or a guard, not for its width alone. Recorded: a 2-D bounds check nvcc builds as a
predicate set on two paths (`mov.pred` twice), and a running maximum set on a loop's first iteration.
"""

from __future__ import annotations

import pytest

from kernelloop.verify.precision import compare_profiles

from .conftest import FIXTURES
from .redteam_statics import ptx_profile

pytestmark = pytest.mark.nvcc

ROUND = FIXTURES / "redteam" / "round333"
BASE = FIXTURES / "redteam" / "round331" / "table_base.cu"


@pytest.mark.parametrize("attack", ["andpair_counter.cu", "orpair_counter.cu", "sameword_counter.cu",
                                    "early_guard.cu", "early_not.cu"])
def test_predicates_that_are_not_one_value_are_not_read_as_one(tmp_path, attack):
    base, cand = ptx_profile(BASE, tmp_path), ptx_profile(ROUND / attack, tmp_path)
    assert [v.rule for v in compare_profiles(base, cand) if v.rule == "device-static"]


@pytest.mark.parametrize("honest", ["honest_and_cond.cu", "honest_float_cond.cu"])
def test_a_value_set_and_used_under_one_condition_is_not_refused(tmp_path, honest):
    assert not ptx_profile(ROUND / honest, tmp_path).classes.get("device_static_written")


@pytest.mark.parametrize("honest", ["honest_two_index.cu", "honest_first_iteration.cu"])
def test_the_recorded_false_refusals_still_refuse(tmp_path, honest):
    # if this starts passing, the docs' residual list must change with it
    assert ptx_profile(ROUND / honest, tmp_path).classes.get("device_static_written")
