"""Red team round 341 on the GPU: state a part keeps where the state check did not look.
- Local memory above the stack top: every frame grows down from one top, with some hundred bytes of the thread's
  window above it that no frame covers. Measured on the H100 (above_top_probe_h100.txt): nothing written there
  survives to the next launch, and compute-sanitizer calls any access there invalid, so the harness does not scrub
  it. `above_top_reader.cu` adds 1e6 wherever it finds its own tag there from an earlier launch: accepted while that
  stays true (memcheck off).
- Driver objects: a texture object created every call and never destroyed (its handle, a small integer, counts the
  calls and reaches the kernel as a plain argument); the number of driver objects the part holds is now part of
  its state, so the state check rejects it.
Fixtures: tests/fixtures/redteam/round341/ (baseline: part_state/baseline.cu); the layout itself is measured by
above_top_probe.cu there."""

from __future__ import annotations

import pytest

from kernelloop.config import Settings, VerifySettings
from kernelloop.verify.gate import verify_files
from kernelloop.verify.verdict import Reason

from ..conftest import FIXTURES

pytestmark = pytest.mark.gpu
ROUND341 = FIXTURES / "redteam" / "round341"
BASELINE = FIXTURES / "part_state" / "baseline.cu"


def _verify(name, tmp_path, record_property):
    v = verify_files(BASELINE, ROUND341 / name, Settings(cache_dir=tmp_path / "cache",
                                                         verify=VerifySettings(memcheck="off")))
    record_property("verdict", v.summary)
    print(f"\n[{name}] {v.reasons} {v.summary} | " + " | ".join(f"{g.gate}: {g.status} {g.detail[:300]}"
                                                            for g in v.gates))
    return v


def test_local_memory_above_the_stack_top_never_reaches_the_next_call(tmp_path, record_property):
    v = _verify("above_top_reader.cu", tmp_path, record_property)
    assert v.accepted, v.summary


def test_a_texture_object_created_every_call_is_state_between_calls(tmp_path, record_property):
    v = _verify("texture_handle_counter.cu", tmp_path, record_property)
    assert not v.accepted and Reason.state_between_calls in v.reasons, v.summary
