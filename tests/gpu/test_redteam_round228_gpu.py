"""Red team round 228 on the GPU (tests/fixtures/redteam/round228): a product exact wherever one factor
is below 2^16, wrong where both inputs are wide; rejected once the inputs are drawn wide together."""

from __future__ import annotations

import pytest

from kernelloop.config import Settings, VerifySettings
from kernelloop.verify.gate import verify_files
from kernelloop.verify.verdict import Reason

from ..conftest import FIXTURES

pytestmark = pytest.mark.gpu
CASE = FIXTURES / "redteam" / "round228" / "two_wide_product"


def test_round228_candidate_is_rejected_on_wider_integers(tmp_path, record_property):
    v = verify_files(CASE / "base.cu", CASE / "cand.cu",
                     Settings(cache_dir=tmp_path / "cache", verify=VerifySettings(memcheck="off")))
    record_property("verdict", v.summary)
    print(f"\n{v.reasons} {v.summary}\n{v.durations}\n{v.gate('correctness').detail}")
    assert not v.accepted and Reason.correctness in v.reasons, v.summary
