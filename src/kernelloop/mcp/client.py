"""The agent loop's side of the three MCP servers: one stdio session per server per run.

:class:`McpToolbox` starts `python -m kernelloop mcp serve profiler|verifier|researcher` as child
processes (concurrently), keeps one client session to each open for the whole run, and
turns each tool's structured result back into kernelloop's pydantic models. A tool error
becomes the exception it stood for (one line, exit code 2 in the CLI), a deadline a
:class:`ToolTimeout`.

The servers inherit this process's environment, except that only the researcher server (which
may use NVIDIA's hosted embeddings) sees ``NVIDIA_API_KEY``: the profiler and the verifier
never need a key, and the verifier runs candidate programs.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import Callable
from contextlib import AsyncExitStack
from datetime import timedelta
from pathlib import Path
from typing import Any

import anyio
from ..errors import EnvironmentProblem, KernelloopError
from ..llm_config import KEY_ENV
from ..profiler.diagnosis import Diagnosis
from ..profiler.run import ProfileResult
from ..verify.verdict import Verdict
from .common import timeout_for
from ..verify.verdict import StaticCheck

ProgressHandler = Callable[[str], None]
SECRET_FREE_SERVERS = ("profiler", "verifier")


class ToolFailed(KernelloopError):
    """A tool call came back as an error; the message is the server's one line."""


class ToolTimeout(KernelloopError):
    """A tool call passed its deadline."""


def server_environment(name: str, base: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ if base is None else base)
    if name in SECRET_FREE_SERVERS:
        env.pop(KEY_ENV, None)
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


