"""The live display of `kernelloop optimize`: the current node and iteration on a status line,
one line per proposal, verdict and finding. Presentation only."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.status import Status
from rich.table import Table

from ..agents.events import LoopEvent
from .render import styled

_NODE_STYLE = {"profiler": "cyan", "researcher": "magenta", "optimizer": "yellow", "check": "blue",
               "verifier": "green", "accept": "green", "finish": "white", "start": "white"}


class LoopView:
    def __init__(self, console: Console, *, quiet: bool = False) -> None:
        self.console = console
        self.quiet = quiet  # --json: nothing but the final JSON, and that on stdout
        self.run_id = ""
        self.run_dir = ""
        self.status: Status | None = None
        self.events: list[LoopEvent] = []

    def __enter__(self) -> LoopView:
        if not self.quiet:
            self.status = self.console.status("starting…")
            self.status.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.status is not None:
            self.status.__exit__(None, None, None)
            self.status = None

    def _line(self, event: LoopEvent, text: str) -> None:
        if self.quiet:
            return
        style = _NODE_STYLE.get(event.node, "white")
        where = f" it {event.iteration}" if event.iteration else "      "
        self.console.print(styled((f"{event.node:<10}", style), f"{where}  {text}"))

    def handle(self, event: LoopEvent) -> None:
        self.events.append(event)
        if event.node == "start" and event.data.get("run_id"):
            self.run_id, self.run_dir = event.data["run_id"], event.data["run_dir"]
            who = event.data.get("optimizer", "")
            model = event.data.get("model")
            self._line(event, f"run {self.run_id} ({who}{', ' + model if model else ''}) -> {self.run_dir}")
            return
        if event.kind == "node" and self.status is not None:
            it = f" · iteration {event.iteration}" if event.iteration else ""
            self.status.update(styled((event.node, "bold"), f"{it}: {event.message}"))
        elif event.kind == "progress" and self.status is not None:
            self.status.update(styled((event.node, "bold"), f" · iteration {event.iteration}: {event.message}"))
        elif event.kind == "proposal":
            extra = f" (compile fix {event.data['fix']})" if event.data.get("fix") else ""
            self._line(event, f"candidate: {event.message}{extra}")
        elif event.kind == "verdict":
            mark = ("accepted", "green") if event.data.get("accepted") else ("rejected", "red")
            if not self.quiet:
                message = event.message.removeprefix("accepted: ").removeprefix("rejected: ")
                self.console.print(styled((f"{event.node:<10}", "green"), f" it {event.iteration}  ", mark,
                                          f"  {message}"))
        elif event.kind in ("info", "done"):
            self._line(event, event.message)

    def summary(self) -> dict[str, Any]:
        path = Path(self.run_dir) / "summary.json"
        if not self.run_dir or not path.is_file():
            return {"status": "unknown", "run_id": self.run_id, "run_dir": self.run_dir}
        data = json.loads(path.read_text())
        data["run_dir"] = self.run_dir
        return data

    def print_result(self, console: Console, summary: dict[str, Any]) -> None:
        verify = summary.get("verify") or {}
        table = Table(title=f"{summary.get('kernel', '')} on {summary.get('gpu') or 'the GPU'}", title_justify="left")
        table.add_column("")
        table.add_column("", overflow="fold")
        status = summary.get("status", "unknown")
        table.add_row("result", styled(("ACCEPTED", "green") if status == "accepted" else (status.upper(), "red"),
                                       f" at iteration {verify.get('iteration_accepted')}"
                                       if verify.get("iteration_accepted") else ""))
        if verify.get("speedup"):
            table.add_row("kernel time", f"{verify['baseline_kernel_ms']} ms -> {verify['candidate_kernel_ms']} ms "
                          f"({verify['speedup']}x, bar {verify['accept_threshold']}x)")
        elif summary.get("stop_reason"):
            table.add_row("why", summary["stop_reason"])
        profile = summary.get("profile") or {}
        if profile:
            table.add_row("diagnosis", profile.get("verdict", ""))
        split = summary.get("time_split_seconds") or {}
        table.add_row("time", f"{summary.get('loop_time_seconds')} s (" + ", ".join(f"{k} {v}" for k, v in split.items()) + ")")
        tokens = summary.get("tokens") or {}
        if tokens.get("total_tokens"):
            table.add_row("tokens", f"{tokens['total_tokens']} in {tokens.get('calls', 0)} call(s)")
        table.add_row("artifacts", str(summary.get("run_dir", "")))
        console.print(table)
