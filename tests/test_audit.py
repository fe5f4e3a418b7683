"""The independent timing audit on synthetic CUPTI traces, one per way to game the timer."""

from __future__ import annotations

import pytest

from kernelloop.tools.cupti import ApiRecord, CopyRecord, CuptiTrace, ElapsedCall, EventRecordCall, KernelRecord
from kernelloop.verify.audit import AuditReport, audit_trace, judge

US = 1000  # ns


class Program:
    """Writes a trace the way a contract harness produces one: warm-up calls, then R timed calls."""

    def __init__(self):
        self.t = 0
        self.gpu = 0
        self.corr = 0
        self.trace = CuptiTrace(complete=True, pids=[1])

    def _next(self):
        self.corr += 1
        return self.corr

    def launch(self, name="_Z6kernelPf", dur_us=400, grid=(64, 64, 1), block=(16, 16, 1), side_stream=False):
        c = self._next()
        self.trace.api.append(ApiRecord(cbid=211, name="cudaLaunchKernel", start=self.t, end=self.t + 3 * US, corr=c))
        start = max(self.gpu, self.t + 5 * US)
        end = start + dur_us * US
        self.trace.kernels.append(KernelRecord(name=name, start=start, end=end, corr=c, stream=7 if side_stream else 1,
                                               device=0, grid=grid, block=block))
        if not side_stream:
            self.gpu = end
        self.t += 4 * US

    def copy(self, kind, dur_us=100):
        c = self._next()
        self.trace.api.append(ApiRecord(cbid=31, name="cudaMemcpy", start=self.t, end=self.t + dur_us * US, corr=c))
        start = max(self.gpu, self.t)
        self.trace.copies.append(CopyRecord(copy_kind=kind, bytes=4 << 20, start=start, end=start + dur_us * US,
                                            corr=c, stream=1))
        self.gpu = start + dur_us * US
        self.t = self.gpu

    def record(self, event):
        self.trace.event_records.append(EventRecordCall(event=event, stream="0x0", t=self.t, corr=self._next()))
        self.mark = getattr(self, "mark", {})
        self.mark[event] = max(self.gpu, self.t)
        self.t += 1 * US

    def elapsed(self, a="0xa", b="0xb"):
        self.t = max(self.t, self.gpu) + 10 * US
        ms = (self.mark[b] - self.mark[a]) / 1e6
        self.trace.elapsed.append(ElapsedCall(start_event=a, end_event=b, ms=ms, result=0, t=self.t, corr=self._next()))
        self.t += 1 * US
        return ms


def harness(call, warmup=2, iters=20):
    p = Program()
    for i in range(warmup):
        call(p, i)
    p.t = p.gpu + 50 * US
    p.record("0xa")
    for i in range(iters):
        call(p, warmup + i)
    p.record("0xb")
    total = p.elapsed()
    return p.trace, total / iters


def honest(p, i):
    p.launch()


def audited(call, reported=None, harness_kernels=frozenset(), **kw):
    trace, kernel_ms = harness(call, **kw)
    report = audit_trace(trace, reported_ms=reported or kernel_ms, harness_kernels=set(harness_kernels))
    base_trace, base_ms = harness(honest)
    base = audit_trace(base_trace, reported_ms=base_ms, harness_kernels=set())
    return judge(report, base, escape_tolerance=0.10, agreement_tolerance=0.25, warmup_slowdown_limit=1.5)


def reasons(report: AuditReport):
    return {f.reason for f in report.findings}


def test_honest_program_passes_and_numbers_agree():
    r = audited(honest)
    assert r.ok, r.findings
    assert r.iterations == 20 and r.window_launches == 20
    assert abs(r.independent_ms - 0.4) < 0.01 and abs(r.reported_ms - 0.4) < 0.02


def test_side_stream_escapes_the_events():
    r = audited(lambda p, i: p.launch(side_stream=True))
    assert "timer_escape" in reasons(r)


def test_faked_kernel_ms_is_caught():
    r = audited(honest, reported=0.001)
    assert "kernel_ms_mismatch" in reasons(r)


