"""The agent loop end to end without a GPU: scripted chat models write the candidates, the
static check is the real one (policy + nvcc), and profile/verify are scripted (their real
counterparts run in tests/gpu)."""

from __future__ import annotations

import asyncio
import json
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from kernelloop.config import load_settings
from kernelloop.graph.loop import recursion_limit, route, run_store
from kernelloop.graph.optimize import optimize
from kernelloop.llm_config import LLMConfig
from kernelloop.optimizers.base import Proposal
from kernelloop.optimizers.llm import LLMOptimizer
from kernelloop.runs.certificate import integrity_checks, read_certificate
from kernelloop.verify.verdict import Reason

from .conftest import ROOT, shared_cache_dir
from .fakes.chat import ScriptedChatModel
from .graph_fakes import FakeToolbox, make_verdict

pytestmark = pytest.mark.nvcc  # the static check compiles every candidate for real

NAIVE = ROOT / "kernels" / "naive_matmul.cu"
TILED = (ROOT / "src" / "kernelloop" / "exemplars" / "matmul_smem_tiling.cu").read_text()
BLOCKED = (ROOT / "src" / "kernelloop" / "exemplars" / "matmul_register_blocking.cu").read_text()


def fenced(source: str, prose: str = "Here is the rewrite.") -> str:
    return f"{prose}\n\n```cuda\n{source}\n```\n"


def not_faster(speedup: float = 1.05):
    return make_verdict(accepted=False, speedup=speedup, reason=Reason.not_faster,
                        detail=f"speedup: {speedup:.2f}x vs bar 1.20x")


