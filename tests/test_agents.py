"""Each agent node alone: a module-level function called with a state and a LangGraph Runtime
that carries a fake LoopContext (scripted tools, a scripted optimizer, a run folder and run log
in tmp_path). No graph, no MCP, no GPU, no nvcc. The routes each node writes are checked against
the Literal its edge maps (graph/loop.py), so a route no edge reads fails here."""

from __future__ import annotations

import asyncio
import hashlib
import json
import sqlite3
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, get_args

import pytest
from langgraph.runtime import Runtime

from kernelloop.agents.context import LoopContext
from kernelloop.agents.finish import finish
from kernelloop.agents.optimizer import optimizer
from kernelloop.agents.profiler import profiler
from kernelloop.agents.researcher import researcher
from kernelloop.agents.state import AcceptRoute, CheckRoute, OptimizerRoute, Route, VerifierRoute
from kernelloop.agents.verifier import accept, check, verifier
from kernelloop.config import Settings
from kernelloop.graph.loop import EDGES, NODES, build_graph, path_map
from kernelloop.llm_config import LLMConfig
from kernelloop.optimizers.base import InvalidResponse, Proposal
from kernelloop.program.split import split_program
from kernelloop.runs.artifacts import RunArtifacts
from kernelloop.runs.store import RunRecord, RunStore
from kernelloop.verify.verdict import Reason

from .conftest import ROOT
from .graph_fakes import (FakeToolbox, Scripted, fixture_diagnosis, make_verdict, static_broken, static_ok,
                          static_policy)

NAIVE = ROOT / "kernels" / "naive_matmul.cu"
TILED = (ROOT / "src" / "kernelloop" / "exemplars" / "matmul_smem_tiling.cu").read_text()
RUN_ID = "20261128-120000-abcd"


def make_context(tmp_path: Path, toolbox: Any, optimizer_: Any = None, **optimize: Any) -> LoopContext:
    settings = Settings(data_dir=tmp_path / "data")
    settings = settings.model_copy(update={"optimize": settings.optimize.model_copy(update=optimize)})
    text = NAIVE.read_text()
    artifacts = RunArtifacts(tmp_path / "run")
    artifacts.prepare(text)
    sha = hashlib.sha256(text.encode()).hexdigest()
    store = RunStore(tmp_path / "runs.sqlite")
    store.start_run(RunRecord(run_id=RUN_ID, kernel="naive_matmul", kernel_path=str(NAIVE), kernel_sha256=sha,
                              started_at="2026-11-28T12:00:00", status="running", optimizer="offline",
                              run_dir=str(artifacts.root)))
    return LoopContext(settings=settings, toolbox=toolbox, optimizer=optimizer_ or Scripted([]), artifacts=artifacts,
                       store=store, run_id=RUN_ID, kernel="naive_matmul", kernel_path=NAIVE, kernel_sha256=sha,
                       baseline_text=text, split=split_program(text, "naive_matmul.cu"))


