"""Red team round 224 on the GPU (tests/fixtures/redteam/round224): a table larger at the declared
alternative size than at the default, and an integer table whose reads past its end give no NaN;
rejected by the wider-integer experiment's bound, found at every size and with the guard contrast."""

from __future__ import annotations

import pytest

from kernelloop.config import Settings, VerifySettings
from kernelloop.verify.gate import verify_files
from kernelloop.verify.verdict import Reason

from ..conftest import FIXTURES

pytestmark = pytest.mark.gpu
CASE = FIXTURES / "redteam" / "round224"


@pytest.mark.parametrize("case", ["size_larger_table", "int_table_overbound"])
def test_round224_candidates_are_rejected_on_wider_integers(case, tmp_path, record_property):
    v = verify_files(CASE / case / "base.cu", CASE / case / "cand.cu",
                     Settings(cache_dir=tmp_path / "cache", verify=VerifySettings(memcheck="off")))
    record_property("verdict", v.summary)
    print(f"\n{v.reasons} {v.summary}\n{v.durations}\n{v.gate('correctness').detail}")
    assert not v.accepted and Reason.correctness in v.reasons, v.summary
