"""What the three MCP servers share: per-tool timeouts, the worker thread, progress, and
errors turned into one line for the client.

Every tool is a thin shell: it parses its arguments, runs one synchronous kernelloop call
in a worker thread under a deadline, and returns a pydantic model (FastMCP derives the
tool's output schema from the return annotation and sends the model as structured
content). What a client can see of a failure is one line:

* a KernelloopError (a problem the user can fix) -> its own message;
* the deadline passed -> "<tool> timed out after N s";
* anything else -> "internal error: <type>: <message>" (the traceback goes to stderr only).
"""

import importlib.metadata
import logging
import math
import os
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import anyio
import anyio.from_thread
import anyio.to_thread
from mcp.server.fastmcp import Context, FastMCP
from mcp.server.fastmcp.exceptions import ToolError
from mcp.types import CallToolResult, TextContent
from pydantic import BaseModel, ValidationError

from .. import __version__
from ..config import environment_value
from ..errors import ConfigError, KernelloopError

logger = logging.getLogger("kernelloop.mcp")
T = TypeVar("T")

# Seconds each tool may take before the client gets "timed out". Override one with
# KERNELLOOP_MCP_TIMEOUT_<TOOL> (e.g. KERNELLOOP_MCP_TIMEOUT_VERIFY=7200); read at each call.
DEFAULT_TIMEOUTS_S: dict[str, float] = {
    # each server's ping, named for its server: clients that gather every server's tools into
    # one list (langchain-mcp-adapters) keep tools by name, so three `server_info` became one
    "profiler_info": 10.0,
    "verifier_info": 10.0,
    "researcher_info": 10.0,
    # profiler
    "compile_check": 600.0,
    "resource_usage": 600.0,
    "profile": 1800.0,
    "diagnose_report": 300.0,
    # verifier
    "verify": 3600.0,
    "static_check": 1200.0,
    # researcher (the first call of a process may build the index and load the embedding model)
    "search": 300.0,
    "search_for_diagnosis": 300.0,
    "corpus_stats": 300.0,
}
TIMEOUT_ENV_PREFIX = "KERNELLOOP_MCP_TIMEOUT_"
LOG_LEVEL_ENV = "KERNELLOOP_MCP_LOG_LEVEL"


def timeout_for(tool: str) -> float:
    """The deadline of one tool, in seconds: the environment's override, or the default."""
    name = f"{TIMEOUT_ENV_PREFIX}{tool.upper()}"
    raw = environment_value(name)
    if raw is None:
        return DEFAULT_TIMEOUTS_S.get(tool, 600.0)
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{name}={raw!r} is not a number of seconds") from None
    if not value > 0:
        raise ConfigError(f"{name}={raw!r} must be a number of seconds greater than 0")
    return value


def timeouts() -> dict[str, float]:
    """Every tool's effective deadline (for the servers' *_info tools); a bad override shows as -1."""
    out: dict[str, float] = {}
    for tool in DEFAULT_TIMEOUTS_S:
        try:
            out[tool] = timeout_for(tool)
        except ConfigError:
            out[tool] = -1.0
    return out


def one_line(text: str) -> str:
    """A message on one line: lines joined with "; ", blank lines dropped."""
    lines = [ln.strip() for ln in str(text).splitlines() if ln.strip()]
    return "; ".join(lines) or "(no message)"


class KernelloopToolError(ToolError):
    """A tool failure whose message is already the one line the client should see."""


class KernelloopMCP(FastMCP):
    """FastMCP, with our tool errors sent as they are, and non-finite numbers in results sent as strings.

    FastMCP wraps every exception a tool raises as "Error executing tool NAME: ..."; a
    KernelloopToolError is already the line to show, so it goes out unchanged as a
    CallToolResult with isError set."""

    async def list_tools(self) -> list[Any]:
        tools = await super().list_tools()
        for tool in tools:  # what the client validates a result against, and the server too
            if tool.outputSchema is not None:
                tool.outputSchema = admit_nonfinite(tool.outputSchema)
        return tools

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> Any:
        try:
            result = await super().call_tool(name, arguments)
            if isinstance(result, tuple) and len(result) == 2 and isinstance(result[1], dict):
                return result[0], finite_json(result[1])
            return result
        except ToolError as exc:
            ours = exc if isinstance(exc, KernelloopToolError) else exc.__cause__
            if isinstance(ours, KernelloopToolError):
                return _error_result(str(ours))
            cause = exc.__cause__
            if isinstance(cause, ValidationError) and cause.title.endswith("Arguments"):  # FastMCP's argument model
                return _error_result(f"invalid arguments for {name}: {_first_error(cause)}")
            raise


# JSON has no infinity and no NaN, and a verdict holds both where a candidate's output is non-finite or wrong where no
# error is allowed (an allowance's worst ratio is inf): sent as numbers they reached the client as null and failed the
# tool's output schema, and the run ended in an error instead of a rejection (kept-aside set 22 on an H100). They go
# as the strings pydantic reads back as floats, and every number in a tool's output schema admits them.
_NONFINITE = ("Infinity", "-Infinity", "NaN")


