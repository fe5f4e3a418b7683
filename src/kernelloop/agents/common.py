"""What the nodes share: their events, the time each phase took, and where a failed attempt
sends the run. Every node is `async def node(state, runtime: Runtime[LoopContext]) -> update`:
LangGraph hands it the run's LoopContext as `runtime.context` and the run's event stream as
`runtime.stream_writer` (a no-op outside a graph run, so a node runs alone in a unit test)."""

from __future__ import annotations

import contextvars
from collections.abc import Awaitable, Callable
from typing import Any

from langgraph.runtime import Runtime

from ..optimizers.base import FailedAttempt
from .context import LoopContext
from .events import EventKind, LoopEvent
from .state import FailureRoute, LoopState


def emit(runtime: Runtime[LoopContext], kind: EventKind, node: str, iteration: int, message: str,
         **data: Any) -> None:
    runtime.stream_writer(LoopEvent(kind=kind, node=node, iteration=iteration, message=message,
                                    data=data).model_dump(mode="json"))


def progress(runtime: Runtime[LoopContext], node: str, iteration: int) -> Callable[[str], None]:
    """A progress callback for MCP notifications. The MCP session calls it from its own task
    (its receive loop, started before the graph ran), and LangGraph's stream writer looks up the
    run's config in a context variable: so the writer runs in this node's context, copied now;
    called bare from that task it would find none, and the message would be lost."""
    writer = runtime.stream_writer
    node_context = contextvars.copy_context()

    def report(message: str) -> None:
        event = LoopEvent(kind="progress", node=node, iteration=iteration, message=message).model_dump(mode="json")
        try:
            node_context.run(writer, event)
        except RuntimeError:  # the node has finished (or the context is in use): nothing listens
            pass

    return report


def add_time(state: LoopState, phase: str, seconds: float) -> dict[str, float]:
    timings = dict(state.get("timings") or {})
    timings[phase] = timings.get(phase, 0.0) + seconds
    return timings


def next_after_failure(ctx: LoopContext, state: LoopState, iteration: int, stale: int) -> FailureRoute:
    """retry, or exhausted: the round cap before any acceptance; patience after one (keep-going)."""
    opt = ctx.settings.optimize
    if state.get("accepted"):
        if stale >= opt.patience or iteration >= opt.max_iterations + opt.max_rounds:
            return "exhausted"
        return "retry"
    return "exhausted" if iteration >= opt.max_iterations else "retry"


def failed_update(runtime: Runtime[LoopContext], state: LoopState, failure: FailedAttempt) -> dict[str, Any]:
    """The state update of a rejected attempt (optimizer, check or verifier): the failure joins the
    anti-context, and the route is `retry` or `exhausted`."""
    ctx, opt = runtime.context, runtime.context.settings.optimize
    iteration = failure.iteration
    stale = state.get("stale_rounds", 0) + (1 if state.get("accepted") else 0)
    route = next_after_failure(ctx, state, iteration, stale)
    emit(runtime, "verdict", "verifier", iteration, f"rejected ({failure.kind}): {failure.reason}",
         accepted=False, failure=failure.kind, speedup=failure.speedup, approach=failure.approach)
    update: dict[str, Any] = {"failed": [*state.get("failed", []), failure.model_dump(mode="json")],
                              "stale_rounds": stale, "route": route, "proposal": None, "compile_errors": None}
    if route == "exhausted":
        update["stop_reason"] = (f"no round gained {opt.min_gain:.0%} for {opt.patience} round(s)"
                                 if state.get("accepted") else
                                 f"no candidate cleared the bar in {iteration} iteration(s)")
    return update


async def quietly(work: Awaitable[Any]) -> None:
    """A prefetch: its failure is not the run's (the node that needs the result reports it)."""
    try:
        await work
    except Exception:  # noqa: BLE001 - deliberately ignored, see above
        pass
