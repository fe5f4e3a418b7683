"""Red team round 164 (tests/fixtures/redteam/round164/): two routes past every static gate.

1. One build with every switch and option at once cannot show an AND that holds a fact it turns
   off: `__half` without operators AND `__nv_bfloat16` with them (PyTorch's four switches) AND
   <algorithm> after the part halved a row in PyTorch's extension build of the whole file. The
   build real programs ship most is compared in the part's real context too (shipped.other_builds);
   the class (a minterm of the build's facts on a build no list holds) stays open: the build a user
   ships is the one to declare (verify.build_flags).
2. `scan_build_switches` exempted every name the baseline's part spells: a baseline that tests
   `#ifndef NDEBUG` let a candidate use NDEBUG in code, where `const int p(int (NDEBUG));` declares
   a function in one build and an int in a release build. Only the baseline's uses in code exempt.

Round 164 also made the one-file builds the part's real context only where the rest of the file can
reach the part's code: through a template of its own (shipped.one_file_reaches)."""

from __future__ import annotations

import pytest

from kernelloop.config import Settings, VerifySettings
from kernelloop.verify.policy import scan_build_switches
from kernelloop.verify.shipped import one_file_reaches
from kernelloop.verify.static_check import check_static_files

from .conftest import FIXTURES, shared_cache_dir

CASE = FIXTURES / "redteam" / "round164" / "policy"


def _check(base: str, candidate: str):
    return check_static_files(CASE / base, CASE / candidate,
                              Settings(cache_dir=shared_cache_dir(), verify=VerifySettings(arch="sm_90")))


@pytest.mark.nvcc
def test_an_and_with_a_fact_every_switch_turns_off_shows_in_pytorchs_build_of_the_whole_file():
    check = _check("base_kl.cu", "torch_whole_cand.cu")
    assert not check.ok and "build-context" in check.summary, check.summary
    assert "PyTorch" in check.summary and "as one file" in check.summary, check.summary


@pytest.mark.nvcc
def test_a_switch_name_the_baseline_only_tests_is_no_exemption_for_code():
    check = _check("base_ndebug.cu", "ndebug_vexing_cand.cu")
    assert not check.ok and "names NDEBUG" in check.summary, check.summary


def test_the_exemption_follows_the_baselines_use_in_code():
    builds = [(("NDEBUG",), {"CHECKED": " 1"}, {"CHECKED": " 0", "NDEBUG": " 1"})]
    vexing = "void f() { const int p(int (NDEBUG)); }"
    tested_only = "void g() {\n#ifndef NDEBUG\n  check();\n#endif\n}"
    assert [v.rule for v in scan_build_switches(vexing, tested_only, builds)] == ["build-context"]
    # a name the baseline uses in code stays exempt (its use is the baseline's build-dependence too)
    in_code = "void g(int* flag) { *flag = CHECKED; }"
    assert scan_build_switches("void f(int* on) { *on = CHECKED; }", in_code, builds) == []
    assert [v.rule for v in scan_build_switches("void f(int* on) { *on = CHECKED; }", "void g() {}", builds)] == \
        ["build-context"]


@pytest.mark.parametrize("part, reaches", [
    ("__global__ void k(float* o, int n) { int i = threadIdx.x; if (i < n) o[i] = 2.0f * o[i]; }", False),
    ("template <int B> __global__ void k(float* o) { o[threadIdx.x] = B; }", True),
    ("void run() { auto f = [](auto x) { return x + 1; }; f(1); }", True),  # a generic lambda
    ("__device__ float twice(const auto& x) { return 2 * x; }", True),  # an abbreviated template
    ("decltype(auto) pick(int& x) { return (x); }", True),  # read as too much: only costs builds
    ("void run() { int n = 4; (void)n; }", False),
    ("// a template would be faster\nvoid run() {}", True),  # a comment's word counts: no literal hides one
])
def test_the_rest_of_a_file_reaches_a_part_only_through_a_template(part, reaches):
    assert one_file_reaches(part) is reaches
