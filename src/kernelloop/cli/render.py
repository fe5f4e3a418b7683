"""Rich rendering of core results. Presentation only: no logic decides anything here."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from ..verify.verdict import Verdict

_MARK = {"pass": "[green]✓[/]", "fail": "[red]✗[/]", "skipped": "[yellow]–[/]", "info": "[blue]i[/]"}


def verdict_table(v: Verdict) -> Table:
    table = Table(title=f"{v.candidate_file} vs {v.baseline_file}", title_justify="left", show_lines=False)
    for col in ("Gate", "Baseline", "Candidate", "Result"):
        table.add_column(col, overflow="fold")
    for g in v.gates:
        table.add_row(g.gate, g.baseline, g.candidate, f"{_MARK[g.status]} {g.detail}")
    return table


def print_verdict(console: Console, v: Verdict) -> None:
    console.print(verdict_table(v))
    gpu = f"{v.gpu.name} ({v.arch}, driver {v.gpu.driver_version})" if v.gpu else v.arch
    console.print(f"GPU: {gpu}; nvcc {v.nvcc_version}; split: {v.split_mode}; seeds: {', '.join(map(str, v.seeds))}")
    if v.isolation:
        console.print(f"sandbox: {v.isolation.summary()}")
    for note in v.notes:
        console.print(f"[yellow]note:[/] {note}")
    if v.policy:
        for violation in v.policy[:10]:
            console.print(f"  [red]policy[/] {violation.describe()}")
    for name, build in v.builds.items():
        if not build.ok and build.log_excerpt:
            console.print(f"[red]{name} build log ({build.stage}):[/]\n{build.log_excerpt}")
    if v.memcheck_excerpt and "memcheck" in {r.value for r in v.reasons}:
        console.print(f"[red]memcheck:[/]\n{v.memcheck_excerpt}")
    if v.failure_excerpt:
        console.print(f"[red]candidate stderr:[/]\n{v.failure_excerpt}")
    d = v.durations
    console.print(f"time: {d.total_s:.1f} s (compile {d.compile_s:.1f}, correctness {d.correctness_s:.1f}, "
                  f"memcheck {d.memcheck_s:.1f}, timing {d.timing_s:.1f}; verifier overhead {d.overhead_s:.2f})")
    style = "bold green" if v.accepted else "bold red"
    console.print(f"[{style}]{v.summary}[/]")
