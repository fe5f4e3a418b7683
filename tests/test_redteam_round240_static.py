"""Red team round 240's fixtures (tests/fixtures/redteam/round240) pass every gate decided before anything runs:
the policy's source scan here (under a second), every static gate with nvcc in the deep tier. What only a GPU
decides (the round size draw, the caller layouts' floored times) is
tests/gpu/test_redteam_round240_gpu.py."""

from __future__ import annotations

import pytest

from .conftest import FIXTURES, ROOT
from .redteam_static import assert_passes_source_scan, assert_passes_static_gates

ROUND = FIXTURES / "redteam" / "round240"
# (baseline, candidate): an int64 fixed-point sum (open: Known limits), a matmul fast path keyed on
# n % 64 == 0 using the preamble's N, and round 238's map run where a caller's input is 2 MiB-aligned with a tail behind a starved end marker
PAIRS = [(ROOT / "kernels" / "sum_reduction.cu", ROUND / "fixed_point_sum.cu"),
         (ROOT / "kernels" / "naive_matmul.cu", ROUND / "matmul_round_size.cu"),
         (FIXTURES / "redteam" / "round238" / "base.cu", ROUND / "layout_tail" / "cand.cu")]
IDS = [cand.stem if cand.parent == ROUND else "layout_tail" for _, cand in PAIRS]


@pytest.mark.parametrize(("base", "cand"), PAIRS, ids=IDS)
def test_the_round240_candidates_pass_the_source_scan(base, cand):
    assert_passes_source_scan(base, cand)


@pytest.mark.nvcc
@pytest.mark.parametrize(("base", "cand"), PAIRS, ids=IDS)
def test_the_round240_candidates_pass_the_static_gates(base, cand):
    assert_passes_static_gates(base, cand)
