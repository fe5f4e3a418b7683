"""Red team round 247 on the GPU (tests/fixtures/redteam/round247): a sum keyed on its input's quantiles, a one-token
path capping k, the baseline's speed for buffers side by side, a fixed point for packed buffers, and a kernel four
times over at one row, rejected; an honest reciprocal rewrite not refused for correctness."""

from __future__ import annotations

import pytest

from kernelloop.verify.verdict import Reason

from ..conftest import FIXTURES, ROOT
from .redteam import verify_shown as _verify

pytestmark = pytest.mark.gpu
ROUND = FIXTURES / "redteam" / "round247"
SUM = ROOT / "kernels" / "sum_reduction.cu"
WRONG = (Reason.correctness, Reason.memcheck, Reason.run_failed)
SLOW = (Reason.not_faster, Reason.slower)


@pytest.mark.parametrize(("base", "name", "reasons"), [
    (SUM, "sum_power_family_key.cu", WRONG),
    (FIXTURES / "redteam" / "round244" / "linear_bias.cu", "linear_m1_staged_k.cu", WRONG),
    (ROUND / "dot.cu", "dot_side_by_side_baseline_speed.cu", SLOW),
    (SUM, "sum_packed_fixed_point.cu", WRONG),
    (ROUND / "rmsnorm.cu", "rmsnorm_decode_x4.cu", SLOW)])
def test_round247_is_rejected(base, name, reasons, tmp_path, record_property):
    v = _verify(base, ROUND / name, tmp_path)
    record_property("verdict", v.summary)
    assert not v.accepted and any(r in v.reasons for r in reasons), v.summary


def test_round247_an_honest_reciprocal_rewrite_is_not_refused_for_correctness(tmp_path, record_property):
    v = _verify(ROUND / "row_scale.cu", ROUND / "row_scale_reciprocal.cu", tmp_path)
    record_property("verdict", v.summary)
    assert Reason.correctness not in v.reasons, v.summary
