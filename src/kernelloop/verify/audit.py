"""The independent timing audit: does KERNEL_MS describe GPU kernels that did the work?

A CUPTI library injected into the program records every kernel (GPU start/end), every
runtime API call (host time), every copy, and every cudaEventRecord and
cudaEventElapsedTime call. From that we find the harness's timed region (the host time
between the recording of the events that cudaEventElapsedTime compared) and check:

- kernels launched inside the timed region did not run outside the events (a side
  stream that escapes the timer): their busy GPU time must not exceed the event time;
- KERNEL_MS follows from the harness's own event time, and is not below the kernels'
  busy time per timed call;
- the timed region holds GPU kernels of the editable part, at least one per timed call,
  and no host<->device copies the baseline does not have (work done on the host);
- the timed calls launch what the warm-up calls launched (same kernels, grids, blocks),
  and no kernel becomes much faster after its first launch than the baseline's do
  (work skipped or cached after the first call).
"""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel

from ..tools.cupti import CuptiTrace

NS_PER_MS = 1e6


class AuditFinding(BaseModel):
    reason: Literal["timer_escape", "kernel_ms_mismatch", "no_gpu_work", "inconsistent_work", "timing_unverified",
                    "reframed_timing", "runtime_error"]
    message: str


class AuditReport(BaseModel):
    source: Literal["cupti", "ncu", "none"]
    windows: int = 0
    events_ms: float | None = None  # what the harness's events measured, summed
    busy_ms: float | None = None  # union of GPU busy time of kernels launched in the timed region
    reported_ms: float | None = None  # KERNEL_MS printed by the same run
    iterations: int | None = None  # timed calls, derived from events_ms / KERNEL_MS
    independent_ms: float | None = None  # busy_ms / iterations
    window_launches: int = 0
    window_host_copies: int = 0
    run_host_copies: int = 0  # host<->device copies anywhere in the run (warm-up included)
    window_counts: dict[str, int] = {}  # launches per kernel signature in the timed region
    window_spread: float | None = None  # max over signatures of max/median duration in the region
    warmup_signatures: list[str] = []
    window_signatures: list[str] = []
    first_to_timed_ratio: float | None = None
    # The timing windows themselves, which the candidate must not add, drop or move: how many
    # cudaEventElapsedTime calls the run made, and how often each timed window's events were recorded.
    elapsed_calls: int = 0
    window_event_records: list[int] = []
    worst_window_escape: float | None = None  # max over timed windows of GPU busy / event time
    worst_window_overrun_us: float | None = None  # max over timed calls of work still running after the stop event
    # v2: per timed call, the GPU time from the end of the harness's start marker (on the legacy stream right
    # before the start event, with the GPU idle: nothing the part does can move it) to the end of the call's
    # last work, at least the call's event time; the mean over the calls. Work run past the stop event counts
    # here whatever kept the end marker from dating it (round 238).
    dated_ms: float | None = None
    # CUDA runtime calls that returned an error, by "name: error N", with how many times (statuses
    # that are answers, not failures, left out: NOT_READY from a query, CUDART_UNLOADING at exit)
    failed_calls: dict[str, int] = {}
    window_markers: bool = True  # v2: every timed window is between the harness's start and end marker kernels
    # v2: how long a launch takes the GPU at least, from the harness's own launches (the baseline's run is read):
    # the median wait from the start marker's end to the call's first work starting, and the start marker's
    # duration (an empty kernel). What a size's smallest forgives on top: launch_cost_ms.
    launch_wait_ns: int | None = None
    start_marker_ns: int | None = None
    work_ms: float | None = None  # v2: per timed call, its first work's start to its last work's end; the median
    # Per timed call: the editable part's launches (v2: every call must launch the same work),
    # and its kernels launched after the first timed call outside any window (work between calls).
    uneven_window: int | None = None  # the first window whose launches differ from the first one's
    launches_between_calls: int = 0
    findings: list[AuditFinding] = []
    notes: list[str] = []

    @property
    def ok(self) -> bool:
        return not self.findings


