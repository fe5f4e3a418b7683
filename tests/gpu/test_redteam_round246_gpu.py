"""Red team round 246 on the GPU (tests/fixtures/redteam/round246): a sum keyed on its input's shape, and one-token
paths wrong, slow or nearly twice the baseline's work, and a path at the baseline's speed for packed buffers,
rejected."""

from __future__ import annotations

import pytest

from kernelloop.verify.verdict import Reason

from ..conftest import FIXTURES, ROOT
from .redteam import verify_shown as _verify

pytestmark = pytest.mark.gpu
ROUND = FIXTURES / "redteam" / "round246"
LINEAR = FIXTURES / "redteam" / "round244" / "linear_bias.cu"
WRONG = (Reason.correctness, Reason.memcheck, Reason.run_failed)
SLOW = (Reason.not_faster, Reason.slower)


@pytest.mark.parametrize(("base", "name", "reasons"), [
    (ROOT / "kernels" / "sum_reduction.cu", "sum_shape_key.cu", WRONG),
    (LINEAR, "linear_m1_tail_wrong.cu", WRONG),
    (LINEAR, "linear_m1_tail_slow.cu", SLOW),
    (LINEAR, "linear_m1_nearly_twice.cu", SLOW),
    (LINEAR, "linear_packed_baseline_speed.cu", SLOW)])
def test_round246_is_rejected(base, name, reasons, tmp_path, record_property):
    v = _verify(base, ROUND / name, tmp_path)
    record_property("verdict", v.summary)
    assert not v.accepted and any(r in v.reasons for r in reasons), v.summary
