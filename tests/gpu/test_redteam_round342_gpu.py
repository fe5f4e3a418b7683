"""Red team round 342 on the GPU: what the driver objects a part keeps hold of is read with its state
(kernelloop_harness.cuh, part_objects_digest): a count kept in the nodes of a graph the part holds, and in the
priorities and flags of eight streams it recreates, is rejected by the state check; an honest part that captures a
graph on its thread's default stream every call (built with --default-stream=per-thread, whose _ptsz names the
harness records) runs. Fixtures: tests/fixtures/redteam/round342/ (baseline: part_state/baseline.cu)."""

from __future__ import annotations

import pytest

from kernelloop.config import Settings, VerifySettings
from kernelloop.verify.gate import verify_files
from kernelloop.verify.verdict import Reason

from ..conftest import FIXTURES

pytestmark = pytest.mark.gpu
ROUND342 = FIXTURES / "redteam" / "round342"
BASELINE = FIXTURES / "part_state" / "baseline.cu"


def _verify(baseline, name, tmp_path, record_property, flags=()):
    v = verify_files(baseline, ROUND342 / name, Settings(cache_dir=tmp_path / "cache", verify=VerifySettings(
        memcheck="off", build_flags=list(flags))))
    record_property("verdict", v.summary)
    print(f"\n[{name}] {v.reasons} {v.summary} | " + " | ".join(f"{g.gate}: {g.status} {g.detail[:300]}"
                                                            for g in v.gates))
    return v


@pytest.mark.parametrize("name, flags", [("graph_node_counter.cu", ()),
                                         ("stream_priority_counter.cu", ("--default-stream=legacy",))])
def test_a_count_kept_in_the_driver_objects_a_part_holds_is_state_between_calls(name, flags, tmp_path,
                                                                                  record_property):
    v = _verify(BASELINE, name, tmp_path, record_property, flags)
    assert not v.accepted and Reason.state_between_calls in v.reasons, v.summary


def test_a_graph_captured_every_call_on_the_threads_stream_runs(tmp_path, record_property):
    # against itself: nothing but the speed-up is missing
    honest = ROUND342 / "capture_per_thread_honest.cu"
    v = _verify(honest, honest.name, tmp_path, record_property, ("--default-stream=per-thread",))
    assert not v.accepted and set(v.reasons) <= {Reason.not_faster, Reason.inconclusive}, v.summary
