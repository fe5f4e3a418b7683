"""Red team round 282 (tests/fixtures/redteam/round282b/): the harness flushed L2 before every call it made, so an
input found in L2 told a kernel it was not being verified (a probe timing its reads of the input took a cached path
that returned the last call's result, only where the input was warm, as a producer kernel leaves it for a real
caller). A secret quarter of the timed calls (bits 8 and 9 of the call's draw, kWarmInputs) now read their inputs
into L2 after the flush; they are checked like any call, and the timing audit leaves them out of its uniformity
figures (program_run.warm_input_calls)."""

from __future__ import annotations

import secrets

from kernelloop.verify.program_run import WARM_INPUTS_BITS, kept_output_calls, stream_for, warm_input_calls

from .conftest import ROOT

HARNESS = ROOT / "src" / "kernelloop" / "harness" / "kernelloop_harness.cuh"


def test_about_a_quarter_of_the_timed_calls_warm_their_inputs_apart_from_the_kept_outputs():
    counts, both = [], 0
    for _ in range(50):
        secret = secrets.token_bytes(32)
        warm = warm_input_calls(secret, 40)
        stream = stream_for(secret)
        assert warm == {c for c in range(40) if stream[16 * c + 1] & 3 == 3}
        # timing runs read the same bits: the baseline and the candidate of a pair warm the same calls
        assert warm == warm_input_calls(secret, 40, heavy=False)
        counts.append(len(warm))
        both += len(warm & kept_output_calls(secret, 40))
    assert 6 <= sum(counts) / len(counts) <= 14  # a quarter of 40
    assert both > 0  # drawn apart: a call may be warm and keep its outputs too


def test_the_harness_reads_the_same_bits_and_warms_after_the_flush():
    harness = HARNESS.read_text()
    assert f"constexpr uint64_t kWarmInputs = {WARM_INPUTS_BITS >> 1 << 1 & 256} | {WARM_INPUTS_BITS & 512};" in harness
    flush = harness.index("KL_CHECK(cudaMemset(s.flush, (int)(key & 0x7F), s.flush_bytes));")
    warm = harness.index("if ((stress & kWarmInputs) == kWarmInputs) warm_inputs(key);")
    assert flush < warm < harness.index("KL_CHECK(cudaDeviceSynchronize());", warm)
