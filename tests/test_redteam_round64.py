"""Red team round 64 (tests/fixtures/redteam/round64/REPORT.md): no route; a rule gap and a false
refusal. A parenthesized declarator (`int (__x) = 1;`, `void (__assert_fail)(...)`) hid a reserved
name from the syntax reading, in the source and in the preprocessed part; a condition testing a
feature through the toolkit's own function-like macro (`__CUDA_ARCH_HAS_FEATURE__(SM90_ALL)`) was
refused as testing a name only the build defines, though it expands to one the target defines."""

from __future__ import annotations

import pytest

from kernelloop.verify.policy import scan_source

from .conftest import FIXTURES
from .test_shipped import _static

ROUND64 = FIXTURES / "redteam" / "round64"


def _reserved(code: str) -> list[str]:
    return [v.detail for v in scan_source(code + "\n") if v.rule == "reserved-name"]


@pytest.mark.parametrize("code", [
    "int (__x) = 1;",
    "int (*__p)(int);",
    "int &(__r) = g;",
    "int (* (__h))[2];",
    "int ((__y));",
    'extern "C" int (__nv_probe)(void) { return 0; }',
    "void (__assert_fail)(const char* a, const char* f, unsigned l, const char* fn) { }",
    "int ok, (__second) = 2;",
    "struct S { int (__m); };",
    "int __q [[maybe_unused]] = 1;",
    "template <typename T> void (__f)(T) {}",
    "namespace n { void (__g)(); }",
    # a parameter too (red team round 161: `int _CG_DEBUG` is a macro in a -G -DCG_DEBUG build)
    "void (f)(int __unused_param_is_a_parameter) {}",
])
def test_every_declarator_spelling_names_what_it_declares(code):
    assert _reserved(code), code


@pytest.mark.parametrize("code", [
    "int (x) = 1;", "int (*p)(int);", "void (f)(int unused_param) {}",
    "struct S { int (m); };", "int f(int (a));",
])
def test_the_same_spellings_with_ordinary_names_pass(code):
    assert _reserved(code) == [], code


@pytest.mark.nvcc
@pytest.mark.parametrize("program", ["sum_reduction_paren_nv_probe.cu", "sum_reduction_attack_maxnreg_var.cu",
                                     "candidate_paren_assert_fail.cu"])
def test_the_rounds_parenthesized_declarators_are_refused(program):
    rules = {v.rule for v in _static("sum_reduction.cu", ROUND64 / "parenthesized_declarator" / program).violations}
    assert "reserved-name" in rules, rules


@pytest.mark.nvcc
@pytest.mark.parametrize("program", ["sum_reduction_honest_has_feature.cu", "sum_reduction_honest_arch_specific.cu",
                                     "sum_reduction_honest_builtin_align.cu", "sum_reduction_honest_local_maxnreg.cu"])
def test_the_rounds_honest_probes_pass(program):
    assert _static("sum_reduction.cu", ROUND64 / "probes" / program).violations == []


@pytest.mark.nvcc
@pytest.mark.parametrize("condition, refused", [
    ("defined(__CUDA_ARCH__) && __CUDA_ARCH_HAS_FEATURE__(SM90_ALL)", False),
    ("__CUDA_ARCH_HAS_FEATURE__(SM100_ALL) || __CUDA_ARCH_HAS_FEATURE__(SM90_ALL)", False),
    # the toolkit's macro expands; what is beside it is still checked
    ("__CUDA_ARCH_HAS_FEATURE__(SM90_ALL) || defined(NDEBUG)", True),
    # a macro of the part's own that pastes is read by its words, not expanded: fail closed
    ("KL_CAT(NDE, BUG)", True),
    ("__has_include(<cuda_fp16.h>)", True),
])
def test_a_condition_is_checked_on_the_toolkits_expansion(condition, refused):
    code = f"#define KL_CAT(a, b) a##b\n#if {condition}\n#endif\n"
    found = [v for v in scan_source(code) if v.rule == "build-context"]
    assert bool(found) == refused, found
