"""Red team round 57 (tests/fixtures/redteam/round57/REPORT.md): round 56's names bound in forms a list
of declarations missed (parameters, references, structured bindings, the part's own macro), a number
with an exponent's sign both lexers misread (`1e+'a`), and a wrong finite value on a masked row that
only sampling saw (tests/test_harness_groups.py: samples aimed at the special-value groups)."""

from __future__ import annotations

import pytest

from kernelloop.program.scanner import in_number
from kernelloop.verify.policy import scan_macro_hygiene, scan_source

from .conftest import FIXTURES
from .test_redteam_round56 import BASELINE, CUDA_CHECK
from .test_shipped import _static

ROUND57 = FIXTURES / "redteam" / "round57"


@pytest.mark.nvcc
@pytest.mark.parametrize("candidate, rule", [
    ("param_names/candidate_param_names.cu", "macro-hygiene"),
    ("param_names/candidate_reference_names.cu", "macro-hygiene"),
    ("param_names/candidate_lambda_structured.cu", "macro-hygiene"),
    ("param_names/candidate_macro_declared.cu", "macro-hygiene"),
    ("ppnumber_sign_desync/candidate_ppnumber_sign.cu", "character"),
])
def test_the_rounds_candidates_are_refused(candidate, rule):
    result = _static("sum_reduction.cu", ROUND57 / candidate)
    assert rule in {v.rule for v in result.violations}, result.violations


@pytest.mark.parametrize("binding", [
    "constexpr int f(int fprintf) { CUDA_CHECK(cudaSuccess); return 0; }",
    "constexpr int f() { int x = 0; int& stderr = x; CUDA_CHECK(cudaSuccess); return 0; }",
    "constexpr int f() { auto [fprintf, stderr] = pair(); CUDA_CHECK(cudaSuccess); return 0; }",
    "auto f = [](int exit) { CUDA_CHECK(cudaSuccess); };",
    "template <int cudaSuccess> int f() { CUDA_CHECK(0); return 0; }",
    "void f() { using spy::exit; CUDA_CHECK(cudaSuccess); }",
    "struct S { int fprintf; void g() { CUDA_CHECK(cudaSuccess); } };",
    "void f() { for (auto exit : list()) { CUDA_CHECK(cudaSuccess); } }",
    "void f() { try {} catch (int stderr) { CUDA_CHECK(cudaSuccess); } }",
    "int (*cudaGetErrorString)(int) = nullptr; void f() { CUDA_CHECK(cudaSuccess); }",
])
def test_any_form_of_binding_the_macros_names_is_refused(binding):
    found = scan_macro_hygiene(binding + "\n" + BASELINE, BASELINE, {"CUDA_CHECK": CUDA_CHECK}, {}, "")
    assert [v.rule for v in found][:1] == ["macro-hygiene"], (binding, found)


def test_the_expanded_part_shows_a_binding_made_by_the_parts_own_macro():
    # as written, `static BIND(int, exit);` reads as a function declared with a parameter of type exit
    part = "#define BIND(T, n) T n{}\nstatic BIND(int, exit);\n" + BASELINE
    expanded = "static int exit{};\n" + BASELINE
    found = scan_macro_hygiene(part + "void g() { CUDA_CHECK(cudaSuccess); }\n", BASELINE,
                               {"CUDA_CHECK": CUDA_CHECK}, {}, "", expanded)
    assert found and found[0].where.startswith("preprocessed line")


def test_honest_uses_of_the_same_names_pass():
    part = ("__global__ void k2(float* o) { o[0] = 2; }\n"
            "void launch(float* o) {\n"
            "  k2<<<1, 1>>>(o);\n"
            "  cudaError_t err = cudaGetLastError();\n"
            "  if (err != cudaSuccess) { const char* why = cudaGetErrorString(err); (void)why; exit(1); }\n"
            "  CUDA_CHECK(cudaDeviceSynchronize());\n"
            "  static_cast<void>(sizeof(cudaError_t)); auto e2 = static_cast<cudaError_t>(0); (void)e2;\n"
            "  std::exit(err == cudaSuccess ? 0 : 1);\n"
            "}\n")
    assert scan_macro_hygiene(part, BASELINE, {"CUDA_CHECK": CUDA_CHECK}, {}, "") == []


def test_a_variable_named_like_a_preamble_dim3_is_no_call():
    # `dim3 grid(...)` in frozen code is a declaration, not a call of `grid`
    frozen = "void helper() { dim3 grid(4); (void)grid; }\n"
    part = "void launch(float* o) { dim3 grid(1); (void)grid; }\n"
    assert scan_macro_hygiene(part, BASELINE, {}, {}, frozen) == []


@pytest.mark.parametrize("text, quote, inside", [
    ("1e+'a", 3, True), ("0x1p-'2", 5, True), ("2E-'0", 3, True), ("value+'0'", 6, False), ("x-'a'", 2, False),
    ("1'000", 1, True),
])
def test_a_number_keeps_its_exponents_sign(text, quote, inside):
    assert text[quote] == "'" and in_number(text, quote) is inside


def test_character_literals_of_more_than_one_character_are_refused():
    assert "character" in {v.rule for v in scan_source("int x = 'ab';\n" + BASELINE)}
    honest = "__global__ void k(int* o) { char a = 'x', b = '\\n', c = '\\x41', d = '\\''; o[0] = 1'000 + a + b + c + d; }\n"
    assert [v for v in scan_source(honest) if v.rule == "character"] == []
