"""Red team round 160 (tests/fixtures/redteam/round160/): a public header macro defined only in
some builds. With -DDEBUG or -D_DEBUG, cub/util_debug.cuh defines CUB_STDERR (empty) and
cuda/std's assert header defines CCCL_ENABLE_DEVICE_ASSERTIONS (empty); in the verifier's build
both are plain names. A helper's parameter so named made `C / 2 - CUB_STDERR - 0` the whole row in
the verifier's build and half of it in a debug build (certain: every static gate passed; host
launcher and device helper). Fixed by class: the part is preprocessed again as builds with the
switches real builds set (policy.BUILD_SWITCHES; NDEBUG alone), and a name it uses that any of them
defines otherwise (or that names such a macro), which the baseline's part does not use, is refused."""

from __future__ import annotations

import pytest

from kernelloop.config import Settings, VerifySettings
from kernelloop.verify import policy
from kernelloop.verify.static_check import check_static_files

from .conftest import FIXTURES, shared_cache_dir

CASE = FIXTURES / "redteam" / "round160" / "policy"
BASE = CASE / "base_kl.cu"


def test_macros_that_differ_between_builds_and_those_naming_them():
    verified = {"A": " 1", "B": " A + 1", "C": " 2", "LOG": "(x) x"}
    switched = {"A": " 2", "B": " A + 1", "C": " 2", "LOG": "(x) x", "ONLY_HERE": " "}
    assert policy.switch_dependent_macros(verified, switched) == {"A", "B", "ONLY_HERE"}


def test_a_name_the_baseline_uses_too_is_the_programs_business():
    builds = [(policy.BUILD_SWITCHES, {"CHECK": "(x) x"}, {"CHECK": "(x) check(x)", "CUB_STDERR": " "})]
    assert policy.scan_build_switches("CHECK(f());", "CHECK(g());", builds) == []
    found = policy.scan_build_switches("int h(int CUB_STDERR) { return 1 - CUB_STDERR; }", "int h(int n);", builds)
    assert [v.rule for v in found] == ["build-context"] and "CUB_STDERR" in found[0].detail
    # assert differs under NDEBUG: its own check (assert-side-effect) compares the code both ways
    assert policy.scan_build_switches("assert(n > 0);", "", [(("NDEBUG",), {"assert": "(e) f(e)"}, {"assert": "(e) 0"})]) == []
    # nor a macro wrapping it (a program's CHECK_IDX around assert: the release build's code is compared)
    release = [(("NDEBUG",), {"assert": "(e) f(e)", "CHECK_IDX": "(i, n) assert(i < n)"},
                {"assert": "(e) 0", "CHECK_IDX": "(i, n) assert(i < n)"})]
    assert policy.scan_build_switches("CHECK_IDX(k, n);", "", release) == []


@pytest.mark.parametrize("candidate, name", [("cubstderr_cand.cu", "CUB_STDERR"),
                                             ("ccclassertions_cand.cu", "CCCL_ENABLE_DEVICE_ASSERTIONS")])
def test_the_red_teams_candidates_are_refused(candidate, name):
    check = check_static_files(BASE, CASE / candidate, Settings(cache_dir=shared_cache_dir(), verify=VerifySettings(arch="sm_90")))
    assert not check.ok and "build-context" in check.summary and name in check.summary, check.summary


def test_the_control_is_refused_and_the_baseline_passes():
    settings = Settings(cache_dir=shared_cache_dir(), verify=VerifySettings(arch="sm_90"))
    control = check_static_files(BASE, CASE / "ifdebug_cand.cu", settings)
    assert not control.ok and "build-context" in control.summary
    assert check_static_files(BASE, BASE, settings).ok
