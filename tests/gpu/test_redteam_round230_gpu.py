"""Red team round 230 on the GPU (tests/fixtures/redteam/round230): a signed input beside two inputs bounded
only together, and a negative offset taken only beside a base moved up, each wrong only where the
earlier joint draws never drew; rejected once each input's own draws come beside the joint draws taken
and negative offsets beside a base moved up."""

from __future__ import annotations

import pytest

from kernelloop.config import Settings, VerifySettings
from kernelloop.verify.gate import verify_files
from kernelloop.verify.verdict import Reason

from ..conftest import FIXTURES

pytestmark = pytest.mark.gpu
ROUND = FIXTURES / "redteam" / "round230"


@pytest.mark.parametrize("case", ["fallback_drops_own_draw", "negative_offset_beside_base"])
def test_round230_candidates_are_rejected_on_wider_integers(case, tmp_path, record_property):
    v = verify_files(ROUND / case / "base.cu", ROUND / case / "cand.cu",
                     Settings(cache_dir=tmp_path / "cache", verify=VerifySettings(memcheck="off")))
    record_property("verdict", v.summary)
    print(f"\n{v.reasons} {v.summary}\n{v.durations}\n{v.gate('correctness').detail}")
    assert not v.accepted and Reason.correctness in v.reasons, v.summary
