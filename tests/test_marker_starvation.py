"""Red team round 238: a part that keeps the harness's window marker from starting (a greatest-priority
stream whose pending blocks take every freed slot) leaves a few microseconds a call past the stop event that
the audit's overrun check does not date. Modelled CUPTI traces (host submission to GPU 1 us, 2.5 us a
launch). Closed by class: the harness launches a start marker right before each start event, the GPU idle,
and every time compared (the timing pairs, other sizes, wide draws) is KERNEL_MS but never less than the
span from that marker's end to the end of the call's last work (AuditReport.dated_ms, OtherSize.floored)."""

from __future__ import annotations

import pytest

from kernelloop.config import VerifySettings
from kernelloop.tools.cupti import ApiRecord, CuptiTrace, ElapsedCall, EventRecordCall, KernelRecord
from kernelloop.verify.audit import audit_trace, judge
from kernelloop.verify.gate import OtherSize

from .test_audit import HARNESS_V2, MARKER, START_MARKER

US = 1000
LAT = 1 * US  # host submission -> GPU
KERNEL = "_Z4workPKfPfi"
TAIL = "_Z4tailPKfPfi"
GATE = "_Z4gatePVj"
class Timeline:
    def __init__(self):
        self.t = 0
        self.corr = 0
        self.trace = CuptiTrace(complete=True, pids=[1])
        self.stamps: dict[str, int] = {}

    def _c(self):
        self.corr += 1
        return self.corr

    def launch(self, name, dur_ns, *, ready=0, grid=(264, 1, 1), block=(1024, 1, 1), stream=1):
        """cudaLaunchKernel at host time t: the GPU starts it at max(submission + LAT, ready)."""
        c = self._c()
        self.trace.api.append(ApiRecord(cbid=211, name="cudaLaunchKernel", start=self.t, end=self.t + 2500, corr=c))
        start = max(self.t + 2 * US + LAT, ready)
        k = KernelRecord(name=name, start=start, end=start + dur_ns, corr=c, stream=stream, device=0, grid=grid,
                         block=block)
        self.trace.kernels.append(k)
        self.t += 2500
        return k

    def record(self, event, legacy_end=0):
        self.trace.event_records.append(EventRecordCall(event=event, stream="0x0", t=self.t, corr=self._c()))
        self.stamps[event] = max(self.t + LAT, legacy_end)
        self.t += 1 * US

    def elapsed(self, a, b):
        ms = (self.stamps[b] - self.stamps[a]) / 1e6
        self.trace.elapsed.append(ElapsedCall(start_event=a, end_event=b, ms=ms, result=0, t=self.t, corr=self._c()))
        self.t += 1 * US
        return ms


def run(main_ns: int, tail_ns: int = 0, *, whole_side: bool = False, starve: bool = True, calls: int = 20,
        warmup: int = 2, gated: bool = False):
    """One program run: 3 bandwidth-probe windows, warm-up calls, then `calls` timed calls. Each call launches
    a kernel of main_ns on the legacy stream (on the side stream instead where whole_side) and, where
    tail_ns, a tail kernel on a greatest-priority non-blocking stream ordered after it by an event
    (cudaEventRecord + cudaStreamWaitEvent), which nothing joins back: it runs past the stop event."""
    p = Timeline()
    for k in range(3):
        p.record(f"p{k}a")
        pk = p.launch("_ZN2kl25kl_bandwidth_probe_kernel", 50 * US, grid=(2048, 1, 1), block=(256, 1, 1))
        p.record(f"p{k}b", legacy_end=pk.end)
        p.t = pk.end + 10 * US
        p.elapsed(f"p{k}a", f"p{k}b")

    def call():
        if gated:
            # a one-block gate on the legacy stream spinning on a device counter, then the work on a greatest-
            # priority non-blocking stream; the gate exits when tail_ns of the work are left: the stop event
            # fires while the work grid still has blocks pending
            g = p.launch(GATE, 0, grid=(1, 1, 1), block=(32, 1, 1))
            w = p.launch(KERNEL, main_ns + tail_ns, stream=7)
            p.trace.kernels[p.trace.kernels.index(g)] = g.model_copy(update={"end": w.end - tail_ns})
            return w.end - tail_ns, w.end
        k = p.launch(KERNEL, main_ns, stream=7 if whole_side else 1)
        last = k
        if tail_ns:
            p.t += 2 * US  # cudaEventRecord + cudaStreamWaitEvent
            last = p.launch(TAIL, tail_ns, ready=k.end + 500, stream=7)
        return (0 if whole_side else k.end), last.end

    for w in range(warmup):
        _, end = call()
        p.t = max(p.t, end) + 30 * US  # cudaDeviceSynchronize, checks
    total = 0.0
    side = whole_side or tail_ns > 0
    for c in range(calls):
        p.t += 40 * US  # the call's fill, flush and scrub, all synchronised
        # the harness's start marker on the legacy stream, the GPU idle, right before the start event
        opener = p.launch(START_MARKER, 1500, grid=(1, 1, 1), block=(1, 1, 1))
        p.record(f"s{c}", legacy_end=opener.end)
        legacy_end, end = call()
        p.record(f"e{c}", legacy_end=legacy_end)
        # the harness's marker on the legacy stream, launched right after the stop event
        c_m = p._c()
        p.trace.api.append(ApiRecord(cbid=211, name="cudaLaunchKernel", start=p.t, end=p.t + 2500, corr=c_m))
        natural = max(p.t + 2 * US + LAT, p.stamps[f"e{c}"] + 300)
        # starved: the greatest-priority grid's pending blocks take every freed slot; the marker gets the
        # first slot freed after the last of them is dispatched, < 1 us before that grid ends
        m_start = max(natural, end - 600) if (side and starve) else natural
        p.trace.kernels.append(KernelRecord(name=MARKER, start=m_start, end=m_start + 1500, corr=c_m, stream=1,
                                            device=0, grid=(1, 1, 1), block=(1, 1, 1)))
        p.t += 2500
        p.t = max(p.t, end, m_start + 1500) + 10 * US  # cudaEventSynchronize + cudaDeviceSynchronize
        total += p.elapsed(f"s{c}", f"e{c}")
    return p.trace, total / calls




