"""Red team round 186's class (tests/fixtures/redteam/round186/poison): what outputs hold before a call
must not tell the verifier's calls from a caller's. The harness leaves outputs and scratch as the call
before left them in the timed calls whose draw has bit 7 set and bit 6 (the 0xFF poison) clear (never
the last, whose outputs are dumped),
and the verifier knows which (runs.kept_output_calls) so the baseline's NaN check at drawn sizes does
not read an earlier call's poison in an element the kernel never writes."""

from __future__ import annotations

import secrets

from kernelloop.verify.program_run import FIXED_POISON_BIT, KEEP_OUTPUTS_BIT, kept_output_calls, stream_for

from .conftest import ROOT


def test_about_a_quarter_of_the_timed_calls_keep_the_outputs_and_never_the_last():
    counts = []
    for _ in range(50):
        secret = secrets.token_bytes(32)
        kept = kept_output_calls(secret, 20)
        assert 19 not in kept and kept <= set(range(19))
        stream = stream_for(secret)
        assert kept == {c for c in range(19) if stream[16 * c] & KEEP_OUTPUTS_BIT and not stream[16 * c] & FIXED_POISON_BIT}
        counts.append(len(kept))
    assert 3 <= sum(counts) / len(counts) <= 7  # a quarter: bit 7 set, bit 6 (the 0xFF poison) clear


def test_the_harness_reads_the_same_bit_and_keeps_nothing_in_the_calibration_run():
    harness = (ROOT / "src" / "kernelloop" / "harness" / "kernelloop_harness.cuh").read_text()
    assert f"kKeepOutputs = {KEEP_OUTPUTS_BIT};" in harness
    assert "const bool keep = drawn && (stress & kKeepOutputs) && s.calls != s.timed_calls - 1;" in harness
    assert "const bool drawn = stress && !(stress & kFixedPoison);" in harness

