"""kernelloop's rag MCP server on stdio: search, search_for_diagnosis, corpus_stats, rag_info.

The same as `kernelloop mcp serve rag`; the server itself lives in the installed package
(kernelloop.mcp.rag). Run:  python mcp_servers/rag_server.py
`server` is the FastMCP object, for tools that load one from a file (`mcp dev`).
"""

from kernelloop.mcp import build_server, run_stdio

server = build_server("rag")

if __name__ == "__main__":
    run_stdio(server)