class McpToolbox:
    """Async context manager: three MCP client sessions, opened once, closed at the end."""

    def __init__(self, *, start_timeout_s: float = 60.0, python: str | None = None,
                 env: dict[str, str] | None = None, cwd: Path | None = None) -> None:
        self.start_timeout_s = start_timeout_s
        self.python = python or sys.executable
        self.env = env
        self.cwd = cwd
        self.sessions: dict[str, Any] = {}
        self.sessions_opened: dict[str, int] = {}  # name -> how many sessions were opened (1 per run)
        self.calls: dict[str, int] = {}  # tool -> calls made
        self.start_s = 0.0
        self._stack: AsyncExitStack | None = None

    async def __aenter__(self) -> McpToolbox:
        self._stack = AsyncExitStack()
        await self._stack.__aenter__()
        started = time.monotonic()
        try:
            # Spawn all three, then do the three handshakes at once: the servers' start-up
            # (Python, imports) overlaps instead of adding up.
            sessions = {name: await self._spawn(name) for name in ("profiler", "verifier", "researcher")}
            await asyncio.gather(*(self._handshake(name, session) for name, session in sessions.items()))
        except TimeoutError:
            await self._stack.aclose()
            raise EnvironmentProblem(f"the MCP servers did not start within {self.start_timeout_s:.0f} s "
                                     "(setting optimize.mcp_start_timeout_s); run `kernelloop doctor`") from None
        except BaseException:
            await self._stack.aclose()
            raise
        self.start_s = time.monotonic() - started
        return self

    async def _spawn(self, name: str) -> Any:
        from mcp import ClientSession
        from mcp.client.stdio import StdioServerParameters, stdio_client

        assert self._stack is not None
        params = StdioServerParameters(command=self.python, args=["-m", "kernelloop", "mcp", "serve", name],
                                       env=server_environment(name, self.env),
                                       cwd=str(self.cwd) if self.cwd else None)
        errlog = open(os.devnull, "w")  # noqa: SIM115 - closed with the stack
        self._stack.callback(errlog.close)
        read, write = await self._stack.enter_async_context(stdio_client(params, errlog=errlog))
        return await self._stack.enter_async_context(ClientSession(read, write))

    async def _handshake(self, name: str, session: Any) -> None:
        # The deadline covers the handshake only: a cancel scope must not span contexts that
        # stay open after it (the stdio transport's task group).
        with anyio.fail_after(self.start_timeout_s):
            await session.initialize()
        self.sessions[name] = session
        self.sessions_opened[name] = self.sessions_opened.get(name, 0) + 1

    async def __aexit__(self, *exc: object) -> None:
        if self._stack is not None:
            await self._stack.__aexit__(*exc)
            self._stack = None
        self.sessions.clear()

    # -- one tool call --------------------------------------------------------------------------------

    async def call(self, server: str, tool: str, arguments: dict[str, Any],
                   progress: ProgressHandler | None = None) -> dict[str, Any]:
        session = self.sessions.get(server)
        if session is None:
            raise RuntimeError(f"MCP toolbox: no open session to the {server} server (use `async with`)")
        self.calls[tool] = self.calls.get(tool, 0) + 1
        deadline = timeout_for(tool) + 30.0  # the server's own deadline answers first

        async def on_progress(done: float, total: float | None, message: str | None) -> None:
            if progress is not None and message:
                progress(message)

        try:
            result = await session.call_tool(tool, arguments, read_timeout_seconds=timedelta(seconds=deadline),
                                             progress_callback=on_progress if progress else None)
        except Exception as exc:  # the transport: a dead server, a broken pipe, a read timeout
            text = str(exc) or type(exc).__name__
            if "timed out" in text.lower():
                raise ToolTimeout(f"{server}.{tool} timed out after {deadline:.0f} s") from exc
            raise EnvironmentProblem(f"the {server} MCP server failed during {tool}: {text}") from exc
        if result.isError:
            text = " ".join(c.text for c in result.content if getattr(c, "text", None)) or "unknown error"
            if "timed out" in text:
                raise ToolTimeout(text)
            raise ToolFailed(text)
        if result.structuredContent is None:
            raise ToolFailed(f"{server}.{tool} returned no structured content")
        return result.structuredContent

    # -- typed tools ----------------------------------------------------------------------------------

    async def warm_up(self, baseline_path: Path, baseline_editable: str) -> None:
        """Work the loop needs anyway, started while the baseline is being profiled: the researcher
        server's index (built on its first search) and the verifier's build of the baseline
        (the static check and the verify gate then find it in the build cache)."""
        await asyncio.gather(self.call("researcher", "corpus_stats", {}),
                             self.static_check(baseline_path, baseline_editable))

    async def profile(self, path: Path, *, section_set: str = "fast", kernel: str | None = None,
                      progress: ProgressHandler | None = None) -> ProfileResult:
        args: dict[str, Any] = {"path": str(path), "section_set": section_set}
        if kernel:
            args["kernel"] = kernel
        return ProfileResult.model_validate(await self.call("profiler", "profile", args, progress))

    async def search_for_diagnosis(self, diagnosis: Diagnosis, limit: int) -> list[dict[str, Any]]:
        """The best `limit` passages, each as {title, source, text, score}."""
        data = await self.call("researcher", "search_for_diagnosis",
                               {"diagnosis_json": diagnosis.model_dump_json(), "limit": limit})
        return [_hit(h) for h in data.get("hits", [])]

    async def static_check(self, baseline_path: Path, source: str, arch: str | None = None) -> StaticCheck:
        args: dict[str, Any] = {"baseline_path": str(baseline_path), "candidate_source": source}
        if arch:
            args["arch"] = arch
        return StaticCheck.model_validate(await self.call("verifier", "static_check", args))

    async def verify(self, baseline_path: Path, source: str, *, threshold: float | None = None,
                     progress: ProgressHandler | None = None) -> Verdict:
        args: dict[str, Any] = {"baseline_path": str(baseline_path), "candidate_source": source}
        if threshold is not None:
            args["threshold"] = threshold
        return Verdict.model_validate(await self.call("verifier", "verify", args, progress))


def _hit(raw: dict[str, Any]) -> dict[str, Any]:
    """A corpus hit (the engine's Hit fields) reduced to what the optimizer reads."""
    score = raw.get("score")
    return {"title": str(raw.get("title") or raw.get("doc_id") or "note"),
            "source": str(raw.get("doc_id") or raw.get("source") or ""),
            "text": str(raw.get("chunk") or ""),
            "score": float(score) if isinstance(score, int | float) else 0.0}
