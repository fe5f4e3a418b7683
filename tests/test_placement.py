"""Where an experiment's buffers lie (verify/placement.py; red team round 245): guarded runs are never side by
side, so each experiment at another size, on special values, wide integers or scaled inputs draws its
placement in secret, and a placement the baseline does not take is made guarded."""

from __future__ import annotations

import pytest

from kernelloop.verify import gate, magnitudes, placement
from kernelloop.verify.placement import GUARDED, OFFSETS_PACKED, Placement, drawn_placement, placed_pair
from kernelloop.verify.verdict import Reason

from .test_nonfinite import GOOD, scripted_runs, settings, two_size_manifest, verify  # noqa: F401  (a fixture)


def test_each_placement_is_drawn_about_a_third_of_the_time():
    drawn = [drawn_placement() for _ in range(600)]
    guarded = sum(p == GUARDED for p in drawn)
    malloc = sum(p.exact and p.shift is None for p in drawn)
    packed = [p for p in drawn if p.shift is not None]
    assert all(100 < n < 300 for n in (guarded, malloc, len(packed))), (guarded, malloc, len(packed))
    assert all(p.shift[2] == OFFSETS_PACKED and p.shift[1] == 0 for p in packed)
    assert {p.shift[3] for p in packed} == {0, 1} and len({p.shift[0] for p in packed}) == len(packed)
    assert Placement(True).kwargs() == {"exact_buffers": True, "buffer_shift": None} and GUARDED.kwargs() == {}
    assert "side" not in GUARDED.words() and "packed" in packed[0].words()


def test_a_placement_the_baseline_does_not_take_is_made_guarded():
    runs: list[tuple[str, Placement]] = []

    def run(role):
        return lambda at: runs.append((role, at)) or f"{role} {'exact' if at.exact else 'guarded'}"
    cand, base, used = placed_pair(run("candidate"), run("baseline"), lambda done: "guarded" in done, Placement(True))
    assert used == GUARDED and cand == "candidate guarded" and base == "baseline guarded"
    assert [r for r, _ in runs] == ["candidate", "baseline", "candidate", "baseline"]
    cand, base, used = placed_pair(run("candidate"), run("baseline"), lambda done: True, Placement(True))
    assert used == Placement(True) and base == "baseline exact"


@pytest.mark.nvcc
def test_a_candidate_wrong_only_with_its_buffers_side_by_side_at_another_size_is_rejected(
        settings, monkeypatch):  # noqa: F811
    """Round 245: a transpose that flushed small values to zero wherever its buffers lay side by side (which no
    guarded run ever has) was right in every experiment; a packed placement at another size meets it."""
    wrong = ([[0, 0, 0, 0], [0, 0, 0, 0]], [0, 0, 0, 0])

    def behave(role, kw):
        side_by_side = kw.get("exact_buffers") and kw.get("buffer_shift") and kw["buffer_shift"][2] == OFFSETS_PACKED
        return wrong if role == "candidate" and side_by_side and kw.get("size_index") else GOOD

    calls = scripted_runs(monkeypatch, behave, make_manifest=two_size_manifest)
    packed = Placement(True, (12345, 0, OFFSETS_PACKED, 0))
    for module in (gate, magnitudes, placement):
        monkeypatch.setattr(module, "drawn_placement", lambda: packed)
    v = verify(settings)
    assert not v.accepted and Reason.correctness in v.reasons, v.summary
    assert "packed right after the one before" in v.gate("correctness").detail
    # the drawn size's baseline ran guarded first (a size it does not take shows there), then packed
    drawn = [c for c in calls if c.get("size_index") == -1 and c["role"] == "baseline"]
    assert not drawn[0].get("exact_buffers") and drawn[1].get("buffer_shift") == packed.shift


@pytest.mark.nvcc
def test_a_candidate_wrong_on_special_values_only_with_its_buffers_packed_in_order_is_rejected(
        settings, monkeypatch):  # noqa: F811
    """Round 247: the special-value experiment is made once and drew one placement (guarded here); the candidate
    runs it again in every other caller placement against the same baseline run."""
    nan = float("nan")

    def behave(role, kw):
        if kw.get("nonfinite_calls") is None:
            return GOOD
        packed_in_order = kw.get("buffer_shift") and kw["buffer_shift"][2] == OFFSETS_PACKED and not kw["buffer_shift"][3]
        if role == "candidate" and packed_in_order:  # lets NaN through where the baseline sanitises it
            return ([[1, nan, 3, 4], [5, 6, nan, 8]], [5, nan, 7, 8])
        return ([[1, 0, 3, 4], [5, 6, 0, 8]], [5, 0, 7, 8])

    calls = scripted_runs(monkeypatch, behave)
    v = verify(settings)
    assert not v.accepted and Reason.correctness in v.reasons, v.summary
    assert "packed right after the one before" in v.gate("correctness").detail
    assert any(c.get("nonfinite_calls") and c.get("exact_buffers") and c["role"] == "candidate" for c in calls)
