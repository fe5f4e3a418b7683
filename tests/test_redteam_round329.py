"""Red team round 329 (tools.ptx_writes on round 328's fix).

Closed by class, in both users:
- Text order stood in for the paths: a jump around a register's only definition (`bra U; D: mov t, 0; bra E;
  U: mov r, t; bra D;`) read it undefined, and ptxas passed the static's address left in its register. Now a
  must-analysis over the body's branches: a read needs a definition on every path to it.
- A call parameter counted as filled by any `st.param` naming it: one field of a struct argument filled (the
  pointer field never set) passed the static's address in the unfilled bytes. Now every byte the callee reads
  (its `ld.param`s; every byte for a function the module does not define) must be filled on every path to the
  call, and a return value's bytes its callers read on every path to `ret`, not a struct's padding.
- A store counted as a park in local memory wherever a local address might flow into its place: a local slot's
  zero distance added to a shared variable's address stored the static's address into shared memory. Now only a
  `st.local`, or a place that is a local root moved or offset by numbers alone, parks.
"""

from __future__ import annotations

import pytest

from kernelloop.errors import InputError
from kernelloop.verify.precision import compare_profiles

from .conftest import FIXTURES
from .redteam_statics import init_guard, ptx_profile

pytestmark = pytest.mark.nvcc

ROUND = FIXTURES / "redteam" / "round329"


def _static_rules(name: str, tmp_path) -> list[str]:
    base, cand = ptx_profile(ROUND / "table_base.cu", tmp_path), ptx_profile(ROUND / f"{name}.cu", tmp_path)
    return [v.rule for v in compare_profiles(base, cand) if v.rule == "device-static"]


@pytest.mark.parametrize("name", ["jump_counter", "partial_counter", "fakepark_counter"])
def test_a_counter_kept_through_a_jump_a_part_filled_argument_or_a_false_park_is_refused(name, tmp_path):
    assert _static_rules(name, tmp_path)


def test_a_padded_struct_returned_and_a_struct_argument_read_in_part_are_no_writes(tmp_path):
    # nvcc fills a returned struct's fields, not its padding, and a struct argument's fields the callee reads
    profile = ptx_profile(ROUND / "honest_padded_struct.cu", tmp_path)
    assert profile.classes.get("device_static") and not profile.classes.get("device_static_written")


def test_init_refuses_a_gain_written_through_a_register_a_jump_leaves_undefined():
    with pytest.raises(InputError, match=r"gain_slot\(\)::gain, device memory that device code writes"):
        init_guard(ROUND / "init_jump_gain.cu")