def test_cached_copy_without_kernels_is_no_gpu_work():
    def cached(p, i):
        if i == 0:
            p.launch()
        else:
            p.copy("DtoD", dur_us=5)
    assert "no_gpu_work" in reasons(audited(cached))


def test_host_compute_with_copies_is_no_gpu_work():
    def on_host(p, i):
        p.copy("DtoH")
        p.t += 300_000 * US  # the CPU computes
        p.copy("HtoD")
        p.launch(name="_Z5dummyv", dur_us=2)
    assert "no_gpu_work" in reasons(audited(on_host))


def test_different_work_after_warmup_is_inconsistent():
    def switch(p, i):
        if i == 0:
            p.launch()
        else:
            p.launch(name="_Z4copyPf", dur_us=5, grid=(4096, 1, 1), block=(256, 1, 1))
    assert "inconsistent_work" in reasons(audited(switch, warmup=1))


def test_kernel_that_gets_much_faster_after_its_first_launch_is_inconsistent():
    def cached_flag(p, i):
        p.launch(dur_us=400 if i == 0 else 5)
    assert "inconsistent_work" in reasons(audited(cached_flag))


def test_skipping_launches_in_some_calls_is_inconsistent():
    assert "inconsistent_work" in reasons(audited(lambda p, i: p.launch() if i % 2 == 0 else None))


def test_a_cold_first_launch_within_limits_is_fine_and_a_twice_slower_one_is_not():
    r = audited(lambda p, i: p.launch(dur_us=560 if i == 0 else 400))
    assert r.ok and 1.35 < r.first_to_timed_ratio < 1.45
    assert "inconsistent_work" in reasons(audited(lambda p, i: p.launch(dur_us=800 if i == 0 else 400)))


def test_work_done_in_one_timed_call_only_is_inconsistent():
    def once_then_copy(p, i):
        p.launch(name="_Z4hashPf", dur_us=3)
        if i in (0, 2):  # after each input change: first warm-up call and first timed call
            p.launch()
        p.launch(name="_Z4copyPf", dur_us=5)
    assert "inconsistent_work" in reasons(audited(once_then_copy))


def test_one_slow_launch_among_fast_ones_in_the_timed_region_is_inconsistent():
    def flagged(p, i):
        p.launch(dur_us=400 if i in (0, 2) else 10)
    assert "inconsistent_work" in reasons(audited(flagged))


def test_host_copies_during_warm_up_are_caught():
    def host_cache(p, i):
        if i == 0:
            p.copy("DtoH")
            p.copy("DtoH")
            p.copy("HtoD")
        p.launch(name="_Z4copyPf", dur_us=5)
    assert "no_gpu_work" in reasons(audited(host_cache))


def test_harness_kernels_do_not_count_as_editable_work():
    def with_init(p, i):
        p.launch(name="_Z4initPf", dur_us=50)
    r = audited(with_init, harness_kernels={"_Z4initPf"})
    assert "no_gpu_work" in reasons(r)


def test_unusable_traces_fail_closed():
    trace, ms = harness(honest)
    for broken in (trace.model_copy(update={"complete": False}), trace.model_copy(update={"truncated": True}),
                   trace.model_copy(update={"dropped": 3}), trace.model_copy(update={"elapsed": []})):
        r = audit_trace(broken, reported_ms=ms, harness_kernels=set())
        assert reasons(r) == {"timing_unverified"}


def test_per_call_event_pairs_are_supported():
    p = Program()
    p.launch()
    total = 0.0
    for i in range(10):
        p.record("0xa")
        p.launch()
        p.record("0xb")
        total += p.elapsed()
    r = audit_trace(p.trace, reported_ms=total / 10, harness_kernels=set())
    assert r.windows == 10 and r.iterations == 10 and r.window_launches == 10 and not r.findings


# -- contract v2: probes first, then one pair of events per timed call --------------------------


MARKER = "_ZN2kl23kl_window_marker_kernelEv"
START_MARKER = "_ZN2kl29kl_window_start_marker_kernelEv"
REPLAY_MARKER = "_ZN2kl23kl_replay_marker_kernelEv"
HARNESS_V2 = {"_ZN2kl25kl_bandwidth_probe_kernel", MARKER, START_MARKER, REPLAY_MARKER}


