"""Red team round 59 (tests/fixtures/redteam/round59/REPORT.md): C++ declares a name in more spellings
than a reading of the syntax keeps up with (`T(x)[1];`, `T(x){};`, `T(d), x;`, ...). The compiler now
decides: the part built alone has the frozen build-value macros redefined with their names qualified
(`::fprintf`), and must compile to the code it compiles to in one file with the harness
(verify/shipped.py). And a one-argument call of a function (`remember(cudaSuccess);`) is no declaration."""

from __future__ import annotations

import pytest

from kernelloop.verify import policy
from kernelloop.verify.policy import qualified_macro_definitions

from .conftest import FIXTURES
from .test_redteam_round56 import CUDA_CHECK
from .test_shipped import _static

REDTEAM = FIXTURES / "redteam"


@pytest.mark.nvcc
def test_a_binding_in_a_spelling_the_syntax_reading_misses_is_refused_by_the_compiler():
    result = _static("sum_reduction.cu", REDTEAM / "round59" / "decl_suffix" / "candidate_decl_suffix.cu")
    assert "build-identity" in {v.rule for v in result.violations}, result.violations


@pytest.mark.nvcc
def test_an_honest_one_argument_call_passes():
    result = _static("sum_reduction.cu", REDTEAM / "round59" / "honest_one_arg_call" / "honest_one_arg_call.cu")
    assert result.violations == []


@pytest.mark.nvcc
@pytest.mark.parametrize("candidate", [
    "round56/preamble_macro_line/candidate_preamble_line.cu",
    "round57/param_names/candidate_macro_declared.cu",
    "round58/vexing_parse/candidate_vexing_parse.cu",
    "round60/global_overload/candidate_global_overload.cu",  # a global overload: pinned before the part
])
def test_the_compiler_alone_refuses_every_rounds_binding(candidate, monkeypatch):
    # with the reading of the syntax switched off, the qualified build still tells
    monkeypatch.setattr(policy, "scan_macro_hygiene", lambda *args, **kwargs: [])
    result = _static("sum_reduction.cu", REDTEAM / candidate)
    assert "build-identity" in {v.rule for v in result.violations}, result.violations


def test_the_redefinitions_qualify_the_free_names_only():
    text = qualified_macro_definitions("void f() { CUDA_CHECK(cudaGetLastError()); }", "",
                                       {"CUDA_CHECK": CUDA_CHECK, "UNUSED": "(x) f(x, __LINE__)"},
                                       {"stderr": " stderr", "EXIT_FAILURE": " 1"}, "NS")
    pins, undef = text.splitlines()[:2]
    assert pins == ("namespace NS { using ::cudaError_t; using ::cudaGetErrorString; using ::cudaSuccess; "
                    "using ::exit; using ::fprintf; using ::stderr; }")
    assert undef == "#undef CUDA_CHECK" and "UNUSED" not in text
    assert "::NS::cudaError_t err_ = (call)" in text and "err_ != ::NS::cudaSuccess" in text
    assert "::NS::fprintf(::NS::stderr," in text and "::NS::cudaGetErrorString(err_), __FILE__, __LINE__" in text
    assert "::NS::exit(1)" in text


def test_a_macro_calling_a_function_of_its_own_name_and_a_stringizer():
    macros = {"cudaCheck": "(err) (cudaCheck(err, __FILE__, __LINE__))",
              "checkCudaErrors": "(val) check((val), #val, __FILE__, __LINE__)"}
    text = qualified_macro_definitions("void f() { cudaCheck(e); checkCudaErrors(e); }", "", macros, {}, "NS")
    assert "#define cudaCheck(err) (::NS::cudaCheck(err, __FILE__, __LINE__))" in text
    assert "#define checkCudaErrors(val) ::NS::check((val), #val, __FILE__, __LINE__)" in text


def test_no_build_value_macro_no_redefinition():
    assert qualified_macro_definitions("void f() { CHECK(1); }", "", {"CHECK": "(x) if (!(x)) exit(1)"}, {}, "NS") == ""
