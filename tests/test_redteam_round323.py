"""Red team round 323 (tools.ptx_writes on round 322's fix).

Closed by class, each in both users (init's guard and the verifier's `device-static` rule):
- the distance rule (`first - table` is no address) trusted any `add`/`mov`/`cvta` as an exact offset:
  an `add.rn.f64` on the address's bits made `a - b` the address itself. Only whole 64-bit integer
  arithmetic and conversions between generic and global or constant memory keep an address whole now;
- a register declared in an inner block under the table's own name was read as the table: a name a
  body or a header declares again counts the variable written;
- `ld.param [f_param_0+8]` reads `f_param_1` (ptxas lays parameters out in a row): a parameter read or
  filled past its own bytes hands on every address the function was given, or is a store.
False refusal fixed: a `static const` table staged into shared memory with cp.async (its source is read).
"""

from __future__ import annotations

import pytest

from kernelloop.errors import InputError
from kernelloop.verify.precision import compare_profiles

from .conftest import FIXTURES
from .redteam_statics import init_guard, ptx_profile

pytestmark = pytest.mark.nvcc

ROUND = FIXTURES / "redteam" / "round323"


def _profile(name: str, tmp_path):
    return ptx_profile(ROUND / f"{name}.cu", tmp_path)


def _guard(name: str) -> None:
    init_guard(ROUND / name)


@pytest.mark.parametrize("name", ["fabs_counter", "shadow_counter", "paramoff_counter"])
def test_a_counter_kept_in_a_read_only_table_is_refused(name, tmp_path):
    base, cand = _profile("table_base", tmp_path), _profile(name, tmp_path)
    assert [v.rule for v in compare_profiles(base, cand) if v.rule == "device-static"]


@pytest.mark.parametrize("name", ["init_fabs_gain.cu", "init_shadow_gain.cu", "init_paramoff_gain.cu"])
def test_init_refuses_a_gain_its_left_out_main_sets(name):
    with pytest.raises(InputError, match=r"output_gain\(.*\)::gain, device memory that device code writes"):
        _guard(name)


def test_a_table_staged_into_shared_memory_with_cp_async_is_only_read(tmp_path):
    base, cand = _profile("table_base", tmp_path), _profile("fr_cpasync_cand", tmp_path)
    assert not [v.rule for v in compare_profiles(base, cand) if v.rule == "device-static"]
    _guard("init_fr_cpasync.cu")
