"""Red team round 165 (tests/fixtures/redteam/round165/): two routes past every static gate, each
through a reading of the text where the compiler's counts.

1. Round 164's `one_file_reaches` read templates by where `auto` stood in a parameter list: an
   attribute before a generic lambda's `auto` parameter (`[]([[maybe_unused]] auto* a, int c)`)
   hid the template, so the part was compared alone only, and the lambda's end-of-unit lookup found
   `std::to_string` through <string> after the part (one file) and its own fallback alone. Now any
   `auto`, `template`, `concept`, `requires` or a lambda's template parameters (`]<`) counts.
2. `scan_build_switches` read the names the part spells: `INT64_C(CUB_DEBUG_AL)` pastes
   CUB_DEBUG_ALL in <cstdint>'s macro, a switch a debug build defines. The part as the compiler
   reads it (macros expanded) is read too."""

from __future__ import annotations

import pytest

from kernelloop.config import Settings, VerifySettings
from kernelloop.verify.shipped import one_file_reaches
from kernelloop.verify.static_check import check_static_files

from .conftest import FIXTURES, shared_cache_dir

CASE = FIXTURES / "redteam" / "round165" / "parts"
BASE = FIXTURES / "redteam" / "round164" / "policy" / "base_kl.cu"


@pytest.mark.nvcc
@pytest.mark.parametrize("candidate, rule, says", [
    ("attr_lambda_cand.cu", "build-identity", "in one file with the harness"),
    ("int64c_paste_cand.cu", "build-context", "names CUB_DEBUG_ALL"),
])
def test_the_red_teams_candidates_are_refused(candidate, rule, says):
    check = check_static_files(BASE, CASE / candidate,
                               Settings(cache_dir=shared_cache_dir(), verify=VerifySettings(arch="sm_90")))
    assert not check.ok and rule in check.summary and says in check.summary, check.summary


@pytest.mark.parametrize("part", [
    "void run() { auto f = []([[maybe_unused]] auto* a, int c) { return c; }; }",
    "void run() { auto f = []<class T>(T* a, int c) { return c; }; }",
    "void run() { auto f = <::><class T>(T* a, int c) { return c; }; }",  # the digraphs of [ and ]
    "void run() { auto f = [] /* a comment */ <class T>(T* a) { return 0; }; }",
])
def test_every_spelling_of_a_generic_lambda_is_a_template(part):
    assert one_file_reaches(part)
