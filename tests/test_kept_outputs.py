"""Red team round 186's class (tests/fixtures/redteam/round186/poison): what outputs hold before a call
must not tell the verifier's calls from a caller's. The harness leaves outputs and scratch as the call
before left them in the timed calls whose draw has bit 7 set and bit 6 (the 0xFF poison) clear (never
the last, whose outputs are dumped),
and the verifier knows which (runs.kept_output_calls) so the baseline's NaN check at drawn sizes does
not read an earlier call's poison in an element the kernel never writes."""

from __future__ import annotations

import secrets

from kernelloop.verify.runs import FIXED_POISON_BIT, KEEP_OUTPUTS_BIT, kept_output_calls, stream_for

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


def test_a_derived_call_follows_about_one_call_in_eight_never_the_last():
    # red team round 187: a part that skipped its work when a fingerprint of its inputs matched the
    # last call's; the derived call redraws about half of each input and keeps the outputs
    from kernelloop.verify.runs import DERIVED_SAMPLES, STRESSED_BIT, call_words, derived_calls
    shares = []
    for _ in range(50):
        secret = secrets.token_bytes(32)
        derived = derived_calls(secret, 20)
        stream = stream_for(secret)
        unstressed = [c for c in range(19) if not stream[16 * c] & (STRESSED_BIT | FIXED_POISON_BIT)]
        assert 19 not in derived and derived <= set(unstressed)
        assert derived == {c for c in unstressed if not stream[16 * c + 1] & 1}
        shares.append(len(derived) / max(len(unstressed), 1))
    assert 0.35 <= sum(shares) / len(shares) <= 0.65
    assert call_words(DERIVED_SAMPLES + 3) == "the call on half-redrawn inputs after timed call 4"
    assert call_words(3) == "timed call 4"
    harness = (ROOT / "src" / "kernelloop" / "harness" / "kernelloop_harness.cuh").read_text()
    assert f"kDerivedSamples = {DERIVED_SAMPLES};" in harness
    assert "((draw >> 8) & 1) == 0" in harness and "!(draw & kStressed)" in harness
