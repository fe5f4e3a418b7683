"""Red team round 321 (tools.ptx_writes after round 320's fix).

Closed by class: a call that lists one parameter twice (`call.uni f, (p, p)` in inline assembly)
hands the address to two of the callee's parameters, and only the first position was followed, so
a store through the second was unseen, in both users. A parameter a call lists more than once is
now a store like any other (written).
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

ROUND = FIXTURES / "redteam" / "round321"


def _profile(name: str, tmp_path):
    return ptx_profile(ROUND / f"{name}.cu", tmp_path)


def test_a_counter_written_through_a_parameter_passed_twice_is_refused(tmp_path):
    base, cand = _profile("table_base", tmp_path), _profile("param_twice_counter", tmp_path)
    assert [v.rule for v in compare_profiles(base, cand) if v.rule == "device-static"]


def test_init_refuses_a_gain_set_through_a_parameter_passed_twice():
    name = "init_param_twice_gain.cu"
    source = (ROUND / name).read_text()
    result = generate(source, InitSpec(values={"n": ["4096", "3001"]}, roles={"y": "output", "x": "input"},
                                       launcher="scale"), name)
    with pytest.raises(InputError, match=r"output_gain\(\)::gain, device memory that device code writes"):
        refuse_state_set_by_dropped_code(source, result, arch="sm_90", cache_dir=shared_cache_dir(),
                                         generated=result.program)
