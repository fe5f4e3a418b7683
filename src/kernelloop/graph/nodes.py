"""The graph's nodes. Each reads the state, calls one agent's tools, writes its artifacts and
returns the state update, including `route`: where the run goes next. Routing functions
only read `route` (LangGraph drops writes made in a routing function)."""

from __future__ import annotations

import asyncio
import contextvars
import re
import shutil
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from langgraph.config import get_stream_writer

from ..agents.feedback import compile_errors, failure_from_static, failure_from_verdict, not_a_gain
from ..optimizers.base import (FailedAttempt, InvalidResponse, NoMoreCandidates, OptimizeRequest, Proposal,
                               ResearchNote)
from ..errors import InputError
from ..profiler.diagnosis import Diagnosis
from ..profiler.run import ProfileResult
from ..program.split import BEGIN_MARKER, END_MARKER, candidate_editable_part
from ..runs.certificate import build_certificate, write_certificate
from ..runs.report import RunFacts, report_html, report_markdown, summary
from ..runs.store import AttemptRecord, now
from ..verify.verdict import Verdict
from .context import LoopContext
from .events import LoopEvent
from .state import LoopState

Node = Callable[[LoopState], Awaitable[dict[str, Any]]]
_MAIN = re.compile(r"\bmain\s*\(")


def _emit(event: str, node: str, iteration: int, message: str, **data: Any) -> None:
    try:
        writer = get_stream_writer()
    except RuntimeError:  # called outside a graph run (unit tests of a node)
        return
    writer(LoopEvent(kind=event, node=node, iteration=iteration, message=message, data=data).model_dump(mode="json"))


def _progress(node: str, iteration: int) -> Callable[[str], None]:
    """A progress callback for MCP notifications; bound to this node's stream writer now, because
    the MCP session calls it from its own task (its receive loop, started before the graph ran).
    The writer looks up the run's config in a context variable, so it runs in this node's context,
    copied now: called bare from that task it would find none, and the message would be lost."""
    try:
        writer = get_stream_writer()
    except RuntimeError:
        return lambda message: None
    node_context = contextvars.copy_context()

    def report(message: str) -> None:
        event = LoopEvent(kind="progress", node=node, iteration=iteration, message=message).model_dump(mode="json")
        try:
            node_context.run(writer, event)
        except RuntimeError:  # the node has finished (or the context is in use): nothing listens
            pass

    return report


def _add_time(state: LoopState, phase: str, seconds: float) -> dict[str, float]:
    timings = dict(state.get("timings") or {})
    timings[phase] = timings.get(phase, 0.0) + seconds
    return timings


def _profile_summary(result: ProfileResult) -> dict[str, Any]:
    return result.model_dump(mode="json", exclude={"kernels", "ncu_command"})


def _keep_report(ctx: LoopContext, result: ProfileResult, name: str) -> None:
    """Copy the .ncu-rep into the run folder (the profiler keeps its own copy too)."""
    if Path(result.report_path).is_file():
        shutil.copy2(result.report_path, ctx.artifacts.root / name)


