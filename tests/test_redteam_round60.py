"""Red team round 60 (tests/fixtures/redteam/round60/REPORT.md): a global overload of fprintf, declared in
a spelling tree-sitter reads as an expression at namespace scope, is found by `::fprintf` as by
`fprintf`. The qualified build now pins the frozen names before the part (a using-declaration in a
secret namespace takes only what is declared so far); and an expression statement at namespace
scope, which C++ does not have, is read as the declaration it is."""

from __future__ import annotations

import pytest

from kernelloop.verify.policy import scan_macro_hygiene

from .conftest import FIXTURES
from .test_redteam_round56 import BASELINE, CUDA_CHECK
from .test_shipped import _static

ROUND60 = FIXTURES / "redteam" / "round60" / "global_overload"


@pytest.mark.nvcc
def test_the_global_overload_is_refused():
    result = _static("sum_reduction.cu", ROUND60 / "candidate_global_overload.cu")
    assert result.violations, "accepted"


@pytest.mark.parametrize("code", [
    'extern "C++" { [[gnu::alias("impl")]] Sig(unused), fprintf; }',
    "namespace spy { Sig(a), exit; }",
    "Sig(a), stderr;",
])
def test_an_expression_at_namespace_scope_is_a_declaration(code):
    part = code + "\nvoid g() { CUDA_CHECK(cudaSuccess); }\n" + BASELINE
    assert [v.rule for v in scan_macro_hygiene(part, BASELINE, {"CUDA_CHECK": CUDA_CHECK}, {}, "")][:1] == \
        ["macro-hygiene"]
