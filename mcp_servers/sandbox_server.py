"""kernelloop's sandbox MCP server on stdio: verify (GPU, with progress), static_check, sandbox_info.

The same as `kernelloop mcp serve sandbox`; the server itself lives in the installed package
(kernelloop.mcp.sandbox). Run:  python mcp_servers/sandbox_server.py
`server` is the FastMCP object, for tools that load one from a file (`mcp dev`).
"""

from kernelloop.mcp import build_server, run_stdio

server = build_server("sandbox")

if __name__ == "__main__":
    run_stdio(server)