def harness_v2(call, warmup=2, calls=20, probes=3, extra_window=False, rerecord=False, markers=True, replay=False,
               replay_marker=REPLAY_MARKER, start_markers=True):
    """A v2 harness's trace: bandwidth probes (their own windows), warm-up, then one window
    per timed call on events of its own."""
    p = Program()
    for k in range(probes):
        p.record(f"0xp{k}a")
        p.launch(name="_ZN2kl25kl_bandwidth_probe_kernel", dur_us=50)
        p.record(f"0xp{k}b")
        p.elapsed(f"0xp{k}a", f"0xp{k}b")
    for i in range(warmup):
        call(p, i)
    total = 0.0
    for c in range(calls):
        p.t = p.gpu + 50 * US
        if start_markers:  # the harness's start marker, right before the start event on the same stream
            p.launch(name=START_MARKER, dur_us=2, grid=(1, 1, 1), block=(1, 1, 1))
        p.record(f"0xs{c}")
        call(p, warmup + c)
        if rerecord and c == 5:
            p.record(f"0xs{c}")  # the candidate re-records the harness's start event: the window shrinks
            p.launch(dur_us=5)
        p.record(f"0xe{c}")
        if markers:  # the harness's marker kernel, right after the stop event on the same stream
            p.launch(name=MARKER, dur_us=2, grid=(1, 1, 1), block=(1, 1, 1))
        total += p.elapsed(f"0xs{c}", f"0xe{c}")
        if extra_window and c == 3:
            p.record("0xc1")
            p.record("0xc1")
            p.elapsed("0xc1", "0xc1")  # a planted zero-length window
        if replay and c == calls - 2:  # the untimed repeat of the first call's inputs, between its markers
            p.launch(name=replay_marker, dur_us=2, grid=(1, 1, 1), block=(1, 1, 1))
            call(p, warmup)
            p.launch(name=replay_marker, dur_us=2, grid=(1, 1, 1), block=(1, 1, 1))
    return p.trace, total / calls


def audited_v2(call, **kw):
    trace, kernel_ms = harness_v2(call, **kw)
    hk = HARNESS_V2
    report = audit_trace(trace, reported_ms=kernel_ms, harness_kernels=hk, timed_calls=20)
    base_trace, base_ms = harness_v2(honest, replay=kw.get("replay", False))
    base = audit_trace(base_trace, reported_ms=base_ms, harness_kernels=hk, timed_calls=20)
    return judge(report, base, escape_tolerance=0.10, agreement_tolerance=0.25, warmup_slowdown_limit=1.5)


def test_v2_honest_harness_passes_with_probe_windows_ignored():
    r = audited_v2(honest)
    assert r.ok, r.findings
    assert r.windows == 20 and r.elapsed_calls == 23 and r.window_launches == 20


def test_v2_a_planted_timing_window_is_reframing():
    r = audited_v2(honest, extra_window=True)
    assert any(f.reason == "reframed_timing" for f in r.findings), r.findings


def test_v2_re_recording_a_window_event_is_reframing():
    r = audited_v2(honest, rerecord=True)
    assert any(f.reason == "reframed_timing" for f in r.findings), r.findings


def test_v2_one_call_escaping_its_own_window_is_caught():
    def one_escapes(p, i):
        p.launch()
        if i == 9:
            p.launch(dur_us=3000, side_stream=True)  # outlives this call's stop event

    r = audited_v2(one_escapes)
    assert any(f.reason == "timer_escape" for f in r.findings), r.findings


def test_v2_copy_engine_work_in_a_window_counts_as_busy():
    def copies_on_the_side(p, i):
        p.launch()
        c = p._next()
        p.trace.api.append(ApiRecord(cbid=41, name="cudaMemcpyAsync", start=p.t, end=p.t + US, corr=c))
        start = p.t + 2 * US
        p.trace.copies.append(CopyRecord(copy_kind="DtoD", bytes=64 << 20, start=start, end=start + 5000 * US,
                                         corr=c, stream=9))  # a side-stream device copy the events never wait for
        p.t += 2 * US

    r = audited_v2(copies_on_the_side)
    assert any(f.reason == "timer_escape" for f in r.findings), r.findings