def make_nodes(ctx: LoopContext) -> dict[str, Node]:
    settings, opt = ctx.settings, ctx.settings.optimize
    base_path = ctx.artifacts.baseline_path

    def next_after_failure(state: LoopState, iteration: int, stale: int) -> str:
        """retry, or exhausted: the round cap before any acceptance; patience after one (keep-going)."""
        if state.get("accepted"):
            if stale >= opt.patience or iteration >= opt.max_iterations + opt.max_rounds:
                return "exhausted"
            return "retry"
        return "exhausted" if iteration >= opt.max_iterations else "retry"

    def failed_update(state: LoopState, failure: FailedAttempt) -> dict[str, Any]:
        iteration = failure.iteration
        stale = state.get("stale_rounds", 0) + (1 if state.get("accepted") else 0)
        route = next_after_failure(state, iteration, stale)
        _emit("verdict", "verifier", iteration, f"rejected ({failure.kind}): {failure.reason}",
              accepted=False, failure=failure.kind, speedup=failure.speedup, approach=failure.approach)
        update: dict[str, Any] = {"failed": [*state.get("failed", []), failure.model_dump(mode="json")],
                                  "stale_rounds": stale, "route": route, "proposal": None, "compile_errors": None}
        if route == "exhausted":
            update["stop_reason"] = (f"no round gained {opt.min_gain:.0%} for {opt.patience} round(s)"
                                     if state.get("accepted") else
                                     f"no candidate cleared the bar in {iteration} iteration(s)")
        return update

    async def profiler(state: LoopState) -> dict[str, Any]:
        _emit("node", "profiler", 0, "Nsight Compute on the baseline")
        started = state.get("started_at") or time.time()
        t = time.monotonic()
        # While ncu runs on the GPU, the other servers build what they will need (CPU work).
        warm = asyncio.create_task(_quietly(ctx.toolbox.warm_up(base_path, ctx.split.editable)))
        try:
            result = await ctx.toolbox.profile(base_path, section_set=opt.profile_sections,
                                               progress=_progress("profiler", 0))
        finally:
            await warm
        ctx.artifacts.write_json("profile-baseline.json", result)
        _keep_report(ctx, result, "profile-baseline.ncu-rep")
        d = result.diagnosis
        _emit("info", "profiler", 0, d.summary, primary=d.primary, subtype=d.subtype, duration_ms=d.duration_ms)
        diag = d.model_dump(mode="json")
        return {"started_at": started, "baseline_profile": _profile_summary(result), "diagnosis": diag,
                "baseline_diagnosis": diag, "gpu": d.device or "", "timings": _add_time(state, "profile", time.monotonic() - t),
                "iteration": state.get("iteration", 0), "fix": 0, "failed": state.get("failed", []),
                "accepted": state.get("accepted", []), "best_editable": state.get("best_editable") or ctx.split.editable,
                "best_speedup": state.get("best_speedup", 1.0), "stale_rounds": 0, "status": "running",
                "tokens": state.get("tokens", {})}

    async def researcher(state: LoopState) -> dict[str, Any]:
        iteration = state.get("iteration", 0)
        _emit("node", "researcher", iteration, "searching the knowledge corpus for the diagnosis")
        t = time.monotonic()
        notes: list[dict[str, Any]] = []
        if opt.research_k > 0 and state.get("diagnosis"):
            hits = await ctx.toolbox.search_for_diagnosis(Diagnosis.model_validate(state["diagnosis"]), opt.research_k)
            notes = [ResearchNote(**h).model_dump(mode="json") for h in hits]
        ctx.artifacts.write_json(f"research-{iteration:02d}.json" if iteration else "research.json", notes)
        _emit("info", "researcher", iteration, f"{len(notes)} passage(s): " + ", ".join(n["source"] for n in notes))
        return {"research": notes, "timings": _add_time(state, "research", time.monotonic() - t), "route": "optimize"}

    def build_request(state: LoopState, iteration: int) -> OptimizeRequest:
        split = ctx.split
        previous = Proposal.model_validate(state["proposal"]) if state.get("compile_errors") and state.get("proposal") else None
        diagnosis = Diagnosis.model_validate(state["diagnosis"]) if state.get("diagnosis") else None
        return OptimizeRequest(
            kernel_name=ctx.kernel, program=ctx.baseline_text, baseline_editable=split.editable,
            current_editable=state.get("best_editable") or split.editable, preamble=split.preamble,
            harness=split.harness, exported=split.exported, diagnosis=diagnosis,
            research=[ResearchNote(**n) for n in state.get("research", [])],
            failed_attempts=[FailedAttempt(**f) for f in state.get("failed", [])], memory=ctx.memory,
            compile_errors=state.get("compile_errors"), previous_source=previous.source if previous else None,
            iteration=iteration, gpu_name=state.get("gpu", ""), arch=ctx.arch,
            threshold=settings.verify.threshold, best_speedup=state.get("best_speedup", 1.0))

    async def optimizer(state: LoopState) -> dict[str, Any]:
        fixing = bool(state.get("compile_errors"))
        iteration = state.get("iteration", 0) + (0 if fixing else 1)
        fix = state.get("fix", 0) + 1 if fixing else 0
        _emit("node", "optimizer", iteration, f"{ctx.optimizer.name}: " + (f"compile fix {fix}" if fixing else "new candidate"))
        request = build_request(state, iteration)
        t = time.monotonic()
        try:
            proposal = await asyncio.to_thread(lambda: _as_gate_sees_it(ctx.optimizer.propose(request), ctx))
        except NoMoreCandidates as exc:
            _emit("info", "optimizer", iteration, f"nothing left to try: {exc}")
            update: dict[str, Any] = {"iteration": iteration - (0 if fixing else 1), "route": "finish",
                                      "stop_reason": str(exc), "timings": _add_time(state, "optimize", time.monotonic() - t)}
            if fixing and state.get("proposal"):  # the round's candidate still did not build
                last = Proposal.model_validate(state["proposal"])
                update["failed"] = [*state.get("failed", []), FailedAttempt(
                    iteration=iteration, approach=last.approach, kind="compile", reason="does not build",
                    excerpt=state.get("compile_errors") or "", source=last.source).model_dump(mode="json")]
            return update
        except InvalidResponse as exc:
            elapsed = time.monotonic() - t
            where = ctx.artifacts.attempt_dir(iteration, fix)
            if exc.response:
                ctx.artifacts.write_text(f"{where}/response.md", exc.response)
            bad = Proposal(source="", approach="(invalid response)", optimizer=ctx.optimizer.name, prompt=exc.prompt,
                           response=exc.response, tokens=exc.tokens, thinking_s=exc.thinking_s)
            update = failed_update(state, FailedAttempt(iteration=iteration, approach="(invalid response)",
                                                        kind="invalid_response", reason=str(exc), excerpt=str(exc)))
            return {**update, "iteration": iteration, "fix": fix, "tokens": _add_tokens(state, bad),
                    "timings": _add_time(state, "optimize", elapsed)}
        elapsed = time.monotonic() - t
        program = ctx.split.whole_program(proposal.source)
        ctx.artifacts.write_proposal(iteration, fix, proposal, program, ctx.baseline_text)
        _emit("proposal", "optimizer", iteration, proposal.approach, fix=fix, thinking_s=round(proposal.thinking_s, 2),
              tokens=proposal.tokens.total_tokens if proposal.tokens else 0)
        return {"iteration": iteration, "fix": fix, "proposal": proposal.model_dump(mode="json"), "compile_errors": None,
                "route": "check", "tokens": _add_tokens(state, proposal),
                "timings": _add_time(state, "optimize", elapsed)}

    async def check(state: LoopState) -> dict[str, Any]:
        """Policy and build, no GPU: a compile error goes back to the optimizer (capped)."""
        iteration, fix = state["iteration"], state.get("fix", 0)
        proposal = Proposal.model_validate(state["proposal"])
        _emit("node", "check", iteration, "policy scan and nvcc")
        t = time.monotonic()
        result = await ctx.toolbox.static_check(base_path, proposal.source)
        where = ctx.artifacts.attempt_dir(iteration, fix)
        log = [result.summary, *[v.describe() for v in result.violations]]
        if result.candidate_build is not None:
            log += ["", f"nvcc {' '.join(result.candidate_build.flags)}", result.candidate_build.log_excerpt]
        ctx.artifacts.write_text(f"{where}/compile.log", "\n".join(log).rstrip() + "\n")
        timings = _add_time(state, "check", time.monotonic() - t)
        if result.ok:
            return {"route": "verify", "timings": timings}
        if not result.violations and fix < opt.compile_fix_attempts:
            _emit("info", "check", iteration, f"does not build; nvcc's errors go back to the optimizer "
                  f"(fix {fix + 1} of {opt.compile_fix_attempts})")
            return {"route": "fix", "compile_errors": compile_errors(result), "timings": timings}
        failure = failure_from_static(result, iteration=iteration, approach=proposal.approach, source=proposal.source)
        return {**failed_update(state, failure), "timings": timings}

    async def verifier(state: LoopState) -> dict[str, Any]:
        iteration = state["iteration"]
        proposal = Proposal.model_validate(state["proposal"])
        _emit("node", "verifier", iteration, "verify gate: correctness on fresh seeds, memcheck, timing audit, speedup")
        t = time.monotonic()
        verdict = await ctx.toolbox.verify(base_path, proposal.source, threshold=settings.verify.threshold,
                                           progress=_progress("verifier", iteration))
        timings = _add_time(state, "verify", time.monotonic() - t)
        ctx.artifacts.write_json(f"{ctx.artifacts.attempt_dir(iteration, state.get('fix', 0))}/verdict.json", verdict)
        if not verdict.accepted:
            failure = failure_from_verdict(verdict, iteration=iteration, approach=proposal.approach, source=proposal.source)
            return {**failed_update(state, failure), "timings": timings}
        best = state.get("best_speedup", 1.0)
        speed = verdict.speed.speedup if verdict.speed else 0.0
        if state.get("accepted") and speed < best * (1.0 + opt.min_gain):
            failure = not_a_gain(verdict, iteration=iteration, approach=proposal.approach, source=proposal.source,
                                 best=best, min_gain=opt.min_gain)
            return {**failed_update(state, failure), "timings": timings}
        _emit("verdict", "verifier", iteration, verdict.summary, accepted=True, speedup=speed, approach=proposal.approach)
        return {"route": "accept", "best_verdict": verdict.model_dump(mode="json"), "timings": timings}

    async def accept(state: LoopState) -> dict[str, Any]:
        """Record the proof, then re-profile the winner so the report shows before and after."""
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
            _emit("node", "accept", iteration, "profiling the accepted kernel")
            t = time.monotonic()
            result = await ctx.toolbox.profile(ctx.artifacts.root / "best.cu", section_set=opt.profile_sections,
                                               progress=_progress("accept", iteration))
            timings["reprofile"] = timings.get("reprofile", 0.0) + time.monotonic() - t
            ctx.artifacts.write_json("profile-best.json", result)
            _keep_report(ctx, result, "profile-best.ncu-rep")
            update["best_profile"] = _profile_summary(result)
            update["diagnosis"] = result.diagnosis.model_dump(mode="json")
        update["timings"] = timings
        going_on = opt.keep_going and iteration < opt.max_iterations + opt.max_rounds
        update["route"] = "continue" if going_on else "finish"
        if not going_on:
            update["stop_reason"] = "accepted" if not opt.keep_going else f"round cap ({opt.max_iterations + opt.max_rounds})"
        return update

    async def finish(state: LoopState) -> dict[str, Any]:
        accepted = state.get("accepted", [])
        status = "accepted" if accepted else "exhausted"
        _emit("node", "finish", state.get("iteration", 0), f"{status}: writing report.md, report.html and summary.json")
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
        _emit("done", "finish", state.get("iteration", 0), status, status=status)
        return {"status": status, "route": "end"}

    return {"profiler": profiler, "researcher": researcher, "optimizer": optimizer, "check": check,
            "verifier": verifier, "accept": accept, "finish": finish}


