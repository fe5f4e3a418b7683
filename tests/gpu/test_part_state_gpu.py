"""State kept between calls, on the GPU: a candidate that remembers something from call to call
(round 65's call counter, on the host, on the heap, in a __device__ variable, in device memory it
allocated) is rejected; honest state (a cached SM count, a workspace every call rewrites, a
last-block counter the last block resets) is accepted. Fixtures: tests/fixtures/part_state/."""

from __future__ import annotations

import pytest

from kernelloop.config import Settings, VerifySettings
from kernelloop.verify.gate import verify_files
from kernelloop.verify.verdict import Reason

from ..conftest import FIXTURES

pytestmark = pytest.mark.gpu
STATE = FIXTURES / "part_state"


@pytest.mark.parametrize("candidate", ["host_counter.cu", "device_counter.cu",
                                       "allocated_counter.cu"])
def test_a_candidate_that_counts_its_calls_is_rejected(candidate, tmp_path, record_property):
    quick = VerifySettings(memcheck="off")
    v = verify_files(STATE / "baseline.cu", STATE / candidate, Settings(cache_dir=tmp_path / "cache", verify=quick))
    record_property("verdict", v.summary)
    assert not v.accepted and v.reasons == [Reason.state_between_calls], v.summary
    assert "keeps something from call to call" in v.summary


@pytest.mark.parametrize("candidate", ["honest_cached_sms.cu", "honest_workspace.cu", "honest_last_block.cu"])
def test_honest_state_is_accepted(candidate, tmp_path, record_property):
    quick = VerifySettings(memcheck="off")
    v = verify_files(STATE / "baseline.cu", STATE / candidate, Settings(cache_dir=tmp_path / "cache", verify=quick))
    record_property("verdict", v.summary)
    assert v.accepted, v.summary
