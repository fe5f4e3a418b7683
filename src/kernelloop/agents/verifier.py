"""The verifier agent, in three nodes: `check` (the policy scan and nvcc, no GPU: a build error
goes back to the optimizer), `verifier` (the whole verify gate) and `accept` (the proof
certificate and `best.cu`, and the winner profiled again for the before/after report); the
verifier MCP server's `static_check` and `verify` tools, the profiler's `profile`."""

from __future__ import annotations

import time
from typing import Any

from langgraph.runtime import Runtime

from ..optimizers.base import Proposal
from ..runs.certificate import build_certificate, write_certificate
from ..verify.verdict import Verdict
from .common import add_time, emit, failed_update, progress
from .context import LoopContext
from .feedback import compile_errors, failure_from_static, failure_from_verdict, not_a_gain
from .profiler import profile_into_run, profile_summary
from .state import AcceptRoute, CheckRoute, LoopState, VerifierRoute


async def check(state: LoopState, runtime: Runtime[LoopContext]) -> dict[str, Any]:
    """Policy and build, no GPU. Routes: verify; fix (nvcc's errors go back to the optimizer, at
    most optimize.compile_fix_attempts times a round); retry or exhausted (a policy violation, or a
    build still failing after the fixes)."""
    ctx = runtime.context
    attempts = ctx.settings.optimize.compile_fix_attempts
    iteration, fix = state["iteration"], state.get("fix", 0)
    proposal = Proposal.model_validate(state["proposal"])
    emit(runtime, "node", "check", iteration, "policy scan and nvcc")
    t = time.monotonic()
    result = await ctx.toolbox.static_check(ctx.artifacts.baseline_path, proposal.source)
    where = ctx.artifacts.attempt_dir(iteration, fix)
    log = [result.summary, *[v.describe() for v in result.violations]]
    if result.candidate_build is not None:
        log += ["", f"nvcc {' '.join(result.candidate_build.flags)}", result.candidate_build.log_excerpt]
    ctx.artifacts.write_text(f"{where}/compile.log", "\n".join(log).rstrip() + "\n")
    timings = add_time(state, "check", time.monotonic() - t)
    route: CheckRoute
    if result.ok:
        route = "verify"
        return {"route": route, "timings": timings}
    if not result.violations and fix < attempts:
        emit(runtime, "info", "check", iteration,
             f"does not build; nvcc's errors go back to the optimizer (fix {fix + 1} of {attempts})")
        route = "fix"
        return {"route": route, "compile_errors": compile_errors(result), "timings": timings}
    failure = failure_from_static(result, iteration=iteration, approach=proposal.approach, source=proposal.source)
    return {**failed_update(runtime, state, failure), "timings": timings}


async def verifier(state: LoopState, runtime: Runtime[LoopContext]) -> dict[str, Any]:
    """The verify gate on the candidate against the original baseline. Routes: accept; retry or
    exhausted (rejected, or with keep-going: not `min_gain` better than the best so far)."""
    ctx = runtime.context
    min_gain = ctx.settings.optimize.min_gain
    iteration = state["iteration"]
    proposal = Proposal.model_validate(state["proposal"])
    emit(runtime, "node", "verifier", iteration,
         "verify gate: correctness on fresh seeds, memcheck, timing audit, speedup")
    t = time.monotonic()
    verdict = await ctx.toolbox.verify(ctx.artifacts.baseline_path, proposal.source,
                                       threshold=ctx.settings.verify.threshold,
                                       progress=progress(runtime, "verifier", iteration))
    timings = add_time(state, "verify", time.monotonic() - t)
    ctx.artifacts.write_json(f"{ctx.artifacts.attempt_dir(iteration, state.get('fix', 0))}/verdict.json", verdict)
    if not verdict.accepted:
        failure = failure_from_verdict(verdict, iteration=iteration, approach=proposal.approach, source=proposal.source)
        return {**failed_update(runtime, state, failure), "timings": timings}
    best = state.get("best_speedup", 1.0)
    speed = verdict.speed.speedup if verdict.speed else 0.0
    if state.get("accepted") and speed < best * (1.0 + min_gain):
        failure = not_a_gain(verdict, iteration=iteration, approach=proposal.approach, source=proposal.source,
                             best=best, min_gain=min_gain)
        return {**failed_update(runtime, state, failure), "timings": timings}
    emit(runtime, "verdict", "verifier", iteration, verdict.summary, accepted=True, speedup=speed,
         approach=proposal.approach)
    route: VerifierRoute = "accept"
    return {"route": route, "best_verdict": verdict.model_dump(mode="json"), "timings": timings}


async def accept(state: LoopState, runtime: Runtime[LoopContext]) -> dict[str, Any]:
    """Record the proof, then re-profile the winner so the report shows before and after.
    Routes: continue (keep-going, under the round cap); finish."""
    ctx = runtime.context
    opt = ctx.settings.optimize
    iteration = state["iteration"]
    proposal = Proposal.model_validate(state["proposal"])
    verdict = Verdict.model_validate(state["best_verdict"])
    program = ctx.split.whole_program(proposal.source)
    ctx.artifacts.write_text("best.cu", program)
    cert = build_certificate(verdict, kernel=ctx.kernel, baseline_text=ctx.baseline_text, candidate_text=program,
                             candidate_editable=proposal.source)
    write_certificate(cert, ctx.artifacts.root / "certificate.json")
    where = ctx.artifacts.attempt_dir(iteration, state.get("fix", 0))
    write_certificate(cert, ctx.artifacts.root / where / "certificate.json")
    speed = verdict.speed.speedup if verdict.speed else 1.0
    record = {"iteration": iteration, "approach": proposal.approach, "speedup": speed, "summary": verdict.summary,
              "certificate": f"{where}/certificate.json"}
    update: dict[str, Any] = {"accepted": [*state.get("accepted", []), record], "best_editable": proposal.source,
                              "best_speedup": speed, "stale_rounds": 0, "proposal": None, "compile_errors": None}
    timings = dict(state.get("timings") or {})
    if opt.reprofile_winner:
        emit(runtime, "node", "accept", iteration, "profiling the accepted kernel")
        t = time.monotonic()
        result = await profile_into_run(runtime, ctx.artifacts.root / "best.cu", "profile-best", node="accept",
                                        iteration=iteration)
        timings["reprofile"] = timings.get("reprofile", 0.0) + time.monotonic() - t
        update["best_profile"] = profile_summary(result)
        update["diagnosis"] = result.diagnosis.model_dump(mode="json")
    update["timings"] = timings
    going_on = opt.keep_going and iteration < opt.max_iterations + opt.max_rounds
    route: AcceptRoute = "continue" if going_on else "finish"
    update["route"] = route
    if not going_on:
        cap = opt.max_iterations + opt.max_rounds
        update["stop_reason"] = "accepted" if not opt.keep_going else f"round cap ({cap})"
    return update
