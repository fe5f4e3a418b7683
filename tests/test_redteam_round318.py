"""Red team round 318 (tools.ptx_writes after round 317's fix).

Closed by class: PTX names a register `%` and digits (`%9`: `{ .reg .b64 %%9; mov.b64 %%9, %0; st.f32
[%%9], %1; }` in inline assembly), and the reading named identifiers without their `%`, so an address
moved into `%9` derived nothing and the store through it was unseen, in the verifier's scan (a counter
kept in the baseline's own constant table) and in init's guard (a set-up kernel's gain). The reading
now names every PTX identifier, a register's `%` kept.
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

ROUND = FIXTURES / "redteam" / "round318"


def _profile(name: str, tmp_path):
    return ptx_profile(ROUND / f"{name}.cu", tmp_path)


def test_a_counter_stored_through_a_digit_register_is_refused(tmp_path):
    base, cand = _profile("table_base", tmp_path), _profile("digit_register_counter", tmp_path)
    assert [v.rule for v in compare_profiles(base, cand) if v.rule == "device-static"]


def test_init_refuses_a_gain_set_through_a_digit_register():
    name = "init_digit_register_gain.cu"
    source = (ROUND / name).read_text()
    result = generate(source, InitSpec(values={"n": ["4096", "3001"]}, roles={"y": "output", "x": "input"},
                                       launcher="scale"), name)
    with pytest.raises(InputError, match=r"output_gain\(\)::gain, device memory that device code writes"):
        refuse_state_set_by_dropped_code(source, result, arch="sm_90", cache_dir=shared_cache_dir(),
                                         generated=result.program)
