"""Red team round 87 (tests/fixtures/redteam/round87/): code a rewrite writes calls a library name
unqualified inside the program's namespace, where the program's own overload of that name is
found first (an `int fmaxf(int, int)`, an `int expf(int)`); and a name declared through a macro
(`ACT_UNARY(exp, exp2f(x))`) was not seen as declared. CPU only."""

from __future__ import annotations


import pytest

from kernelloop.optimizers.offline.analysis import names_the_rewrite_adds
from kernelloop.optimizers.offline.cparse import called_names, declared_names

from .conftest import FIXTURES
from .test_redteam_round85 import _proposals

ROUND = FIXTURES / "redteam" / "round87"


@pytest.mark.parametrize("path, declared", [("ns_fmaxf_overload_row/baseline.cu", "fmaxf"),
                                            ("ns_fmaxf_overload_row/baseline_int.cu", "fmaxf"),
                                            ("ns_expf_overload_template/baseline.cu", "expf"),
                                            ("macro_defined_exp/baseline.cu", "exp")])
def test_no_rewrite_calls_a_name_the_program_gives_its_own_meaning(path, declared):
    # round 87 found these rewrites calling the namespace's own overload; round 88 wrote the calls a
    # rewrite adds as `::fmaxf`; rounds 138-142 found `::name` reaching the program's own
    # declarations too (a global template, an inline namespace), so now a rewrite that adds a call
    # of a name the program declares anywhere is not proposed at all
    sources = _proposals(ROUND / path)
    added = [line for source in sources for line in source.splitlines()
             if "kl_" in line and f"::{declared}(" in line]
    assert added == [], added


def test_a_name_passed_to_a_function_like_macro_or_declared_in_a_macro_body_counts_as_declared():
    names = declared_names("""
#define ACT_UNARY(name, expr) __device__ float name(float x) { return expr; }
#define DEFINE_LOG __device__ float log(float x) { return log2f(x); }
namespace act { ACT_UNARY(exp, exp2f(x)); DEFINE_LOG }
""")
    assert {"exp", "log"} <= names


def test_only_unqualified_calls_depend_on_their_scope():
    assert called_names("void f() { ::expf(1.f); ns::g(2); h<float>(3); k<<<1, 1>>>(); m(4); }") == {"h", "k", "m"}
    editable = "namespace a { __device__ int fmaxf(int x, int y) { return x > y ? x : y; } }"
    assert names_the_rewrite_adds(editable, "", "", editable + "\n__global__ void q() { fmaxf(1.f, 2.f); }") == ["fmaxf"]
