"""Red team round 229 on the GPU (tests/fixtures/redteam/round229): two inputs bounded only together
(`pool[first + pos]`) and a signed input beside a bounded id, each wrong only where both are wide in a
way the earlier joint draws never drew; rejected once each input is drawn as the baseline took it alone
and along the edge of what it takes."""

from __future__ import annotations

import pytest

from kernelloop.config import Settings, VerifySettings
from kernelloop.verify.gate import verify_files
from kernelloop.verify.verdict import Reason

from ..conftest import FIXTURES

pytestmark = pytest.mark.gpu
ROUND = FIXTURES / "redteam" / "round229"


@pytest.mark.parametrize("case", ["halved_corner", "sign_alone"])
def test_round229_candidates_are_rejected_on_wider_integers(case, tmp_path, record_property):
    v = verify_files(ROUND / case / "base.cu", ROUND / case / "cand.cu",
                     Settings(cache_dir=tmp_path / "cache", verify=VerifySettings(memcheck="off")))
    record_property("verdict", v.summary)
    print(f"\n{v.reasons} {v.summary}\n{v.durations}\n{v.gate('correctness').detail}")
    assert not v.accepted and Reason.correctness in v.reasons, v.summary
