"""The part's module memory, read at run time (tools/module_memory.py, kernelloop_harness.cuh "The part's module
memory"), on the GPU: with the static reading of device statics blinded (its `device-static` findings dropped), a
launch counter kept in module memory no registration names (a C++ static of device code, a string literal's
storage, an asm statement's `.global`) is still rejected, by the state check; an honest part whose module memory
no call changes (a static table, format strings, an assertion's strings) is accepted. And local memory: what a
launch leaves in its threads' frames never reaches the next call (the harness scrubs it before every call), so a
part that would be wrong wherever it found its own tag there is right in every call. Fixtures:
tests/fixtures/module_memory/ (baseline: part_state/baseline.cu)."""

from __future__ import annotations

import pytest

from kernelloop.config import Settings, VerifySettings
from kernelloop.verify import precision
from kernelloop.verify.gate import verify_files
from kernelloop.verify.verdict import Reason

from ..conftest import FIXTURES

pytestmark = pytest.mark.gpu
MODULE = FIXTURES / "module_memory"
BASELINE = FIXTURES / "part_state" / "baseline.cu"
COUNTERS = ["static_local_counter.cu", "string_storage_counter.cu", "asm_global_counter.cu"]


@pytest.fixture
def static_reading_blinded(monkeypatch):
    compare = precision.compare_profiles

    def without_device_statics(baseline, candidate):
        return [v for v in compare(baseline, candidate) if v.rule != "device-static"]

    monkeypatch.setattr(precision, "compare_profiles", without_device_statics)


@pytest.mark.parametrize("name", COUNTERS)
def test_a_counter_in_module_memory_is_rejected_by_the_state_check(name, static_reading_blinded, tmp_path,
                                                                     record_property):
    v = verify_files(BASELINE, MODULE / name, Settings(cache_dir=tmp_path / "cache",
                                                       verify=VerifySettings(memcheck="off")))
    record_property("verdict", v.summary)
    print(f"\n[{name}] {v.reasons} {v.summary}")
    assert not v.accepted and Reason.state_between_calls in v.reasons, v.summary


def test_module_memory_no_call_changes_is_accepted(static_reading_blinded, tmp_path, record_property):
    v = verify_files(BASELINE, MODULE / "honest_module_memory.cu",
                     Settings(cache_dir=tmp_path / "cache", verify=VerifySettings(memcheck="off")))
    record_property("verdict", v.summary)
    print(f"\n[honest_module_memory.cu] {v.summary} | " + " | ".join(f"{g.gate}: {g.status} {g.detail[:300]}"
                                                                  for g in v.gates))
    assert v.accepted, v.summary


def test_what_a_launch_leaves_in_local_memory_never_reaches_the_next_call(tmp_path, record_property):
    v = verify_files(BASELINE, MODULE / "local_memory_reader.cu",
                     Settings(cache_dir=tmp_path / "cache", verify=VerifySettings(memcheck="off")))
    record_property("verdict", v.summary)
    print(f"\n[local_memory_reader.cu] {v.summary} | " + " | ".join(f"{g.gate}: {g.status} {g.detail[:300]}"
                                                                 for g in v.gates))
    assert v.accepted, v.summary


ROUND338 = FIXTURES / "redteam" / "round338"


def test_a_frame_deeper_than_the_stack_size_is_scrubbed_whole(tmp_path, record_property):
    # red team round 338: a 20 KiB asm .local frame (a scrub capped at 16 KiB left its bottom 4 KiB from call to call)
    v = verify_files(BASELINE, ROUND338 / "deep_frame_reader.cu",
                     Settings(cache_dir=tmp_path / "cache", verify=VerifySettings(memcheck="off")))
    record_property("verdict", v.summary)
    print(f"\n[deep_frame_reader.cu] {v.summary}")
    assert v.accepted, v.summary


def test_a_counter_in_the_padding_of_a_module_objects_slot_is_rejected(tmp_path, record_property):
    # red team round 338: a counter 128 bytes past a registered 4-byte variable, inside its 256-byte slot, with no
    # sanitizer run (memcheck would be the only other reader)
    v = verify_files(BASELINE, ROUND338 / "slot_padding_counter.cu",
                     Settings(cache_dir=tmp_path / "cache", verify=VerifySettings(memcheck="off")))
    record_property("verdict", v.summary)
    print(f"\n[slot_padding_counter.cu] {v.reasons} {v.summary}")
    assert not v.accepted and Reason.state_between_calls in v.reasons, v.summary


def test_an_honest_part_with_a_local_frame_is_accepted(static_reading_blinded, tmp_path, record_property):
    # red team round 340: a scrub sized from a stack limit read again each call (which the scrub's own launch raises)
    # grew every call until it could not launch; a part with a 128-byte frame must pass call after call
    v = verify_files(BASELINE, FIXTURES / "redteam" / "round340" / "local_frame_honest.cu",
                     Settings(cache_dir=tmp_path / "cache", verify=VerifySettings(memcheck="off")))
    record_property("verdict", v.summary)
    print(f"\n[local_frame_honest.cu] {v.summary}")
    assert v.accepted, v.summary
