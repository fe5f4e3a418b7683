"""Benchmark of the MCP servers' round trip over stdio (a script that prints figures, not a test).

For each server (profiler, verifier, researcher): start `python -m kernelloop mcp serve NAME` as an
MCP client would, time the start (spawn to initialized), then call its cheap ping
(`profiler_info`, `verifier_info`, `researcher_info`) N times (after a few warm-up calls) and print p50 / p95 / max. Goal: p50 <= 20 ms.
Needs no GPU and no nvcc.

    python benchmarks/mcp_roundtrip.py [--calls 200] [--server researcher] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from datetime import timedelta
from pathlib import Path

import anyio
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

ROOT = Path(__file__).resolve().parent.parent
GOAL_MS = 20.0
WARMUP = 5


def percentile(sorted_values: list[float], q: float) -> float:
    """Nearest-rank percentile of an ascending list."""
    index = max(0, min(len(sorted_values) - 1, int(round(q / 100 * len(sorted_values) + 0.5)) - 1))
    return sorted_values[index]


async def measure(name: str, calls: int, tool: str) -> dict:
    params = StdioServerParameters(command=sys.executable, args=["-m", "kernelloop", "mcp", "serve", name],
                                   env=dict(os.environ), cwd=str(ROOT))
    not_protocol: list[Exception] = []

    async def on_message(message):
        if isinstance(message, Exception):
            not_protocol.append(message)

    started = time.perf_counter()
    with open(os.devnull, "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write, message_handler=on_message,
                                     read_timeout_seconds=timedelta(seconds=60)) as session:
                await session.initialize()
                start_ms = (time.perf_counter() - started) * 1000
                for _ in range(WARMUP):
                    await session.call_tool(tool, {})
                times: list[float] = []
                errors = 0
                for _ in range(calls):
                    t = time.perf_counter()
                    result = await session.call_tool(tool, {})
                    times.append((time.perf_counter() - t) * 1000)
                    errors += bool(result.isError)
    times.sort()
    return {"server": name, "tool": tool, "calls": calls, "start_ms": start_ms,
            "p50_ms": percentile(times, 50), "p95_ms": percentile(times, 95), "max_ms": times[-1],
            "mean_ms": statistics.fmean(times), "tool_errors": errors, "non_protocol_lines": len(not_protocol)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--server", choices=["profiler", "verifier", "researcher"], action="append",
                    help="server to measure (repeatable; default: all three)")
    ap.add_argument("--tool", default=None, help="a tool that takes no arguments (default: each server's ping, NAME_info)")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args()
    rows = []
    print(f"{'server':9} {'start ms':>9} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8}  {args.tool or 'NAME_info'} x {args.calls} over stdio")
    for name in args.server or ["profiler", "verifier", "researcher"]:
        row = anyio.run(measure, name, args.calls, args.tool or f"{name}_info")
        rows.append(row)
        flag = "" if row["p50_ms"] <= GOAL_MS else f"  (over the {GOAL_MS:g} ms goal)"
        extra = "".join([f"  {row['tool_errors']} tool errors" if row["tool_errors"] else "",
                         f"  {row['non_protocol_lines']} non-JSON-RPC lines!" if row["non_protocol_lines"] else ""])
        print(f"{name:9} {row['start_ms']:9.0f} {row['p50_ms']:8.2f} {row['p95_ms']:8.2f} {row['max_ms']:8.2f}{flag}{extra}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
