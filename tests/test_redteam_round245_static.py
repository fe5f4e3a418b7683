"""Red team round 245's fixtures (tests/fixtures/redteam/round245) pass every gate decided before anything runs:
the policy's source scan here, every static gate with nvcc in the deep tier. What only a GPU decides is
tests/gpu/test_redteam_round245_gpu.py."""

from __future__ import annotations

import pytest

from .conftest import FIXTURES, ROOT
from .redteam_static import assert_passes_source_scan, assert_passes_static_gates

ROUND = FIXTURES / "redteam" / "round245"
LINEAR = FIXTURES / "redteam" / "round244" / "linear_bias.cu"
BATCHED = FIXTURES / "redteam" / "round244" / "batched_affine.cu"
PAIRS = [(ROOT / "kernels" / "transpose.cu", ROUND / "transpose_gap_round_slow.cu"),
         (ROOT / "kernels" / "transpose.cu", ROUND / "transpose_gap_flush.cu"),
         (LINEAR, ROUND / "linear_m1_slow.cu"),
         (BATCHED, ROUND / "batch_tile8_drops_tail.cu"),
         (ROOT / "kernels" / "sum_reduction.cu", ROUND / "sum_window_fixed_point.cu"),
         (ROOT / "kernels" / "sum_reduction.cu", ROUND / "sum_octave_key.cu"),
         (ROUND / "cosine_split_norms.cu", ROUND / "cosine_one_rsqrt.cu")]
IDS = [cand.stem for _, cand in PAIRS]


@pytest.mark.parametrize(("base", "cand"), PAIRS, ids=IDS)
def test_the_round245_candidates_pass_the_source_scan(base, cand):
    assert_passes_source_scan(base, cand)


@pytest.mark.nvcc
@pytest.mark.parametrize(("base", "cand"), PAIRS, ids=IDS)
def test_the_round245_candidates_pass_the_static_gates(base, cand):
    assert_passes_static_gates(base, cand)
