"""`kernelloop optimize` as one call: check the input, pick the optimizer, open the three MCP
sessions, run (or resume) the loop, and stream its events."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable
from contextlib import aclosing
from pathlib import Path
from typing import Any

from ..agents.events import LoopEvent
from ..config import RUN_VERIFY_SETTINGS_ENV, Settings
from ..errors import InputError
from ..llm_config import LLMConfig, resolve_llm_config
from ..mcp.client import McpToolbox
from ..optimizers.factory import make_optimizer, model_label, resolve_kind
from ..runs.store import failure_reason, now
from .inputs import CheckedInput, check_inputs
from .loop import new_run, resumed_run, run_loop, run_store, saved_settings

ToolboxFactory = Callable[[Settings], Any]  # -> an async context manager yielding a Toolbox


def mcp_toolbox(settings: Settings) -> McpToolbox:
    # The verifier server verifies with the run's own [verify] settings, handed over when it starts
    # (KERNELLOOP_RUN_VERIFY_SETTINGS): a resumed run verifies as it began, whatever the server's folder
    # says; a tool call can only tighten them (red team round 50: a per-call settings argument let the
    # caller, the party being judged, loosen every gate).
    return McpToolbox(start_timeout_s=settings.optimize.mcp_start_timeout_s,
                      env={**os.environ, RUN_VERIFY_SETTINGS_ENV: settings.verify.model_dump_json()})


async def optimize(kernel: Path | None, settings: Settings, llm: LLMConfig, *, optimizer_kind: str | None = None,
                   resume: str | None = None, toolbox_factory: ToolboxFactory | None = None,
                   require_gpu: bool = True, optimizer: Any = None,
                   checked: CheckedInput | None = None) -> AsyncIterator[LoopEvent]:
    """Events of one run. `optimizer` overrides the factory (tests: scripted chat models);
    `checked` is the input the caller already checked (graph.inputs.check_inputs)."""
    if (kernel is None) == (resume is None):
        raise InputError("give the kernel to optimize, or --resume RUN_ID (not both)")
    if resume is not None:
        record = run_store(settings).get_run(resume)
        settings = saved_settings(record)  # a resumed run keeps its caps and threshold
        kind = record.options.get("optimizer_kind", record.optimizer)
        if kind != "offline":  # the same endpoint and model; the key is read again (never stored)
            llm = resolve_llm_config(record.model or None, record.options.get("base_url"), None)
        chosen = optimizer or make_optimizer(kind, llm, settings.optimize, settings.cache_dir)
        ctx = resumed_run(record, settings, chosen, _NoToolbox(), require_gpu=require_gpu)
    else:
        assert kernel is not None  # for the type checker: checked above
        if checked is None:
            checked = check_inputs(kernel, settings, require_gpu=require_gpu)  # before the optimizer and servers start
        kind = resolve_kind(optimizer_kind or settings.optimize.optimizer, llm)
        chosen = optimizer or make_optimizer(kind, llm, settings.optimize, settings.cache_dir)
        ctx = new_run(checked, settings, chosen, _NoToolbox(), model=model_label(chosen, llm),
                      options={"optimizer_kind": kind, "base_url": llm.base_url if kind != "offline" else None})
    yield LoopEvent(kind="info", node="start", message=f"run {ctx.run_id}: {ctx.artifacts.root}",
                    data={"run_id": ctx.run_id, "run_dir": str(ctx.artifacts.root), "optimizer": chosen.name,
                          "model": ctx.model, "resumed": ctx.resumed})
    try:
        toolbox_cm = (toolbox_factory or mcp_toolbox)(settings)
        toolbox = await toolbox_cm.__aenter__()
    except BaseException as exc:
        ctx.store.update_run(ctx.run_id, status="error", finished_at=now(),
                             reason=f"the MCP servers did not start: {failure_reason(exc)}")
        raise
    try:
        ctx.toolbox = toolbox
        ctx.mcp_start_s = getattr(toolbox, "start_s", 0.0)
        async with aclosing(run_loop(ctx)) as events:  # closed here, not by the garbage collector
            async for event in events:
                yield event
    finally:
        await toolbox_cm.__aexit__(None, None, None)


class _NoToolbox:
    """Stands in until the MCP sessions are open (the input is checked before they start)."""

    def __getattr__(self, name: str) -> Any:
        raise RuntimeError("the MCP toolbox is not open yet")
