"""Red team round 171 (tests/fixtures/redteam/round171/), on round 170's fix: a toolkit header's own plain
`assert()` called an operator the part declared. cuda_fp6.hpp's (and cuda_fp4.hpp's) conversion
functions are not templates and assert `rounding == cudaRoundNearest || ...`; a part that declares
`bool operator==(cudaRoundMode, cudaRoundMode)` (counting its calls) before including
<cuda/std/type_traits> or <cooperative_groups.h> has that assert call it, and a -DNDEBUG build (a
release build) drops the call: the launch's column count followed the count. The NDEBUG comparison ran
only where the part's text named `assert`, and then judged the part's own asserts only.

Closed by class (shipped.py): plain asserts are assertions like CCCL's and libstdc++'s. The assertion
shims redefine <assert.h>'s `assert` too (condition evaluated, no failure path; following NDEBUG at
each inclusion as the header does), the reach build makes code holding one ill-formed, and a release
build (-DNDEBUG) is one of the builds compared. Also noted by the red team: CCCL's debug mode wraps
comparators outside its assertions (`__debug_less`); a unit that includes CCCL is compared in the debug
builds whatever the reach build says (shipped.cccl_included)."""

from __future__ import annotations

import pytest

from kernelloop.config import Settings, VerifySettings
from kernelloop.program.split import split_program
from kernelloop.tools.nvcc import find_toolchain
from kernelloop.verify.shipped import header_assertion_differences, one_file_reaches
from kernelloop.verify.static_check import check_static_files

from .conftest import FIXTURES, shared_cache_dir
from .test_redteam_round166 import BASE

CASE = FIXTURES / "redteam" / "round171"


def _violations(candidate):
    check = check_static_files(BASE, candidate, Settings(cache_dir=shared_cache_dir(), verify=VerifySettings(arch="sm_90")))
    assert not check.ok, check.summary
    return check.violations


@pytest.mark.nvcc
@pytest.mark.parametrize("candidate", ["cand.cu", "cand_fp4_cg.cu"])
def test_a_headers_plain_assert_calling_the_parts_operator_is_compared_in_a_release_build(candidate):
    path = CASE / "header_plain_assert_operator" / candidate
    violations = _violations(path)
    # Refused at the gate; where a check before it refuses the part first (the build with every
    # configuration switch of the toolkit, which takes the fp6/fp4 types away), the release build's
    # comparison is asked on its own: it must find the difference too.
    assert any(v.rule in ("assert-side-effect", "build-context") for v in violations), violations
    part = split_program(path.read_text(), path.name).editable
    switches, _ = header_assertion_differences(split_program(BASE.read_text(), BASE.name), part, arch="sm_90",
                                               cache_dir=shared_cache_dir(), toolchain=find_toolchain(),
                                               one_file=one_file_reaches(part))
    assert switches == ("NDEBUG",)


@pytest.mark.nvcc
def test_a_comparator_cccls_debug_mode_wraps_is_compared():
    violations = _violations(CASE / "debug_less_conversion" / "cand.cu")
    assert any(v.rule == "assert-side-effect" for v in violations), violations
