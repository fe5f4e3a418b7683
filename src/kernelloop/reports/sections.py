"""Pieces both reports show: a verdict's gate table and its roofline placement."""

from __future__ import annotations

from ..verify.verdict import Verdict
from .figures import BASELINE, CANDIDATE, PerfPoint, roofline_chart, roofline_problem
from .page import Cell, Page

MARKS = {"pass": "✓ pass", "fail": "✗ fail", "skipped": "– skipped", "info": "i info"}


def gate_table(page: Page, verdict: Verdict, *, baseline: str = "baseline", candidate: str = "candidate") -> None:
    page.table(["gate", baseline, candidate, "result", "detail"],
               [[g.gate, g.baseline, g.candidate, Cell(MARKS.get(g.status, g.status), g.status), g.detail]
                for g in verdict.gates])


def perf_points(verdict: Verdict) -> list[PerfPoint]:
    """The two programs' median kernel times: reference and current (`bench check`), else
    baseline and candidate."""
    if verdict.regression is not None:
        r = verdict.regression
        return [PerfPoint("reference", r.reference.median, BASELINE), PerfPoint("current", r.current.median, CANDIDATE)]
    if verdict.speed is not None:
        s = verdict.speed
        return [PerfPoint("baseline", s.baseline.median, BASELINE), PerfPoint("candidate", s.candidate.median, CANDIDATE)]
    return []


def roofline_section(page: Page, verdict: Verdict | None, *, missing: str = "") -> None:
    """The roofline placement (or the bandwidth bar when no FLOPs are declared); a plain sentence
    when it cannot be drawn."""
    if verdict is None:
        page.notice(missing or "no roofline placement: there is no verdict")
        return
    points = perf_points(verdict)
    problem = roofline_problem(verdict.work, points)
    if problem is not None:
        page.notice(problem)
        return
    work = verdict.work
    assert work is not None
    moved = work.bytes_read + work.bytes_written
    per_call = (f"Per call the harness declares {work.bytes_read:,} bytes read (inputs, but tables read in part) and "
                f"{work.bytes_written:,} written")
    if work.flops > 0:
        caption = (f"{per_call}, and {work.flops:,.0f} FLOPs: arithmetic intensity {work.flops / moved:.3g} FLOP/byte. "
                   f"Ceilings measured by the harness on this GPU: copy {work.copy_gbps:,.0f} GB/s (read + write), "
                   f"FP32 FMA {work.fma_gflops:,.0f} GFLOP/s. Points: declared FLOPs / median kernel time.")
    else:
        caption = (f"{per_call}; no FLOPs are declared, so the placement is bandwidth: bytes read + written / median "
                   f"kernel time, against the copy bandwidth the harness measured on this GPU "
                   f"({work.copy_gbps:,.0f} GB/s, read + write).")
    page.figure(roofline_chart(work, points), caption)
