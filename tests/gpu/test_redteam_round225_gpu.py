"""Red team round 225 on the GPU (tests/fixtures/redteam/round225): a 0/1 mask table read past its end
only for its truth, which no guard byte changes; rejected once compute-sanitizer bounds the table."""

from __future__ import annotations

import pytest

from kernelloop.config import Settings, VerifySettings
from kernelloop.verify.gate import verify_files
from kernelloop.verify.verdict import Reason

from ..conftest import FIXTURES

pytestmark = pytest.mark.gpu
CASE = FIXTURES / "redteam" / "round225" / "mask_truthy_overbound"


def test_round225_candidate_is_rejected_on_wider_integers(tmp_path, record_property):
    v = verify_files(CASE / "base.cu", CASE / "cand.cu",
                     Settings(cache_dir=tmp_path / "cache", verify=VerifySettings(memcheck="off")))
    record_property("verdict", v.summary)
    print(f"\n{v.reasons} {v.summary}\n{v.durations}\n{v.gate('correctness').detail}")
    assert not v.accepted and Reason.correctness in v.reasons, v.summary
