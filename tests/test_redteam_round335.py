"""Red team round 335 (tools.ptx_writes on round 334's fix): two ways closed by class, two false refusals recorded.

Closed: an undefined value's bits passed on where the reading did not look. (1) A barrier's reduction spelled
`bar.cta.red` or `barrier.cta.red` (PTX's optional `.cta`, `.aligned`) read as defining nothing and reading no other
thread: each bit of an undefined register went through `bar.cta.red.or.pred` and was rebuilt under the predicate
into the low half of a pointer a call wrote through (ptxas's `SEL` had left the static's low half in that
register). Now every barrier reduction, however spelled, defines its result and reads other threads. (2) The carry
flag: `add.cc` of a shifted undefined value, then `addc bit, 0, 0` (numbers only) rebuilt the value bit by bit in
one thread. Now the carry flag is a register of its own, set by every `.cc` instruction and read by `addc`/`subc`/
`madc`.

False refusals recorded: a value set on a loop's first iteration and read on later ones under a comparison of the
loop counter (a running previous element; the comparison changes from iteration to iteration, so it is not read),
and a vote or `__syncthreads_count` over `in && a > 0` with `a` loaded only where `in` (LLVM computes `a > 0`
unconditionally and combines it with `and.pred`).
"""

from __future__ import annotations

import pytest

from kernelloop.verify.precision import compare_profiles

from .conftest import FIXTURES
from .redteam_statics import ptx_profile

pytestmark = pytest.mark.nvcc

ROUND = FIXTURES / "redteam" / "round335"
BASE = FIXTURES / "redteam" / "round331" / "table_base.cu"


@pytest.mark.parametrize("attack", ["barred_counter.cu", "barrier_cta_counter.cu", "carry_counter.cu"])
def test_undefined_bits_passed_on_by_a_barrier_reduction_or_the_carry_flag_are_refused(tmp_path, attack):
    base, cand = ptx_profile(BASE, tmp_path), ptx_profile(ROUND / attack, tmp_path)
    assert [v.rule for v in compare_profiles(base, cand) if v.rule == "device-static"]


@pytest.mark.parametrize("honest", ["honest_switch.cu", "honest_int128.cu"])
def test_a_switch_and_wide_integer_arithmetic_are_not_refused(tmp_path, honest):
    assert not ptx_profile(ROUND / honest, tmp_path).classes.get("device_static_written")


@pytest.mark.parametrize("honest", ["honest_loop_carry.cu", "honest_sync_count.cu"])
def test_the_recorded_false_refusals_still_refuse(tmp_path, honest):
    # if this starts passing, the docs' residual list must change with it
    assert ptx_profile(ROUND / honest, tmp_path).classes.get("device_static_written")