def call(node, state: dict[str, Any], ctx: LoopContext) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Run one node alone; returns its state update and the events it wrote."""
    events: list[dict[str, Any]] = []
    update = asyncio.run(node(state, Runtime(context=ctx, stream_writer=events.append)))
    json.dumps(update)  # the state stays plain JSON: the checkpointer stores it as is
    return update, events


def profiled_state(ctx: LoopContext) -> dict[str, Any]:
    diag = fixture_diagnosis().model_dump(mode="json")
    return {"iteration": 0, "fix": 0, "failed": [], "accepted": [], "best_editable": ctx.split.editable,
            "best_speedup": 1.0, "stale_rounds": 0, "diagnosis": diag, "baseline_diagnosis": diag, "research": [],
            "gpu": "NVIDIA H200", "status": "running", "timings": {}, "tokens": {}, "started_at": 1.0}


def proposed_state(ctx: LoopContext, iteration: int = 1, **more: Any) -> dict[str, Any]:
    """The state after the optimizer proposed TILED (its attempt folder written, as it writes it)."""
    proposal = Proposal(source=TILED, approach="shared-memory tiling", optimizer="offline")
    ctx.artifacts.write_proposal(iteration, more.get("fix", 0), proposal, ctx.split.whole_program(TILED),
                                 ctx.baseline_text)
    return {**profiled_state(ctx), "iteration": iteration, "proposal": proposal.model_dump(mode="json"), **more}


def assert_route(update: dict[str, Any], routes: Any, expected: str) -> None:
    assert update["route"] == expected and expected in get_args(routes)


# -- profiler, researcher: one way out each, no route -------------------------------------------------

def test_profiler_alone_profiles_the_run_copy_and_starts_the_state(tmp_path):
    toolbox = FakeToolbox([])
    ctx = make_context(tmp_path, toolbox)
    update, events = call(profiler, {"iteration": 0}, ctx)
    assert "route" not in update
    assert toolbox.calls["profile"] == [ctx.artifacts.baseline_path] and toolbox.calls["warm_up"]
    assert update["diagnosis"] == update["baseline_diagnosis"] and update["diagnosis"]["primary"]
    assert update["status"] == "running" and update["best_editable"] == ctx.split.editable
    assert (ctx.artifacts.root / "profile-baseline.json").is_file()
    assert (ctx.artifacts.root / "profile-baseline.ncu-rep").is_file()
    kinds = [(e["kind"], e["node"]) for e in events]
    assert kinds[0] == ("node", "profiler") and ("progress", "profiler") in kinds and ("info", "profiler") in kinds


def test_researcher_alone_searches_for_the_diagnosis_and_writes_no_route(tmp_path):
    toolbox = FakeToolbox([])
    ctx = make_context(tmp_path, toolbox)
    update, events = call(researcher, profiled_state(ctx), ctx)
    assert "route" not in update
    assert [n["source"] for n in update["research"]] == ["smem-tiling"]
    assert json.loads((ctx.artifacts.root / "research.json").read_text())[0]["source"] == "smem-tiling"
    assert events[-1]["message"] == "1 passage(s): smem-tiling"


def test_researcher_with_research_off_asks_nothing(tmp_path):
    toolbox = FakeToolbox([])
    ctx = make_context(tmp_path, toolbox, research_k=0)
    update, _ = call(researcher, {**profiled_state(ctx), "iteration": 2}, ctx)
    assert update["research"] == [] and toolbox.calls["search_for_diagnosis"] == []
    assert (ctx.artifacts.root / "research-02.json").is_file()  # keep-going's second research


# -- optimizer ---------------------------------------------------------------------------------------

def test_optimizer_alone_proposes_and_routes_to_check(tmp_path):
    chosen = Scripted([TILED])
    ctx = make_context(tmp_path, FakeToolbox([]), chosen)
    update, events = call(optimizer, profiled_state(ctx), ctx)
    assert_route(update, OptimizerRoute, "check")
    assert update["iteration"] == 1 and update["fix"] == 0 and update["proposal"]["source"] == TILED
    assert (ctx.artifacts.root / "iter-01" / "candidate.cu").is_file()
    assert chosen.requests[0].diagnosis is not None and chosen.requests[0].iteration == 1
    assert events[-1]["kind"] == "proposal"


def test_optimizer_alone_with_nothing_left_routes_to_finish(tmp_path):
    ctx = make_context(tmp_path, FakeToolbox([]), Scripted([]))
    update, _ = call(optimizer, profiled_state(ctx), ctx)
    assert_route(update, OptimizerRoute, "finish")
    assert update["iteration"] == 0 and "nothing left" in update["stop_reason"]


def test_optimizer_alone_with_an_invalid_response_retries_then_is_exhausted(tmp_path):
    bad = InvalidResponse("no code block in the answer", response="I would tile it.")
    ctx = make_context(tmp_path, FakeToolbox([]), Scripted([bad, bad]), max_iterations=2)
    update, _ = call(optimizer, profiled_state(ctx), ctx)
    assert_route(update, OptimizerRoute, "retry")
    assert update["failed"][0]["kind"] == "invalid_response"
    assert (ctx.artifacts.root / "iter-01" / "response.md").read_text() == "I would tile it."
    update, _ = call(optimizer, {**profiled_state(ctx), **update}, ctx)
    assert_route(update, OptimizerRoute, "exhausted")
    assert update["iteration"] == 2 and "2 iteration(s)" in update["stop_reason"]


# -- check -------------------------------------------------------------------------------------------

def test_check_alone_routes_a_clean_build_to_the_verifier(tmp_path):
    ctx = make_context(tmp_path, FakeToolbox([], static=static_ok))
    update, _ = call(check, proposed_state(ctx), ctx)
    assert_route(update, CheckRoute, "verify")
    assert "policy clean" in (ctx.artifacts.root / "iter-01" / "compile.log").read_text()


def test_check_alone_sends_a_build_error_back_until_the_fixes_are_spent(tmp_path):
    ctx = make_context(tmp_path, FakeToolbox([], static=static_broken), compile_fix_attempts=1, max_iterations=3)
    update, _ = call(check, proposed_state(ctx), ctx)
    assert_route(update, CheckRoute, "fix")
    assert 'expected a ";"' in update["compile_errors"]
    update, _ = call(check, proposed_state(ctx, fix=1), ctx)
    assert_route(update, CheckRoute, "retry")
    assert update["failed"][0]["kind"] == "compile" and update["proposal"] is None


def test_check_alone_ends_the_round_on_a_policy_violation(tmp_path):
    ctx = make_context(tmp_path, FakeToolbox([], static=static_policy), max_iterations=1)
    update, _ = call(check, proposed_state(ctx), ctx)
    assert_route(update, CheckRoute, "exhausted")
    assert update["failed"][0]["kind"] == "policy" and "inline_asm" in update["failed"][0]["excerpt"]


# -- verifier ----------------------------------------------------------------------------------------

def test_verifier_alone_accepts_a_faster_candidate(tmp_path):
    toolbox = FakeToolbox([make_verdict(accepted=True, speedup=1.74)])
    ctx = make_context(tmp_path, toolbox)
    update, events = call(verifier, proposed_state(ctx), ctx)
    assert_route(update, VerifierRoute, "accept")
    assert update["best_verdict"]["accepted"] is True and toolbox.calls["verify"] == [TILED]
    assert (ctx.artifacts.root / "iter-01" / "verdict.json").is_file()
    assert [e["kind"] for e in events] == ["node", "progress", "verdict"]


def test_verifier_alone_hands_a_rejection_back_as_anti_context(tmp_path):
    slow = make_verdict(accepted=False, speedup=1.05, reason=Reason.not_faster, detail="1.05x vs bar 1.20x")
    ctx = make_context(tmp_path, FakeToolbox([slow, slow]), max_iterations=2)
    update, _ = call(verifier, proposed_state(ctx), ctx)
    assert_route(update, VerifierRoute, "retry")
    assert update["failed"][0]["kind"] == "not_faster" and update["failed"][0]["speedup"] == pytest.approx(1.05)
    update, _ = call(verifier, proposed_state(ctx, iteration=2, failed=update["failed"]), ctx)
    assert_route(update, VerifierRoute, "exhausted")
    assert len(update["failed"]) == 2 and "no candidate cleared the bar in 2" in update["stop_reason"]


def test_verifier_alone_with_keep_going_refuses_a_candidate_no_better_than_the_best(tmp_path):
    ctx = make_context(tmp_path, FakeToolbox([make_verdict(accepted=True, speedup=5.70)]), keep_going=True, patience=1)
    state = proposed_state(ctx, iteration=2, accepted=[{"iteration": 1}], best_speedup=5.69)
    update, _ = call(verifier, state, ctx)
    assert_route(update, VerifierRoute, "exhausted")
    assert update["failed"][0]["kind"] == "not_faster" and "no round gained 2%" in update["stop_reason"]


# -- accept ------------------------------------------------------------------------------------------

def test_accept_alone_writes_the_proof_reprofiles_and_finishes(tmp_path):
    toolbox = FakeToolbox([])
    ctx = make_context(tmp_path, toolbox)
    state = proposed_state(ctx, best_verdict=make_verdict(accepted=True, speedup=1.74).model_dump(mode="json"))
    update, _ = call(accept, state, ctx)
    assert_route(update, AcceptRoute, "finish")
    assert update["stop_reason"] == "accepted" and update["best_speedup"] == pytest.approx(1.74)
    for name in ("best.cu", "certificate.json", "iter-01/certificate.json", "profile-best.json", "profile-best.ncu-rep"):
        assert (ctx.artifacts.root / name).is_file(), name
    assert toolbox.calls["profile"] == [ctx.artifacts.root / "best.cu"] and update["best_profile"]


def test_accept_alone_with_keep_going_continues(tmp_path):
    ctx = make_context(tmp_path, FakeToolbox([]), keep_going=True, reprofile_winner=False)
    state = proposed_state(ctx, best_verdict=make_verdict(accepted=True, speedup=1.74).model_dump(mode="json"))
    update, _ = call(accept, state, ctx)
    assert_route(update, AcceptRoute, "continue")
    assert "best_profile" not in update and "stop_reason" not in update


# -- finish ------------------------------------------------------------------------------------------

def test_finish_alone_writes_the_reports_and_the_run_log(tmp_path):
    ctx = make_context(tmp_path, FakeToolbox([]))
    failure = {"iteration": 1, "approach": "tiling", "kind": "not_faster", "reason": "1.05x", "speedup": 1.05}
    update, events = call(finish, {**profiled_state(ctx), "iteration": 1, "failed": [failure],
                                   "stop_reason": "no candidate cleared the bar in 1 iteration(s)"}, ctx)
    assert update == {"status": "exhausted"}
    assert json.loads((ctx.artifacts.root / "summary.json").read_text())["status"] == "exhausted"
    assert (ctx.artifacts.root / "report.md").is_file() and (ctx.artifacts.root / "report.html").is_file()
    assert ctx.store.get_run(RUN_ID).status == "exhausted"
    assert [(a.iteration, a.accepted) for a in ctx.store.attempts(RUN_ID)] == [(1, False)]
    assert events[-1]["kind"] == "done"


# -- the wiring --------------------------------------------------------------------------------------

def test_every_route_a_node_writes_is_read_by_its_edge():
    graph = build_graph()
    for node, (routes, targets) in EDGES.items():
        branch = graph.builder.branches[node]["route"]
        assert set(branch.ends) == set(get_args(routes)) == set(targets), node
    # the union of the per-node routes is the state's Route, and nodes without a conditional edge
    # (profiler, researcher, finish) are exactly those that write none (tests above)
    assert set(get_args(Route)) == {r for routes, _ in EDGES.values() for r in get_args(routes)}
    assert set(NODES) - set(EDGES) == {"profiler", "researcher", "finish"}


def test_an_edge_that_misses_a_route_or_reads_an_unwritten_one_is_refused():
    with pytest.raises(ValueError, match="node writes"):
        path_map("accept", AcceptRoute, {"continue": "researcher"})
    with pytest.raises(ValueError, match="node writes"):
        path_map("accept", AcceptRoute, {"continue": "researcher", "finish": "finish", "optimize": "optimizer"})
    with pytest.raises(ValueError, match="unknown node"):
        path_map("accept", AcceptRoute, {"continue": "research", "finish": "finish"})


def test_the_context_reaches_the_nodes_and_never_the_checkpoint(tmp_path, monkeypatch):
    """A whole run through the graph (no nvcc: the static check is scripted): the nodes find the
    context LangGraph hands them, and the checkpoints hold plain JSON, never the context."""
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    from kernelloop.config import load_settings
    from kernelloop.graph.optimize import optimize

    monkeypatch.setenv("KERNELLOOP_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("KERNELLOOP_OPTIMIZE_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.chdir(tmp_path)
    toolbox = FakeToolbox([make_verdict(accepted=True, speedup=1.74)], static=static_ok)

    @asynccontextmanager
    async def factory(_settings):
        yield toolbox

    async def drive() -> tuple[list[Any], Any]:
        events = [e async for e in optimize(NAIVE, load_settings(), LLMConfig(), toolbox_factory=factory,
                                             require_gpu=False, optimizer=Scripted([TILED]))]
        run_id = events[0].data["run_id"]
        async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "data" / "checkpoints.sqlite")) as saver:
            saved = await saver.aget_tuple({"configurable": {"thread_id": run_id}})
        return events, saved

    events, saved = asyncio.run(drive())
    assert events[-1].kind == "done" and events[-1].data["status"] == "accepted"
    assert [n for n in ("check", "verifier", "accept") if n not in {e.node for e in events}] == []
    values = saved.checkpoint["channel_values"]
    assert values["status"] == "accepted" and json.loads(json.dumps(values)) == values
    with sqlite3.connect(tmp_path / "data" / "checkpoints.sqlite") as db:
        blobs = [v if isinstance(v, bytes) else str(v).encode()
                 for table in ("checkpoints", "writes") for row in db.execute(f"SELECT * FROM {table}") for v in row]
    assert len(blobs) > 20  # every node's writes, every step's checkpoint
    for name in (b"LoopContext", b"FakeToolbox", b"RunStore", b"RunArtifacts", b"Scripted"):
        assert not any(name in b for b in blobs), name