def _signature(k) -> str:
    grid = "x".join(str(v) for v in k.grid)
    block = "x".join(str(v) for v in k.block)
    return f"{k.name or '?'}<<<{grid},{block},{k.dyn_smem}>>>"


def _union_ns(intervals: list[tuple[int, int]]) -> int:
    total, cur_start, cur_end = 0, None, None
    for s, e in sorted(intervals):
        if cur_end is None or s > cur_end:
            if cur_end is not None:
                total += cur_end - cur_start
            cur_start, cur_end = s, e
        else:
            cur_end = max(cur_end, e)
    if cur_end is not None:
        total += cur_end - cur_start
    return total


@dataclass
class _Timeline:
    windows: list[tuple[int, int]]
    window_ms: list[float]
    events_ms: float
    window_kernels: list
    warmup_kernels: list
    window_host_copies: int
    run_host_copies: int
    elapsed_calls: int
    window_event_records: list[int]
    window_busy_ns: list[int]
    window_signatures: list[Counter]
    between_calls: int
    window_overrun_ns: list[int] | None  # per window: work past the marker after its stop event
    window_dated_ns: list[int] | None  # per window: start marker's end to the last work's end, at least its events
    launch_wait_ns: int | None  # median over windows: the start marker's end to the first work's start
    start_marker_ns: int | None  # the start markers' median duration
    work_ns: list[int] | None  # per window: the first work's start to the last work's end


MARKER_KERNEL = "kl_window_marker_kernel"  # kernelloop_harness.cuh
START_MARKER_KERNEL = "kl_window_start_marker_kernel"
# Before and after the harness's untimed repeat of an earlier timed call's inputs (the part's state check).
REPLAY_MARKER_KERNEL = "kl_replay_marker_kernel"
SPREAD_FLOOR_NS = 3000  # a launch's time over its kernel's median that is never read as uneven work
OVERRUN_GRANULARITY_NS = 1000  # CUPTI's kernel timestamps against each other


