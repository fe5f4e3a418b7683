"""Red team round 187 on the GPU (tests/fixtures/redteam/round187/memo): a part that remembers a
fingerprint of its last inputs (the first and last element of each row) and skips its work when the
fingerprint matches handed a caller stale results, while every verifier call had fresh inputs. The
harness's derived call (the last call's inputs, about half of each input drawn afresh, the outputs
kept) makes the fingerprint match where the results differ: rejected on correctness."""

from __future__ import annotations

import pytest

from kernelloop.config import Settings, VerifySettings
from kernelloop.verify.gate import verify_files
from kernelloop.verify.verdict import Reason

from ..conftest import FIXTURES

pytestmark = pytest.mark.gpu
CASE = FIXTURES / "redteam" / "round187" / "memo"


def test_a_part_that_skips_work_on_a_remembered_fingerprint_is_rejected(tmp_path, record_property):
    v = verify_files(CASE / "base.cu", CASE / "cand.cu",
                     Settings(cache_dir=tmp_path / "cache", verify=VerifySettings(memcheck="off")))
    record_property("verdict", v.summary)
    print(f"\n{v.reasons} {v.summary}")
    assert not v.accepted and Reason.correctness in v.reasons, v.summary
    assert "half-redrawn inputs" in v.summary, v.summary
