"""Red team round 56 (tests/fixtures/redteam/round56/REPORT.md): a value of the build through the
frozen code's own macros (CUDA_CHECK's __LINE__ kept by local objects named like the names it
calls), and a character both lexers read differently from the compiler (`$` in an identifier)."""

from __future__ import annotations

import pytest

from kernelloop.verify.policy import scan_macro_hygiene, scan_source

from .conftest import FIXTURES
from .test_shipped import _static

ROUND56 = FIXTURES / "redteam" / "round56"

CUDA_CHECK = ("(call) do { cudaError_t err_ = (call); if (err_ != cudaSuccess) { fprintf(stderr, \"%s at %s:%d\\n\", "
              "cudaGetErrorString(err_), __FILE__, __LINE__); exit(1); } } while (0)")
BASELINE = "__global__ void k(float* o) { o[0] = 1; }\nvoid launch(float* o) { k<<<1, 1>>>(o); }\n"


@pytest.mark.nvcc
@pytest.mark.parametrize("candidate, rule", [
    ("preamble_macro_line/candidate_preamble_line.cu", "macro-hygiene"),
    ("dollar_identifier_desync/candidate_dollar_desync.cu", "character"),
    ("dollar_identifier_desync/candidate_dollar_desync_plain.cu", "character"),
])
def test_the_rounds_candidates_are_refused(candidate, rule):
    result = _static("sum_reduction.cu", ROUND56 / candidate)
    assert rule in {v.rule for v in result.violations}, result.violations


def test_names_a_build_value_macro_leaves_to_lookup_may_not_be_declared():
    for declared in ("fprintf", "stderr", "exit", "cudaGetErrorString"):
        part = (f"struct S {{ constexpr void operator()(...) const {{}} }};\n"
                f"constexpr int f() {{ S {declared}{{}}; CUDA_CHECK(cudaSuccess); return 0; }}\n" + BASELINE)
        found = scan_macro_hygiene(part, BASELINE, {"CUDA_CHECK": CUDA_CHECK}, {}, "")
        assert [v.rule for v in found] == ["macro-hygiene"] and declared in found[0].detail, (declared, found)


def test_through_the_parts_own_macro_too():
    part = "#define MINE(x) CUDA_CHECK(x)\nint exit = 0;\nvoid g() { MINE(cudaSuccess); }\n" + BASELINE
    assert scan_macro_hygiene(part, BASELINE, {"CUDA_CHECK": CUDA_CHECK}, {}, "")


def test_an_honest_part_using_the_macro_and_its_own_err_passes():
    part = ("__global__ void k2(float* o) { o[0] = 2; }\n"
            "void launch(float* o) { cudaError_t err_ = cudaSuccess; int call = 0; k2<<<1, 1>>>(o);\n"
            "  CUDA_CHECK(cudaGetLastError()); (void)err_; (void)call; }\n")
    assert scan_macro_hygiene(part, BASELINE, {"CUDA_CHECK": CUDA_CHECK}, {}, "") == []


def test_a_macro_without_a_build_value_leaves_its_names_alone():
    part = "int fprintf_count = 0;\nstruct exit_code { int v; };\nvoid g() { CHECK(1); }\n" + BASELINE
    assert scan_macro_hygiene(part, BASELINE, {"CHECK": "(x) do { if (!(x)) exit(1); } while (0)"}, {}, "") == []


def test_an_overload_of_what_the_frozen_code_calls_is_refused():
    # a header's template `check(result, ..., line)` calls `_cudaGetErrorEnum(result)` and fprintf
    # unqualified: argument-dependent lookup would find the part's own overloads
    frozen = ("template <class T> void check(T r, const char* f, int line) { if (r) { "
              "fprintf(stderr, \"%s:%d %s\", f, line, _cudaGetErrorEnum(r)); exit(1); } }\n")
    part = "namespace spy { struct E {}; const char* _cudaGetErrorEnum(E) { return \"\"; } }\n" + BASELINE
    found = scan_macro_hygiene(part, BASELINE, {}, {}, frozen)
    assert [v.rule for v in found] == ["macro-hygiene"] and "_cudaGetErrorEnum" in found[0].detail


def test_what_the_baseline_declares_itself_stays_allowed():
    frozen = "void run_all(float* o) { launch(o); }\n"  # frozen code calling the part's launcher
    assert scan_macro_hygiene(BASELINE, BASELINE, {}, {}, frozen) == []


@pytest.mark.parametrize("code", [
    "#define KL$1 1 +\nstatic constexpr int kOne = KL$1'/' - '/';\n",
    "static constexpr int caf\u00e9 = 1;\n",
    "static constexpr int k = 1; static constexpr int j = k @ 2;\n",
    "static constexpr int \\u0061bc = 1;\n",
])
def test_characters_outside_cpp_basic_set_are_refused_in_code(code):
    assert "character" in {v.rule for v in scan_source(code + BASELINE)}


def test_such_characters_in_comments_and_literals_are_fine():
    code = ("// caf\u00e9 costs $3 @ noon `x` \\ done\n/* \u00b5s */\n"
            "static const char* note = \"$ @ ` \\\\ \u00e9\"; static const char c = '$';\n")
    assert [v for v in scan_source(code + BASELINE) if v.rule == "character"] == []


def test_a_macro_bodys_literals_are_literals_to_both_readings():
    # tree-sitter leaves a macro's body as text: an llm.c-style cudaCheck's "\n" is not code
    code = ('#define cudaCheck(call) do { cudaError_t e = (call); if (e != cudaSuccess) { \\\n'
            '  printf("CUDA error %s at %s:%d\\n", cudaGetErrorString(e), __FILE__, __LINE__); exit(1); } } while (0)\n')
    assert [v for v in scan_source(code + BASELINE) if v.rule == "character"] == []
    assert "character" in {v.rule for v in scan_source("#define X(c) c $\n" + BASELINE)}
