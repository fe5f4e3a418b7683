"""summary.json (the reference demo's fields, and ours), report.md and report.html, from a finished run."""

from __future__ import annotations

from datetime import date
from typing import Any

from pydantic import BaseModel

from .. import __version__
from ..profiler.diagnosis import Diagnosis
from ..verify.verdict import Verdict

DEMO_PROFILE_METRICS = ("sm_throughput_pct", "l1tex_throughput_pct", "dram_throughput_pct", "l1_hit_rate_pct",
                        "achieved_occupancy_pct")


class RunFacts(BaseModel):
    """Everything the summary and the report are made from."""

    run_id: str
    kernel: str
    kernel_path: str
    status: str  # accepted | exhausted
    stop_reason: str = ""
    optimizer: str
    model: str = ""
    gpu: str = ""
    max_iterations: int
    iterations: int
    threshold: float
    diagnosis: Diagnosis | None = None
    diagnosis_after: Diagnosis | None = None
    best_verdict: Verdict | None = None
    iteration_accepted: int | None = None
    attempts: list[dict[str, Any]] = []  # {iteration, approach, outcome, speedup, reason}
    timings: dict[str, float] = {}
    loop_time_s: float = 0.0
    mcp_start_s: float = 0.0
    tokens: dict[str, int] = {}
    certificate: str | None = None
    resumed: bool = False


def _metric(d: Diagnosis | None, key: str) -> float | None:
    if d is None:
        return None
    found = next((e for e in d.key_metrics if e.key == key), None)
    if found is None:
        found = next((e for f in d.findings for e in f.evidence if e.key == key), None)
    return round(found.value, 2) if found and found.value is not None else None


def _profile_block(d: Diagnosis | None) -> dict[str, Any] | None:
    if d is None:
        return None
    block: dict[str, Any] = {"verdict": f"{d.primary} ({d.subtype})", "summary": d.summary}
    for key in DEMO_PROFILE_METRICS:
        block[key.replace("l1tex_", "l1_")] = _metric(d, key)
    block["duration_ms"] = d.duration_ms
    block["metrics_parsed"] = d.metrics_parsed
    return block


def summary(f: RunFacts) -> dict[str, Any]:
    v = f.best_verdict
    correctness = None
    if v is not None:
        correctness = "match" if (g := v.gate("correctness")) and g.status == "pass" else "mismatch"
    base_ms = v.speed.baseline.median if v and v.speed else None
    cand_ms = v.speed.candidate.median if v and v.speed else None
    return {
        "date": date.today().isoformat(),
        "run_id": f.run_id,
        "status": f.status,
        "stop_reason": f.stop_reason,
        "gpu": f.gpu,
        "kernel": f.kernel,
        "kernel_path": f.kernel_path,
        "optimizer": f.optimizer,
        "model": f.model or None,
        "profile": _profile_block(f.diagnosis),
        "profile_after": _profile_block(f.diagnosis_after),
        "verify": {
            "compile_ok": bool(v and (g := v.gate("compile")) and g.status == "pass"),
            "correctness": correctness,
            "baseline_kernel_ms": round(base_ms, 4) if base_ms else None,
            "candidate_kernel_ms": round(cand_ms, 4) if cand_ms else None,
            "speedup": round(v.speed.speedup, 3) if v and v.speed else None,
            "speedup_interval": [round(v.speed.lower, 3), round(v.speed.upper, 3)] if v and v.speed else None,
            "iteration_accepted": f.iteration_accepted,
            "max_iterations": f.max_iterations,
            "accept_threshold": f.threshold,
        },
        "iterations": f.iterations,
        "attempts": f.attempts,
        "loop_time_seconds": round(f.loop_time_s, 2),
        "mcp_start_seconds": round(f.mcp_start_s, 2),
        "time_split_seconds": {k: round(s, 2) for k, s in f.timings.items()},
        "tokens": f.tokens,
        "certificate": f.certificate,
        "resumed": f.resumed,
    }


def _fmt(value: float | None, unit: str = "") -> str:
    return "-" if value is None else f"{value:g}{unit}"