def _timeline(trace: CuptiTrace, harness_kernels: set[str], timed_calls: int | None = None) -> _Timeline | None:
    launch_time = {a.corr: a.start for a in trace.api}
    records_by_event: dict[str, list[int]] = {}
    for r in trace.event_records:
        records_by_event.setdefault(r.event, []).append(r.t)
    windows: list[tuple[int, int]] = []
    window_ms: list[float] = []
    window_events: list[tuple[str, str]] = []
    for e in trace.elapsed:
        if e.result != 0 or e.ms is None:
            continue
        # The end event's latest recording before this call, and the start event's
        # latest recording before that: the region the harness actually measured.
        ends = [t for t in records_by_event.get(e.end_event, []) if t <= e.t]
        if not ends:
            continue
        starts = [t for t in records_by_event.get(e.start_event, []) if t <= max(ends)]
        if not starts:
            continue
        windows.append((max(starts), max(ends)))
        window_ms.append(e.ms)
        window_events.append((e.start_event, e.end_event))
    elapsed_calls = len(windows)
    if timed_calls is not None:
        # A v2 harness times its calls last, one window each; earlier windows are its own
        # bandwidth probes. Fewer windows than calls: the trace cannot be read as the harness ran.
        if len(windows) < timed_calls:
            return None
        windows, window_ms, window_events = windows[-timed_calls:], window_ms[-timed_calls:], window_events[-timed_calls:]
    if not windows:
        return None
    events_ms = sum(window_ms)
    window_event_records = [len(records_by_event.get(ev, [])) for pair in window_events for ev in pair]
    first = min(s for s, _ in windows)

    def inside(t: int) -> bool:
        return any(s <= t <= e for s, e in windows)

    def window_of(t: int) -> int | None:
        return next((i for i, (s, e) in enumerate(windows) if s <= t <= e), None)

    window_kernels, warmup_kernels = [], []
    for k in trace.kernels:
        t = launch_time.get(k.corr, k.start)
        if inside(t):
            window_kernels.append(k)
        elif t < first and k.name not in harness_kernels:
            warmup_kernels.append(k)
    # Every copy that touches host memory (host-to-host too: a cudaMemcpy can write any host address).
    host_copies = [c for c in trace.copies if c.copy_kind not in ("DtoD", "PtoP")]
    in_window = sum(1 for c in host_copies if inside(launch_time.get(c.corr, c.start)))
    # GPU busy time per window: kernels, and copy-engine work (copies, memsets) too, issued
    # inside the window; a window's work must fit inside its own events.
    per_window: list[list[tuple[int, int]]] = [[] for _ in windows]
    signatures: list[Counter] = [Counter() for _ in windows]
    between = 0
    # The repeat calls' launches (each between a pair of replay markers) are the harness's
    # experiment, not work between calls; where the markers do not pair up, nothing is excused.
    replay_marks = sorted(launch_time.get(k.corr, k.start) for k in trace.kernels
                          if k.name in harness_kernels and REPLAY_MARKER_KERNEL in (k.name or ""))
    repeats = list(zip(replay_marks[::2], replay_marks[1::2])) if len(replay_marks) % 2 == 0 else []
    for k in trace.kernels:
        if k.name in harness_kernels:
            continue
        t = launch_time.get(k.corr, k.start)
        i = window_of(t)
        if i is not None:
            signatures[i][_signature(k)] += 1
        elif t > first and not any(s < t < e for s, e in repeats):
            between += 1
    for item in [*trace.kernels, *trace.copies, *trace.memsets]:
        i = window_of(launch_time.get(item.corr, item.start))
        if i is not None:
            per_window[i].append((item.start, item.end))
    # The harness launches a marker kernel right after each timed call's stop event (v2): work
    # the call launched must have ended when the marker starts on the GPU, or it escaped.
    # And one right before each start event, on the same stream, the GPU idle: its end dates the window's
    # start whatever the part does next, so the call's span (to the end of its last work) is known even
    # where the part kept the end marker from starting (round 238: a greatest-priority grid took every
    # freed slot first, and work ran past the stop event undated).
    overrun: list[int] | None = None
    dated: list[int] | None = None
    waits: list[int] | None = None
    openers: list[int] = []
    spans: list[int] = []
    if timed_calls is not None:
        overrun, dated, waits = [], [], []
        by_launch = sorted(trace.kernels, key=lambda k: launch_time.get(k.corr, k.start))
        for i, (s, e) in enumerate(windows):
            marker = next((k for k in by_launch if launch_time.get(k.corr, k.start) > e), None)
            opener = next((k for k in reversed(by_launch) if launch_time.get(k.corr, k.start) < s), None)
            if (marker is None or MARKER_KERNEL not in (marker.name or "") or opener is None
                    or START_MARKER_KERNEL not in (opener.name or "")):
                overrun = dated = waits = None  # every v2 harness launches both: the trace cannot be read as it ran
                break
            ends = [end for start, end in per_window[i]]
            overrun.append(max(ends, default=marker.start) - marker.start)
            dated.append(max(round(window_ms[i] * NS_PER_MS), max(ends, default=opener.end) - opener.end))
            if per_window[i]:
                first_start = min(start for start, end in per_window[i])
                waits.append(max(0, first_start - opener.end))
                spans.append(max(ends) - first_start)
            openers.append(opener.end - opener.start)
    return _Timeline(windows=windows, window_ms=window_ms, events_ms=events_ms, window_kernels=window_kernels,
                     warmup_kernels=warmup_kernels, window_host_copies=in_window, run_host_copies=len(host_copies),
                     elapsed_calls=elapsed_calls, window_event_records=window_event_records,
                     window_busy_ns=[_union_ns(w) for w in per_window], window_signatures=signatures,
                     between_calls=between, window_overrun_ns=overrun, window_dated_ns=dated,
                     launch_wait_ns=round(statistics.median(waits)) if waits else None,
                     start_marker_ns=round(statistics.median(openers)) if waits is not None and openers else None,
                     work_ns=spans if waits is not None else None)


def launch_cost_ms(baseline: AuditReport, *, cap_ms: float) -> float:
    """What one more launch costs a call at least, read from the baseline's run: its wait from the start marker
    to its first work, and the start marker's own time (an empty kernel), CAP_MS at most; 0 where not on record."""
    if baseline.launch_wait_ns is None or not baseline.start_marker_ns:
        return 0.0
    return min((baseline.launch_wait_ns + baseline.start_marker_ns) / NS_PER_MS, cap_ms)


