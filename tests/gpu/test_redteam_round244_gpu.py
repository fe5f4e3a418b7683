"""Red team round 244 on the GPU (tests/fixtures/redteam/round244): a batched fast path keyed on M and N at their
defaults, with a grid covering the preamble's batch count, is rejected at the round draw that moves the batch
alone (`single_size_draws`), in every verification."""

from __future__ import annotations

import pytest

from kernelloop.verify.verdict import Reason

from ..conftest import FIXTURES
from .redteam import verify_shown as _verify

pytestmark = pytest.mark.gpu
ROUND = FIXTURES / "redteam" / "round244"


def test_round244_a_fast_path_at_two_defaults_while_the_batch_moves_is_wrong(tmp_path, record_property):
    v = _verify(ROUND / "batched_affine.cu", ROUND / "defaults_pair_path.cu", tmp_path)
    record_property("verdict", v.summary)
    assert not v.accepted and (Reason.correctness in v.reasons or Reason.memcheck in v.reasons
                               or Reason.run_failed in v.reasons), v.summary


def test_round244_the_baseline_against_itself_is_not_refused_at_its_drawn_sizes(tmp_path, record_property):
    # A/A: moving one size alone is a size the baseline takes (no relation between batch, M and N)
    base = ROUND / "batched_affine.cu"
    v = _verify(base, base, tmp_path)
    record_property("verdict", v.summary)
    assert Reason.correctness not in v.reasons and Reason.run_failed not in v.reasons, v.summary


@pytest.mark.parametrize(("base", "name"), [("head_split.cu", "head_split_heads_path.cu"),
                                            ("linear_bias.cu", "linear_m1_drops_bias.cu")])
def test_round244a_a_path_wrong_where_a_kept_size_meets_a_related_one_or_at_size_one_is_wrong(
        base, name, tmp_path, record_property):
    v = _verify(ROUND / base, ROUND / name, tmp_path)
    record_property("verdict", v.summary)
    assert not v.accepted and (Reason.correctness in v.reasons or Reason.memcheck in v.reasons
                               or Reason.run_failed in v.reasons), v.summary


def test_round244a_strips_of_128_where_cols_is_a_multiple_of_32_are_wrong(tmp_path, record_property):
    from ..conftest import ROOT
    v = _verify(ROOT / "kernels" / "transpose.cu", ROUND / "transpose_strips128.cu", tmp_path)
    record_property("verdict", v.summary)
    assert not v.accepted and (Reason.correctness in v.reasons or Reason.memcheck in v.reasons
                               or Reason.run_failed in v.reasons), v.summary


def test_round244a_an_honest_rewrite_with_chained_sizes_is_not_stopped(tmp_path, record_property):
    v = _verify(ROUND / "repeat_kv.cu", ROUND / "repeat_kv_honest.cu", tmp_path)
    record_property("verdict", v.summary)
    assert Reason.correctness not in v.reasons and Reason.run_failed not in v.reasons, v.summary


@pytest.mark.parametrize(("base", "name"), [(("round164", "policy", "base_kl.cu"), "rowsum_round_aligned_slow.cu"),
                                            (("round219", "base.cu"), "mix_wide_aligned_slow.cu")])
def test_round244b_slow_only_for_aligned_buffers_at_a_round_size_or_on_wide_values_is_rejected(
        base, name, tmp_path, record_property):
    v = _verify(FIXTURES.joinpath("redteam", *base), ROUND / name, tmp_path)
    record_property("verdict", v.summary)
    assert not v.accepted and (Reason.not_faster in v.reasons or Reason.slower in v.reasons), v.summary
