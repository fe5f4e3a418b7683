"""The researcher agent: passages on the diagnosed bottleneck from the knowledge corpus (the
`search_for_diagnosis` tool of the researcher MCP server), for the optimizer's prompt."""

from __future__ import annotations

import time
from typing import Any

from langgraph.runtime import Runtime

from ..optimizers.base import ResearchNote
from ..profiler.diagnosis import Diagnosis
from .common import add_time, emit
from .context import LoopContext
from .state import LoopState


async def researcher(state: LoopState, runtime: Runtime[LoopContext]) -> dict[str, Any]:
    """Writes `research.json` (`research-NN.json` when keep-going researches a winner again).
    One way out (the optimizer), so it writes no route."""
    ctx = runtime.context
    k = ctx.settings.optimize.research_k
    iteration = state.get("iteration", 0)
    emit(runtime, "node", "researcher", iteration, "searching the knowledge corpus for the diagnosis")
    t = time.monotonic()
    notes: list[dict[str, Any]] = []
    if k > 0 and state.get("diagnosis"):
        hits = await ctx.toolbox.search_for_diagnosis(Diagnosis.model_validate(state["diagnosis"]), k)
        notes = [ResearchNote(**h).model_dump(mode="json") for h in hits]
    ctx.artifacts.write_json(f"research-{iteration:02d}.json" if iteration else "research.json", notes)
    emit(runtime, "info", "researcher", iteration, f"{len(notes)} passage(s): " + ", ".join(n["source"] for n in notes))
    return {"research": notes, "timings": add_time(state, "research", time.monotonic() - t)}
