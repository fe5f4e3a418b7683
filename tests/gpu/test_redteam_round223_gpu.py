"""Red team round 223 on the GPU (tests/fixtures/redteam/round223): a table's ids between 2^12 and its
size never compared; a candidate wrong on wide values at every size but the default; candidates keyed
on inputs not drawn from zero (a narrow band far from it, multiples of 16). Rejected by the wider-integer
experiment's bound, shapes and sizes."""

from __future__ import annotations

import pytest

from kernelloop.config import Settings, VerifySettings
from kernelloop.verify.gate import verify_files
from kernelloop.verify.verdict import Reason

from ..conftest import FIXTURES

pytestmark = pytest.mark.gpu
CASE = FIXTURES / "redteam" / "round223"


@pytest.mark.parametrize("baseline, candidate", [("../round220/emb_base.cu", "emb_top_octave/emb_top_octave.cu"),
                                                 ("../round219/base.cu", "size_keyed_wide/size_keyed_wide.cu"),
                                                 ("../round219/base.cu", "offset_band/offset_band.cu"),
                                                 ("../round219/base.cu", "aligned_values/aligned_values.cu")])
def test_round223_candidates_are_rejected_on_wider_integers(baseline, candidate, tmp_path, record_property):
    v = verify_files(CASE / baseline, CASE / candidate,
                     Settings(cache_dir=tmp_path / "cache", verify=VerifySettings(memcheck="off")))
    record_property("verdict", v.summary)
    print(f"\n{v.reasons} {v.summary}\n{v.durations}\n{v.gate('correctness').detail}")
    assert not v.accepted and Reason.correctness in v.reasons, v.summary
