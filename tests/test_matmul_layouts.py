"""The matmul family on operands stored transposed (A^T * B: a weight gradient; A * B^T: llm.c's
matmul_forward), recognised by their indexing; the candidate copies such an operand into
row-major form each call (a tiled transpose into a workspace the launcher keeps) and runs the
same GEMM templates. Fixtures: tests/fixtures/outside/matmul_atb_naive.cu, matmul_abt_llmc.cu."""

from __future__ import annotations

import re

import pytest

from kernelloop.config import Settings
from kernelloop.optimizers.offline.optimizer import OfflineOptimizer
from kernelloop.program.init import InitSpec, generate
from kernelloop.program.split import split_program

from .conftest import shared_cache_dir
from .outside_specs import OUTSIDE
from .test_offline_optimizer import request_for

SPECS = {
    "matmul_atb_naive.cu": InitSpec(values={"M": ["1024", "333"], "N": ["1024", "257"], "K": ["2048", "129"]},
                                    counts={"x": "K * M", "dy": "K * N", "dw": "M * N"}, roles={"dw": "output"}),
    "matmul_abt_llmc.cu": InitSpec(values={"BT": ["2048", "777"], "C": ["768", "129"], "OC": ["768", "333"],
                                           "sqrt_block_size": ["16"]},
                                   counts={"out": "BT * OC", "inp": "BT * C", "weight": "OC * C"},
                                   roles={"out": "output"}),
}
EXPECTED = {
    "matmul_atb_naive.cu": ("A[k*M + r] (A stored transposed) * B[k*N + c]", "row_major_a(x, (int)(K), (int)(M), 0)"),
    "matmul_abt_llmc.cu": ("A[r*K + k] * B[c*K + k] (B stored transposed)", "row_major_b(weight, (int)(OC), (int)(C), 0)"),
}


def _program(name: str) -> str:
    return generate((OUTSIDE / name).read_text(), SPECS[name], name).program


@pytest.mark.parametrize("name", sorted(SPECS))
def test_an_operand_stored_transposed_is_recognised_and_copied_into_row_major_form(name):
    proposal = OfflineOptimizer().propose(request_for(_program(name), "mm"))
    read, argument = EXPECTED[name]
    assert read in proposal.notes[0], proposal.notes
    launcher = proposal.source[proposal.source.rindex("\nvoid "):]
    assert argument in launcher and "matmul_run(" in launcher, launcher


def test_a_transposed_operand_whose_stride_is_not_the_other_dimension_is_no_gemm():
    text = (OUTSIDE / "matmul_atb_naive.cu").read_text().replace("x[k * M + r]", "x[k * N + r]")
    program = generate(text, SPECS["matmul_atb_naive.cu"], "matmul_atb_naive.cu").program
    split = split_program(program, "p.cu")
    analysis = OfflineOptimizer().analysis(split.editable, split.harness, split.exported, split.preamble)
    assert not analysis.matches
    assert "matmul: no factor indexed row*K + k (or k*M + row, A stored transposed)" in analysis.no_fit_message()


@pytest.mark.nvcc
@pytest.mark.parametrize("name", sorted(SPECS))
def test_the_proposal_passes_the_static_gates(name):
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


def test_the_transposed_copy_runs_once_per_call_and_not_where_the_baseline_runs():
    # the launch guard's size check gets the operands as written: only the template's own call copies
    proposal = OfflineOptimizer().propose(request_for(_program("matmul_abt_llmc.cu"), "mm"))
    launcher = proposal.source[proposal.source.rindex("\nvoid "):]
    assert launcher.count("row_major_b(") == 1, launcher
    assert re.search(r"matmul_fits\(inp, weight, out,", launcher), launcher
