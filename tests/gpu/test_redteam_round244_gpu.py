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
