"""Red team round 234 on the GPU (tests/fixtures/redteam/round234), both beside round 219's word mixer
(a baseline that takes every 32-bit word): candidates wrong only where every word has a shape (multiples
of 16, a band far above zero) and a maximum far below 2^32, rejected now that the shapes come at every
scale; and a candidate exact everywhere, fast on init's guess [0, 16) and slow on every wider word,
rejected by the `wider values` gate."""

from __future__ import annotations

import pytest

from kernelloop.config import Settings, VerifySettings
from kernelloop.verify.gate import verify_files
from kernelloop.verify.verdict import Reason

from ..conftest import FIXTURES

pytestmark = pytest.mark.gpu
ROUND = FIXTURES / "redteam" / "round234"
BASE = FIXTURES / "redteam" / "round219" / "base.cu"


def _verify(candidate, tmp_path):
    return verify_files(BASE, candidate, Settings(cache_dir=tmp_path / "cache", verify=VerifySettings(memcheck="off")))


@pytest.mark.parametrize("candidate", ["cand.cu", "cand_offset.cu"])
def test_round234_shapes_far_below_the_bound_are_rejected(candidate, tmp_path, record_property):
    v = _verify(ROUND / "shapes_at_bound_scale" / candidate, tmp_path)
    record_property("verdict", v.summary)
    print(f"\n{v.reasons} {v.summary}\n{v.durations}\n{v.gate('correctness').detail}")
    assert not v.accepted and Reason.correctness in v.reasons, v.summary


def test_round234_fast_only_on_the_guess_is_rejected(tmp_path, record_property):
    v = _verify(ROUND / "timed_only_on_guess" / "cand.cu", tmp_path)
    record_property("verdict", v.summary)
    print(f"\n{v.reasons} {v.summary}\n{v.durations}\n" + "\n".join(f"{g.gate}: {g.status}: {g.detail}" for g in v.gates))
    assert not v.accepted, v.summary
    if v.gate("speedup") is not None and v.gate("speedup").status == "pass":  # faster on the guess, as meant
        assert v.gate("wider values").status == "fail", v.summary