def report_markdown(f: RunFacts) -> str:
    s = summary(f)
    ver = s["verify"]
    lines = [f"# kernelloop optimize: {f.kernel}", "",
             f"**{f.status.upper()}**" + (f": {ver['speedup']}x faster, proven" if f.status == "accepted" else
                                          f" after {f.iterations} iteration(s): {f.stop_reason}"), "",
             f"- run: `{f.run_id}`; GPU: {f.gpu or 'unknown'}; optimizer: {f.optimizer}"
             + (f" ({f.model})" if f.model else ""),
             f"- bar: {f.threshold}x, at most {f.max_iterations} iteration(s); loop time {s['loop_time_seconds']} s"
             + (" (resumed)" if f.resumed else ""), ""]
    if f.diagnosis is not None:
        lines += ["## Diagnosis", "", f"Before: **{f.diagnosis.primary}** ({f.diagnosis.subtype}): {f.diagnosis.summary}", ""]
        if f.diagnosis_after is not None:
            lines += [f"After: **{f.diagnosis_after.primary}** ({f.diagnosis_after.subtype}): "
                      f"{f.diagnosis_after.summary}", ""]
        before, after = s["profile"], s["profile_after"] or {}
        lines += ["| metric | before | after |", "|---|---|---|"]
        for key in ("duration_ms", *[k.replace("l1tex_", "l1_") for k in DEMO_PROFILE_METRICS]):
            lines.append(f"| {key} | {_fmt(before.get(key))} | {_fmt(after.get(key))} |")
        lines.append("")
    lines += ["## Attempts", "", "| iteration | approach | outcome | speedup | reason |", "|---|---|---|---|---|"]
    for a in f.attempts:
        speed = f"{a['speedup']:.2f}x" if a.get("speedup") else "-"
        reason = str(a.get("reason", "")).replace("|", "\\|").replace("\n", " ")[:160]
        lines.append(f"| {a['iteration']} | {a['approach']} | {a['outcome']} | {speed} | {reason} |")
    lines.append("")
    v = f.best_verdict
    if v is not None:
        lines += ["## Proof", "", "| gate | baseline | candidate | result |", "|---|---|---|---|"]
        for g in v.gates:
            lines.append(f"| {g.gate} | {g.baseline} | {g.candidate} | {g.status}: {g.detail[:120]} |")
        lines += ["", f"Kernel time (median of interleaved runs): baseline {ver['baseline_kernel_ms']} ms, "
                  f"candidate {ver['candidate_kernel_ms']} ms; {v.speed.describe() if v.speed else ''}.", ""]
        if f.certificate:
            lines += [f"Certificate: `{f.certificate}`; re-check it on a GPU with "
                      f"`kernelloop verify-cert {f.certificate}`.", ""]
    lines += ["## Time", "", "| phase | seconds |", "|---|---|"]
    lines += [f"| {k} | {t:.2f} |" for k, t in f.timings.items()]
    if f.tokens.get("total_tokens"):
        lines += ["", f"Tokens: {f.tokens.get('prompt_tokens', 0)} prompt, {f.tokens.get('completion_tokens', 0)} "
                  f"completion in {f.tokens.get('calls', 0)} call(s)."]
    return "\n".join(lines) + "\n"


