"""What the nodes share that is not state: the tools, the optimizer, the run's files and log.

It is the graph's `context_schema`: the loop hands one LoopContext to LangGraph with each run
(`astream(..., context=ctx)`) and every node reads it as `runtime.context`. None of it is
checkpointed; `kernelloop optimize --resume` builds a new context from the run log and the run
folder, and the checkpointed state says where the loop stood."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ..config import Settings
from ..optimizers.base import Optimizer, PastAttempt
from ..profiler.diagnosis import Diagnosis
from ..profiler.run import ProfileResult
from ..program.split import ProgramSplit
from ..runs.artifacts import RunArtifacts
from ..runs.store import RunStore
from ..verify.verdict import StaticCheck, Verdict


class Toolbox(Protocol):
    """The tool calls the loop makes (McpToolbox in production: the three MCP servers)."""

    async def warm_up(self, baseline_path: Path, baseline_editable: str) -> None: ...

    async def profile(self, path: Path, *, section_set: str = "fast", kernel: str | None = None,
                      progress: Any = None) -> ProfileResult: ...

    async def search_for_diagnosis(self, diagnosis: Diagnosis, k: int) -> list[dict[str, Any]]: ...

    async def static_check(self, baseline_path: Path, source: str, arch: str | None = None) -> StaticCheck: ...

    async def verify(self, baseline_path: Path, source: str, *, threshold: float | None = None,
                     progress: Any = None) -> Verdict: ...


@dataclass
class LoopContext:
    settings: Settings
    toolbox: Toolbox
    optimizer: Optimizer
    artifacts: RunArtifacts
    store: RunStore
    run_id: str
    kernel: str
    kernel_path: Path  # the user's file (the run works on its copy, artifacts.baseline_path)
    kernel_sha256: str
    baseline_text: str
    split: ProgramSplit
    arch: str = "sm_90"  # nvcc's name for the GPU the run verifies on (or the verify.arch setting)
    model: str = ""
    memory: list[PastAttempt] = field(default_factory=list)
    resumed: bool = False
    mcp_start_s: float = 0.0  # starting the three MCP servers and their handshakes
