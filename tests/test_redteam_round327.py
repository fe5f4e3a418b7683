"""Red team round 327 (tools.ptx_writes on round 326's fix).

Closed by class, in both users (init's guard and the verifier's `device-static` rule): a value the PTX leaves
undefined is whatever ptxas's register holds. A call argument no `st.param` filled arrived in the register a read of
the static had just used, and the callee wrote through it (plain C++: `float* q; poke(q, g);`, or an empty asm's
output). Now a register read that nothing in the function defines, a call parameter its block never fills before
the call, or a declared return value never filled counts every static written. Left (recorded): a definition on
some paths only (a predicated move), which this reading counts as a definition.
"""

from __future__ import annotations

import pytest

from kernelloop.errors import InputError
from kernelloop.init_state import refuse_state_set_by_dropped_code
from kernelloop.program.init import generate
from kernelloop.verify.precision import compare_profiles

from .conftest import FIXTURES, shared_cache_dir
from .redteam_statics import SCALE_SPEC, ptx_profile

pytestmark = pytest.mark.nvcc

ROUND = FIXTURES / "redteam" / "round327"


def _profile(name: str, tmp_path):
    return ptx_profile(ROUND / f"{name}.cu", tmp_path)


def test_a_counter_kept_through_an_argument_never_stored_is_refused(tmp_path):
    base, cand = _profile("table_base", tmp_path), _profile("undef_counter", tmp_path)
    assert [v.rule for v in compare_profiles(base, cand) if v.rule == "device-static"]


@pytest.mark.parametrize("name", ["init_undefarg_pure.cu", "init_undefarg_asm.cu"])
def test_init_refuses_a_gain_written_through_an_undefined_argument(name):
    source = (ROUND / name).read_text()
    result = generate(source, SCALE_SPEC, name)
    with pytest.raises(InputError, match=r"gain_slot\(\)::gain, device memory that device code writes"):
        refuse_state_set_by_dropped_code(source, result, arch="sm_90", cache_dir=shared_cache_dir(),
                                         generated=result.program)
