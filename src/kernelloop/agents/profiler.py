"""The profiler agent: Nsight Compute on the baseline's hot kernel, and the diagnosis the
researcher and the optimizer work from (the `profile` tool of the profiler MCP server)."""

from __future__ import annotations

import asyncio
import shutil
import time
from pathlib import Path
from typing import Any

from langgraph.runtime import Runtime

from ..profiler.run import ProfileResult
from .common import add_time, emit, progress, quietly
from .context import LoopContext
from .state import LoopState


def profile_summary(result: ProfileResult) -> dict[str, Any]:
    return result.model_dump(mode="json", exclude={"kernels", "ncu_command"})


async def profile_into_run(runtime: Runtime[LoopContext], path: Path, name: str, *, node: str,
                           iteration: int) -> ProfileResult:
    """Profile one program of the run and keep `<name>.json` and `<name>.ncu-rep` in its folder
    (the profiler keeps its own copy of the report too)."""
    ctx = runtime.context
    result = await ctx.toolbox.profile(path, section_set=ctx.settings.optimize.profile_sections,
                                       progress=progress(runtime, node, iteration))
    ctx.artifacts.write_json(f"{name}.json", result)
    if Path(result.report_path).is_file():
        shutil.copy2(result.report_path, ctx.artifacts.root / f"{name}.ncu-rep")
    return result


async def profiler(state: LoopState, runtime: Runtime[LoopContext]) -> dict[str, Any]:
    """The baseline's profile and diagnosis; also sets up the state every later node reads."""
    ctx = runtime.context
    emit(runtime, "node", "profiler", 0, "Nsight Compute on the baseline")
    started = state.get("started_at") or time.time()
    t = time.monotonic()
    # While ncu runs on the GPU, the other servers build what they will need (CPU work).
    warm = asyncio.create_task(quietly(ctx.toolbox.warm_up(ctx.artifacts.baseline_path, ctx.split.editable)))
    try:
        result = await profile_into_run(runtime, ctx.artifacts.baseline_path, "profile-baseline", node="profiler",
                                        iteration=0)
    finally:
        await warm
    d = result.diagnosis
    emit(runtime, "info", "profiler", 0, d.summary, primary=d.primary, subtype=d.subtype, duration_ms=d.duration_ms)
    diag = d.model_dump(mode="json")
    return {"started_at": started, "baseline_profile": profile_summary(result), "diagnosis": diag,
            "baseline_diagnosis": diag, "gpu": d.device or "",
            "timings": add_time(state, "profile", time.monotonic() - t),
            "iteration": state.get("iteration", 0), "fix": 0, "failed": state.get("failed", []),
            "accepted": state.get("accepted", []), "best_editable": state.get("best_editable") or ctx.split.editable,
            "best_speedup": state.get("best_speedup", 1.0), "stale_rounds": 0, "status": "running",
            "tokens": state.get("tokens", {})}
