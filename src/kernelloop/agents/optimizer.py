"""The optimizer agent: one candidate editable part per call, from whichever optimizer the run
uses (LLM or offline; optimizers/), with the diagnosis, the research notes and every failed
attempt as context; after a build error, a fix of the same candidate with nvcc's messages."""

from __future__ import annotations

import asyncio
import re
import time
from typing import Any

from langgraph.runtime import Runtime

from ..errors import InputError
from ..optimizers.base import (FailedAttempt, InvalidResponse, NoMoreCandidates, OptimizeRequest, Proposal,
                               ResearchNote)
from ..profiler.diagnosis import Diagnosis
from ..program.split import BEGIN_MARKER, END_MARKER, ProgramSplit, candidate_editable_part
from .common import add_time, emit, failed_update
from .context import LoopContext
from .state import LoopState, OptimizerRoute

_MAIN = re.compile(r"\bmain\s*\(")


def build_request(ctx: LoopContext, state: LoopState, iteration: int) -> OptimizeRequest:
    """What the optimizer is asked: the program, the best so far, the diagnosis, the research,
    the failed attempts (this run's) and the memory (earlier runs'), and a compile fix's errors."""
    split = ctx.split
    fixing = state.get("compile_errors") and state.get("proposal")
    previous = Proposal.model_validate(state["proposal"]) if fixing else None
    diagnosis = Diagnosis.model_validate(state["diagnosis"]) if state.get("diagnosis") else None
    return OptimizeRequest(
        kernel_name=ctx.kernel, program=ctx.baseline_text, baseline_editable=split.editable,
        current_editable=state.get("best_editable") or split.editable, preamble=split.preamble,
        harness=split.harness, exported=split.exported, diagnosis=diagnosis,
        research=[ResearchNote(**n) for n in state.get("research", [])],
        failed_attempts=[FailedAttempt(**f) for f in state.get("failed", [])], memory=ctx.memory,
        compile_errors=state.get("compile_errors"), previous_source=previous.source if previous else None,
        iteration=iteration, gpu_name=state.get("gpu", ""), arch=ctx.arch,
        threshold=ctx.settings.verify.threshold, best_speedup=state.get("best_speedup", 1.0))


async def optimizer(state: LoopState, runtime: Runtime[LoopContext]) -> dict[str, Any]:
    """A new round's candidate, or (compile_errors set) a fix of the round's candidate.
    Routes: check; finish (nothing left to try); retry or exhausted (an invalid response)."""
    ctx = runtime.context
    fixing = bool(state.get("compile_errors"))
    iteration = state.get("iteration", 0) + (0 if fixing else 1)
    fix = state.get("fix", 0) + 1 if fixing else 0
    emit(runtime, "node", "optimizer", iteration,
         f"{ctx.optimizer.name}: " + (f"compile fix {fix}" if fixing else "new candidate"))
    request = build_request(ctx, state, iteration)
    t = time.monotonic()
    route: OptimizerRoute
    try:
        proposal = await asyncio.to_thread(lambda: as_gate_sees_it(ctx.optimizer.propose(request), ctx.split))
    except NoMoreCandidates as exc:
        emit(runtime, "info", "optimizer", iteration, f"nothing left to try: {exc}")
        route = "finish"
        update: dict[str, Any] = {"iteration": iteration - (0 if fixing else 1), "route": route,
                                  "stop_reason": str(exc), "timings": add_time(state, "optimize", time.monotonic() - t)}
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
        failure = FailedAttempt(iteration=iteration, approach="(invalid response)", kind="invalid_response",
                                reason=str(exc), excerpt=str(exc))
        update = failed_update(runtime, state, failure)
        return {**update, "iteration": iteration, "fix": fix, "tokens": add_tokens(state, bad),
                "timings": add_time(state, "optimize", elapsed)}
    elapsed = time.monotonic() - t
    program = ctx.split.whole_program(proposal.source)
    ctx.artifacts.write_proposal(iteration, fix, proposal, program, ctx.baseline_text)
    emit(runtime, "proposal", "optimizer", iteration, proposal.approach, fix=fix,
         thinking_s=round(proposal.thinking_s, 2), tokens=proposal.tokens.total_tokens if proposal.tokens else 0)
    route = "check"
    return {"iteration": iteration, "fix": fix, "proposal": proposal.model_dump(mode="json"), "compile_errors": None,
            "route": route, "tokens": add_tokens(state, proposal), "timings": add_time(state, "optimize", elapsed)}


def as_gate_sees_it(proposal: Proposal, split: ProgramSplit) -> Proposal:
    """The candidate cut down the way the verify gate cuts it, when it holds editable markers or a
    main(): best.cu and the certificate then name exactly the code that was verified."""
    source = proposal.source
    if not (BEGIN_MARKER.search(source) or END_MARKER.search(source) or _MAIN.search(source)):
        return proposal
    try:
        editable, notes = candidate_editable_part(source, split, "the candidate")
    except InputError as exc:
        raise InvalidResponse(str(exc), response=proposal.response, prompt=proposal.prompt, tokens=proposal.tokens,
                              thinking_s=proposal.thinking_s) from None
    if not editable.strip():
        raise InvalidResponse("the candidate's editable part is empty", response=proposal.response,
                              prompt=proposal.prompt, tokens=proposal.tokens, thinking_s=proposal.thinking_s)
    return proposal.model_copy(update={"source": editable, "notes": [*proposal.notes, *notes]})


def add_tokens(state: LoopState, proposal: Proposal) -> dict[str, int]:
    tokens = dict(state.get("tokens") or {})
    if proposal.tokens is not None:
        for key in ("prompt_tokens", "completion_tokens", "total_tokens"):
            tokens[key] = tokens.get(key, 0) + getattr(proposal.tokens, key)
        tokens["calls"] = tokens.get("calls", 0) + 1
    return tokens