@pytest.fixture
def env(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELLOOP_CACHE_DIR", str(shared_cache_dir()))
    monkeypatch.setenv("KERNELLOOP_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("KERNELLOOP_OPTIMIZE_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def llm_optimizer(chat: ScriptedChatModel, settings) -> LLMOptimizer:
    return LLMOptimizer(lambda: chat, name="nim", model="nvidia/llama-3.3-nemotron-super-49b-v1",
                        settings=settings.optimize)


def toolbox_factory(toolbox):
    @asynccontextmanager
    async def factory(settings):
        yield toolbox
    return factory


def run(kernel: Path | None, toolbox, optimizer, *, resume: str | None = None, stop_after=None, **cli):
    """Drive one run to its end (or until `stop_after(event)` is true); returns the events."""
    settings = load_settings(cli)
    events = []

    async def drive():
        stream = optimize(kernel, settings, LLMConfig(), resume=resume, toolbox_factory=toolbox_factory(toolbox),
                          require_gpu=False, optimizer=optimizer)
        async for event in stream:
            events.append(event)
            if stop_after is not None and stop_after(event):
                await stream.aclose()
                return

    asyncio.run(drive())
    return events


def run_dir(events) -> Path:
    return Path(next(e for e in events if e.node == "start").data["run_dir"])


def summary(events) -> dict:
    return json.loads((run_dir(events) / "summary.json").read_text())


def human_text(messages) -> str:
    return "\n".join(str(m.content) for m in messages)


def test_accepted_on_the_first_attempt_leaves_every_artifact(env):
    settings = load_settings()
    chat = ScriptedChatModel([fenced(TILED)])
    toolbox = FakeToolbox([make_verdict(accepted=True, speedup=1.74)])
    events = run(NAIVE, toolbox, llm_optimizer(chat, settings))
    s = summary(events)
    assert s["status"] == "accepted" and s["verify"]["iteration_accepted"] == 1
    assert s["verify"]["speedup"] == pytest.approx(1.74, rel=1e-3)
    assert s["verify"]["compile_ok"] is True and s["verify"]["correctness"] == "match"
    assert s["tokens"]["calls"] == 1 and s["tokens"]["total_tokens"] > 0
    folder = run_dir(events)
    for name in ("baseline.cu", "best.cu", "certificate.json", "report.md", "report.html", "summary.json", "research.json",
                 "profile-baseline.json", "profile-best.json", "iter-01/candidate.cu", "iter-01/candidate.diff",
                 "iter-01/prompt.md", "iter-01/response.md", "iter-01/compile.log", "iter-01/verdict.json"):
        assert (folder / name).is_file(), name
    assert (folder / "baseline.cu").read_text() == NAIVE.read_text()
    assert "tiled_matmul_kernel" in (folder / "best.cu").read_text()
    assert "+__global__ void tiled_matmul_kernel" in (folder / "iter-01/candidate.diff").read_text()
    cert = read_certificate(folder / "certificate.json")
    assert all(c.status == "pass" for c in integrity_checks(cert, (folder / "baseline.cu").read_text(),
                                                              (folder / "best.cu").read_text()))
    assert [s.seed for s in cert.seeds] == [1111, 2222] and cert.gpu == "NVIDIA H200"
    # one profile of the baseline, one of the winner; research once; the candidate checked and verified once
    assert [p.name for p in toolbox.calls["profile"]] == ["baseline.cu", "best.cu"]
    assert len(toolbox.calls["search_for_diagnosis"]) == 1 and len(toolbox.calls["verify"]) == 1
    # the prompt carried the diagnosis and the research notes
    prompt = human_text(chat.calls[0])
    assert "L1/load-store limited" in prompt and "Stage tiles of A and B in shared memory" in prompt
    record = run_store(load_settings()).list_runs()[0]
    assert record.status == "accepted" and record.best_speedup == pytest.approx(1.74)
    assert "ACCEPTED" in (folder / "report.md").read_text()
    assert "ACCEPTED: 1.74x faster" in (folder / "report.html").read_text(encoding="utf-8")


def test_rejected_then_accepted_with_the_failure_in_the_second_prompt(env):
    settings = load_settings()
    chat = ScriptedChatModel([fenced(TILED), fenced(BLOCKED)])
    toolbox = FakeToolbox([not_faster(1.05), make_verdict(accepted=True, speedup=5.69)])
    events = run(NAIVE, toolbox, llm_optimizer(chat, settings))
    s = summary(events)
    assert s["status"] == "accepted" and s["verify"]["iteration_accepted"] == 2
    second = human_text(chat.calls[1])
    assert "did not clear the bar" in second and "1.05" in second
    assert "1.05" not in human_text(chat.calls[0])
    assert [a["outcome"] for a in s["attempts"]] == ["rejected: not_faster", "accepted"]
    attempts = run_store(load_settings()).attempts(s["run_id"])
    assert [(a.iteration, a.accepted) for a in attempts] == [(1, False), (2, True)]


def test_a_compile_error_goes_back_to_the_optimizer_and_is_fixed_in_the_same_iteration(env):
    settings = load_settings()
    broken = TILED.replace("acc += sA[ty][k] * sB[k][tx];", "acc += sA[ty][k] * sB[k][tx]")  # missing ;
    chat = ScriptedChatModel([fenced(broken), fenced(TILED)])
    toolbox = FakeToolbox([make_verdict(accepted=True, speedup=1.74)])
    events = run(NAIVE, toolbox, llm_optimizer(chat, settings))
    s = summary(events)
    assert s["status"] == "accepted" and s["verify"]["iteration_accepted"] == 1 and s["iterations"] == 1
    fix_prompt = human_text(chat.calls[1])
    assert "error" in fix_prompt and "expected a \";\"" in fix_prompt
    assert len(toolbox.calls["static_check"]) == 2 and len(toolbox.calls["verify"]) == 1
    folder = run_dir(events)
    assert "error" in (folder / "iter-01/compile.log").read_text()
    assert (folder / "iter-01/fix-1/candidate.cu").is_file() and (folder / "iter-01/fix-1/verdict.json").is_file()


def test_compile_fix_attempts_are_capped_then_the_round_fails(env):
    settings = load_settings({"compile_fix_attempts": 1, "max_iterations": 1})
    broken = TILED.replace("acc += sA[ty][k] * sB[k][tx];", "acc += undefined_name;")
    chat = ScriptedChatModel([fenced(broken), fenced(broken)])
    toolbox = FakeToolbox([])
    events = run(NAIVE, toolbox, llm_optimizer(chat, settings), compile_fix_attempts=1, max_iterations=1)
    s = summary(events)
    assert s["status"] == "exhausted" and len(chat.calls) == 2 and not toolbox.calls["verify"]
    assert s["attempts"][0]["outcome"] == "rejected: compile"


def test_exhausted_after_max_iterations(env):
    settings = load_settings()
    chat = ScriptedChatModel([fenced(TILED)] * 3)
    toolbox = FakeToolbox([not_faster(1.05), not_faster(1.1), not_faster(1.15)])
    events = run(NAIVE, toolbox, llm_optimizer(chat, settings))
    s = summary(events)
    assert s["status"] == "exhausted" and s["iterations"] == 3 and len(toolbox.calls["verify"]) == 3
    assert "no candidate cleared the bar in 3 iteration(s)" in s["stop_reason"]
    third = human_text(chat.calls[2])
    assert "1.05" in third and "1.10" in third  # every earlier failure is anti-context
    assert run_store(load_settings()).list_runs()[0].status == "exhausted"
    assert not (run_dir(events) / "best.cu").exists()


class Scripted:
    """An optimizer that hands out given sources in order (for loop mechanics)."""

    name = "offline"

    def __init__(self, sources):
        self.sources = list(sources)
        self.requests = []

    def propose(self, request):
        self.requests.append(request)
        if not self.sources:
            from kernelloop.optimizers.base import NoMoreCandidates
            raise NoMoreCandidates("scripted optimizer: nothing left")
        return Proposal(source=self.sources.pop(0), approach=f"candidate {len(self.requests)}", optimizer="offline")


def test_resume_after_an_interruption_continues_where_the_run_stopped(env):
    toolbox = FakeToolbox([not_faster(1.05)])
    first = run(NAIVE, toolbox, Scripted([TILED, BLOCKED]),
                stop_after=lambda e: e.kind == "node" and e.iteration == 2)  # Ctrl-C as round 2 starts
    run_id = next(e for e in first if e.node == "start").data["run_id"]
    store = run_store(load_settings())
    assert store.get_run(run_id).status == "interrupted"
    assert not (run_dir(first) / "summary.json").exists()

    toolbox2 = FakeToolbox([make_verdict(accepted=True, speedup=5.69)])
    optimizer2 = Scripted([BLOCKED])
    second = run(None, toolbox2, optimizer2, resume=run_id[:12])
    assert any("resuming run" in e.message for e in second)
    s = summary(first)
    assert s["status"] == "accepted" and s["verify"]["iteration_accepted"] == 2 and s["resumed"] is True
    # the baseline was not profiled again, and the first attempt's failure reached the optimizer
    assert [p.name for p in toolbox2.calls["profile"]] == ["best.cu"]
    assert optimizer2.requests[0].iteration == 2
    assert optimizer2.requests[0].failed_attempts[0].speedup == pytest.approx(1.05)
    assert store.get_run(run_id).status == "accepted"


def test_a_failed_tool_call_marks_the_run_and_resume_retries_the_node(env):
    toolbox = FakeToolbox([], fail_on={"verify": RuntimeError("the GPU fell off the bus")})
    with pytest.raises(RuntimeError):
        run(NAIVE, toolbox, Scripted([TILED]))
    record = run_store(load_settings()).list_runs()[0]
    assert record.status == "error"
    toolbox2 = FakeToolbox([make_verdict(accepted=True, speedup=1.74)])
    run(None, toolbox2, Scripted([]), resume=record.run_id)  # no new proposal needed: verify re-runs
    assert len(toolbox2.calls["verify"]) == 1 and run_store(load_settings()).get_run(record.run_id).status == "accepted"


def test_resuming_a_finished_run_is_a_clear_error(env):
    events = run(NAIVE, FakeToolbox([make_verdict(accepted=True, speedup=1.74)]), Scripted([TILED]))
    run_id = next(e for e in events if e.node == "start").data["run_id"]
    from kernelloop.errors import InputError
    with pytest.raises(InputError, match="already finished"):
        run(None, FakeToolbox([]), Scripted([]), resume=run_id)


def test_keep_going_continues_from_the_best_until_patience_runs_out(env):
    verdicts = [make_verdict(accepted=True, speedup=1.74), make_verdict(accepted=True, speedup=5.69),
                make_verdict(accepted=True, speedup=5.70), not_faster(1.1)]
    optimizer = Scripted([TILED, BLOCKED, BLOCKED, TILED])
    events = run(NAIVE, FakeToolbox(verdicts), optimizer, keep_going=True, patience=2)
    s = summary(events)
    assert s["status"] == "accepted" and s["iterations"] == 4
    assert s["verify"]["speedup"] == pytest.approx(5.69, rel=1e-3)  # 5.70 is not a 2% gain over 5.69
    assert "no round gained 2%" in s["stop_reason"]
    assert optimizer.requests[2].current_editable == BLOCKED and optimizer.requests[2].best_speedup == pytest.approx(5.69)
    assert [a["outcome"] for a in s["attempts"]] == ["accepted", "accepted", "rejected: not_faster", "rejected: not_faster"]


def test_memory_of_past_runs_reaches_the_next_run(env):
    run(NAIVE, FakeToolbox([not_faster(1.05), make_verdict(accepted=True, speedup=5.69)]), Scripted([TILED, BLOCKED]))
    optimizer = Scripted([BLOCKED])
    run(NAIVE, FakeToolbox([make_verdict(accepted=True, speedup=5.69)]), optimizer)
    memory = optimizer.requests[0].memory
    assert {(m.approach, m.accepted) for m in memory} == {("candidate 1", False), ("candidate 2", True)}


def test_optimizer_with_nothing_to_offer_ends_the_run_exhausted(env):
    events = run(NAIVE, FakeToolbox([]), Scripted([]))
    s = summary(events)
    assert s["status"] == "exhausted" and s["iterations"] == 0 and "nothing left" in s["stop_reason"]


def test_routes_only_read_the_state_and_the_recursion_limit_follows_the_caps():
    state = {"route": "retry", "iteration": 2}
    assert route(state) == "retry" and state == {"route": "retry", "iteration": 2}
    opt = load_settings().optimize
    assert 10 < recursion_limit(opt) < 60
    assert recursion_limit(opt.model_copy(update={"keep_going": True})) > recursion_limit(opt)


class Misconfigured:
    name = "nim"

    def propose(self, request):
        from kernelloop.errors import ConfigError
        raise ConfigError("model 'nvidia/nemotron-nano-9b-v2' not found (404): check the exact model name")


def test_a_configuration_error_from_the_optimizer_ends_the_run_with_that_one_line(env):
    from kernelloop.errors import ConfigError
    with pytest.raises(ConfigError, match="exact model name"):
        run(NAIVE, FakeToolbox([]), Misconfigured())
    assert run_store(load_settings()).list_runs()[0].status == "error"


def test_an_optimizer_out_of_ideas_during_a_compile_fix_records_the_broken_candidate(env):
    broken = TILED.replace("acc += sA[ty][k] * sB[k][tx];", "acc += undefined_name;")
    events = run(NAIVE, FakeToolbox([]), Scripted([broken]))
    s = summary(events)
    assert s["status"] == "exhausted" and s["iterations"] == 1
    assert [(a["iteration"], a["outcome"]) for a in s["attempts"]] == [(1, "rejected: compile")]
