"""Red team round 320 (tools.ptx_writes after round 319's fix).

Closed by class: a callee's parameters were found by searching the header for the function's name,
and an `extern "C"` function named `f` is found inside `.func`, so every parameter was read one
position off (the return slot first): a static handed as argument 1 was followed into a parameter
that is only read, while the one written through got nothing, in both users; and the same shift
made an honest table handed to `f` count as written. The header is now read as a header (kind,
return list, name, parameters), and an argument past a callee's parameters counts as written.
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

ROUND = FIXTURES / "redteam" / "round320"


def _profile(name: str, tmp_path):
    return ptx_profile(ROUND / f"{name}.cu", tmp_path)


def test_a_counter_written_through_a_function_named_like_part_of_func_is_refused(tmp_path):
    base, cand = _profile("table_base", tmp_path), _profile("name_in_func_counter", tmp_path)
    assert [v.rule for v in compare_profiles(base, cand) if v.rule == "device-static"]


def test_a_table_handed_to_f_is_only_read(tmp_path):
    assert "device_static_written" not in _profile("fr1_table_to_f", tmp_path).classes


def test_init_refuses_a_gain_set_through_f():
    name = "init_name_in_func_gain.cu"
    source = (ROUND / name).read_text()
    result = generate(source, InitSpec(values={"n": ["4096", "3001"]}, roles={"y": "output", "x": "input"},
                                       launcher="scale"), name)
    with pytest.raises(InputError, match=r"gain_slot\(\)::gain, device memory that device code writes"):
        refuse_state_set_by_dropped_code(source, result, arch="sm_90", cache_dir=shared_cache_dir(),
                                         generated=result.program)
