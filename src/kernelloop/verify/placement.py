"""Where an experiment's buffers lie (red team rounds 244-245).

Guarded runs wrap every buffer in guard zones, so they differ from a caller's buffers however each one is
placed: two guarded buffers are never side by side, where a caller's consecutive cudaMalloc blocks, or cuts of
one workspace, are. A part keyed on such a property AND on anything only guarded runs vary (a size drawn, wide
values, scaled inputs, special values) was slow or wrong for callers and right in every run (round 245: a
transpose 3x slower wherever its buffers lay side by side at a round size; one that flushed values below 2^-24
there). So each of those experiments draws, in secret, where its buffers lie: guarded; each buffer its own
exact allocation where cudaMalloc puts it; or all of them packed one right after another in one mapped range,
in declaration order or its reverse (KERNELLOOP_EXACT_BUFFERS, KERNELLOOP_BUFFER_SHIFT). Where the baseline does
not take a placement (a driver that cannot map the range, a read of its own past a buffer), that experiment is
made guarded instead: the placement is the verifier's choice, never the program's to refuse.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from typing import NamedTuple

from .comparing import run_failure
from .program_run import ProgramRun

# The caller layouts' offsets (KERNELLOOP_BUFFER_SHIFT's MODE): drawn below 2 MiB, the same with every bit the other
# way, none (2 MiB-aligned), packed one right after another from an aligned start, or from a drawn offset.
OFFSETS_DRAWN, OFFSETS_FLIPPED, OFFSETS_NONE, OFFSETS_PACKED, OFFSETS_PACKED_DRAWN = 0, 1, 2, 3, 4


class Placement(NamedTuple):
    """EXACT: every buffer an allocation of its own size, no guard zones; SHIFT: (key, unit, offsets, reversed)
    for a mapped layout (None: where cudaMalloc puts each)."""
    exact: bool = False
    shift: tuple[int, int, int, int] | None = None

    def kwargs(self) -> dict:
        return {"exact_buffers": True, "buffer_shift": self.shift} if self.exact else {}

    def words(self) -> str:
        if not self.exact:
            return ""
        if self.shift is None:
            return ", every buffer its own allocation where cudaMalloc puts it"
        return ", every buffer packed right after the one before in one allocation" + (
            ", in reverse order" if self.shift[3] else "")


GUARDED = Placement()
# How the harness says the driver could not map a packed or shifted layout (the machine's, not the program's)
LAYOUT_MAPPING_FAILURE = "kernelloop harness: the shifted buffers' address range:"


def drawn_placement() -> Placement:
    """An experiment's placement, drawn in secret: guarded, where cudaMalloc puts each buffer, or packed one right
    after another from an aligned start (each at a multiple of its element size), in either order; a third each."""
    kind = secrets.randbelow(3)
    if kind == 0:
        return GUARDED
    if kind == 1:
        return Placement(True)
    return Placement(True, (secrets.randbits(62) | 1, 0, OFFSETS_PACKED, secrets.randbelow(2)))


def placed_pair(run_candidate: Callable[[Placement], ProgramRun], run_baseline: Callable[[Placement], ProgramRun],
                takes: Callable[[ProgramRun], bool],
                placement: Placement | None = None) -> tuple[ProgramRun, ProgramRun, Placement]:
    """One experiment's candidate and baseline runs at PLACEMENT (drawn where None): where the baseline does not
    take a placement other than the guarded one (TAKES false), both again guarded."""
    placement = drawn_placement() if placement is None else placement
    cand, base = run_candidate(placement), run_baseline(placement)
    if placement.exact and not takes(base):
        placement = GUARDED
        cand, base = run_candidate(placement), run_baseline(placement)
    return cand, base, placement


def other_caller_placements(used: Placement) -> list[Placement]:
    """Every caller placement but USED: each buffer where cudaMalloc puts it, and packed one right after another
    in declaration order and in reverse. An experiment made once (the scaled inputs, the special values) draws one
    placement; a part keyed on buffers side by side met packing in declaration order in 1 of 6 (red team round
    247): the candidate is run again in each of the others, against the same baseline run (its results do not
    depend on where its buffers lie: it reads nothing past them, as the baseline-bounds check has seen)."""
    key = secrets.randbits(62) | 1
    every = [Placement(True), Placement(True, (key, 0, OFFSETS_PACKED, 0)), Placement(True, (key, 0, OFFSETS_PACKED, 1))]
    return [p for p in every if (p.exact, p.shift is None, p.shift[3] if p.shift else None)
            != (used.exact, used.shift is None, used.shift[3] if used.shift else None)]


def fails_with_the_baseline(run: ProgramRun, baseline_there: Callable[[], ProgramRun]) -> bool:
    """Whether the candidate's RUN in a placement other than its experiment's failed where the baseline fails too:
    the baseline's run in the same placement (BASELINE_THERE, run only then) fails as well (the driver cannot map
    the range, the baseline itself does not take it), so the placement checks nothing. Only the baseline's own run
    says so: the line a failed mapping prints is text a program can print (red team round 248)."""
    return run_failure(run) is not None and run_failure(baseline_there()) is not None
