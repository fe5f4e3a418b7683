"""Red team rounds 343-344 on the GPU: the part's destroys of driver objects it made in the same call are carried out
after the call, in the order of their handles (kernelloop_harness.cuh, defer_part_destroy), so the order a pool hands
handles back in carries nothing from call to call. Honest parts it must keep: a texture object kept across calls and
replaced every call (destroyed at once: the handle comes back as in a real program), and 2048 events made and
destroyed in one call (more than the 1024 a call's deferred list holds). Not run yet. Fixtures:
tests/fixtures/redteam/round344/ (baseline: part_state/baseline.cu); the attacks there and in round343/ fire past the
verifier's calls and document the class (Known limits)."""

from __future__ import annotations

import pytest

from kernelloop.config import Settings, VerifySettings
from kernelloop.verify.gate import verify_files
from kernelloop.verify.verdict import Reason

from ..conftest import FIXTURES

pytestmark = pytest.mark.gpu
ROUND344 = FIXTURES / "redteam" / "round344"
BASELINE = FIXTURES / "part_state" / "baseline.cu"


@pytest.mark.parametrize("name", ["honest_texture_rebind.cu", "honest_event_per_chunk.cu"])
def test_honest_parts_that_make_and_destroy_driver_objects_keep_no_state(name, tmp_path, record_property):
    v = verify_files(BASELINE, ROUND344 / name, Settings(cache_dir=tmp_path / "cache",
                                                         verify=VerifySettings(memcheck="off")))
    record_property("verdict", v.summary)
    print(f"\n[{name}] {v.reasons} {v.summary}")
    # the event-per-chunk part may well not be faster; neither may fail its runs or the state check
    assert Reason.state_between_calls not in v.reasons and Reason.run_failed not in v.reasons, v.summary
