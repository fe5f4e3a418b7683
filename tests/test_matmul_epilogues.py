"""The matmul family on GEMMs as real code writes them: a sum that starts at a bias (llm.c's linear
layer, `(bias != NULL) ? bias[oc] : 0.0f`), a bias and an activation applied where the sum is
stored, a template kernel read as the one instantiation the program launches, a flat thread index
split into the row and the column (`row = idx / n; col = idx % n`). The templates' functor
computes the baseline's own start and epilogue, so the sum's sequence of fmaf is unchanged.
Fixtures: tests/fixtures/outside/linear_bias_llmc.cu, gemm_bias_relu.cu, gemm_template_ldg.cu,
gemm_flat_index.cu."""

from __future__ import annotations

import pytest

from kernelloop.config import Settings
from kernelloop.optimizers.offline.optimizer import OfflineOptimizer
from kernelloop.program.init import generate
from kernelloop.program.split import split_program

from .conftest import ROOT, shared_cache_dir
from .outside_specs import OUTSIDE, SPECS
from .test_offline_optimizer import analysis_of, request_for

EXPECTED = {
    "linear_bias_llmc.cu": ("the sum starting at (kl_v0 != nullptr) ? kl_v0[c] : 0.0f (kl_v0=bias)", "bias"),
    "gemm_bias_relu.cu": ("((acc + kl_v0[c]) > 0.0f) ? (acc + kl_v0[c]) : 0.0f of the sum acc", "bias"),
    "gemm_template_ldg.cu": ("C[r*N + c] = the sum, the sum over k < K of A[r*K + k] * B[k*N + c]", None),
    "gemm_flat_index.cu": ("the sum over k < K of A[r*K + k] * B[k*N + c] (A=a, B=b, C=c, M=m, N=n, K=k)", None),
}


def _program(name: str) -> str:
    return generate((OUTSIDE / name).read_text(), SPECS[name], name).program


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_a_gemm_as_real_code_writes_it_is_recognised(name):
    proposal = OfflineOptimizer().propose(request_for(_program(name), "mm"))
    detail, vector = EXPECTED[name]
    assert proposal.notes[0].startswith("matmul recognized") and detail in proposal.notes[0], proposal.notes
    run = proposal.source[proposal.source.rindex("_matmul_run("):].split(";")[0]
    if vector:  # the vector is handed to the template after the sizes, before the stream
        assert run.endswith(f", {vector}, 0)"), run


def test_the_sum_starts_where_the_baseline_starts_it():
    text = (ROOT / "kernels" / "naive_matmul.cu").read_text().replace("float acc = 0.0f;", "float acc = 1.0f;")
    (match,) = analysis_of(text).matches
    assert match.placeholders["EPI_START"] == "1.0f" and match.placeholders["EPILOGUE"] == "acc"
    for cand in OfflineOptimizer().candidates(request_for(text)):
        assert "float start(int r, int c) const { return 1.0f; }" in cand.source
        assert "epilogue.start(row, col)" in cand.source


def test_a_template_kernel_whose_launches_differ_in_type_is_not_read_as_either():
    text = (OUTSIDE / "gemm_template_ldg.cu").read_text().replace(
        "  gemm_naive_kernel<float><<<grid, block>>>(A, B, C, M, N, K);",
        "  if (M > 0) gemm_naive_kernel<float><<<grid, block>>>(A, B, C, M, N, K);\n"
        "  else gemm_naive_kernel<int><<<grid, block>>>((const int*)A, (const int*)B, (int*)C, M, N, K);")
    program = generate(text, SPECS["gemm_template_ldg.cu"], "gemm_template_ldg.cu").program
    split = split_program(program, "p.cu")
    analysis = OfflineOptimizer().analysis(split.editable, split.harness, split.exported, split.preamble)
    assert not any(m.family == "matmul" for m in analysis.matches)


@pytest.mark.nvcc
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_the_proposal_passes_the_static_gates_on_an_ampere_target(name):
    from kernelloop.tools.nvcc import find_toolchain
    from kernelloop.verify.gate import candidate_editable_part, static_gates

    program = _program(name)
    proposal = OfflineOptimizer().propose(request_for(program, "mm"))
    split = split_program(program, "generated.cu")
    editable, _ = candidate_editable_part(proposal.source, split)
    result = static_gates(split, editable, arch="sm_86", settings=Settings(cache_dir=shared_cache_dir()),
                          toolchain=find_toolchain())
    assert result.candidate is not None and result.candidate.ok, result.candidate.log[-1500:]
    assert not result.violations, [v.describe() for v in result.violations]


@pytest.mark.parametrize("change, why", [
    # the split covers only part of the outputs: a second bound
    (("if (idx >= m * n) return;", "if (idx >= m * n || idx < 5) return;"), "a condition selects"),
    # the remainder by another extent than the quotient: not a bijection onto row < M, col < N
    (("int col = idx % n;", "int col = idx % k;"), "flat index split"),
    # the quotient by the column count, the store at row * m + col: the row stride is not the divisor
    (("c[idx] = s;", "c[row * m + col] = s;"), "row stride is not the divisor"),
    # the guard bounds the index by something other than M times the divisor
    (("if (idx >= m * n) return;", "if (idx >= m * k) return;"), "no guard i < M * n"),
])
def test_a_flat_index_split_is_read_only_where_it_names_every_output_once(change, why):
    text = _program("gemm_flat_index.cu")
    assert change[0] in text
    analysis = analysis_of(text.replace(*change), "mm")
    assert not any(m.family == "matmul" for m in analysis.matches)
    assert why in analysis.no_fit_message(), analysis.no_fit_message()


def test_a_flat_index_split_stored_at_row_and_column_is_read_too():
    text = _program("gemm_flat_index.cu").replace("c[idx] = s;", "c[row * n + col] = s;")
    (match,) = [m for m in analysis_of(text, "mm").matches if m.family == "matmul"]
    assert "M=m, N=n, K=k" in match.detail


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_register_blocking_comes_first_whatever_the_launcher_names_its_locals(name):
    # gemm_flat_index's launcher declares `const int blocks`, and the template's own helper was a lambda called
    # `blocks`: every register-blocking rewrite "called a name the program declares" and only shared-memory tiling
    # was proposed (1.48x accepted on an H100 where the template GEMM got 6.40x). A template's own names are kl_ ones.
    proposal = OfflineOptimizer().propose(request_for(_program(name), "mm"))
    assert proposal.approach.startswith("register blocking"), (proposal.approach, proposal.notes)


def test_a_template_calls_only_its_own_names_and_the_librarys():
    # what a template calls resolves to itself or the library whatever the program declares: its helpers, lambdas
    # and functors are named kl_... (a launcher's local `blocks` or `epilogue` is the program's, anywhere)
    import re

    from kernelloop.optimizers.offline.analysis import called_names

    templates = sorted((ROOT / "src" / "kernelloop" / "exemplars" / "templates").glob("*.cu.in"))
    assert templates
    for path in templates:
        text = re.sub(r"\{\{[A-Z_]+\}\}", "1", path.read_text())
        foreign = {n for n in called_names(text) if not re.match(r"(?:kl|Kl|KL)_|Kl[A-Z]", n)} - {"reinterpret_cast"}
        assert not foreign, (path.name, foreign)
