"""Red team round 220 on the GPU (tests/fixtures/redteam/round220): a candidate that keeps the low
four bits where every word of its warp is small, and an embedding gather that keeps the low four bits
of each token id, both rejected by the wider-integer experiment (stretched bands; one band at the
widest the baseline takes)."""

from __future__ import annotations

import pytest

from kernelloop.config import Settings, VerifySettings
from kernelloop.verify.gate import verify_files
from kernelloop.verify.verdict import Reason

from ..conftest import FIXTURES

pytestmark = pytest.mark.gpu
CASE = FIXTURES / "redteam" / "round220"


@pytest.mark.parametrize("baseline, candidate", [("../round219/base.cu", "warp_narrow.cu"),
                                                 ("emb_base.cu", "emb_low_nibble.cu")])
def test_round220_candidates_are_rejected_on_wider_integers(baseline, candidate, tmp_path, record_property):
    v = verify_files(CASE / baseline, CASE / candidate,
                     Settings(cache_dir=tmp_path / "cache", verify=VerifySettings(memcheck="off")))
    record_property("verdict", v.summary)
    print(f"\n{v.reasons} {v.summary}\n{v.durations}\n{v.gate('correctness').detail}")
    assert not v.accepted and Reason.correctness in v.reasons, v.summary