def test_v2_too_few_windows_for_the_declared_calls_fails_closed():
    trace, ms = harness_v2(honest, calls=5, probes=0)
    r = audit_trace(trace, reported_ms=ms, harness_kernels=set(), timed_calls=20)
    assert [f.reason for f in r.findings] == ["timing_unverified"]


def test_v2_work_launched_between_timed_calls_escapes_the_timer():
    def hooked(p, i):
        p.launch()

    trace, ms = harness_v2(hooked)
    # the same kernel, launched by harness code between two timed windows (a hijacked hook)
    trace.api.append(ApiRecord(cbid=211, name="cudaLaunchKernel", start=trace.elapsed[-1].t + 5 * US,
                               end=trace.elapsed[-1].t + 6 * US, corr=99999))
    trace.kernels.append(KernelRecord(name="_Z6kernelPf", start=trace.elapsed[-1].t + 7 * US,
                                      end=trace.elapsed[-1].t + 400 * US, corr=99999, stream=1, device=0,
                                      grid=(64, 64, 1), block=(16, 16, 1)))
    hk = HARNESS_V2
    report = audit_trace(trace, reported_ms=ms, harness_kernels=hk, timed_calls=20)
    base_trace, base_ms = harness_v2(honest)
    base = audit_trace(base_trace, reported_ms=base_ms, harness_kernels=hk, timed_calls=20)
    r = judge(report, base, escape_tolerance=0.10, agreement_tolerance=0.25, warmup_slowdown_limit=1.5)
    assert any(f.reason == "timer_escape" and "between timed" in f.message for f in r.findings), r.findings


def test_v2_a_call_that_launches_other_work_than_the_first_is_inconsistent():
    def lazy_after_first(p, i):
        if i == 2:  # the first timed call does everything in 20 launches
            for _ in range(20):
                p.launch(dur_us=20)
        else:
            p.launch(dur_us=20) if i < 2 else None

    r = audited_v2(lazy_after_first)
    assert any(f.reason == "inconsistent_work" for f in r.findings), r.findings


def test_v2_a_tail_of_each_call_past_its_stop_event_is_caught_at_the_default_allowance():
    """Red-team round 7: 9-12% of each call's work on a side stream, waiting for the main kernel,
    so it runs after the stop event. The allowance for busy time past a window's events was
    10% + 2 us (a free ~1.09x); it is now 3%, about the honest runs' own spread (busy/events
    ~0.98 on the H100)."""
    from kernelloop.config import VerifySettings

    def tail(p, i):
        p.launch(dur_us=400)
        p.launch(name="_Z4tailPf", dur_us=36, grid=(32, 1, 1), side_stream=True)  # starts when the main one ends

    hk = HARNESS_V2
    trace, ms = harness_v2(tail, markers=False)  # the busy-time check alone (the marker check is below)
    report = audit_trace(trace, reported_ms=ms, harness_kernels=hk, timed_calls=20)
    base_trace, base_ms = harness_v2(honest, markers=False)
    base = audit_trace(base_trace, reported_ms=base_ms, harness_kernels=hk, timed_calls=20)
    assert 1.05 < report.worst_window_escape < 1.10
    default = VerifySettings().escape_tolerance
    found = judge(report, base, escape_tolerance=default, agreement_tolerance=0.25, warmup_slowdown_limit=1.5)
    assert "timer_escape" in {f.reason for f in found.findings}
    old = judge(report, base, escape_tolerance=0.10, agreement_tolerance=0.25, warmup_slowdown_limit=1.5)
    assert "timer_escape" not in {f.reason for f in old.findings}  # the hole the red team used



