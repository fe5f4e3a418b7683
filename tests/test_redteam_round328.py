"""Red team round 328 (tools.ptx_writes on round 327's fix).

Closed by class, in both users: round 327's undefined values, defined in name only. A register of a sibling block
(`{ .reg .b64 t; mov t, 0; } { .reg .b64 t; mov r, t; }`), one defined only under a predicate or after its use,
one named like a special register, and one an instruction only reads (`stackrestore`) each counted as defined, and
carried the static's address in ptxas's register. Now a read needs an earlier, unpredicated definition in the
block that declares the register. False refusal fixed: `bar.red.popc` (`__syncthreads_count`) defines its result.
"""

from __future__ import annotations

import pytest

from kernelloop.errors import InputError
from kernelloop.verify.precision import compare_profiles

from .conftest import FIXTURES
from .redteam_statics import init_guard, ptx_profile

pytestmark = pytest.mark.nvcc

ROUND = FIXTURES / "redteam" / "round328"


def _profile(name: str, tmp_path):
    return ptx_profile(ROUND / f"{name}.cu", tmp_path)


def _guard(name: str) -> None:
    init_guard(ROUND / name)


@pytest.mark.parametrize("name", ["sib_counter", "pred_counter", "after_counter"])
def test_a_counter_kept_through_a_register_defined_in_name_only_is_refused(name, tmp_path):
    base, cand = _profile("table_base", tmp_path), _profile(name, tmp_path)
    assert [v.rule for v in compare_profiles(base, cand) if v.rule == "device-static"]


@pytest.mark.parametrize("name", ["init_sib_gain.cu", "init_pred_gain.cu", "init_after_gain.cu",
                                  "init_specname_gain.cu", "init_restore_gain.cu"])
def test_init_refuses_a_gain_written_through_a_register_defined_in_name_only(name):
    with pytest.raises(InputError, match=r"gain_slot\(\)::gain, device memory that device code writes"):
        _guard(name)


def test_a_barrier_reduction_defines_its_result():
    _guard("init_fr_count.cu")
