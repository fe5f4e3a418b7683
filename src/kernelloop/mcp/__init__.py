"""kernelloop's MCP tool servers: profiler, verifier and researcher, each a thin shell over the library,
named for the agent whose tools it serves.

    kernelloop mcp serve profiler|verifier|researcher      (stdio)

The names before 2026-12 (`sandbox` for the verifier, `rag` for the researcher) still start them.

`build_server(name)` returns the FastMCP server (for in-process use and tests);
`serve(name)` runs it on stdio until the client closes stdin.

On stdio, stdout belongs to the protocol: `run_stdio` keeps private copies of the
protocol's stdin and stdout and points file descriptors 0 and 1 at /dev/null and stderr,
so nothing else (a stray print, a child process, a C library) can read the client's
requests or write into the stream. Logs go to stderr.
"""

from __future__ import annotations

import logging
import os
import sys
from io import TextIOWrapper
from typing import TYPE_CHECKING

from ..errors import InputError

if TYPE_CHECKING:
    from .common import KernelloopMCP

SERVER_NAMES = ("profiler", "verifier", "researcher")
SERVER_ALIASES = {"sandbox": "verifier", "rag": "researcher"}  # the names before 2026-12


def server_name(name: str) -> str:
    """NAME as the servers are called now (an older name mapped), or one line saying which exist."""
    name = SERVER_ALIASES.get(name, name)
    if name not in SERVER_NAMES:
        raise InputError(f"unknown MCP server {name!r}; use one of: {', '.join(SERVER_NAMES)}")
    return name


def build_server(name: str) -> KernelloopMCP:
    name = server_name(name)
    if name == "profiler":
        from .profiler import build_server as build
    elif name == "verifier":
        from .verifier import build_server as build
    else:
        from .researcher import build_server as build
    return build()


def configure_logging() -> None:
    """Every log record to stderr, at KERNELLOOP_MCP_LOG_LEVEL (default WARNING)."""
    from ..config import environment_value

    level = (environment_value("KERNELLOOP_MCP_LOG_LEVEL") or "WARNING").upper()
    level = level if level in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL") else "WARNING"
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s: %(message)s"))
    handler.setLevel(level)  # also for libraries that set their own loggers' levels lower
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)


def serve(name: str) -> None:
    """Run the named server on stdio until the client closes the connection."""
    run_stdio(build_server(name))


def run_stdio(server: KernelloopMCP) -> None:
    import anyio
    from mcp.server.stdio import stdio_server

    configure_logging()
    # The protocol keeps private descriptors; 0 and 1 become /dev/null and stderr.
    proto_in = os.fdopen(os.dup(sys.stdin.fileno()), "rb")
    proto_out = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, sys.stdin.fileno())
    os.close(devnull)
    sys.stdout.flush()
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())

    async def main() -> None:
        stdin = anyio.wrap_file(TextIOWrapper(proto_in, encoding="utf-8", errors="replace"))
        stdout = anyio.wrap_file(TextIOWrapper(proto_out, encoding="utf-8"))
        lowlevel = server._mcp_server  # what FastMCP.run_stdio_async runs, with our streams
        async with stdio_server(stdin=stdin, stdout=stdout) as (read_stream, write_stream):
            await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())

    try:
        anyio.run(main)
    except KeyboardInterrupt:
        pass
