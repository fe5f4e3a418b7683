"""State kept between calls, on the GPU: a candidate that remembers something from call to call
(round 65's call counter, on the host, on the heap, in a __device__ variable, in device memory it
allocated) is rejected; honest state (a cached SM count, a workspace every call rewrites, a
last-block counter the last block resets) is accepted. Fixtures: tests/fixtures/part_state/."""

from __future__ import annotations

import pytest

from kernelloop.config import Settings, VerifySettings
from kernelloop.verify.gate import verify_files
from kernelloop.verify.verdict import Reason

from ..conftest import FIXTURES, ROOT

pytestmark = pytest.mark.gpu
STATE = FIXTURES / "part_state"


ROUND70 = FIXTURES / "redteam" / "round70"
ROUND71 = FIXTURES / "redteam" / "round71"
COUNTERS = [STATE / "host_counter.cu", STATE / "device_counter.cu", STATE / "allocated_counter.cu",
            # red team round 70: a kernel's dynamic shared memory setting as the counter; the repeat
            # recognised by its inputs and the counter rewound (the repeated call is now a secret one)
            ROUND70 / "driver_attribute_counter" / "candidate.cu", ROUND70 / "repeat_rewind" / "candidate.cu",
            # red team round 71: every call's history kept and rewound on recognised inputs (two repeats now);
            # a block forgotten by a cudaFree that failed
            ROUND71 / "history_rewind" / "candidate.cu", ROUND71 / "forget_without_free" / "candidate.cu",
            # red team round 72: a counter left in a block the part freed, read again from the next allocation
            FIXTURES / "redteam" / "round72" / "freed_block_counter" / "candidate.cu",
            # red team round 76: a word written beside the counter to balance the public sum of the block's hash
            FIXTURES / "redteam" / "round76" / "state_digest_compensated" / "candidate.cu",
            # red team round 81: a counter in the bytes past an 8-byte block's request, inside its alignment
            FIXTURES / "redteam" / "round81" / "slack_counter_sensed_memcheck" / "candidate.cu",
            # red team round 80: the count written back into a freed block by a kernel on another stream,
            # after the free (argued then, with the copy taken at the free)
            FIXTURES / "redteam" / "round80" / "write_after_freed_copy" / "candidate.cu",
            # round 81's open route without its sensing: the count written into a block after freeing it
            STATE / "stale_pointer_counter.cu"]
HONEST = [STATE / "honest_cached_sms.cu", STATE / "honest_workspace.cu", STATE / "honest_last_block.cu",
          STATE / "honest_per_call_workspace.cu",  # allocated and freed by every call, larger than it writes
          ROUND70 / "fr_stream_ordered_workspace" / "honest.cu",  # round 70: a per-call cudaMallocAsync/FreeAsync
          # red team round 77's search for the digest's key in the harness's memory, made to go wrong at once
          # if it finds one: exact, so accepted, only while the key stays out of the part's reach
          STATE / "key_probe.cu",
          # per-call stream-ordered workspaces of one size on two streams, holding different things
          STATE / "honest_two_stream_workspaces.cu"]


def _baseline(candidate):
    own = candidate.parent / "baseline.cu"
    return own if own.exists() else STATE / "baseline.cu"


@pytest.mark.parametrize("candidate", COUNTERS, ids=[f"{c.parent.name}/{c.name}" for c in COUNTERS])
def test_a_candidate_that_counts_its_calls_is_rejected(candidate, tmp_path, record_property):
    quick = VerifySettings(memcheck="off")
    v = verify_files(_baseline(candidate), candidate, Settings(cache_dir=tmp_path / "cache", verify=quick))
    record_property("verdict", v.summary)
    print(f"\n[{candidate}] {v.reasons} {v.summary}")
    # (round 71's forgotten block also moves more host copies than the baseline: no_gpu_work as well)
    assert not v.accepted and Reason.state_between_calls in v.reasons, v.summary
    assert "keeps something from call to call" in v.summary


@pytest.mark.parametrize("candidate", HONEST, ids=[f"{c.parent.name}/{c.name}" for c in HONEST])
def test_honest_state_is_accepted(candidate, tmp_path, record_property):
    quick = VerifySettings(memcheck="off")
    v = verify_files(_baseline(candidate), candidate, Settings(cache_dir=tmp_path / "cache", verify=quick))
    record_property("verdict", v.summary)
    print(f"\n[{candidate}] {v.summary} | " + " | ".join(f"{g.gate}: {g.status} {g.detail[:300]}" for g in v.gates))
    assert v.accepted, v.summary


def test_a_write_past_the_end_of_a_block_the_part_allocated_is_an_out_of_bounds_write(tmp_path, record_property):
    candidate = STATE / "past_block_counter.cu"  # a counter 512 bytes past a one-word block it holds
    v = verify_files(_baseline(candidate), candidate, Settings(cache_dir=tmp_path / "cache",
                                                                verify=VerifySettings(memcheck="off")))
    record_property("verdict", v.summary)
    print(f"\n[{candidate}] {v.reasons} {v.summary}")
    assert not v.accepted and Reason.memcheck in v.reasons, v.summary
    assert "past the end of a block the editable part allocated" in v.summary


