"""How a run ends in the run log (its reason when it fails), and what reaches the caller while
it runs: MCP progress notifications, which the MCP client delivers from its own task."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from contextlib import asynccontextmanager

import pytest

from kernelloop.config import load_settings
from kernelloop.errors import EnvironmentProblem
from kernelloop.graph.optimize import optimize
from kernelloop.llm_config import LLMConfig
from kernelloop.optimizers.base import NoMoreCandidates, Proposal
from kernelloop.runs.store import RunStore, run_store
from kernelloop.verify.verdict import BuildSummary, StaticCheck

from .conftest import ROOT
from .graph_fakes import FakeToolbox, make_verdict

NAIVE = ROOT / "kernels" / "naive_matmul.cu"
TILED = (ROOT / "src" / "kernelloop" / "exemplars" / "matmul_smem_tiling.cu").read_text()


@pytest.fixture
def env(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELLOOP_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("KERNELLOOP_OPTIMIZE_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.delenv("NVIDIA_API_KEY", raising=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path


class OneCandidate:
    name = "offline"

    def __init__(self):
        self.sources = [TILED]

    def propose(self, request):
        if not self.sources:
            raise NoMoreCandidates("nothing left")
        return Proposal(source=self.sources.pop(0), approach="tile", optimizer="offline")


def builds(baseline_path, source):  # the static check, passed without nvcc: these tests are about the loop
    done = BuildSummary(ok=True, cached=True, seconds=0.0, stage="done", flags=["-O3"])
    return StaticCheck(ok=True, summary="passes", arch="sm_90", split_mode="markers", baseline_build=done,
                       candidate_build=done)


def drive(toolbox, **cli):
    events = []

    @asynccontextmanager
    async def factory(settings):
        yield toolbox

    async def go():
        async for event in optimize(NAIVE, load_settings(cli), LLMConfig(), toolbox_factory=factory,
                                    require_gpu=False, optimizer=OneCandidate()):
            events.append(event)

    asyncio.run(go())
    return events


def test_a_failed_run_records_why(env):
    toolbox = FakeToolbox([make_verdict(accepted=True, speedup=5.0)], static=builds,
                          fail_on={"profile": EnvironmentProblem("ncu failed: ==ERROR== the GPU fell off the bus")})
    with pytest.raises(EnvironmentProblem):
        drive(toolbox)
    record = run_store(load_settings()).list_runs()[0]
    assert record.status == "error"
    assert record.reason == "ncu failed: ==ERROR== the GPU fell off the bus"


def test_an_unexpected_failure_names_its_kind(env):
    toolbox = FakeToolbox([], static=builds, fail_on={"verify": KeyError("best_verdict")})
    with pytest.raises(KeyError):
        drive(toolbox)
    record = run_store(load_settings()).list_runs()[0]
    assert (record.status, record.reason) == ("error", "KeyError: 'best_verdict'")


def test_runs_show_prints_the_reason_and_json_carries_it(env, capsys, monkeypatch):
    toolbox = FakeToolbox([], static=builds, fail_on={"profile": EnvironmentProblem("ncu failed: [bus] error")})
    with pytest.raises(EnvironmentProblem):
        drive(toolbox)
    from typer.testing import CliRunner

    from kernelloop.cli.app import app

    run_id = run_store(load_settings()).list_runs()[0].run_id
    shown = CliRunner().invoke(app, ["runs", "show", run_id])
    assert shown.exit_code == 0 and "error: ncu failed: [bus] error" in shown.stdout  # literal, brackets kept
    listed = CliRunner().invoke(app, ["runs", "list", "--json"])
    assert '"reason": "ncu failed: [bus] error"' in listed.stdout


def test_a_run_log_from_before_reasons_still_opens_and_records_them(tmp_path):
    path = tmp_path / "runs.sqlite"
    with sqlite3.connect(path) as conn:  # the schema as it was, without the reason column
        conn.execute("CREATE TABLE runs (run_id TEXT PRIMARY KEY, kernel TEXT NOT NULL, kernel_path TEXT NOT NULL, "
                     "kernel_sha256 TEXT NOT NULL, started_at TEXT NOT NULL, finished_at TEXT, status TEXT NOT NULL, "
                     "optimizer TEXT NOT NULL, model TEXT NOT NULL DEFAULT '', iterations INTEGER NOT NULL DEFAULT 0, "
                     "best_speedup REAL, gpu TEXT NOT NULL DEFAULT '', run_dir TEXT NOT NULL, "
                     "options_json TEXT NOT NULL DEFAULT '{}', summary_json TEXT NOT NULL DEFAULT '{}')")
        conn.execute("INSERT INTO runs (run_id, kernel, kernel_path, kernel_sha256, started_at, status, optimizer, "
                     "run_dir) VALUES ('old-run', 'k', '/k.cu', 'x', '2026-01-01', 'error', 'offline', '/r')")
    store = RunStore(path)
    assert store.get_run("old-run").reason == ""
    store.update_run("old-run", reason="the sandbox server died")
    assert store.get_run("old-run").reason == "the sandbox server died"


class ProgressFromAnotherTask(FakeToolbox):
    """Calls the progress callback the way the MCP client does: from its receive loop, a task started
    before the graph ran, which does not carry the node's context. Any exception from the callback is
    logged the way mcp.shared.session logs it."""

    async def __aenter__(self):
        self.queue: asyncio.Queue = asyncio.Queue()
        self.receiver = asyncio.create_task(self._receive())
        return self

    async def __aexit__(self, *exc):
        self.receiver.cancel()

    async def _receive(self):
        while True:
            callback, message, done = await self.queue.get()
            try:
                callback(message)
            except Exception as exc:  # noqa: BLE001 - what mcp does
                logging.error("Progress callback raised an exception: %s", exc)
            done.set()

    async def _notify(self, progress, message):
        done = asyncio.Event()
        await self.queue.put((progress, message, done))
        await done.wait()

    async def verify(self, baseline_path, source, *, threshold=None, progress=None):
        await self._notify(progress, "timing: 7 interleaved runs each")
        return await super().verify(baseline_path, source, threshold=threshold)

    async def profile(self, path, *, section_set="fast", kernel=None, progress=None):
        await self._notify(progress, "ncu: replaying the launch")
        return await super().profile(path, section_set=section_set, kernel=kernel)


def test_progress_from_the_mcp_clients_own_task_reaches_the_caller_and_logs_no_error(env, caplog):
    toolbox = ProgressFromAnotherTask([make_verdict(accepted=True, speedup=5.0)], static=builds)

    @asynccontextmanager
    async def factory(settings):
        async with toolbox as opened:
            yield opened

    events = []

    async def go():
        async for event in optimize(NAIVE, load_settings(), LLMConfig(), toolbox_factory=factory, require_gpu=False,
                                    optimizer=OneCandidate()):
            events.append(event)

    with caplog.at_level(logging.WARNING):
        asyncio.run(go())
    progress = [(e.node, e.message) for e in events if e.kind == "progress"]
    assert ("verifier", "timing: 7 interleaved runs each") in progress
    assert ("profiler", "ncu: replaying the launch") in progress
    assert not [r for r in caplog.records if "Progress callback raised" in r.getMessage()]
