"""The loop's graph and how a run starts, streams its events, and resumes.

    START -> profiler -> researcher -> optimizer -> check -> verifier -> accept -> finish -> END
                                         ^  ^  fix |   retry |          | continue
                                         |  +------+         |          v
                                         +-------------------+      researcher

* check: the policy scan and nvcc, no GPU; a build error goes back to the optimizer with
  nvcc's messages (at most optimize.compile_fix_attempts times a round).
* verifier: the whole verify gate. accept -> record the proof and re-profile the winner;
  retry -> the failed attempt and why go to the optimizer as anti-context; exhausted after
  optimize.max_iterations rounds (with keep_going: after optimize.patience rounds without a
  gain of optimize.min_gain over the best, or max_iterations + max_rounds rounds in all).

The nodes are the agents' module-level functions (agents/); each reads the run's LoopContext
(tools, optimizer, run folder, run log) as `runtime.context`, which the run passes to LangGraph
as its context (`context_schema=LoopContext`), never into the state.

State is checkpointed after every node in `<data dir>/checkpoints.sqlite` (LangGraph's SQLite
checkpointer), keyed by the run id: `kernelloop optimize --resume RUN_ID` continues there.
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from contextlib import aclosing
from datetime import datetime
from pathlib import Path
from typing import Any, get_args

from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph import END, START, StateGraph

from ..agents.context import LoopContext, Toolbox
from ..agents.events import LoopEvent
from ..agents.finish import finish
from ..agents.optimizer import optimizer
from ..agents.profiler import profiler
from ..agents.researcher import researcher
from ..agents.state import AcceptRoute, CheckRoute, LoopState, OptimizerRoute, Route, VerifierRoute
from ..agents.verifier import accept, check, verifier
from ..config import OptimizeSettings, Settings
from ..errors import InputError
from ..optimizers.base import Optimizer, PastAttempt
from ..program.split import read_program, split_program
from ..runs.artifacts import RunArtifacts, kernel_name, new_run_id
from ..runs.store import RunRecord, RunStore, failure_reason, now, run_store
from .inputs import CheckedInput, _arch

NODES = {"profiler": profiler, "researcher": researcher, "optimizer": optimizer, "check": check,
         "verifier": verifier, "accept": accept, "finish": finish}
# The conditional edges: per node, the routes it writes (its Literal) and where each one leads.
EDGES: dict[str, tuple[Any, dict[str, str]]] = {
    "optimizer": (OptimizerRoute, {"check": "check", "retry": "optimizer", "exhausted": "finish", "finish": "finish"}),
    "check": (CheckRoute, {"verify": "verifier", "fix": "optimizer", "retry": "optimizer", "exhausted": "finish"}),
    "verifier": (VerifierRoute, {"accept": "accept", "retry": "optimizer", "exhausted": "finish"}),
    "accept": (AcceptRoute, {"continue": "researcher", "finish": "finish"}),
}


def route(state: LoopState) -> Route:
    """Every conditional edge: the route the node just wrote. Reads only (LangGraph drops writes
    made in a routing function)."""
    return state["route"]


def path_map(node: str, routes: Any, targets: dict[str, str]) -> dict[str, str]:
    """A conditional edge's path map. It must map exactly the routes the node's Literal names: a
    route no edge reads, or an edge for a route no node writes, is a bug found when the graph is built."""
    written, read = set(get_args(routes)), set(targets)
    if written != read:
        raise ValueError(f"the edge out of {node} maps {sorted(read)} but the node writes {sorted(written)}")
    unknown = set(targets.values()) - set(NODES)
    if unknown:
        raise ValueError(f"the edge out of {node} leads to unknown node(s) {sorted(unknown)}")
    return targets


def recursion_limit(opt: OptimizeSettings) -> int:
    """Steps a run can take at most, from the caps (LangGraph's own default is far too high)."""
    rounds = opt.max_iterations + (opt.max_rounds if opt.keep_going else 0)
    per_round = 2 * (opt.compile_fix_attempts + 1) + 3  # optimizer+check per try, verifier, accept, researcher
    return 2 + rounds * per_round + 2  # profiler and researcher first; finish last


def build_graph(checkpointer: Any = None) -> Any:
    """The loop's graph; each run passes its LoopContext as the context (`context=ctx`)."""
    g = StateGraph(LoopState, context_schema=LoopContext)
    for name, fn in NODES.items():
        g.add_node(name, fn)
    g.add_edge(START, "profiler")
    g.add_edge("profiler", "researcher")
    g.add_edge("researcher", "optimizer")
    for node, (routes, targets) in EDGES.items():
        g.add_conditional_edges(node, route, path_map(node, routes, targets))
    g.add_edge("finish", END)
    return g.compile(checkpointer=checkpointer)


def checkpoint_path(settings: Settings) -> Path:
    return settings.data_dir / "checkpoints.sqlite"


def _memory(store: RunStore, kernel: str, sha: str, settings: Settings, exclude_run: str | None = None) -> list[PastAttempt]:
    return [PastAttempt(run_id=a.run_id, approach=a.approach, accepted=a.accepted, reason=a.reason, speedup=a.speedup)
            for a in store.memory(kernel, sha, limit=settings.optimize.memory_attempts, exclude_run=exclude_run)]


def new_run(checked: CheckedInput, settings: Settings, optimizer: Optimizer, toolbox: Toolbox, *, model: str = "",
            options: dict[str, Any] | None = None, runs_dir: Path | None = None) -> LoopContext:
    """Create the run folder and the run log entry for checked input, load the kernel's memory."""
    path, text, split, arch, gpu = checked.path, checked.text, checked.split, checked.arch, checked.gpu
    kernel = kernel_name(path)
    run_id = new_run_id(datetime.now())
    root = (runs_dir or settings.optimize.runs_dir).expanduser()
    artifacts = RunArtifacts((root if root.is_absolute() else Path.cwd() / root) / kernel / run_id)
    artifacts.prepare(text)
    sha = hashlib.sha256(text.encode()).hexdigest()
    store = run_store(settings)
    memory = _memory(store, kernel, sha, settings)
    store.start_run(RunRecord(run_id=run_id, kernel=kernel, kernel_path=str(path.resolve()), kernel_sha256=sha,
                              started_at=now(), status="running", optimizer=optimizer.name, model=model, gpu=gpu,
                              run_dir=str(artifacts.root),
                              options={**(options or {}), "settings": settings.model_dump(mode="json")}))
    return LoopContext(settings=settings, toolbox=toolbox, optimizer=optimizer, artifacts=artifacts, store=store,
                       run_id=run_id, kernel=kernel, kernel_path=path, kernel_sha256=sha, baseline_text=text,
                       split=split, arch=arch, model=model, memory=memory)


def resumed_run(record: RunRecord, settings: Settings, optimizer: Optimizer, toolbox: Toolbox, *,
                require_gpu: bool = True) -> LoopContext:
    """The context of a run that stopped: its own copy of the baseline, its own settings."""
    artifacts = RunArtifacts(Path(record.run_dir))
    if not artifacts.baseline_path.is_file():
        raise InputError(f"run {record.run_id}: its folder {record.run_dir} is gone; it cannot be resumed")
    text = read_program(artifacts.baseline_path)
    if hashlib.sha256(text.encode()).hexdigest() != record.kernel_sha256:
        raise InputError(f"run {record.run_id}: {artifacts.baseline_path} changed since the run started; "
                         "it cannot be resumed against another baseline")
    arch, _ = _arch(settings, require_gpu)
    store = run_store(settings)
    memory = _memory(store, record.kernel, record.kernel_sha256, settings, exclude_run=record.run_id)
    store.update_run(record.run_id, status="running", finished_at=None, reason="")
    return LoopContext(settings=settings, toolbox=toolbox, optimizer=optimizer, artifacts=artifacts, store=store,
                       run_id=record.run_id, kernel=record.kernel, kernel_path=Path(record.kernel_path),
                       kernel_sha256=record.kernel_sha256, baseline_text=text, split=split_program(text, record.kernel_path),
                       arch=arch, model=record.model, memory=memory, resumed=True)


def saved_settings(record: RunRecord) -> Settings:
    """The settings a run started with (a resumed run keeps its caps and threshold)."""
    saved = record.options.get("settings")
    return Settings.model_validate(saved) if saved else Settings()


async def run_loop(ctx: LoopContext) -> AsyncIterator[LoopEvent]:
    """Run (or resume) the loop; yields its events. The run log says how it ended, also when it
    is interrupted (Ctrl-C) or fails: then the checkpoint lets `--resume` continue."""
    finished = False
    ending = "interrupted"  # Ctrl-C, or the caller stopped listening
    reason = "interrupted (Ctrl-C, or the caller stopped listening); `kernelloop optimize --resume` continues it"
    try:
        ctx.settings.data_dir.mkdir(parents=True, exist_ok=True)
        async with AsyncSqliteSaver.from_conn_string(str(checkpoint_path(ctx.settings))) as saver:
            graph = build_graph(saver)
            config = {"configurable": {"thread_id": ctx.run_id},
                      "recursion_limit": recursion_limit(ctx.settings.optimize)}
            inputs: dict[str, Any] | None = {"iteration": 0}
            if ctx.resumed:
                snapshot = await graph.aget_state(config)
                if not snapshot.values:
                    raise InputError(f"run {ctx.run_id} has no checkpoint to resume from; start a new run")
                # Finished means the finish node ran. An empty `next` alone does not: a node whose
                # writes were saved just before the interruption leaves no task, only writes to apply.
                if snapshot.values.get("status") in ("accepted", "exhausted"):
                    finished = True
                    raise InputError(f"run {ctx.run_id} already finished ({snapshot.values['status']}); "
                                     f"`kernelloop runs show {ctx.run_id}`")
                done = [t for t in snapshot.tasks if t.result is not None]
                if not snapshot.next and done:
                    # Interrupted just as a node finished: its writes are in the state but the task
                    # is marked cancelled, so nothing is scheduled. Re-take the edge out of it.
                    await graph.aupdate_state(config, {}, as_node=done[0].name)
                    snapshot = await graph.aget_state(config)
                inputs = None  # continue from the checkpoint
                at = snapshot.next[0] if snapshot.next else "the step after the last saved node"
                yield LoopEvent(kind="info", node="start", iteration=snapshot.values.get("iteration", 0),
                                message=f"resuming run {ctx.run_id} at {at}")
            # durability="sync": a node's checkpoint is on disk before the next node starts, so
            # Ctrl-C at any moment loses at most the node that was running.
            stream = graph.astream(inputs, config, context=ctx, stream_mode="custom", durability="sync")
            async with aclosing(stream):
                async for chunk in stream:
                    event = LoopEvent.model_validate(chunk)
                    if event.kind == "done":
                        finished = True
                    yield event
    except Exception as exc:
        ending, reason = "error", failure_reason(exc)
        raise
    finally:
        if not finished:
            ctx.store.update_run(ctx.run_id, status=ending, finished_at=now(), reason=reason)


async def final_state(ctx: LoopContext) -> dict[str, Any]:
    """The last checkpointed state of a run (for --json output and tests)."""
    async with AsyncSqliteSaver.from_conn_string(str(checkpoint_path(ctx.settings))) as saver:
        graph = build_graph(saver)
        snapshot = await graph.aget_state({"configurable": {"thread_id": ctx.run_id}})
        return dict(snapshot.values)
