"""kernelloop's profiler MCP server on stdio: compile_check, resource_usage, profile (GPU), diagnose_report, profiler_info.

The same as `kernelloop mcp serve profiler`; the server itself lives in the installed package
(kernelloop.mcp.profiler). Run:  python mcp_servers/profiler_server.py
`server` is the FastMCP object, for tools that load one from a file (`mcp dev`).
"""

from kernelloop.mcp import build_server, run_stdio

server = build_server("profiler")

if __name__ == "__main__":
    run_stdio(server)