def finite_json(value: Any) -> Any:
    """VALUE (a tool's structured result) with each non-finite float as the string pydantic reads back."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dict):
        return {k: finite_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite_json(v) for v in value]
    return value


def admit_nonfinite(schema: Any) -> Any:
    """SCHEMA with every number type also admitting the strings of finite_json."""
    if isinstance(schema, list):
        return [admit_nonfinite(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: admit_nonfinite(v) for k, v in schema.items()}
    kind = out.get("type")
    if kind == "number" or (isinstance(kind, list) and "number" in kind):
        types = kind if isinstance(kind, list) else [kind]
        rest = {k: v for k, v in out.items() if k != "type"}
        return {**{k: v for k, v in rest.items() if k in ("title", "description", "default")},
                "anyOf": [{"type": types, **{k: v for k, v in rest.items() if k not in ("title", "description", "default")}},
                          {"type": "string", "enum": list(_NONFINITE)}]}
    return out


def _error_result(text: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], isError=True)


def _first_error(exc: ValidationError) -> str:
    errors = exc.errors()
    first = errors[0]
    where = ".".join(str(p) for p in first["loc"]) or "(arguments)"
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return one_line(f"{where}: {first['msg']}{more}")


def new_server(name: str, instructions: str) -> KernelloopMCP:
    # FastMCP's INFO logs one line per request; they go to stderr anyway, but cost time.
    level = (environment_value(LOG_LEVEL_ENV) or "WARNING").upper()
    if level not in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"):
        level = "WARNING"
    server = KernelloopMCP(name, instructions=instructions, log_level=level)  # type: ignore[arg-type]
    server._mcp_server.version = __version__  # the initialize reply names kernelloop's version, not mcp's
    return server


class ProgressBridge:
    """Forwards the gate's progress events (called in the worker thread) to the client.

    As MCP progress notifications when the client asked for them (it sent a progress
    token), else as log messages. Never raises into the library; silent once the tool
    call is over (a call abandoned at its deadline may still be running)."""

    def __init__(self, ctx: Context | None) -> None:
        self.ctx = ctx
        self.sent = 0
        self.open = True

    def __call__(self, event: Any) -> None:  # worker thread
        if not self.open or self.ctx is None:
            return
        try:
            anyio.from_thread.run(self._send, event)
        except Exception as exc:  # the event loop is gone, or the client: keep the gate running
            logger.debug("progress not forwarded: %s", exc)

    async def _send(self, event: Any) -> None:  # event loop
        if not self.open or self.ctx is None:
            return
        stage, message = getattr(event, "stage", ""), getattr(event, "message", str(event))
        text = f"{stage}: {message}" if stage else str(message)
        self.sent += 1
        try:
            meta = self.ctx.request_context.meta
            if meta is not None and meta.progressToken is not None:
                await self.ctx.report_progress(self.sent, None, text)
            else:
                await self.ctx.info(text)
        except Exception as exc:
            logger.debug("progress not forwarded: %s", exc)


async def run_tool(tool: str, fn: Callable[[], T], *, progress: ProgressBridge | None = None) -> T:
    """Run `fn` (synchronous kernelloop work) in a worker thread under the tool's deadline.

    At the deadline the call returns "timed out" at once; the thread is abandoned and
    finishes on its own (every compile and program run has its own wall-clock cap)."""
    try:
        seconds = timeout_for(tool)
    except ConfigError as exc:
        raise KernelloopToolError(one_line(str(exc))) from None
    scope = None
    try:
        with anyio.fail_after(seconds) as scope:
            return await anyio.to_thread.run_sync(fn, abandon_on_cancel=True)
    except TimeoutError as exc:
        if scope is not None and scope.cancelled_caught:
            raise KernelloopToolError(f"{tool} timed out after {seconds:g} s") from None
        raise _internal(tool, exc) from None
    except KernelloopError as exc:
        raise KernelloopToolError(one_line(str(exc))) from None
    except KernelloopToolError:
        raise
    except Exception as exc:
        raise _internal(tool, exc) from None
    finally:
        if progress is not None:
            progress.open = False


def _internal(tool: str, exc: BaseException) -> KernelloopToolError:
    logger.error("tool %s failed", tool, exc_info=exc)  # stderr only
    return KernelloopToolError(f"internal error: {type(exc).__name__}: {one_line(str(exc))}")


# -- <server>_info -------------------------------------------------------------------------


class ServerInfo(BaseModel):
    """Who this server is and what it runs with (a cheap call: no compiler, no GPU)."""

    name: str
    kernelloop_version: str
    mcp_version: str
    python: str
    pid: int
    cwd: str
    tools: list[str]
    timeouts_s: dict[str, float]  # the effective per-tool deadlines (-1: a bad override)
    settings: dict[str, Any]  # kernelloop's merged settings (defaults < kernelloop.toml < env)


def _mcp_version() -> str:
    try:
        return importlib.metadata.version("mcp")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def info_tool_name(server_name: str) -> str:
    """The ping of a server: `profiler_info` for kernelloop-profiler."""
    return f"{server_name.removeprefix('kernelloop-')}_info"


def add_server_info(server: KernelloopMCP, tools: list[str]) -> None:
    mcp_version = _mcp_version()
    python = sys.version.split()[0]
    tool_name = info_tool_name(server.name)

    def info() -> ServerInfo:
        from ..config import load_settings

        return ServerInfo(
            name=server.name, kernelloop_version=__version__, mcp_version=mcp_version, python=python,
            pid=os.getpid(), cwd=os.getcwd(), tools=[tool_name, *tools],
            timeouts_s={t: s for t, s in timeouts().items() if t in tools or t == tool_name},
            settings=load_settings().model_dump(mode="json"),
        )

    async def server_info() -> ServerInfo:
        """Name, versions, tools, per-tool timeouts and settings of this server. Cheap; use it as a ping."""
        return await run_tool(tool_name, info)

    server.add_tool(server_info, name=tool_name)