# cudaErrorCudartUnloading (calls at process exit), cudaErrorNotReady (a stream or event query's answer)
_ANSWERS = frozenset({4, 600})


def failed_runtime_calls(trace: CuptiTrace) -> dict[str, int]:
    """The runtime calls of a run that returned an error, counted by name and error."""
    return dict(Counter(f"{a.name or f'cbid {a.cbid}'}: error {a.ret}" for a in trace.api
                        if a.ret is not None and a.ret != 0 and a.ret not in _ANSWERS))


def audit_trace(trace: CuptiTrace, *, reported_ms: float, harness_kernels: set[str],
                timed_calls: int | None = None, uneven_calls: set[int] | None = None) -> AuditReport:
    """Measure one run's trace (no judgement against a baseline yet)."""
    report = AuditReport(source="cupti", reported_ms=reported_ms)
    report.failed_calls = failed_runtime_calls(trace)
    # A trace we cannot trust whole proves nothing: fail closed.
    if not trace.complete or trace.truncated or trace.dropped:
        why = ("it has no end record (the program did not exit normally)" if not trace.complete
               else "it was truncated" if trace.truncated else f"CUPTI dropped {trace.dropped} records")
        report.findings.append(AuditFinding(reason="timing_unverified", message=f"the CUPTI trace is unusable: {why}"))
        return report
    if len(trace.pids) > 1:
        report.notes.append(f"{len(trace.pids)} processes loaded the tracer (the program started children)")
    tl = _timeline(trace, harness_kernels, timed_calls)
    if tl is None:
        report.findings.append(AuditFinding(
            reason="timing_unverified",
            message="no cudaEventElapsedTime between recorded events: the timed region cannot be located",
        ))
        return report
    editable = [k for k in tl.window_kernels if k.name not in harness_kernels]
    report.windows = len(tl.windows)
    report.events_ms = tl.events_ms
    in_windows = [(k.start, k.end) for k in tl.window_kernels]
    launch_time = {a.corr: a.start for a in trace.api}
    in_windows += [(x.start, x.end) for x in [*trace.copies, *trace.memsets]
                   if any(s <= launch_time.get(x.corr, x.start) <= e for s, e in tl.windows)]
    report.busy_ms = _union_ns(in_windows) / NS_PER_MS
    report.elapsed_calls = tl.elapsed_calls
    if timed_calls is not None:
        report.launches_between_calls = tl.between_calls
        report.uneven_window = next((i for i, sig in enumerate(tl.window_signatures) if sig != tl.window_signatures[0]),
                                    None)
    report.window_event_records = tl.window_event_records
    report.window_markers = timed_calls is None or tl.window_overrun_ns is not None
    if tl.window_overrun_ns is not None:
        report.worst_window_overrun_us = max(tl.window_overrun_ns, default=0) / 1000
    if tl.window_dated_ns:
        report.dated_ms = statistics.fmean(tl.window_dated_ns) / NS_PER_MS
    report.launch_wait_ns, report.start_marker_ns = tl.launch_wait_ns, tl.start_marker_ns
    if tl.work_ns:  # the median call: one jittered call does not move it (red team round 252)
        report.work_ms = statistics.median(tl.work_ns) / NS_PER_MS
    if len(tl.windows) > 1:
        # One pair of events per call: each window's own work against its own time (2 us of
        # timestamp granularity per window).
        report.worst_window_escape = max((busy / NS_PER_MS) / max(ms + 0.002, 1e-6)
                                         for busy, ms in zip(tl.window_busy_ns, tl.window_ms))
    report.window_launches = len(editable)
    report.window_host_copies = tl.window_host_copies
    report.run_host_copies = tl.run_host_copies
    report.window_counts = dict(Counter(_signature(k) for k in editable))
    report.iterations = round(tl.events_ms / reported_ms) if reported_ms > 0 else None
    if report.iterations:
        report.independent_ms = report.busy_ms / report.iterations
    report.warmup_signatures = sorted({_signature(k) for k in tl.warmup_kernels})
    report.window_signatures = sorted({_signature(k) for k in editable})
    ratios, spreads = [], []
    # Launch uniformity on the calls whose inputs are alike (not the "one value" stressed ones).
    alike = [k for k in editable
             if next((i for i, (s, e) in enumerate(tl.windows) if s <= launch_time.get(k.corr, k.start) <= e), None)
             not in (uneven_calls or set())]
    for sig in report.window_signatures:
        timed = [k.end - k.start for k in alike if _signature(k) == sig]
        if timed and statistics.median(timed) > 0:
            # A few microseconds are launch jitter, not work: a 5 us kernel once at 8 us hides nothing
            # (a two-pass reduction's one-block final pass was refused for it).
            excess = max(timed) - statistics.median(timed)
            spreads.append(max(timed) / statistics.median(timed) if excess > SPREAD_FLOOR_NS else 1.0)
        first = [k.end - k.start for k in tl.warmup_kernels if _signature(k) == sig]
        if timed and first and statistics.median(timed) > 0:
            # the same floor: a 1.5 us pass 2 us colder at its first launch skipped nothing (red team round 250)
            excess = max(first) - statistics.median(timed)
            ratios.append(max(first) / statistics.median(timed) if excess > SPREAD_FLOOR_NS else 1.0)
    report.first_to_timed_ratio = max(ratios) if ratios else None
    report.window_spread = max(spreads) if spreads else None
    return report


