"""Rich rendering of core results. Presentation only: no logic decides anything here.

The CLI's consoles read no markup: text from data (code, logs, paths, file names with
brackets) is printed as it is. Styles are given as (text, style) pieces to `styled`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table
from rich.text import Text

if TYPE_CHECKING:  # annotations only: every command imports this module, few need these (numpy, pydantic models)
    from ..profiler.diagnosis import Diagnosis
    from ..runs.certificate import CertificateCheck
    from ..runs.store import AttemptRecord, RunRecord
    from ..verify.verdict import Verdict

_MARK = {"pass": ("✓", "green"), "fail": ("✗", "red"), "skipped": ("–", "yellow"), "info": ("i", "blue")}


def styled(*parts: str | tuple[str, str]) -> Text:
    """One text from plain pieces and (text, style) pieces; nothing in it is read as markup."""
    return Text.assemble(*parts)


def plain_console(*, stderr: bool = False, soft_wrap: bool = False) -> Console:
    """A console that prints data literally (no markup, no highlighting of numbers and paths)."""
    return Console(stderr=stderr, soft_wrap=soft_wrap, markup=False, highlight=False)


def verdict_table(v: Verdict) -> Table:
    table = Table(title=f"{v.candidate_file} vs {v.baseline_file}", title_justify="left", show_lines=False)
    for col in ("Gate", "Baseline", "Candidate", "Result"):
        table.add_column(col, overflow="fold")
    for g in v.gates:
        table.add_row(g.gate, g.baseline, g.candidate, styled(_MARK[g.status], f" {g.detail}"))
    return table


def print_verdict(console: Console, v: Verdict) -> None:
    console.print(verdict_table(v))
    gpu = f"{v.gpu.name} ({v.arch}, driver {v.gpu.driver_version})" if v.gpu else v.arch
    console.print(f"GPU: {gpu}; nvcc {v.nvcc_version}; split: {v.split_mode}; seeds: {', '.join(map(str, v.seeds))}")
    if v.isolation:
        console.print(f"sandbox: {v.isolation.summary()}")
    for note in v.notes:
        console.print(styled(("note:", "yellow"), f" {note}"))
    if v.policy:
        for violation in v.policy[:10]:
            console.print(styled("  ", ("policy", "red"), f" {violation.describe()}"))
    for name, build in v.builds.items():
        if not build.ok and build.log_excerpt:
            console.print(styled((f"{name} build log ({build.stage}):", "red"), f"\n{build.log_excerpt}"))
    if v.memcheck_excerpt and "memcheck" in {r.value for r in v.reasons}:
        console.print(styled(("memcheck:", "red"), f"\n{v.memcheck_excerpt}"))
    if v.failure_excerpt:
        console.print(styled(("candidate stderr:", "red"), f"\n{v.failure_excerpt}"))
    d = v.durations
    parts = [f"wider integers {d.wide_integers_s:.1f}" if d.wide_integers_s else "",
             f"scaled inputs {d.scaled_inputs_s:.1f}" if d.scaled_inputs_s else ""]
    wide = f" ({', '.join(p for p in parts if p)})" if any(parts) else ""
    console.print(f"time: {d.total_s:.1f} s (compile {d.compile_s:.1f}, correctness {d.correctness_s:.1f}{wide}, "
                  f"memcheck {d.memcheck_s:.1f}, timing {d.timing_s:.1f}; verifier overhead {d.overhead_s:.2f})")
    style = "bold green" if v.accepted else "bold red"
    console.print(styled((v.summary, style)))


_SEVERITY = {"critical": ("critical", "bold red"), "major": ("major", "yellow"), "minor": ("minor", "dim")}


def _fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    if unit in ("B/s", "FLOP/s"):
        return f"{value / 1e9:,.1f} G{unit}"
    if unit == "ns":
        return f"{value / 1e3:,.1f} µs"
    if abs(value) >= 1e6:
        return f"{value:.3g} {unit}".strip()
    return f"{value:,.2f} {unit}".strip()


def print_diagnosis(console: Console, d: Diagnosis, *, extra: str = "") -> None:
    """Verdict first, then the evidence."""
    console.print(styled((d.kernel, "bold"), f" on {d.device or 'unknown GPU'}"
                         + (f", {d.duration_ms:.3f} ms per launch" if d.duration_ms else "")
                         + (f", grid {d.grid} block {d.block}" if d.grid else "")))
    console.print(styled((d.primary, "bold magenta"), " — ", (d.subtype, "bold")))
    console.print(d.summary.split(": ", 1)[-1])
    metrics = Table(title="key metrics", title_justify="left")
    metrics.add_column("metric")
    metrics.add_column("value", justify="right")
    for e in d.key_metrics:
        metrics.add_row(e.label, _fmt(e.value, e.unit))
    console.print(metrics)
    if d.findings:
        rules = Table(title="findings (rule table)", title_justify="left", show_lines=True)
        for col in ("severity", "rule", "finding", "action", "NVIDIA agrees"):
            rules.add_column(col, overflow="fold")
        for f in d.findings:
            rules.add_row(styled(_SEVERITY[f.severity]), f.rule, f.finding, f.action, ", ".join(f.nvidia_agrees) or "-")
        console.print(rules)
    for gap in d.not_judged:  # a rule without its evidence says so instead of reading the gap as 0
        console.print(styled(("not judged:", "yellow"), f" {gap.describe().removeprefix('could not judge ')}"))
    if d.not_judged:
        console.print("  (`kernelloop profile --set full` collects every section)")
    if d.nvidia:
        nv = Table(title="Nsight Compute's own rules", title_justify="left")
        for col in ("rule", "kind", "est. speedup", "agrees with", "message"):
            nv.add_column(col, overflow="fold")
        for r in d.nvidia:
            speed = f"{r.estimated_speedup_pct:.1f}%" if r.estimated_speedup_pct is not None else "-"
            nv.add_row(r.rule_id, r.kind, speed, ", ".join(r.agrees_with) or "-", r.message[:160])
        console.print(nv)
    roof = d.roofline
    if roof.ridge_point:
        ai = f"{roof.arithmetic_intensity:.2f}" if roof.arithmetic_intensity is not None else "-"
        console.print(f"roofline: {ai} FLOP/byte (ridge {roof.ridge_point:.1f}): {roof.side or '-'} side; "
                      f"{_fmt(roof.fp32_flops_per_s, 'FLOP/s')} = {roof.pct_of_compute_roof or 0:.1f}% of the FP32 roof, "
                      f"{_fmt(roof.dram_bytes_per_s, 'B/s')} = {roof.pct_of_memory_roof or 0:.1f}% of DRAM bandwidth")
    console.print(f"{d.metrics_parsed} metrics parsed; report: {d.report_path}" + extra)


def print_certificate_check(console: Console, result: CertificateCheck) -> None:
    for c in result.checks:
        console.print(styled(_MARK[c.status], f" {c.name}: {c.detail}"))
    if result.verdict is not None:
        console.print(verdict_table(result.verdict))
    console.print(styled(("certificate holds", "green") if result.ok else ("certificate does not hold", "red")))


def runs_table(runs: list[RunRecord]) -> Table:
    table = Table(title="kernelloop runs (newest first)", title_justify="left")
    for col in ("run", "kernel", "status", "speedup", "iterations", "optimizer", "started"):
        table.add_column(col, overflow="fold")
    for r in runs:
        speed = f"{r.best_speedup:.2f}x" if r.best_speedup else "-"
        table.add_row(r.run_id, r.kernel, r.status, speed, str(r.iterations), r.optimizer + (f" ({r.model})" if r.model else ""),
                      r.started_at)
    return table


def print_run(console: Console, record: RunRecord, attempts: list[AttemptRecord]) -> None:
    speed = f", {record.best_speedup:.2f}x" if record.best_speedup else ""
    console.print(styled((record.run_id, "bold"), f" {record.kernel}: {record.status}{speed} after {record.iterations} "
                         f"iteration(s); optimizer {record.optimizer}{' (' + record.model + ')' if record.model else ''}; "
                         f"GPU {record.gpu or '-'}"))
    if record.reason:
        console.print(styled((f"{record.status}:", "red"), f" {record.reason}"))
    console.print(f"kernel: {record.kernel_path}\nfolder: {record.run_dir}")
    table = Table(title_justify="left")
    for col in ("iteration", "approach", "outcome", "speedup", "reason"):
        table.add_column(col, overflow="fold")
    for a in attempts:
        table.add_row(str(a.iteration), a.approach, "accepted" if a.accepted else f"rejected: {a.kind}",
                      f"{a.speedup:.2f}x" if a.speedup else "-", a.reason)
    console.print(table)


_BENCH_STYLE = {"same": "green", "faster": "green", "slower": "red", "failed": "red", "ambiguous": "yellow",
                "error": "yellow"}


def bench_table(check) -> Table:
    """`bench check`: one row per kernel (a bench.check.BenchCheck)."""
    table = Table(title=f"bench check on {check.gpu.name} (driver {check.gpu.driver_version})", title_justify="left")
    for col in ("Kernel", "Verdict", "Reference ms", "Current ms", "Change (interval)", "Pairs", "Recorded ms"):
        table.add_column(col, overflow="fold")
    for k in check.kernels:
        d, r = k.decision, k.reference
        table.add_row(
            k.name, styled((k.status.upper(), _BENCH_STYLE[k.status])),
            f"{d.reference.median:.4f} (IQR {d.reference.relative_iqr:.1%})" if d else "-",
            f"{d.current.median:.4f} (IQR {d.current.relative_iqr:.1%})" if d else "-",
            f"{d.ratio - 1:+.1%} ({d.lower - 1:+.1%} to {d.upper - 1:+.1%})" if d else "-",
            str(d.pairs) if d else "-",
            f"{r.kernel_ms.median:.4f} on {r.gpu}" if r else "-")
    return table


def print_bench_check(console: Console, check) -> None:
    console.print(bench_table(check))
    if check.against:
        console.print(f"suite, references and settings from {check.against}")
    for k in check.kernels:
        if k.status not in ("same", "faster"):
            console.print(styled((f"{k.name}:", _BENCH_STYLE[k.status]), f" {k.summary}"))
        for note in k.notes:
            console.print(styled((f"{k.name}:", "blue"), f" {note}"))
        if k.reproduction is not None and k.reproduction.built and not k.reproduction.reproduced \
                and not k.reference_varies:
            console.print(styled((f"{k.name}:", "blue"), " the reference program's outputs here differ from the "
                                 "recorded ones (another GPU, driver or nvcc?); the verdict compares with the "
                                 "reference as run here"))
    console.print(f"{len(check.kernels)} kernel(s) in {check.wall_s:.0f} s; exit code {check.exit_code}")


def print_recorded(console: Console, recorded) -> None:
    """`bench record`: one kernel's new reference (a bench.reference.Recorded)."""
    r = recorded.reference
    line = (f"{r.kernel}: recorded {r.kernel_ms.median:.4f} ms (IQR {r.kernel_ms.relative_iqr:.1%}, "
            f"{len(r.samples_ms)} runs) on {r.gpu}, {len(r.experiments)} output digest(s)")
    if recorded.previous is not None:
        line += f"; was {recorded.previous.kernel_ms.median:.4f} ms on {recorded.previous.gpu}"
    console.print(styled((line, "green")))
    console.print(f"  -> {recorded.entry.reference_dir}")
    for note in recorded.notes:
        console.print(styled(("  note:", "yellow"), f" {note}"))


def print_suite_score(console: Console, score) -> None:
    """`kernelloop runs score`: one row per kernel, then fast_p and the geometric mean (a runs.suite_score.SuiteScore)."""
    from ..runs.suite_score import score_lines

    table = Table(title="suite score (KernelBench's fast_p)", title_justify="left")
    # speedup: the correct candidate's (measured); kept: the accepted one's, else 1.0 (docs/optimize.md)
    for col in ("kernel", "run", "status", "correct", "speedup", "kept", "basis"):
        table.add_column(col, overflow="fold", no_wrap=col in ("status", "correct", "speedup", "kept"))
    for k in score.kernels:
        table.add_row(k.kernel, k.run_id or "-", k.status, styled(("yes", "green") if k.correct else ("no", "red")),
                      f"{k.correct_speedup:.2f}x" if k.correct_speedup is not None else "-", f"{k.speedup:.2f}x",
                      k.basis)
    console.print(table)
    for line in score_lines(score):
        console.print(line)