def _audited(trace, kernel_ms):
    return audit_trace(trace, reported_ms=kernel_ms, harness_kernels=set(HARNESS_V2), timed_calls=20)


def _pair(base_us: float, cand_main_us: float, cand_tail_us: float = 0.0, *, whole_side=False):
    bt, bms = run(int(base_us * US))
    ct, cms = run(int(cand_main_us * US), int(cand_tail_us * US), whole_side=whole_side)
    b, c = _audited(bt, bms), _audited(ct, cms)
    vs = VerifySettings()
    judged = judge(c, b, escape_tolerance=vs.escape_tolerance, agreement_tolerance=vs.agreement_tolerance,
                   warmup_slowdown_limit=vs.warmup_slowdown_limit)
    return OtherSize(label="", baseline_ms=bms, candidate_ms=cms, baseline_audit=b, candidate_audit=c), judged


def _same_work_speedup(base_us: float, main_us: float, tail_us: float, whole: bool) -> float:
    times, _ = _pair(base_us, main_us, tail_us, whole_side=whole)
    assert times.baseline_ms / times.candidate_ms > 1.2  # KERNEL_MS alone: "faster" with the same work
    base, cand = times.floored()
    return base / cand


def test_work_past_a_starved_marker_that_the_audit_passes_is_not_faster_by_the_times_compared():
    # 10 us of work, 3 us of it past the stop event: under every audit limit, 1.33x by KERNEL_MS; the span
    # from the start marker to the tail's end is the call's time
    times, judged = _pair(10, 7, 3)
    assert judged.ok, judged.findings  # the end marker, starved, dates nothing
    assert _same_work_speedup(10, 7, 3, False) < 1.05


@pytest.mark.parametrize(("base_us", "main_us", "tail_us", "whole"),
                         [(20, 14.5, 5.5, False), (20, 10, 10, False), (4, 4.5, 0, True), (10, 7, 3, False)])
def test_the_same_work_past_a_starved_marker_is_not_faster_by_the_times_compared(base_us, main_us, tail_us, whole):
    # before the start marker (round 238): 1.15x at 20 us (busy-time floor), 1.56x for a 4 us kernel moved wholly
    # past the stop event; the audit may flag some of these besides, but the times compared say it alone
    assert _same_work_speedup(base_us, main_us, tail_us, whole) < 1.05


def test_without_the_start_marker_a_kernel_of_a_few_microseconds_looked_faster():
    """What the start marker closed: by KERNEL_MS and busy time alone, the 4 us kernel moved past the stop
    event is 1.5x faster (the baseline's own idle latency inside its window is most of its time)."""
    times, _ = _pair(4, 4.5, 0, whole_side=True)
    undated = [a.model_copy(update={"dated_ms": None}) for a in (times.baseline_audit, times.candidate_audit)]
    base, cand = times.model_copy(update={"baseline_audit": undated[0], "candidate_audit": undated[1]}).floored()
    assert base / cand > 1.2


