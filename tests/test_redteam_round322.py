"""Red team round 322 (tools.ptx_writes on the session's final code).

Closed by class: an address parked in local memory is harmless only where nothing reads local memory
back, and local memory was known only as nvcc's depot: an asm statement's own `.local` slot, read
back through `cvta.local` and a generic load, returned the static's address unseen, in both users.
Every `.local` a body declares is now local memory.
"""

from __future__ import annotations

import pytest

from kernelloop.errors import InputError
from kernelloop.init_state import refuse_state_set_by_dropped_code
from kernelloop.program.init import InitSpec, generate
from kernelloop.verify.precision import compare_profiles

from .conftest import FIXTURES, shared_cache_dir
from .redteam_statics import ptx_profile

pytestmark = pytest.mark.nvcc

ROUND = FIXTURES / "redteam" / "round322"


def _profile(name: str, tmp_path):
    return ptx_profile(ROUND / f"{name}.cu", tmp_path)


def test_a_counter_reached_through_an_asm_local_slot_is_refused(tmp_path):
    base, cand = _profile("table_base", tmp_path), _profile("asm_local_slot_counter", tmp_path)
    assert [v.rule for v in compare_profiles(base, cand) if v.rule == "device-static"]


def test_init_refuses_a_gain_set_through_an_asm_local_slot():
    name = "init_asm_local_slot_gain.cu"
    source = (ROUND / name).read_text()
    result = generate(source, InitSpec(values={"n": ["4096", "3001"]}, roles={"y": "output", "x": "input"},
                                       launcher="scale"), name)
    with pytest.raises(InputError, match=r"output_gain\(\)::gain, device memory that device code writes"):
        refuse_state_set_by_dropped_code(source, result, arch="sm_90", cache_dir=shared_cache_dir(),
                                         generated=result.program)