def _metric_value(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    if unit == "ns":
        return f"{value / 1e3:,.1f} µs"
    if unit in ("B/s", "FLOP/s"):
        return f"{value / 1e9:,.1f} G{unit}"
    return f"{value:,.3g} {unit}".strip() if abs(value) >= 1e6 else f"{value:,.2f} {unit}".strip()


def _iteration_points(f: RunFacts) -> list:
    from ..reports.figures import IterationPoint

    return [IterationPoint(iteration=int(a.get("iteration", 0)), speedup=a.get("speedup") or None,
                           accepted=a.get("outcome") == "accepted", outcome=str(a.get("outcome", "")))
            for a in f.attempts]


def report_html(f: RunFacts) -> str:
    """report.html: the Markdown report's content with figures, one self-contained page
    (reports/page.py): speedup per iteration against the bar, the roofline placement of baseline
    and best candidate, the key metrics before and after, the gate table, the certificate."""
    from ..reports.figures import metrics_chart, speedup_chart  # matplotlib: loaded only to write a report
    from ..reports.page import Cell, Page
    from ..reports.sections import gate_table, roofline_section

    s = summary(f)
    ver = s["verify"]
    page = Page(f"kernelloop optimize: {f.kernel}")
    page.heading(f"kernelloop optimize: {f.kernel}", level=1)
    if f.status == "accepted":
        page.banner(f"ACCEPTED: {ver['speedup']}x faster, proven (iteration {f.iteration_accepted})", "good")
    else:
        page.banner(f"{f.status.upper()} after {f.iterations} iteration(s): {f.stop_reason or 'no candidate cleared the bar'}",
                    "bad")
    page.facts([("kernel", f.kernel_path), ("run", f.run_id), ("GPU", f.gpu or "unknown"),
                ("optimizer", f.optimizer + (f" ({f.model})" if f.model else "")),
                ("bar", f"{f.threshold:g}x, at most {f.max_iterations} iteration(s)"),
                ("loop time", f"{s['loop_time_seconds']} s" + (" (resumed)" if f.resumed else ""))]
               + ([("kernel time", f"baseline {ver['baseline_kernel_ms']} ms, candidate {ver['candidate_kernel_ms']} ms "
                                   f"(medians of interleaved runs)")] if ver["speedup"] else []))

    page.heading("Speedup per iteration")
    if f.attempts:
        page.figure(speedup_chart(_iteration_points(f), f.threshold),
                    f"Each attempt's measured speedup (median baseline / median candidate) against the bar "
                    f"{f.threshold:g}x; an attempt that was never timed (it did not build, was wrong, ...) is a cross.")
        page.table(["iteration", "approach", "outcome", "speedup", "reason"],
                   [[Cell(str(a.get("iteration", "")), "num"), str(a.get("approach", "")),
                     Cell(str(a.get("outcome", "")), "pass" if a.get("outcome") == "accepted" else "fail"),
                     Cell(f"{a['speedup']:.2f}x" if a.get("speedup") else "-", "num"), str(a.get("reason", ""))]
                    for a in f.attempts])
    else:
        page.notice("no attempt was made")

    page.heading("Roofline: baseline and best candidate")
    roofline_section(page, f.best_verdict, missing="no roofline placement: no candidate was accepted, so there is "
                                                   "no before/after pair to place")

    page.heading("Key metrics, before and after")
    if f.diagnosis is None:
        page.notice("the baseline was not profiled: no metrics")
    else:
        after = f.diagnosis_after
        page.paragraph(f"Before: {f.diagnosis.summary}")
        if after is not None:
            page.paragraph(f"After: {after.summary}")
        else:
            page.paragraph("After: not profiled (no candidate accepted, or re-profiling is off).", muted=True)
        after_by_key = {e.key: e for e in (after.key_metrics if after else [])}
        keys = [e.key for e in f.diagnosis.key_metrics] + [k for k in after_by_key
                                                           if k not in {e.key for e in f.diagnosis.key_metrics}]
        before_by_key = {e.key: e for e in f.diagnosis.key_metrics}
        rows, percents = [], []
        for key in keys:
            b, a = before_by_key.get(key), after_by_key.get(key)
            ref = b or a
            assert ref is not None
            rows.append([ref.label, Cell(_metric_value(b.value if b else None, ref.unit), "num"),
                         Cell(_metric_value(a.value if a else None, ref.unit), "num")])
            if ref.unit.startswith("%"):
                percents.append((ref.label, b.value if b else None, a.value if a else None))
        if percents:
            page.figure(metrics_chart(percents),
                        "Percent metrics of one launch of the hot kernel (Nsight Compute), baseline and accepted "
                        "candidate.")
        page.table(["metric", "before", "after"], rows)

    page.heading("Proof: the gate table")
    v = f.best_verdict
    if v is None:
        page.notice("no candidate was accepted: there is no proof")
    else:
        gate_table(page, v)
        if v.speed is not None:
            page.paragraph(f"Speedup {v.speed.describe()}.")
        page.heading("Certificate", level=3)
        if f.certificate:
            page.paragraph(f"{f.certificate} (in this run's folder) names the baseline, the candidate and the reference "
                           "outputs by SHA-256; re-check it on a GPU with:")
            page.code(f"kernelloop verify-cert {f.certificate}")
        else:
            page.notice("no certificate was written")

    page.heading("Time")
    page.table(["phase", "seconds"], [[k, Cell(f"{t:.2f}", "num")] for k, t in f.timings.items()])
    if f.tokens.get("total_tokens"):
        page.paragraph(f"Tokens: {f.tokens.get('prompt_tokens', 0)} prompt, {f.tokens.get('completion_tokens', 0)} "
                       f"completion in {f.tokens.get('calls', 0)} call(s).")
    return page.render(footer=f"kernelloop {__version__}; written {s['date']}; report.md and summary.json hold the "
                              "same facts as text")
