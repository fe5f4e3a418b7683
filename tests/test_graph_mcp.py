"""The loop over real MCP stdio sessions: one session per server for the whole run.

The researcher server's search and the verifier's static check run for real over stdio; the two
GPU tools (profile, verify) are replaced in the client, since this machine has no GPU
(tests/gpu runs them for real)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from kernelloop.config import load_settings
from kernelloop.graph.optimize import optimize
from kernelloop.llm_config import LLMConfig
from kernelloop.mcp.client import McpToolbox
from kernelloop.verify.verdict import Reason

from .conftest import ROOT, shared_cache_dir
from .graph_fakes import FakeToolbox, make_verdict
from .test_graph import BLOCKED, TILED, Scripted

pytestmark = pytest.mark.nvcc


class GpuToolsScripted(McpToolbox):
    """Real MCP sessions; profile and verify answered by the scripted FakeToolbox."""

    def __init__(self, verdicts, **kwargs):
        super().__init__(**kwargs)
        self.fake = FakeToolbox(verdicts)

    async def profile(self, path, **kwargs):
        return await self.fake.profile(path, **kwargs)

    async def verify(self, baseline_path, source, **kwargs):
        return await self.fake.verify(baseline_path, source, **kwargs)


def test_a_run_uses_one_session_per_server_and_the_real_researcher_and_verifier_tools(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELLOOP_CACHE_DIR", str(shared_cache_dir()))
    monkeypatch.setenv("KERNELLOOP_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.chdir(tmp_path)
    toolbox = GpuToolsScripted([make_verdict(accepted=False, speedup=1.05, reason=Reason.not_faster),
                                make_verdict(accepted=True, speedup=5.69)], start_timeout_s=120)
    broken = TILED.replace("acc += sA[ty][k] * sB[k][tx];", "acc += sA[ty][k] * sB[k][tx]")
    optimizer = Scripted([TILED, broken, BLOCKED])
    events = []

    async def drive():
        def factory(settings):
            return toolbox
        async for event in optimize(ROOT / "kernels" / "naive_matmul.cu", load_settings(), LLMConfig(),
                                    toolbox_factory=factory, require_gpu=False, optimizer=optimizer):
            events.append(event)

    asyncio.run(drive())
    assert toolbox.sessions_opened == {"profiler": 1, "verifier": 1, "researcher": 1}
    # the warm-up (index, baseline build) ran while the baseline was profiled
    assert toolbox.calls == {"corpus_stats": 1, "search_for_diagnosis": 1, "static_check": 4}
    run_dir = Path(next(e for e in events if e.node == "start").data["run_dir"])
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "accepted" and summary["verify"]["iteration_accepted"] == 2
    # the real corpus answered the real diagnosis: the tiling note is among the passages
    research = json.loads((run_dir / "research.json").read_text())
    assert any("tiling" in (r["source"] + r["title"]).lower() for r in research)
    assert optimizer.requests[0].research and optimizer.requests[0].research[0].text
    # the broken candidate's nvcc errors came back from the verifier server
    assert "error" in (optimizer.requests[2].compile_errors or "")
    assert not toolbox.sessions  # closed at the end of the run
