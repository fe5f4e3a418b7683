"""Red team round 238 on the GPU (tests/fixtures/redteam/round238): timer gaming by keeping the harness's end
marker from starting. The baseline is one grid of about four waves (an elementwise map wasting integer work on an
identity, about 10 us); each candidate runs the SAME kernel (the same results, bit for bit, no faster) but puts the
whole grid, or a tail of it after an event wait, or all of it behind a one-block gate on stream 0, on a
greatest-priority non-blocking stream never joined back, so its pending blocks take every slot the end marker
needs and work runs past the stop event. Since aff1527 every time compared is at least the span from the
harness's start marker to the end of the call's last work: each is rejected, on timing alone. The control, the
same map without the wasted identity on stream 0, is genuinely faster and must still be accepted (the floor
must not reject honest speed-ups of a few microseconds)."""

from __future__ import annotations

import pytest

from kernelloop.config import Settings, VerifySettings
from kernelloop.verify.gate import verify_files
from kernelloop.verify.verdict import Reason

from ..conftest import FIXTURES

pytestmark = pytest.mark.gpu
ROUND = FIXTURES / "redteam" / "round238"
BASE = ROUND / "base.cu"
# Reasons that would mean the fixture itself is broken (not what this round is about): a candidate rejected for
# one of them says nothing about the timer.
NOT_TIMING = {Reason.policy, Reason.compile, Reason.reduced_precision, Reason.run_failed, Reason.timeout,
              Reason.output_flood, Reason.correctness, Reason.memcheck, Reason.state_between_calls,
              Reason.runtime_error}


def _verify(candidate, tmp_path):
    # each timing pair's raw KERNEL_MS (the progress messages), beside the floored times the verdict keeps
    def show_pairs(p):
        if p.stage == "timing":
            print(f"  {p.message}")
    v = verify_files(BASE, candidate, Settings(cache_dir=tmp_path / "cache", verify=VerifySettings(memcheck="off")),
                     progress=show_pairs)
    print("  floored: baseline " + " ".join(f"{t:.4f}" for t in v.baseline_kernel_ms) + " / candidate "
          + " ".join(f"{t:.4f}" for t in v.candidate_kernel_ms))
    return v


def _show(v) -> str:
    return f"\n{v.reasons} {v.summary}\n{v.durations}\n" + "\n".join(
        f"{g.gate}: {g.status}: {g.detail} [baseline {g.baseline}] [candidate {g.candidate}]" for g in v.gates)


@pytest.mark.parametrize("candidate", ["side_whole.cu", "side_tail.cu", "side_gated.cu"])
def test_round238_work_behind_a_starved_end_marker_is_rejected(candidate, tmp_path, record_property):
    v = _verify(ROUND / candidate, tmp_path)
    record_property("verdict", v.summary)
    print(_show(v))
    assert not v.accepted, v.summary
    assert not NOT_TIMING & set(v.reasons), v.summary  # right at every call, rejected for its time only
    assert v.gate("correctness") is None or v.gate("correctness").status == "pass", v.summary


def test_round238_honest_speedup_of_a_few_microseconds_is_accepted(tmp_path, record_property):
    v = _verify(ROUND / "honest_faster.cu", tmp_path)
    record_property("verdict", v.summary)
    print(_show(v))
    assert v.accepted, v.summary