def test_v2_work_still_running_after_the_stop_event_is_caught_whatever_its_share():
    """Red-team round 7/8: a side-stream tail of 12% per call was accepted on the H100 (6.60x
    against the honest kernel's 6.09x) although the busy-time allowance was 3%: the start
    event's lead on the first kernel hid it. The harness's marker kernel after each stop event
    dates the end of the window on the GPU: any work still running then escaped, however small."""
    def small_tail(p, i):
        p.launch(dur_us=400)
        p.launch(name="_Z4tailPf", dur_us=8, grid=(32, 1, 1), side_stream=True)  # 2% of the call

    trace, ms = harness_v2(small_tail)
    report = audit_trace(trace, reported_ms=ms, harness_kernels=HARNESS_V2, timed_calls=20)
    base_trace, base_ms = harness_v2(honest)
    base = audit_trace(base_trace, reported_ms=base_ms, harness_kernels=HARNESS_V2, timed_calls=20)
    assert base.worst_window_overrun_us is not None and base.worst_window_overrun_us <= 0
    assert report.worst_window_overrun_us > 5
    found = judge(report, base, escape_tolerance=0.10, agreement_tolerance=0.25, warmup_slowdown_limit=1.5)
    assert any(f.reason == "timer_escape" and "stop event" in f.message for f in found.findings), found.findings
    assert judge(base, base, escape_tolerance=0.10, agreement_tolerance=0.25, warmup_slowdown_limit=1.5).ok


def test_v2_a_trace_without_markers_fails_closed():
    """Every v2 harness launches the marker after each stop event; a trace without one cannot
    date the end of a window, so work past it cannot be ruled out."""
    trace, ms = harness_v2(honest, markers=False)
    report = audit_trace(trace, reported_ms=ms, harness_kernels=HARNESS_V2, timed_calls=20)
    base_trace, base_ms = harness_v2(honest)
    base = audit_trace(base_trace, reported_ms=base_ms, harness_kernels=HARNESS_V2, timed_calls=20)
    judged = judge(report, base, escape_tolerance=0.03, agreement_tolerance=0.25, warmup_slowdown_limit=1.5)
    assert [f.reason for f in judged.findings] == ["timing_unverified"]


def test_v2_a_trace_without_start_markers_fails_closed():
    """The start marker dates each window's start for the span floor (round 238); a trace without it cannot."""
    trace, ms = harness_v2(honest, start_markers=False)
    report = audit_trace(trace, reported_ms=ms, harness_kernels=HARNESS_V2, timed_calls=20)
    assert report.dated_ms is None and not report.window_markers
    base_trace, base_ms = harness_v2(honest)
    base = audit_trace(base_trace, reported_ms=base_ms, harness_kernels=HARNESS_V2, timed_calls=20)
    judged = judge(report, base, escape_tolerance=0.03, agreement_tolerance=0.25, warmup_slowdown_limit=1.5)
    assert [f.reason for f in judged.findings] == ["timing_unverified"]


def test_v2_the_dated_span_of_an_honest_call_is_its_event_time_and_counts_work_past_the_stop_event():
    trace, ms = harness_v2(honest)
    report = audit_trace(trace, reported_ms=ms, harness_kernels=HARNESS_V2, timed_calls=20)
    assert report.dated_ms == pytest.approx(ms, rel=0.02)

    def tail_past_stop(p, i):
        p.launch()
        p.launch(name="_Z4tailPf", dur_us=600, side_stream=True)  # ends long after the stop event

    trace, ms = harness_v2(tail_past_stop)
    report = audit_trace(trace, reported_ms=ms, harness_kernels=HARNESS_V2, timed_calls=20)
    assert report.dated_ms > 1.4 * ms  # the span runs to the tail's end, whatever the events said


def test_v2_the_repeat_calls_launches_are_not_work_between_calls():
    def two_kernels(p, i):
        p.launch()
        p.launch(name="_Z6secondPf")

    r = audited_v2(two_kernels, replay=True)  # the baseline's repeat launches one kernel, this one two
    assert r.ok, r.findings
    assert r.launches_between_calls == 0


def test_v2_a_repeat_marker_the_harness_does_not_define_excuses_nothing():
    def two_kernels(p, i):
        p.launch()
        p.launch(name="_Z6secondPf")

    r = audited_v2(two_kernels, replay=True, replay_marker="_Z23kl_replay_marker_kernelv")  # the part's own
    assert any(f.reason == "timer_escape" and "between timed calls" in f.message for f in r.findings), r.findings


# -- a runtime call that fails leaves its outputs unwritten (red team round 213) -------------------


