"""The `kernelloop` command line: parse, call the library, render. Nothing else."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

from .. import __version__
from ..config import load_settings
from ..errors import KernelloopError

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Make CUDA kernels faster and prove it.")
out = Console()
err = Console(stderr=True, soft_wrap=True)  # an error stays one line, whatever the terminal width


def _print_version(value: bool) -> None:
    if value:
        out.print(f"kernelloop {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(version: bool = typer.Option(False, "--version", is_eager=True, callback=_print_version,
                                       help="Print the version and exit.")) -> None:
    """Make CUDA kernels faster and prove it."""


@app.command()
def verify(
    baseline: Path = typer.Argument(..., help="The baseline program (follows docs/contract.md)."),
    candidate: Path = typer.Argument(..., help="The candidate: a whole program or only its editable part."),
    threshold: Optional[float] = typer.Option(None, help="Minimum speedup to accept [default: 1.2]."),
    seeds: Optional[int] = typer.Option(None, help="Fresh seeds for the correctness gate [default: 2]."),
    runs: Optional[int] = typer.Option(None, help="Timing runs per program, interleaved [default: 7]."),
    max_runs: Optional[int] = typer.Option(None, help="Cap on runs when the verdict is a coin toss [default: 15]."),
    rtol: Optional[float] = typer.Option(None, help="Relative tolerance on every printed number [default: 1e-3]."),
    atol: Optional[float] = typer.Option(None, help="Absolute tolerance [default: 0]."),
    arch: Optional[str] = typer.Option(None, help="nvcc architecture, e.g. sm_90 [default: the GPU's]."),
    memcheck: Optional[str] = typer.Option(None, help="compute-sanitizer memcheck: auto|on|off [default: auto]."),
    independent_timing: Optional[str] = typer.Option(
        None, help="CUPTI audit of KERNEL_MS: on|auto|off [default: on; auto accepts without CUPTI]."),
    run_timeout: Optional[float] = typer.Option(None, help="Wall-clock cap on one run, seconds [default: 60]."),
    json_output: bool = typer.Option(False, "--json", help="Print the verdict as JSON."),
) -> None:
    """Accept CANDIDATE only if it builds, matches BASELINE's results and is faster."""
    from ..verify.gate import verify_files

    settings = load_settings({
        "threshold": threshold, "seeds": seeds, "runs": runs, "max_runs": max_runs, "rtol": rtol, "atol": atol,
        "arch": arch, "memcheck": memcheck, "independent_timing": independent_timing, "run_timeout_s": run_timeout,
    })
    if json_output:
        verdict = verify_files(baseline, candidate, settings)
        out.print_json(verdict.model_dump_json())
    else:
        from .render import print_verdict

        with err.status("verifying…") as status:
            verdict = verify_files(baseline, candidate, settings,
                                   progress=lambda p: status.update(f"[bold]{p.stage}[/]: {p.message}"))
        print_verdict(out, verdict)
    raise typer.Exit(0 if verdict.accepted else 1)


@app.command()
def doctor() -> None:
    """Check what kernelloop needs on this machine, one line each with the fix."""
    from ..doctor import run_checks

    checks = run_checks()
    for c in checks:
        mark = {"ok": "[green]✓[/]", "warn": "[yellow]![/]", "fail": "[red]✗[/]"}[c.status]
        out.print(f"{mark} {c.name}: {c.detail}" + (f" — {c.fix}" if c.fix and c.status != "ok" else ""))
    raise typer.Exit(0 if all(c.status != "fail" for c in checks if c.required) else 1)


def main() -> None:
    try:
        code = app(standalone_mode=False)
        sys.exit(code if isinstance(code, int) else 0)
    except KernelloopError as exc:
        err.print(f"[red]error:[/] {exc}", highlight=False)
        sys.exit(2)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.Abort:
        err.print("aborted")
        sys.exit(130)
    except Exception as exc:
        # Usage errors from typer's bundled click: show them the way click would.
        if hasattr(exc, "show") and isinstance(getattr(exc, "exit_code", None), int):
            exc.show()
            sys.exit(exc.exit_code)
        raise
