"""Red team round 324 (tools.ptx_writes on round 323's fix).

Closed by class, in both users (init's guard and the verifier's `device-static` rule): an address parked in local
memory (printf's argument buffer, an asm's slot) is harmless only where nothing reads local memory back, and a read
back was seen only through nvcc's depot and a `.local`'s first declarator. `stacksave` gave the frame's base and a
generic load read the parked address; the first of two `.local` declarators (or `a[8 ]`, `a<2>`) was no local
memory. Now every declarator, every `stacksave`, `alloca` and `cvta.local` result is local memory, and a generic
load at an address no parameter or module variable gives counts as a local read. Honest controls: a binary search
over a constant table and a table handed in a struct by value stay unjudged.
"""

from __future__ import annotations

import pytest

from kernelloop.errors import InputError
from kernelloop.verify.precision import compare_profiles

from .conftest import FIXTURES
from .redteam_statics import init_guard, ptx_profile

pytestmark = pytest.mark.nvcc

ROUND = FIXTURES / "redteam" / "round324"


def _profile(name: str, tmp_path):
    return ptx_profile(ROUND / f"{name}.cu", tmp_path)


def _guard(name: str) -> None:
    init_guard(ROUND / name)


@pytest.mark.parametrize("name", ["stk_counter", "ll_counter", "local_spellings_counter"])
def test_a_counter_read_back_from_local_memory_is_refused(name, tmp_path):
    base, cand = _profile("table_base", tmp_path), _profile(name, tmp_path)
    assert [v.rule for v in compare_profiles(base, cand) if v.rule == "device-static"]


@pytest.mark.parametrize("name", ["init_stacksave_gain.cu", "init_locallist_gain.cu"])
def test_init_refuses_a_gain_its_left_out_main_sets(name):
    with pytest.raises(InputError, match=r"gain_slot\(\)::gain, device memory that device code writes"):
        _guard(name)


@pytest.mark.parametrize("name", ["init_fr_bsearch.cu", "init_fr_view.cu"])
def test_honest_tables_stay_unjudged(name):
    _guard(name)