def _failing_call(name="cudaDeviceGetAttribute", ret=101):
    def call(p, i):
        p.trace.api.append(ApiRecord(cbid=200, name=name, start=p.t, end=p.t + US, corr=p._next(), ret=ret))
        p.t += 2 * US
        p.launch()
    return call


def test_a_runtime_call_failing_in_the_candidates_run_only_is_refused():
    # round 213: a launcher read a count from the bytes a failing cudaDeviceGetAttribute left unwritten
    r = audited_v2(_failing_call())
    assert reasons(r) == {"runtime_error"}, r.findings
    assert "cudaDeviceGetAttribute: error 101" in r.findings[0].message and "22 time(s)" in r.findings[0].message


def test_a_failure_the_baselines_run_has_too_and_query_answers_are_not_the_parts():
    trace, ms = harness_v2(_failing_call())
    report = audit_trace(trace, reported_ms=ms, harness_kernels=HARNESS_V2, timed_calls=20)
    assert report.failed_calls == {"cudaDeviceGetAttribute: error 101": 22}
    judged = judge(report, report, escape_tolerance=0.10, agreement_tolerance=0.25, warmup_slowdown_limit=1.5)
    assert "runtime_error" not in reasons(judged)
    for answer in (600, 4):  # cudaErrorNotReady from a stream query; cudaErrorCudartUnloading at exit
        assert audited_v2(_failing_call("cudaStreamQuery", answer)).ok
    assert audited_v2(_failing_call("cudaStreamQuery", 0)).ok


def test_a_failed_call_is_refused_even_where_the_timing_cannot_be_read():
    trace, ms = harness_v2(_failing_call(), markers=False)
    base_trace, base_ms = harness_v2(honest)
    judged = judge(audit_trace(trace, reported_ms=ms, harness_kernels=HARNESS_V2, timed_calls=20),
                   audit_trace(base_trace, reported_ms=base_ms, harness_kernels=HARNESS_V2, timed_calls=20),
                   escape_tolerance=0.10, agreement_tolerance=0.25, warmup_slowdown_limit=1.5)
    assert "runtime_error" in reasons(judged)


def test_v2_what_a_launch_costs_is_read_from_the_harness_launches():
    """A size's smallest forgives one launch's cost per call (gate.OtherSize.forgiven_ms): the baseline's wait from
    the start marker's end to its first work, and the start marker's own time (an empty kernel)."""
    from kernelloop.verify.audit import launch_cost_ms

    def two_pass(p, i):
        p.launch(dur_us=5)
        p.launch(name="_Z5finalPf", dur_us=5)

    trace, ms = harness_v2(two_pass)
    report = audit_trace(trace, reported_ms=ms, harness_kernels=HARNESS_V2, timed_calls=20)
    assert report.start_marker_ns == 2 * US and report.launch_wait_ns == 3 * US
    assert report.work_ms == pytest.approx(0.010)  # the first pass's start to the second's end
    assert launch_cost_ms(report, cap_ms=0.005) == pytest.approx(0.005)
    assert launch_cost_ms(report, cap_ms=0.004) == pytest.approx(0.004)
    trace, ms = harness_v2(two_pass, start_markers=False)  # no marker: nothing on record, nothing forgiven
    report = audit_trace(trace, reported_ms=ms, harness_kernels=HARNESS_V2, timed_calls=20)
    assert report.launch_wait_ns is None and launch_cost_ms(report, cap_ms=0.005) == 0.0


def test_a_short_kernel_a_few_microseconds_colder_at_its_first_launch_skipped_nothing():
    """Red team round 250: a 1.5 us pass 2 us colder at its first warm-up launch (the baseline's kernel equally cold)
    read as "work skipped after the first call"; a few microseconds are launch jitter, as in the spread check."""
    def cold_first(p, i):
        p.launch(dur_us=3.5 if i == 0 else 1.5)

    r = audited(cold_first)
    assert "inconsistent_work" not in reasons(r), r.findings

    def skips_after_first(p, i):
        p.launch(dur_us=400 if i == 0 else 40)

    assert "inconsistent_work" in reasons(audited(skips_after_first))
