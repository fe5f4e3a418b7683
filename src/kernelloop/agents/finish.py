"""The run's end: `summary.json`, `report.md` and `report.html` in the run folder, every
attempt and the outcome in the run log, and the `done` event."""

from __future__ import annotations

import time
from typing import Any

from langgraph.runtime import Runtime

from ..profiler.diagnosis import Diagnosis
from ..runs.report import RunFacts, report_html, report_markdown, summary
from ..runs.store import AttemptRecord, now
from ..verify.verdict import Verdict
from .common import emit
from .context import LoopContext
from .state import LoopState, Status


async def finish(state: LoopState, runtime: Runtime[LoopContext]) -> dict[str, Any]:
    """One way out (END), so it writes no route; `status` says the run finished."""
    ctx = runtime.context
    accepted = state.get("accepted", [])
    status: Status = "accepted" if accepted else "exhausted"
    emit(runtime, "node", "finish", state.get("iteration", 0),
         f"{status}: writing report.md, report.html and summary.json")
    facts = run_facts(ctx, state, status)
    ctx.artifacts.write_json("summary.json", summary(facts))
    ctx.artifacts.write_text("report.md", report_markdown(facts))
    (ctx.artifacts.root / "report.html").write_text(report_html(facts), encoding="utf-8")  # figures: ×, µ, ✓
    logged = [(a, False, a["kind"], a["reason"]) for a in state.get("failed", [])]
    logged += [(a, True, "accepted", a["summary"]) for a in accepted]
    for a, ok, kind, reason in logged:
        ctx.store.add_attempt(AttemptRecord(run_id=ctx.run_id, iteration=a["iteration"], approach=a["approach"],
                                            optimizer=ctx.optimizer.name, accepted=ok, kind=kind, reason=reason,
                                            speedup=a.get("speedup"), kernel=ctx.kernel,
                                            kernel_sha256=ctx.kernel_sha256))
    ctx.store.update_run(ctx.run_id, status=status, finished_at=now(), iterations=state.get("iteration", 0),
                         best_speedup=state.get("best_speedup") if accepted else None, gpu=state.get("gpu", ""),
                         summary=summary(facts))
    emit(runtime, "done", "finish", state.get("iteration", 0), status, status=status)
    return {"status": status}


def run_facts(ctx: LoopContext, state: LoopState, status: Status) -> RunFacts:
    accepted = state.get("accepted", [])
    attempts = [{"iteration": f["iteration"], "approach": f["approach"], "outcome": f"rejected: {f['kind']}",
                 "speedup": f.get("speedup"), "reason": f["reason"]} for f in state.get("failed", [])]
    attempts += [{"iteration": a["iteration"], "approach": a["approach"], "outcome": "accepted",
                  "speedup": a["speedup"], "reason": a["summary"]} for a in accepted]
    attempts.sort(key=lambda a: a["iteration"])
    best_profile = state.get("best_profile")
    return RunFacts(
        run_id=ctx.run_id, kernel=ctx.kernel, kernel_path=str(ctx.kernel_path), status=status,
        stop_reason=state.get("stop_reason", ""), optimizer=ctx.optimizer.name, model=ctx.model,
        gpu=state.get("gpu", ""),
        max_iterations=ctx.settings.optimize.max_iterations, iterations=state.get("iteration", 0),
        threshold=ctx.settings.verify.threshold,
        diagnosis=Diagnosis.model_validate(state["baseline_diagnosis"]) if state.get("baseline_diagnosis") else None,
        diagnosis_after=Diagnosis.model_validate(best_profile["diagnosis"]) if best_profile else None,
        best_verdict=Verdict.model_validate(state["best_verdict"]) if accepted and state.get("best_verdict") else None,
        iteration_accepted=accepted[0]["iteration"] if accepted else None, attempts=attempts,
        timings=dict(state.get("timings") or {}), loop_time_s=time.time() - state.get("started_at", time.time()),
        tokens=dict(state.get("tokens") or {}), certificate="certificate.json" if accepted else None,
        resumed=ctx.resumed, mcp_start_s=ctx.mcp_start_s)
