"""Red team round 326 (tools.ptx_writes on round 324's fix).

Closed by class, in both users (init's guard and the verifier's `device-static` rule): a printf-parked address read
back from local memory by means the reading did not count as a read of it: `ld.weak.local` at a device function's
parameter address (a function's parameters live in local memory), `ld.param` below a kernel's first parameter (the
constants that place the local window), and a generic `atom` (which returns what it read). Now any `.local` access
but a store reads local memory, a parameter read past its bytes or named as a value may, and atomics are reads.
Recorded over-approximation: printf's `%s` in a module that also loads through pointers it loaded from memory counts
the string's storage written (`--keep-state` is the way out).
"""

from __future__ import annotations

import pytest

from kernelloop.errors import InputError
from kernelloop.verify.precision import compare_profiles

from .conftest import FIXTURES
from .redteam_statics import init_guard, ptx_profile

pytestmark = pytest.mark.nvcc

ROUND = FIXTURES / "redteam" / "round326"


def _profile(name: str, tmp_path):
    return ptx_profile(ROUND / f"{name}.cu", tmp_path)


def _guard(name: str) -> None:
    init_guard(ROUND / name)


@pytest.mark.parametrize("name", ["weaklocal_counter", "paramwindow_counter", "atomspl_counter"])
def test_a_counter_read_back_from_local_memory_is_refused(name, tmp_path):
    base, cand = _profile("table_base", tmp_path), _profile(name, tmp_path)
    assert [v.rule for v in compare_profiles(base, cand) if v.rule == "device-static"]


@pytest.mark.parametrize("name", ["init_weaklocal_gain.cu", "init_paramwindow_gain.cu", "init_atomspl_gain.cu"])
def test_init_refuses_a_gain_its_left_out_main_sets(name):
    with pytest.raises(InputError, match=r"gain_slot\(\)::gain, device memory that device code writes"):
        _guard(name)


def test_printf_of_a_string_beside_pointers_loaded_from_memory_is_the_recorded_over_approximation():
    _guard("init_ctrl_printf_nostr.cu")  # the same program printing no string: kept
    with pytest.raises(InputError, match=r"string literal's storage .*loads through pointers it loaded"):
        _guard("init_fr_printf_chase.cu")
