"""Red team round 317 (tools.ptx_writes after round 316's fix: addresses followed into the module's
functions and back).

Closed by class: (1) the "distance of two addresses in one object" rule trusted a value merged from
two call sites (one root passed to both of a helper's parameters from two calls, `p - q` then read as
no address, and `anchor + (p - q)` stored through): the distance now needs both to be addresses into
one root on every path (a must-analysis); (2) a callee read its parameter through the parameter's own
address (`mov.u64 t, f_param_0; ld.local.u64 [t]` in inline assembly): a parameter named anywhere but
as the place an `ld.param` reads hands its addresses on as written; (3) an indirect call shared a call
block's parameters with a direct call to a helper that only reads: a call through a register counts
as a call no reading can follow. False refusal fixed: an address handed down three calls and returned
up again ran past a cap on the rounds and failed closed; the rounds now run to their fixed point.
Both users are tested: the verifier's `device-static` rule and init's guard.
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

ROUND = FIXTURES / "redteam" / "round317"
SPEC = InitSpec(values={"n": ["4096", "3001"]}, roles={"y": "output", "x": "input"}, launcher="scale")


def _profile(name: str, tmp_path):
    return ptx_profile(ROUND / f"{name}.cu", tmp_path)


@pytest.mark.parametrize("name", ["b1_distance_two_calls", "b2_param_address_read", "b3_indirect_call_shared_param"])
def test_a_counter_kept_in_the_baselines_static_is_refused(name, tmp_path):
    base, cand = _profile("state_ptr_base", tmp_path), _profile(name, tmp_path)
    assert "device_static_written" not in base.classes
    assert [v.rule for v in compare_profiles(base, cand) if v.rule == "device-static"]


def test_an_address_handed_down_three_calls_and_back_is_only_read(tmp_path):
    base, cand = _profile("fr1_chain_base", tmp_path), _profile("fr1_chain_three_calls", tmp_path)
    assert "device_static_written" not in cand.classes


def _init(name: str) -> None:
    source = (ROUND / name).read_text()
    result = generate(source, SPEC, name)
    refuse_state_set_by_dropped_code(source, result, arch="sm_90", cache_dir=shared_cache_dir(),
                                     generated=result.program)


def test_init_refuses_the_merged_distance():
    with pytest.raises(InputError, match="device memory that device code writes"):
        _init("init_b1_distance_two_calls.cu")


def test_init_keeps_a_table_handed_down_three_calls():
    _init("init_fr1_chain_three_calls.cu")
