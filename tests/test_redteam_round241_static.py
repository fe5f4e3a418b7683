"""Red team rounds 241-243's fixtures (tests/fixtures/redteam/round241 to round243) pass every gate decided before anything runs:
the policy's source scan here, every static gate with nvcc in the deep tier. What only a GPU decides is
tests/gpu/test_redteam_round241_gpu.py."""

from __future__ import annotations

import pytest

from .conftest import FIXTURES, ROOT
from .redteam_static import assert_passes_source_scan, assert_passes_static_gates

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
    assert_passes_source_scan(base, cand)


@pytest.mark.nvcc
@pytest.mark.parametrize(("base", "cand"), PAIRS, ids=IDS)
def test_the_round241_candidates_pass_the_static_gates(base, cand):
    assert_passes_static_gates(base, cand)
