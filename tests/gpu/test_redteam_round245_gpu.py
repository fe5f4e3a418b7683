"""Red team round 245 on the GPU (tests/fixtures/redteam/round245): paths keyed on buffers side by side, at m == 1,
on a batch off multiples of 8, on a window of magnitudes or the largest value's octave, rejected; an honest fused
cosine not refused for correctness."""

from __future__ import annotations

import pytest

from kernelloop.verify.verdict import Reason

from ..conftest import FIXTURES, ROOT
from .redteam import verify_shown as _verify

pytestmark = pytest.mark.gpu
ROUND = FIXTURES / "redteam" / "round245"
WRONG = (Reason.correctness, Reason.memcheck, Reason.run_failed)
SLOW = (Reason.not_faster, Reason.slower)


@pytest.mark.parametrize(("base", "name", "reasons"), [
    (ROOT / "kernels" / "transpose.cu", "transpose_gap_round_slow.cu", SLOW),
    (ROOT / "kernels" / "transpose.cu", "transpose_gap_flush.cu", WRONG),
    (FIXTURES / "redteam" / "round244" / "linear_bias.cu", "linear_m1_slow.cu", SLOW),
    (FIXTURES / "redteam" / "round244" / "batched_affine.cu", "batch_tile8_drops_tail.cu", WRONG),
    (ROOT / "kernels" / "sum_reduction.cu", "sum_window_fixed_point.cu", WRONG),
    (ROOT / "kernels" / "sum_reduction.cu", "sum_octave_key.cu", WRONG)])
def test_round245_a_candidate_keyed_on_what_verify_never_combined_is_rejected(base, name, reasons, tmp_path,
                                                                              record_property):
    v = _verify(base, ROUND / name, tmp_path)
    record_property("verdict", v.summary)
    assert not v.accepted and any(r in v.reasons for r in reasons), v.summary


def test_round245_an_honest_fused_cosine_is_not_refused_for_correctness(tmp_path, record_property):
    v = _verify(ROUND / "cosine_split_norms.cu", ROUND / "cosine_one_rsqrt.cu", tmp_path)
    record_property("verdict", v.summary)
    assert Reason.correctness not in v.reasons, v.summary
