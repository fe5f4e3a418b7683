"""Red team round 168 (tests/fixtures/redteam/round168/), on round 167's fix: two routes past every
static gate, both fixed by class.

A. Constant evaluation: the shims' `cond ? (void)0 : (void)0` was a constant expression even where
   the condition fails, where the real failure path (a call of `__assert_fail`, not constexpr) is
   not. A part asked, through an overload pair, whether `cuda::std::lcm` of two numbers whose lcm
   overflows is a constant: yes in release builds and in both builds compared, no in a real debug
   build, which launched with `C >> 1`. The shims' failure path is now a call of an empty function
   that is not constexpr either (inlined away at run time); libstdc++'s keeps its own constant
   evaluation check.
B. One file with assertions on: a template of the part calls `clamp` unqualified; the part alone
   finds its own, the one-file build finds std::clamp through the harness's <algorithm> at the end of
   the unit, which calls the comparator as often in a release build and once more with
   -D_GLIBCXX_ASSERTIONS. A part with a template is now compared with the harness's headers after
   it too (their declarations, none of the harness's code)."""

from __future__ import annotations

import pytest

from .conftest import FIXTURES
from .test_redteam_round166 import _debug_differences, refused_as_a_debug_build_difference

PARTS = FIXTURES / "redteam" / "round168" / "parts"


@pytest.mark.nvcc
def test_asking_whether_an_assertion_is_a_constant_no_longer_tells_the_builds_apart():
    refused_as_a_debug_build_difference(PARTS / "constexpr_fold_cand.cu")


@pytest.mark.nvcc
@pytest.mark.parametrize("part, switches", [
    ("constexpr_fold_device_part.cu", ("DEBUG",)),
    ("adl_clamp_part.cu", ("_GLIBCXX_ASSERTIONS",)),
])
def test_the_device_form_and_the_one_file_form_are_refused(part, switches):
    found, differing = _debug_differences(PARTS / part)
    assert found == switches and differing, (found, differing)