def test_a_candidate_doing_more_work_past_a_starved_marker_is_slower_by_the_times_compared():
    times, judged = _pair(5, 5, 3)  # 1.6x the baseline's work, 3 us of it past the stop event
    assert judged.ok, judged.findings
    ratio, source = times.ratio()
    assert ratio > 1.2 and source == "KERNEL_MS, at least the traced time a call took", (ratio, source)


# -- red team round 240: the caller layouts gate read raw KERNEL_MS -------------------------------------------

ALIGNED = [True, True, True] + [False] * 8  # cudaMalloc's, two 2 MiB-aligned mapped ones, eight offset/packed ones


def _layouts(trick_default, honest_default, trick_other=None):
    """A candidate keyed on its input being 2 MiB-aligned: there (cudaMalloc's placement, the two aligned mapped
    layouts) the baseline's own work with a tail behind a starved end marker; elsewhere (every guarded timed run,
    the offset layouts) an honest, faster kernel."""
    from kernelloop.verify.gate import LayoutTime

    out = []
    for k, aligned in enumerate(ALIGNED):
        times, judged = _pair(*(trick_default if aligned else honest_default))
        assert judged.ok, judged.findings  # every layout run passes the timing audit
        out.append(LayoutTime(aligned=aligned, size=times.model_copy(update={"label": f"layout {k}"})))
    if trick_other is not None:  # another size, cudaMalloc's placement
        times, judged = _pair(*trick_other)
        assert judged.ok, judged.findings
        out.append(LayoutTime(aligned=True, default_size=False,
                              size=times.model_copy(update={"label": "where cudaMalloc puts them (size 1)"})))
    return out


def _layout_gate(layouts):
    from kernelloop.verify.gate import _speed_in_caller_layouts
    from kernelloop.verify.stats import decide
    from kernelloop.verify.verdict import Verdict

    v = Verdict(accepted=False, summary="", baseline_file="b", candidate_file="c", settings=VerifySettings())
    v.speed = decide([1.6] * 9, [1.0] * 9, threshold=1.2, confidence=0.95)  # the honest path, timed and floored
    reasons: list = []
    _speed_in_caller_layouts(v, layouts, reasons)
    return v.gate("caller layouts"), reasons


def test_the_baselines_work_behind_a_starved_marker_in_a_callers_aligned_layout_is_not_faster():
    # aligned layouts: the baseline's 10 us of work (1.1x of it), 3.5 us behind the starved end marker: 1.26x by
    # KERNEL_MS, under 1x by the trace
    layouts = _layouts(trick_default=(10, 7.5, 3.5), honest_default=(10, 5))
    assert all(lay.size.baseline_ms / lay.size.candidate_ms > 1.2 for lay in layouts[:3])
    row, reasons = _layout_gate(layouts)
    assert row.status == "fail" and reasons and "aligned layout" in row.detail, row.detail


def test_a_third_more_work_behind_a_starved_marker_at_another_size_in_a_callers_layout_is_slower():
    layouts = _layouts(trick_default=(10, 5), honest_default=(10, 5), trick_other=(10, 10, 3.5))
    other = layouts[-1].size
    assert other.candidate_ms / other.baseline_ms < 1.05  # by KERNEL_MS: as fast as the baseline
    row, reasons = _layout_gate(layouts)
    assert row.status == "fail" and "another size" in row.detail, row.detail


def test_an_honest_candidate_passes_the_caller_layouts_gate_on_traced_times():
    row, reasons = _layout_gate(_layouts(trick_default=(10, 5), honest_default=(10, 5)))
    assert row.status == "pass" and not reasons, row.detail


def test_every_time_the_gate_compares_goes_through_the_floors():
    """The class (rounds 238, 240): a candidate's time set against a baseline's anywhere but in OtherSize.ratio or
    floored_times is raw KERNEL_MS, which work behind a starved end marker shrinks. No division of one by the
    other may appear elsewhere in the verifier."""
    import ast
    from pathlib import Path

    import kernelloop.verify as verify_package

    allowed = {"ratio", "floored_times", "floored"}
    raw = []
    for path in Path(verify_package.__file__).parent.glob("*.py"):
        tree = ast.parse(path.read_text())
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) or fn.name in allowed:
                continue
            for node in ast.walk(fn):
                if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
                    names = {getattr(side, "attr", getattr(side, "id", "")) for side in (node.left, node.right)}
                    if names & {"candidate_ms", "baseline_ms"} and len(names & {"candidate_ms", "baseline_ms",
                                                                                 "cand_ms", "base_ms"}) == 2:
                        raw.append(f"{path.name}:{node.lineno} in {fn.name}")
    assert not raw, raw
