"""Red team round 319 (tools.ptx_writes after round 318's fix).

Closed by class: ptxas needs no space between an opcode and an operand that starts with `[`, `%` or
`{` (`st.f32[%rd12+12],t;`, `mov.b64%9,%1;` in inline assembly), and the reading split each statement
at its first space, so the glued store was an opcode without operands and the glued move moved
nothing, in both users. Each statement is now split at the end of its opcode, read as ptxas reads
one; a statement that starts with no opcode makes the reading fail closed.
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

ROUND = FIXTURES / "redteam" / "round319"


def _profile(name: str, tmp_path):
    return ptx_profile(ROUND / f"{name}.cu", tmp_path)


@pytest.mark.parametrize("name", ["glued_store_counter", "glued_move_counter"])
def test_a_counter_written_by_a_glued_instruction_is_refused(name, tmp_path):
    base, cand = _profile("table_base", tmp_path), _profile(name, tmp_path)
    assert [v.rule for v in compare_profiles(base, cand) if v.rule == "device-static"]


def test_init_refuses_a_gain_set_by_a_glued_store():
    name = "init_glued_store_gain.cu"
    source = (ROUND / name).read_text()
    result = generate(source, InitSpec(values={"n": ["4096", "3001"]}, roles={"y": "output", "x": "input"},
                                       launcher="scale"), name)
    with pytest.raises(InputError, match=r"gain_slot\(\)::gain, device memory that device code writes"):
        refuse_state_set_by_dropped_code(source, result, arch="sm_90", cache_dir=shared_cache_dir(),
                                         generated=result.program)