def judge(candidate: AuditReport, baseline: AuditReport, *, escape_tolerance: float,
          agreement_tolerance: float, warmup_slowdown_limit: float) -> AuditReport:
    """Add findings to the candidate's report by its own numbers and against the baseline's."""
    c = candidate.model_copy(deep=True)

    def flag(reason, message):
        c.findings.append(AuditFinding(reason=reason, message=message))

    # A call that fails leaves its outputs as they were: what the part reads from them next is whatever
    # the memory held, in a caller's process what its previous call left there (red team round 213). A
    # failure the baseline's run has too (the harness's own, a probe the program makes) is not the part's.
    failed = [(call, n) for call, n in c.failed_calls.items() if call not in baseline.failed_calls]
    if failed:
        call, n = failed[0]
        flag("runtime_error", f"a CUDA runtime call failed in the candidate's run and not in the baseline's ({call}, "
                              f"{n} time(s)): a failed call leaves its outputs unwritten, so the part reads what "
                              "memory held before")
    if any(f.reason == "timing_unverified" for f in c.findings) or c.events_ms is None:
        return c

    if c.window_launches == 0:
        flag("no_gpu_work", "no kernel of the editable part ran inside the timed region")
    if c.window_host_copies > baseline.window_host_copies:
        flag("no_gpu_work", f"{c.window_host_copies} host<->device copies inside the timed region "
                            f"(baseline {baseline.window_host_copies}): work done on the host")
    elif c.run_host_copies > baseline.run_host_copies:
        flag("no_gpu_work", f"{c.run_host_copies} host<->device copies in the run (baseline "
                            f"{baseline.run_host_copies}): the launcher moves data to or from the host")
    # The windows are the harness's: the candidate may not add timing windows (a planted
    # cudaEventElapsedTime of its own), nor re-record the harness's events to move one.
    if baseline.elapsed_calls and c.elapsed_calls != baseline.elapsed_calls:
        flag("reframed_timing", f"the run made {c.elapsed_calls} cudaEventElapsedTime measurements, the baseline "
                                f"{baseline.elapsed_calls}: timing windows were added or dropped")
    elif baseline.window_event_records and c.window_event_records != baseline.window_event_records:
        flag("reframed_timing", "the timed windows' events were recorded more often than the harness records them: "
                                "a window was moved")
    if c.launches_between_calls > baseline.launches_between_calls:
        flag("timer_escape", f"{c.launches_between_calls} kernels of the editable part were launched between timed "
                             "calls, outside every timing window")
    if c.uneven_window is not None and baseline.uneven_window is None:
        flag("inconsistent_work", f"timed call {c.uneven_window + 1} launched other work than the first timed call: "
                                  "every call must compute the whole result")
    if not c.window_markers:
        # Every v2 harness launches one after each stop event: without it the end of a window
        # cannot be dated, so work past it cannot be ruled out.
        flag("timing_unverified", "a timed call has no harness marker kernel right before its start event or right "
                                  "after its stop event")
    if c.worst_window_overrun_us is not None and c.worst_window_overrun_us * 1000 > OVERRUN_GRANULARITY_NS:
        flag("timer_escape", f"work launched in a timed call was still running {c.worst_window_overrun_us:.1f} us after "
                             "its stop event (the harness's marker kernel had started): work escaped its timer")
    if c.worst_window_escape is not None and c.worst_window_escape > 1 + escape_tolerance:
        flag("timer_escape", f"one timed call kept the GPU busy {c.worst_window_escape:.2f}x as long as its events "
                             "measured: work escaped its timer")
    slack_ms = 0.002 * max(1, c.window_launches)  # timestamp granularity per kernel
    if c.busy_ms is not None and c.busy_ms > c.events_ms * (1 + escape_tolerance) + slack_ms:
        flag("timer_escape", f"kernels launched in the timed region were busy {c.busy_ms:.3f} ms on the GPU "
                             f"but the events measured {c.events_ms:.3f} ms: work escaped the timer")
    if baseline.iterations and c.iterations != baseline.iterations:
        flag("kernel_ms_mismatch", f"KERNEL_MS {c.reported_ms:.4f} does not follow from the harness's events "
                                   f"({c.events_ms:.3f} ms over {baseline.iterations} calls)")
    iterations = baseline.iterations or c.iterations
    if iterations and c.busy_ms is not None and c.reported_ms is not None:
        independent = c.busy_ms / iterations
        c.independent_ms = independent
        if c.reported_ms < independent * (1 - agreement_tolerance):
            flag("kernel_ms_mismatch", f"KERNEL_MS {c.reported_ms:.4f} ms is below the {independent:.4f} ms per call "
                                       f"the GPU was busy (CUPTI)")
        if 0 < c.window_launches < iterations:
            flag("inconsistent_work", f"only {c.window_launches} kernel launches for {iterations} timed calls")
        # Every call launches the same work, so each kernel's count is a multiple of the calls.
        uneven = {sig: n for sig, n in c.window_counts.items() if n % iterations}
        if uneven:
            sig, n = next(iter(uneven.items()))
            flag("inconsistent_work", f"{sig.split('<<<')[0]} launched {n} times in {iterations} timed calls: "
                                      "work done in some calls only")
    if c.warmup_signatures and set(c.warmup_signatures) != set(c.window_signatures):
        only_warm = sorted(set(c.warmup_signatures) - set(c.window_signatures))
        only_timed = sorted(set(c.window_signatures) - set(c.warmup_signatures))
        flag("inconsistent_work", "timed calls launch different work than warm-up calls "
                                  f"(warm-up only: {only_warm[:2]}, timed only: {only_timed[:2]})")
    elif not c.warmup_signatures and c.window_launches:
        c.notes.append("no warm-up launches before the timed region: launch consistency not checked")
    if c.window_spread is not None:
        allowed = warmup_slowdown_limit * max(1.0, baseline.window_spread or 1.0)
        if c.window_spread > allowed:
            flag("inconsistent_work", f"one launch of a kernel in the timed region took {c.window_spread:.1f}x its median "
                                      f"(allowed {allowed:.1f}x): work done in some calls only")
    if c.first_to_timed_ratio is not None:
        allowed = warmup_slowdown_limit * max(1.0, baseline.first_to_timed_ratio or 1.0)
        if c.first_to_timed_ratio > allowed:
            flag("inconsistent_work", f"a kernel ran {c.first_to_timed_ratio:.1f}x faster in the timed calls than "
                                      f"at its first launch (allowed {allowed:.1f}x): work skipped after the first call")
    return c


def summarize_launches(trace: CuptiTrace) -> dict[str, int]:
    """Kernel name -> launch count, for reports."""
    return dict(Counter(k.name for k in trace.kernels))