def test_a_counter_at_the_address_of_the_allocators_block_for_a_kept_request_is_seen_by_memcheck(
        tmp_path, record_property):
    # red team round 82: the allocator's fresh block for a request answered with a kept block stayed
    # allocated until the next call (no digest, no memcheck finding); it is freed at once now, so the
    # same write is to memory no allocation holds
    candidate = STATE / "spare_address_counter.cu"
    v = verify_files(_baseline(candidate), candidate, Settings(cache_dir=tmp_path / "cache",
                                                                verify=VerifySettings(memcheck="on")))
    record_property("verdict", v.summary)
    print(f"\n[{candidate}] {v.reasons} {v.summary}")
    assert not v.accepted and Reason.memcheck in v.reasons, v.summary


def test_a_part_that_overflows_the_harness_registry_fails_its_run(tmp_path, record_property):
    candidate = ROUND71 / "registry_overflow" / "candidate.cu"  # red team round 71: 1024 blocks, then the counter
    v = verify_files(_baseline(candidate), candidate, Settings(cache_dir=tmp_path / "cache",
                                                                verify=VerifySettings(memcheck="off")))
    record_property("verdict", v.summary)
    # Either way turned away: the registry full ends the run; where the compiler drops the leaked
    # mallocs nobody reads (gcc -O3 does, seen on the H200), the counter is recorded and is state.
    assert not v.accepted, v.summary
    assert Reason.run_failed in v.reasons or Reason.state_between_calls in v.reasons, v.summary


@pytest.mark.parametrize("candidate", [
    FIXTURES / "redteam" / "round74" / "scrub_fingerprint_bomb" / "candidate.cu",
    # red team round 75: the fill's relation between adjacent words (round 74's mix64(key ^ i)), inverted
    FIXTURES / "redteam" / "round75" / "scrub_stream_inverted" / "candidate.cu"], ids=["round74", "round75"])
def test_a_kernel_that_takes_the_shared_memory_fill_for_the_verifiers_sign_is_wrong_under_verification(
        candidate, tmp_path, record_property):
    # red team round 74: a probe of shared memory it never writes, honest only where every word is one
    # repeated byte (round 73's scrub); the fill is a keyed stream now, so it drops its tail here too
    v = verify_files(_baseline(candidate), candidate, Settings(cache_dir=tmp_path / "cache",
                                                                verify=VerifySettings(memcheck="off")))
    record_property("verdict", v.summary)
    # wrong under verification either way: its dropped tail (correctness), or, where a drawn layout
    # packs its input at an address its float4 loads cannot read, a misaligned load (seen on an H100, 2026-12-06)
    assert not v.accepted and (Reason.correctness in v.reasons or Reason.run_failed in v.reasons), v.summary


def test_a_counter_kept_in_the_harnesss_own_memory_is_an_out_of_bounds_write(tmp_path, record_property):
    # red team round 78: a call counter in the tail of the harness's sample buffer, which no call
    # rewrote; the harness's memory is cleared before every call and must be clear after it
    candidate = FIXTURES / "redteam" / "round78" / "harness_alloc_tail" / "candidate.cu"
    v = verify_files(ROOT / "kernels" / "sum_reduction.cu", candidate,
                     Settings(cache_dir=tmp_path / "cache", verify=VerifySettings(memcheck="off")))
    record_property("verdict", v.summary)
    print(f"\n[{candidate}] {v.reasons} {v.summary}")
    assert not v.accepted and Reason.memcheck in v.reasons, v.summary


@pytest.mark.parametrize("folder", ["captured_recorder_copy", "honest_graph_workspace"])
def test_an_allocation_or_free_inside_a_graph_capture_ends_the_run_and_says_why(folder, tmp_path, record_property):
    # red team round 79: the recorder's copy of a freed block, captured into the part's graph, became a node
    # the part could launch again to write over the copy the digest reads; an honest launcher that captures
    # its own cudaMallocAsync/cudaFreeAsync is refused with it (a known limit: its memory exists only while
    # the graph runs, so the state check could not read it)
    candidate = FIXTURES / "redteam" / "round79" / folder / "candidate.cu"
    # stream capture only in a build that names the default stream (round 175's default-stream rule)
    v = verify_files(ROOT / "kernels" / "sum_reduction.cu", candidate,
                     Settings(cache_dir=tmp_path / "cache", verify=VerifySettings(
                         memcheck="off", build_flags=["--default-stream=legacy"])))
    record_property("verdict", v.summary)
    print(f"\n[{candidate}] {v.reasons} {v.summary}")
    assert not v.accepted and Reason.run_failed in v.reasons and "graph capture" in v.summary, v.summary