def run_facts(ctx: LoopContext, state: LoopState, status: str) -> RunFacts:
    accepted = state.get("accepted", [])
    attempts = [{"iteration": f["iteration"], "approach": f["approach"], "outcome": f"rejected: {f['kind']}",
                 "speedup": f.get("speedup"), "reason": f["reason"]} for f in state.get("failed", [])]
    attempts += [{"iteration": a["iteration"], "approach": a["approach"], "outcome": "accepted",
                  "speedup": a["speedup"], "reason": a["summary"]} for a in accepted]
    attempts.sort(key=lambda a: a["iteration"])
    best_profile = state.get("best_profile")
    return RunFacts(
        run_id=ctx.run_id, kernel=ctx.kernel, kernel_path=str(ctx.kernel_path), status=status,
        stop_reason=state.get("stop_reason", ""), optimizer=ctx.optimizer.name, model=ctx.model, gpu=state.get("gpu", ""),
        max_iterations=ctx.settings.optimize.max_iterations, iterations=state.get("iteration", 0),
        threshold=ctx.settings.verify.threshold,
        diagnosis=Diagnosis.model_validate(state["baseline_diagnosis"]) if state.get("baseline_diagnosis") else None,
        diagnosis_after=Diagnosis.model_validate(best_profile["diagnosis"]) if best_profile else None,
        best_verdict=Verdict.model_validate(state["best_verdict"]) if accepted and state.get("best_verdict") else None,
        iteration_accepted=accepted[0]["iteration"] if accepted else None, attempts=attempts,
        timings=dict(state.get("timings") or {}), loop_time_s=time.time() - state.get("started_at", time.time()),
        tokens=dict(state.get("tokens") or {}), certificate="certificate.json" if accepted else None,
        resumed=ctx.resumed, mcp_start_s=ctx.mcp_start_s)


