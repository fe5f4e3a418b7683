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


@pytest.mark.nvcc
def test_a_failed_comparison_build_does_not_tell_the_secret_names(tmp_path):
    # a part that does not compile where the frozen names are pinned: the verdict (which reaches an LLM
    # optimizer) names neither the secret namespace nor the secret file
    from kernelloop.config import Settings
    from kernelloop.program.split import candidate_editable_part, split_program
    from kernelloop.tools.nvcc import find_toolchain
    from kernelloop.verify.gate import static_gates
    from kernelloop.verify.shipped import _build_identity_key
    from .conftest import ROOT
    split = split_program((ROOT / "kernels" / "sum_reduction.cu").read_text(), "sum_reduction.cu")
    candidate = (FIXTURES / "redteam" / "round59" / "decl_suffix" / "candidate_decl_suffix.cu").read_text()
    editable, _ = candidate_editable_part(candidate, split, "candidate")
    cache = tmp_path / "cache"
    result = static_gates(split, editable, arch="sm_90", settings=Settings(cache_dir=cache), toolchain=find_toolchain())
    text = " ".join(v.detail for v in result.violations)
    assert result.violations and _build_identity_key(cache) not in text, text
