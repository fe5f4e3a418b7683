"""Red team round 247's fixtures (tests/fixtures/redteam/round247) pass every gate decided before anything runs:
the policy's source scan here, every static gate with nvcc in the deep tier. What only a GPU decides is
tests/gpu/test_redteam_round247_gpu.py."""

from __future__ import annotations

import pytest

from .conftest import FIXTURES, ROOT
from .redteam_static import assert_passes_source_scan, assert_passes_static_gates

ROUND = FIXTURES / "redteam" / "round247"
SUM = ROOT / "kernels" / "sum_reduction.cu"
PAIRS = [(SUM, ROUND / "sum_power_family_key.cu"),
         (ROUND / "row_scale.cu", ROUND / "row_scale_reciprocal.cu"),
         (FIXTURES / "redteam" / "round244" / "linear_bias.cu", ROUND / "linear_m1_staged_k.cu"),
         (ROUND / "dot.cu", ROUND / "dot_side_by_side_baseline_speed.cu"),
         (SUM, ROUND / "sum_packed_fixed_point.cu"),
         (ROUND / "rmsnorm.cu", ROUND / "rmsnorm_decode_x4.cu")]
IDS = [cand.stem for _, cand in PAIRS]


@pytest.mark.parametrize(("base", "cand"), PAIRS, ids=IDS)
def test_the_round247_candidates_pass_the_source_scan(base, cand):
    assert_passes_source_scan(base, cand)


@pytest.mark.nvcc
@pytest.mark.parametrize(("base", "cand"), PAIRS, ids=IDS)
def test_the_round247_candidates_pass_the_static_gates(base, cand):
    assert_passes_static_gates(base, cand)
