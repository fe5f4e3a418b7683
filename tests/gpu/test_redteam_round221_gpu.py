"""Red team round 221 on the GPU (tests/fixtures/redteam/round221): candidates that reduce their whole
input first and take a wrong path on narrow inputs (a maximum not at the top of its octave; a maximum
below 2^9; negative padding ids read as row 0), rejected by the wider-integer experiment."""

from __future__ import annotations

import pytest

from kernelloop.config import Settings, VerifySettings
from kernelloop.verify.gate import verify_files
from kernelloop.verify.verdict import Reason

from ..conftest import FIXTURES

pytestmark = pytest.mark.gpu
CASE = FIXTURES / "redteam" / "round221"


@pytest.mark.parametrize("baseline, candidate", [("../round219/base.cu", "octave_top.cu"),
                                                 ("../round220/emb_base.cu", "emb_narrow_band.cu"),
                                                 ("emb_pad_base.cu", "emb_pad_row0.cu")])
def test_round221_candidates_are_rejected_on_wider_integers(baseline, candidate, tmp_path, record_property):
    v = verify_files(CASE / baseline, CASE / candidate,
                     Settings(cache_dir=tmp_path / "cache", verify=VerifySettings(memcheck="off")))
    record_property("verdict", v.summary)
    print(f"\n{v.reasons} {v.summary}\n{v.durations}\n{v.gate('correctness').detail}")
    assert not v.accepted and Reason.correctness in v.reasons, v.summary
