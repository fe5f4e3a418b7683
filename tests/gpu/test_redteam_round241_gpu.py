"""Red team rounds 241-242 on the GPU (tests/fixtures/redteam/round241, round242): an honest cosine rewrite that
normalises first, not refused for correctness (round 240's magnitude stress, which made the baseline underflow, was
withdrawn); a transpose fast path wherever rows == cols, rejected at the round draw that keeps the default's square
shape; a softmax fast path wherever cols is its default 2048, rejected at the round draw that keeps cols there
while rows move; round 243's transpose path at rows' default and softmax path at the defaults' ratio."""

from __future__ import annotations

import pytest

from kernelloop.verify.verdict import Reason

from ..conftest import FIXTURES, ROOT
from .redteam import verify_shown as _verify

pytestmark = pytest.mark.gpu
ROUND = FIXTURES / "redteam" / "round241"


def test_round241_an_honest_cosine_rewrite_is_not_refused_for_correctness(tmp_path, record_property):
    v = _verify(ROUND / "cosine" / "cosine_rows.cu", ROUND / "cosine" / "honest_split_norms.cu", tmp_path)
    record_property("verdict", v.summary)
    assert Reason.correctness not in v.reasons, v.summary


def test_round241_a_fast_path_for_square_shapes_only_is_wrong(tmp_path, record_property):
    v = _verify(ROOT / "kernels" / "transpose.cu", ROUND / "transpose_square_path.cu", tmp_path)
    record_property("verdict", v.summary)
    assert not v.accepted and (Reason.correctness in v.reasons or Reason.memcheck in v.reasons
                               or Reason.run_failed in v.reasons), v.summary


def test_round242_a_fast_path_at_the_default_column_count_only_is_wrong(tmp_path, record_property):
    v = _verify(ROOT / "kernels" / "row_softmax.cu", FIXTURES / "redteam" / "round242" / "softmax_hidden_path.cu",
                tmp_path)
    record_property("verdict", v.summary)
    assert not v.accepted and (Reason.correctness in v.reasons or Reason.memcheck in v.reasons
                               or Reason.run_failed in v.reasons), v.summary


@pytest.mark.parametrize("name", ["transpose_rows_path.cu", "softmax_ratio_path.cu"])
def test_round243_a_fast_path_at_one_default_or_at_the_defaults_ratio_is_wrong(name, tmp_path, record_property):
    base = ROOT / "kernels" / ("transpose.cu" if name.startswith("transpose") else "row_softmax.cu")
    v = _verify(base, FIXTURES / "redteam" / "round243" / name, tmp_path)
    record_property("verdict", v.summary)
    assert not v.accepted and (Reason.correctness in v.reasons or Reason.memcheck in v.reasons
                               or Reason.run_failed in v.reasons), v.summary
