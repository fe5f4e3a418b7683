"""Red team round 330 (tools.ptx_writes on round 329's fix).

Closed by class:
- A park needs local memory itself: a `cvta.local` of any value (the window's base subtracted from an output's
  address and converted back) and a register the asm declares as `%SP` read as local addresses, and a store of the
  static's address into an output passed as a park. Now a place is local only where it comes from nvcc's depot, a
  `.local`, `stacksave` or `alloca`, by moves, `cvta` and numbers.
- Registers the reading did not list: a vector register's lanes (`.reg .v2 .b64 v`: `v.x` defined, `v.y` read) and
  a range past the names it expands (`.reg .b64 t<70000>`) now make the body unreadable (every static written).
- A call through a register (`call %fp, (a0, a1), proto`) hid its unfilled arguments; now every byte of them must
  be filled, and the register it calls through must be defined.
False refusals fixed (round 329's must-analysis): `%tid.x` no longer names an asm register `x`; and a value the PTX
leaves undefined on some path counts only where it may carry an address (64 bits wide, an address, handed to a
call, returned, stored 8 bytes at a time), not LLVM's undefined branch value that a `selp` discards
(`float a; if (c) a = f(); ... if (c) r += a;`).
"""

from __future__ import annotations

import pytest

from kernelloop.verify.precision import compare_profiles

from .conftest import FIXTURES
from .redteam_statics import ptx_profile

pytestmark = pytest.mark.nvcc

ROUND = FIXTURES / "redteam" / "round330"


@pytest.mark.parametrize("name", ["cvtapark_counter", "spname_counter", "vecreg_counter", "range_counter",
                                  "indirect_counter"])
def test_a_counter_through_a_false_local_address_an_unlisted_register_or_an_indirect_call_is_refused(name, tmp_path):
    base, cand = ptx_profile(ROUND / "table_base.cu", tmp_path), ptx_profile(ROUND / f"{name}.cu", tmp_path)
    assert [v.rule for v in compare_profiles(base, cand) if v.rule == "device-static"]


@pytest.mark.parametrize("name", ["honest_asm_x", "honest_corr"])
def test_an_asm_register_named_like_a_component_and_an_undefined_branch_value_are_no_writes(name, tmp_path):
    profile = ptx_profile(ROUND / f"{name}.cu", tmp_path)
    assert profile.classes.get("device_static") and not profile.classes.get("device_static_written")
