"""kernelloop's verifier MCP server on stdio: verify (GPU, with progress), static_check, verifier_info.

The same as `kernelloop mcp serve verifier`; the server itself lives in the installed package
(kernelloop.mcp.verifier). Run:  python mcp_servers/verifier_server.py
`server` is the FastMCP object, for tools that load one from a file (`mcp dev`).
"""

from kernelloop.mcp import build_server, run_stdio

server = build_server("verifier")

if __name__ == "__main__":
    run_stdio(server)
