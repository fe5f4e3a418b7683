"""Red team round 246's fixtures (tests/fixtures/redteam/round246) pass every gate decided before anything runs:
the policy's source scan here, every static gate with nvcc in the deep tier. What only a GPU decides is
tests/gpu/test_redteam_round246_gpu.py."""

from __future__ import annotations

import pytest

from .conftest import FIXTURES, ROOT
from .redteam_static import assert_passes_source_scan, assert_passes_static_gates

ROUND = FIXTURES / "redteam" / "round246"
LINEAR = FIXTURES / "redteam" / "round244" / "linear_bias.cu"
PAIRS = [(ROOT / "kernels" / "sum_reduction.cu", ROUND / "sum_shape_key.cu"),
         (LINEAR, ROUND / "linear_m1_tail_slow.cu"),
         (LINEAR, ROUND / "linear_m1_tail_wrong.cu"),
         (LINEAR, ROUND / "linear_m1_nearly_twice.cu"),
         (LINEAR, ROUND / "linear_packed_baseline_speed.cu")]
IDS = [cand.stem for _, cand in PAIRS]


@pytest.mark.parametrize(("base", "cand"), PAIRS, ids=IDS)
def test_the_round246_candidates_pass_the_source_scan(base, cand):
    assert_passes_source_scan(base, cand)


@pytest.mark.nvcc
@pytest.mark.parametrize(("base", "cand"), PAIRS, ids=IDS)
def test_the_round246_candidates_pass_the_static_gates(base, cand):
    assert_passes_static_gates(base, cand)
