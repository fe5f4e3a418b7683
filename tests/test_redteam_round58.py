"""Red team round 58 (tests/fixtures/redteam/round58/REPORT.md): the most vexing parse (`LineSink(stderr);`
declares stderr, tree-sitter reads a call) bound round 56's names again; and honest code that uses
them in a member's default, a typedef, a range-for, an enumerator, ... was refused."""

from __future__ import annotations

import pytest

from kernelloop.verify.policy import scan_macro_hygiene

from .conftest import FIXTURES
from .test_redteam_round56 import BASELINE, CUDA_CHECK
from .test_shipped import _static

ROUND58 = FIXTURES / "redteam" / "round58"
MACROS = {"CUDA_CHECK": CUDA_CHECK}
USE = "void use_it() { CUDA_CHECK(cudaGetLastError()); }\n"


@pytest.mark.nvcc
@pytest.mark.parametrize("candidate, refused", [
    ("vexing_parse/candidate_vexing_parse.cu", True),
    ("vexing_parse/control_braced_decl.cu", True),
    ("honest_member_init/honest_member_init.cu", False),
    ("honest_member_init/control_braced_member.cu", False),
])
def test_the_rounds_candidates(candidate, refused):
    result = _static("sum_reduction.cu", ROUND58 / candidate)
    assert ("macro-hygiene" in {v.rule for v in result.violations}) is refused, result.violations


@pytest.mark.parametrize("statement", [
    "LineSink(stderr);", "KeepLine(fprintf) = {};", "Keep<int>(fprintf);", "KeepLine(*stderr) = nullptr;",
    "Sink((exit));", "for (Sink(exit);;) { break; }",
])
def test_a_statement_that_could_declare_a_name_binds_it(statement):
    part = f"constexpr int f() {{ {statement} CUDA_CHECK(cudaSuccess); return 0; }}\n" + BASELINE
    found = scan_macro_hygiene(part, BASELINE, MACROS, {}, "")
    assert found and found[0].rule == "macro-hygiene", (statement, found)


@pytest.mark.parametrize("code", [
    "struct DeviceInfo { int sms = 0; cudaError_t status = cudaSuccess; };",
    "typedef cudaError_t Status;",
    "void f(cudaError_t* errs, int n) { for (cudaError_t e : {errs[0], errs[1]}) (void)e; (void)n; }",
    "enum Code { kOk = cudaSuccess };",
    "template <int ok = cudaSuccess, class E = cudaError_t> struct Q {};",
    "struct S { operator cudaError_t() const { return cudaSuccess; } };",
    "using ::cudaError_t;",
    "void f() { CUDA_CHECK(cudaSuccess); CUDA_CHECK(cudaGetLastError()); }",
    "void f() { if (cudaError_t e = cudaGetLastError()) { (void)e; } }",
    "void f() { cudaError_t a = cudaSuccess, b = cudaSuccess; (void)a; (void)b; }",
    "void f() { auto e = cudaGetLastError(); if (e != cudaSuccess) std::exit(1); }",
])
def test_honest_uses_pass(code):
    assert scan_macro_hygiene(code + "\n" + USE + BASELINE, BASELINE, MACROS, {}, "") == [], code