def _as_gate_sees_it(proposal: Proposal, ctx: LoopContext) -> Proposal:
    """The candidate cut down the way the verify gate cuts it, when it holds editable markers or a
    main(): best.cu and the certificate then name exactly the code that was verified."""
    source = proposal.source
    if not (BEGIN_MARKER.search(source) or END_MARKER.search(source) or _MAIN.search(source)):
        return proposal
    try:
        editable, notes = candidate_editable_part(source, ctx.split, "the candidate")
    except InputError as exc:
        raise InvalidResponse(str(exc), response=proposal.response, prompt=proposal.prompt, tokens=proposal.tokens,
                              thinking_s=proposal.thinking_s) from None
    if not editable.strip():
        raise InvalidResponse("the candidate's editable part is empty", response=proposal.response,
                              prompt=proposal.prompt, tokens=proposal.tokens, thinking_s=proposal.thinking_s)
    return proposal.model_copy(update={"source": editable, "notes": [*proposal.notes, *notes]})


async def _quietly(work: Awaitable[Any]) -> None:
    """A prefetch: its failure is not the run's (the node that needs the result reports it)."""
    try:
        await work
    except Exception:  # noqa: BLE001 - deliberately ignored, see above
        pass


def _add_tokens(state: LoopState, proposal: Proposal) -> dict[str, int]:
    tokens = dict(state.get("tokens") or {})
    if proposal.tokens is not None:
        for key in ("prompt_tokens", "completion_tokens", "total_tokens"):
            tokens[key] = tokens.get(key, 0) + getattr(proposal.tokens, key)
        tokens["calls"] = tokens.get("calls", 0) + 1
    return tokens
