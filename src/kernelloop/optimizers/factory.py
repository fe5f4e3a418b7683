"""Which optimizer a run uses: `--optimizer auto|offline|nim|openai`.

auto: an OpenAI-compatible endpoint when a base URL other than NVIDIA's hosted one is
configured (a self-hosted NIM, vLLM, Ollama, llama.cpp server); else NIM when an NVIDIA
API key is configured; else the offline optimizer (no key, no network).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from ..config import OptimizeSettings
from ..errors import ConfigError
from ..llm_config import SOURCE_NAMES, LLMConfig, base_url_problem
from .base import Optimizer

OptimizerKind = Literal["auto", "offline", "nim", "openai"]
KINDS: tuple[str, ...] = ("auto", "offline", "nim", "openai")


def resolve_kind(kind: str, llm: LLMConfig) -> str:
    if kind not in KINDS:
        raise ConfigError(f"unknown optimizer {kind!r}; use one of: {', '.join(KINDS)}")
    if kind != "auto":
        return kind
    if not llm.nvidia_hosted:
        return "openai"
    return "nim" if llm.api_key is not None else "offline"


def make_optimizer(kind: str, llm: LLMConfig, settings: OptimizeSettings, cache_dir: Path | None = None) -> Optimizer:
    """The optimizer for `kind` (auto resolved). Constructing one never touches the network. `cache_dir`:
    the run's (the offline optimizer keeps its ptxas probes there)."""
    chosen = resolve_kind(kind, llm)
    if chosen == "offline":
        from .offline import OfflineOptimizer

        return OfflineOptimizer(settings, cache_dir=cache_dir)
    problem = base_url_problem(llm.base_url)
    if problem:
        raise ConfigError(f"{SOURCE_NAMES[llm.base_url_source]} {llm.base_url!r} {problem}; the {chosen} optimizer "
                          "needs an OpenAI-compatible endpoint such as https://integrate.api.nvidia.com/v1 "
                          "(`kernelloop doctor` checks it)")
    from .llm import make_nim_optimizer, make_openai_optimizer

    return make_nim_optimizer(llm, settings) if chosen == "nim" else make_openai_optimizer(llm, settings)


def model_label(optimizer: Optimizer, llm: LLMConfig) -> str:
    """The model name to record for a run ('' for the offline optimizer)."""
    return "" if optimizer.name == "offline" else llm.model
