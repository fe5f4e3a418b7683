"""Red team round 186 on the GPU (tests/fixtures/redteam/round186/poison): a kernel that reads its
output before writing it and does the work only where the output holds the harness's poison (one
repeated byte) returned the last call's results to a caller, and passed every verifier run, each of
which poisoned the outputs first. The harness now leaves the outputs as the last call left them in
about a quarter of the timed calls (never the last): the kernel keeps stale results there and is rejected on
correctness. (Honest candidates under the new harness: every other `gpu` test.)"""

from __future__ import annotations

import pytest

from kernelloop.config import Settings, VerifySettings
from kernelloop.verify.gate import verify_files
from kernelloop.verify.verdict import Reason

from ..conftest import FIXTURES

pytestmark = pytest.mark.gpu
CASE = FIXTURES / "redteam" / "round186" / "poison"


def test_a_kernel_that_computes_only_on_the_poison_is_rejected(tmp_path, record_property):
    v = verify_files(CASE / "base.cu", CASE / "cand.cu",
                     Settings(cache_dir=tmp_path / "cache", verify=VerifySettings(memcheck="off")))
    record_property("verdict", v.summary)
    print(f"\n{v.reasons} {v.summary}\n{v.durations}")
    assert not v.accepted and Reason.correctness in v.reasons, v.summary
