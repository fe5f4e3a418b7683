"""Red team round 176 (tests/fixtures/redteam/round176/README.md), on round 175's fixes and the
schedule-neutral comparison of device code: two candidates that passed every static gate.

(c1) The comparison took `add.cc` for a pure instruction: it writes the carry flag that `addc`
reads, which no operand names, so two `add.cc` swapped around an `addc` (the order chosen by a
half switch) read as a reordering. Closed by class: a modifier that reads or writes state no
operand names (`.cc`) makes an instruction ordered (tools/ptx_module._IMPLICIT_STATE).

(c2) The toolkit's switches were read under public prefixes only: `-D__NV_DISABLE_128_ATOMICS`
takes the 128-bit atomicCAS away, which a trait detects. Closed by class: every name of the
toolkit's prefixes, in the implementation's reserved form too, is reserved; the user-facing ones
of that form (`__NV_*`, `__CUDA_*`) are set with the public ones in the switches' build, compared
for every part; a group the baseline's own part does not build alike with is split until it does."""

from __future__ import annotations

import pytest

from kernelloop.config import Settings, VerifySettings
from kernelloop.tools.nvcc import find_toolchain
from kernelloop.verify.static_check import check_static_files
from kernelloop.verify.toolkit_switches import switches_set_together, toolkit_config_switches

from .conftest import FIXTURES, shared_cache_dir
from .test_redteam_round166 import BASE

CASE = FIXTURES / "redteam" / "round176"


@pytest.mark.nvcc
@pytest.mark.parametrize("case", ["c1", "c2"])
def test_the_red_teams_candidates_are_refused(case):
    check = check_static_files(BASE, CASE / case / "cand.cu",
                               Settings(cache_dir=shared_cache_dir(), verify=VerifySettings(arch="sm_90")))
    assert not check.ok, check.summary


def test_switches_of_the_reserved_form_are_read_and_the_user_facing_ones_compared():
    switches, _ = toolkit_config_switches(find_toolchain())
    assert {"__NV_DISABLE_128_ATOMICS", "_LIBCUDACXX_HAS_NO_WIDE_CHARACTERS"} <= set(switches)
    assert not {"__CUDA_ARCH__", "__CUDACC__", "__NVCC__"} & set(switches)  # the compiler's own facts
    together = switches_set_together(find_toolchain())
    assert "__NV_DISABLE_128_ATOMICS" in together and "_LIBCUDACXX_HAS_NO_WIDE_CHARACTERS" not in together


def test_a_group_the_baseline_follows_is_split_until_it_does_not():
    from kernelloop.verify.shipped import _groups_alike
    followed = {"-DB", "-DE"}
    groups = _groups_alike(("-DA", "-DB", "-DC", "-DD", "-DE", "-DF"), lambda g: not followed & set(g))
    assert sorted(f for g in groups for f in g) == ["-DA", "-DC", "-DD", "-DF"]
    assert _groups_alike(("-DA", "-DB"), lambda g: True) == [("-DA", "-DB")]
