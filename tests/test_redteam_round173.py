"""Red team round 173 (tests/fixtures/redteam/round173/), on round 172's fix: CCCL's own debug switches
change header functions besides assertions. `cub::detail::DebugSyncStream` (cub/util_device.cuh, an
allowed header) is `return cudaSuccess;` in a normal build and synchronises the stream under
-DCUB_DEBUG_SYNC; a part called it inside a stream capture, where synchronising is an error, and on
that error launched a kernel that sums every other column: never in the builds compared, in a
CUB_DEBUG_SYNC build always.

Closed by class (shipped._CCCL_DEBUG_BUILDS): for a unit that includes CCCL, each of CCCL's debug
switches (CUB_DEBUG_SYNC, CUB_DEBUG_LOG, CUB_DEBUG_ALL, CUB_STDERR, THRUST_DEBUG, THRUST_DEBUG_SYNC) is
a build compared alone, and all of them with every assertion switch at once."""

from __future__ import annotations

import pytest

from kernelloop.config import Settings, VerifySettings
from kernelloop.verify import policy
from kernelloop.program.split import split_program
from kernelloop.tools.nvcc import find_toolchain
from kernelloop.verify.shipped import _CCCL_DEBUG_SWITCHES, header_assertion_differences, one_file_reaches
from kernelloop.verify.static_check import check_static_files

from .conftest import FIXTURES, shared_cache_dir
from .test_redteam_round166 import BASE

CASE = FIXTURES / "redteam" / "round173"


@pytest.mark.nvcc
def test_a_part_reading_what_a_cccl_debug_switch_changes_is_compared_in_that_build():
    check = check_static_files(BASE, CASE / "cub_debug_sync_probe" / "cand.cu",
                               Settings(cache_dir=shared_cache_dir(), verify=VerifySettings(arch="sm_90")))
    assert not check.ok, check.summary
    # Refused first by later rules (a stream capture in a build that does not declare its default stream;
    # the build with every configuration switch of the toolkit, CUB_DEBUG_SYNC among them): the CCCL
    # debug builds' comparison is asked on its own, and must find the difference too.
    assert any(v.rule in ("assert-side-effect", "default-stream", "build-context") for v in check.violations)
    candidate = CASE / "cub_debug_sync_probe" / "cand.cu"
    part = split_program(candidate.read_text(), candidate.name).editable
    switches, _ = header_assertion_differences(split_program(BASE.read_text(), BASE.name), part, arch="sm_90",
                                               cache_dir=shared_cache_dir(), toolchain=find_toolchain(),
                                               one_file=one_file_reaches(part))
    assert "CUB_DEBUG_SYNC" in switches, switches


def test_every_cccl_debug_switch_is_one_the_part_may_not_name():
    assert set(_CCCL_DEBUG_SWITCHES) <= set(policy.BUILD_SWITCHES)
