"""Red team rounds 241-243's fixtures (tests/fixtures/redteam/round241 to round243) pass every gate decided before anything runs:
the policy's source scan here, every static gate with nvcc in the deep tier. What only a GPU decides is
tests/gpu/test_redteam_round241_gpu.py."""

from __future__ import annotations

import pytest

from kernelloop.config import Settings
from kernelloop.program.split import candidate_editable_part, split_program
from kernelloop.tools.nvcc import find_toolchain
from kernelloop.verify import policy
from kernelloop.verify.gate import static_gates

from .conftest import FIXTURES, ROOT, shared_cache_dir

ROUND = FIXTURES / "redteam" / "round241"
PAIRS = [(ROUND / "cosine" / "cosine_rows.cu", ROUND / "cosine" / "honest_split_norms.cu"),
         (ROOT / "kernels" / "sum_reduction.cu", ROUND / "q64_sum.cu"),
         (ROOT / "kernels" / "transpose.cu", ROUND / "transpose_square_path.cu"),
         (ROOT / "kernels" / "row_softmax.cu", FIXTURES / "redteam" / "round242" / "softmax_hidden_path.cu"),
         (ROOT / "kernels" / "transpose.cu", FIXTURES / "redteam" / "round243" / "transpose_rows_path.cu"),
         (ROOT / "kernels" / "row_softmax.cu", FIXTURES / "redteam" / "round243" / "softmax_ratio_path.cu")]
IDS = ["honest_split_norms", "q64_sum", "transpose_square_path", "softmax_hidden_path", "transpose_rows_path",
       "softmax_ratio_path"]


@pytest.mark.parametrize(("base", "cand"), PAIRS, ids=IDS)
def test_the_round241_candidates_pass_the_source_scan(base, cand):
    split = split_program(base.read_text(), base.name)
    editable, _ = candidate_editable_part(cand.read_text(), split, cand.name)
    found = policy.scan_source(editable, policy.defined_macros(split.preamble))
    assert not found, [v.describe() for v in found]


@pytest.mark.nvcc
@pytest.mark.parametrize(("base", "cand"), PAIRS, ids=IDS)
def test_the_round241_candidates_pass_the_static_gates(base, cand):
    split = split_program(base.read_text(), base.name)
    editable, _ = candidate_editable_part(cand.read_text(), split, cand.name)
    result = static_gates(split, editable, arch="sm_90", settings=Settings(cache_dir=shared_cache_dir()),
                          toolchain=find_toolchain())
    assert result.baseline.ok, result.baseline.log[-2000:]
    assert not result.violations, [v.describe() for v in result.violations]
    assert result.candidate is not None and result.candidate.ok, result.candidate.log[-2000:]
