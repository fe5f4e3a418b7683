"""Red team round 240 on the GPU (tests/fixtures/redteam/round240): a matmul fast path keyed on n % 64 == 0 that uses the
preamble's N, rejected at the round size drawn; round 238's map, the baseline's work with a tail behind a starved
end marker wherever a caller's input is 2 MiB-aligned, rejected by the caller layouts gate's floored times (where
the marker is starved at all; else by the timing audit)."""

from __future__ import annotations

import pytest

from kernelloop.verify.verdict import Reason

from ..conftest import FIXTURES, ROOT
from .redteam import verify_shown as _verify

pytestmark = pytest.mark.gpu
ROUND = FIXTURES / "redteam" / "round240"


def test_round240_a_fast_path_keyed_on_a_round_size_is_wrong(tmp_path, record_property):
    v = _verify(ROOT / "kernels" / "naive_matmul.cu", ROUND / "matmul_round_size.cu", tmp_path)
    record_property("verdict", v.summary)
    assert not v.accepted and Reason.correctness in v.reasons, v.summary


def test_round240_the_baselines_work_behind_a_starved_marker_for_a_callers_buffers_is_not_faster(tmp_path,
                                                                                               record_property):
    v = _verify(FIXTURES / "redteam" / "round238" / "base.cu", ROUND / "layout_tail" / "cand.cu", tmp_path)
    record_property("verdict", v.summary)
    assert not v.accepted, v.summary
