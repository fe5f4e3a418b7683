"""kernelloop's researcher MCP server on stdio: search, search_for_diagnosis, corpus_stats, researcher_info.

The same as `kernelloop mcp serve researcher`; the server itself lives in the installed package
(kernelloop.mcp.researcher). Run:  python mcp_servers/researcher_server.py
`server` is the FastMCP object, for tools that load one from a file (`mcp dev`).
"""

from kernelloop.mcp import build_server, run_stdio

server = build_server("researcher")

if __name__ == "__main__":
    run_stdio(server)
