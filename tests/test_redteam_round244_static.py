"""Red team round 244's fixtures (tests/fixtures/redteam/round244) pass every gate decided before anything runs:
the policy's source scan here, every static gate with nvcc in the deep tier. What only a GPU decides is
tests/gpu/test_redteam_round244_gpu.py."""

from __future__ import annotations

import pytest

from .conftest import FIXTURES, ROOT
from .redteam_static import assert_passes_source_scan, assert_passes_static_gates

ROUND = FIXTURES / "redteam" / "round244"
PAIRS = [(ROUND / "batched_affine.cu", ROUND / "defaults_pair_path.cu"),
         (ROUND / "head_split.cu", ROUND / "head_split_heads_path.cu"),
         (ROUND / "linear_bias.cu", ROUND / "linear_m1_drops_bias.cu"),
         (ROOT / "kernels" / "transpose.cu", ROUND / "transpose_strips128.cu"),
         (ROUND / "repeat_kv.cu", ROUND / "repeat_kv_honest.cu"),
         (FIXTURES / "redteam" / "round164" / "policy" / "base_kl.cu", ROUND / "rowsum_round_aligned_slow.cu"),
         (FIXTURES / "redteam" / "round219" / "base.cu", ROUND / "mix_wide_aligned_slow.cu")]
IDS = ["defaults_pair_path", "head_split_heads_path", "linear_m1_drops_bias", "transpose_strips128",
       "repeat_kv_honest", "rowsum_round_aligned_slow", "mix_wide_aligned_slow"]


@pytest.mark.parametrize(("base", "cand"), PAIRS, ids=IDS)
def test_the_round244_candidates_pass_the_source_scan(base, cand):
    assert_passes_source_scan(base, cand)


@pytest.mark.nvcc
@pytest.mark.parametrize(("base", "cand"), PAIRS, ids=IDS)
def test_the_round244_candidates_pass_the_static_gates(base, cand):
    assert_passes_static_gates(base, cand)
