"""The loop's state: plain JSON values only, so LangGraph's SQLite checkpointer stores it as is
and a resumed run reads back exactly what was written (no pickled objects, no class paths).

Routes are typed per node: a node that ends in a conditional edge writes one of its own
literals to `route`, and the graph's edge out of it maps exactly those literals (graph/loop.py
refuses to build otherwise), so every route a node writes is read by an edge. The profiler,
the researcher and finish have one way out each and write no route."""

from __future__ import annotations

from typing import Any, Literal, TypedDict

FailureRoute = Literal["retry", "exhausted"]  # a rejected attempt: another round, or the caps are spent
OptimizerRoute = Literal["check", "finish", FailureRoute]  # finish: the optimizer has nothing left to try
CheckRoute = Literal["verify", "fix", FailureRoute]  # fix: nvcc's errors go back to the optimizer
VerifierRoute = Literal["accept", FailureRoute]
AcceptRoute = Literal["continue", "finish"]  # continue: keep-going, research the winner again
Route = Literal[OptimizerRoute, CheckRoute, VerifierRoute, AcceptRoute]
Status = Literal["running", "accepted", "exhausted"]


class LoopState(TypedDict, total=False):
    started_at: float  # epoch seconds of the first node
    iteration: int  # rounds started (1-based once the optimizer ran)
    fix: int  # compile-fix tries in the current round (0: the round's first proposal)
    route: Route  # where the last node sends the run; routing functions only read it
    diagnosis: dict[str, Any] | None  # of the current best (the baseline's at first)
    baseline_diagnosis: dict[str, Any] | None
    baseline_profile: dict[str, Any] | None  # ProfileResult of the baseline
    best_profile: dict[str, Any] | None  # ProfileResult of the winner
    research: list[dict[str, Any]]  # ResearchNote dicts
    proposal: dict[str, Any] | None  # Proposal of the attempt in flight
    compile_errors: str | None  # set: the next optimizer call is a compile fix
    failed: list[dict[str, Any]]  # FailedAttempt dicts, oldest first
    accepted: list[dict[str, Any]]  # one record per acceptance
    best_editable: str  # the best editable part so far (the baseline's at first)
    best_speedup: float  # of best_editable over the baseline (1.0: none accepted)
    best_verdict: dict[str, Any] | None
    stale_rounds: int  # keep-going: rounds since the last gain
    status: Status
    stop_reason: str
    gpu: str
    timings: dict[str, float]  # phase -> seconds (profile, research, optimize, check, verify, reprofile)
    tokens: dict[str, int]  # prompt_tokens, completion_tokens, total_tokens, calls
