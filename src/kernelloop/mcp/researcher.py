"""The researcher MCP server: search the corpus of CUDA optimization knowledge.

Tools: researcher_info, search, search_for_diagnosis, corpus_stats. The corpus engine
(kernelloop.corpus) is imported inside the tools, so the server starts, and says what
is wrong, even where the engine or its dependencies are missing.
"""

import dataclasses
import importlib
from typing import Annotated, Any

from pydantic import BaseModel, Field

from .common import KernelloopMCP, add_server_info, new_server, run_tool

NAME = "kernelloop-researcher"
TOOLS = ["search", "search_for_diagnosis", "corpus_stats"]
INSTRUCTIONS = (
    "Search kernelloop's corpus of CUDA optimization knowledge (guides, worked examples, exemplar kernels). "
    "search takes free text; search_for_diagnosis takes the JSON of a profiler Diagnosis and finds passages "
    "about its bottleneck; corpus_stats says what the corpus holds."
)

LIMIT = Annotated[int, Field(ge=1, le=50, description="How many hits to return (the CLI's --limit).")]
# `k`, the name these tools took before they matched the CLI's --limit, still accepted (it wins where both are given)
OLDER_K = Annotated[int | None, Field(ge=1, le=50, description="Older name of limit.")]


class SearchResult(BaseModel):
    query: str  # the query as given, or the diagnosis's summary
    limit: int
    hits: list[dict[str, Any]]  # best first; the fields are the corpus engine's Hit


def _corpus(function: str) -> Any:
    """One function of the corpus engine's API, imported now (not when the server starts)."""
    from ..errors import EnvironmentProblem

    try:
        corpus = importlib.import_module("kernelloop.corpus")
    except ImportError as exc:
        if exc.name == "kernelloop.corpus":
            raise EnvironmentProblem("the corpus engine (kernelloop.corpus) is not installed here; "
                                     "reinstall kernelloop") from exc
        raise EnvironmentProblem(f"the corpus engine cannot be imported: {exc}") from exc
    found = getattr(corpus, function, None)
    if not callable(found):
        raise EnvironmentProblem(f"the corpus engine (kernelloop.corpus) has no {function}(); "
                                 "it does not match this server's version of kernelloop")
    return found


def _plain(value: Any) -> dict[str, Any]:
    """A hit or stats object as JSON-ready data, whatever the engine returns."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _jsonable(dataclasses.asdict(value))
    if isinstance(value, dict):
        return _jsonable(value)
    return {"value": str(value)}


def _jsonable(data: dict[str, Any]) -> dict[str, Any]:
    from pydantic import TypeAdapter

    return TypeAdapter(dict[str, Any]).dump_python(data, mode="json")


def _search(query: str, limit: int) -> SearchResult:
    hits = _corpus("search")(query, k=limit)
    return SearchResult(query=query, limit=limit, hits=[_plain(h) for h in hits])


def _search_for_diagnosis(diagnosis_json: str, limit: int) -> SearchResult:
    from pydantic import ValidationError

    from ..errors import InputError
    from ..profiler.diagnosis import Diagnosis

    try:
        diagnosis = Diagnosis.model_validate_json(diagnosis_json)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(top level)"
        raise InputError(f"diagnosis_json is not a Diagnosis (the output of diagnose_report or profile): "
                         f"{where}: {first['msg']}") from None
    hits = _corpus("search_for_diagnosis")(diagnosis, k=limit)
    return SearchResult(query=diagnosis.summary, limit=limit, hits=[_plain(h) for h in hits])


def build_server() -> KernelloopMCP:
    server = new_server(NAME, INSTRUCTIONS)

    @server.tool()
    async def search(
        query: Annotated[str, Field(description="What to look for, in words (e.g. 'shared memory bank conflicts').")],
        limit: LIMIT = 5,
        k: OLDER_K = None,
    ) -> SearchResult:
        """Search the corpus of CUDA optimization knowledge; the best `limit` passages, each with its source."""
        return await run_tool("search", lambda: _search(query, k or limit))

    @server.tool()
    async def search_for_diagnosis(
        diagnosis_json: Annotated[str, Field(description=(
            "A Diagnosis as JSON: the structured output of the profiler's diagnose_report or profile.diagnosis."))],
        limit: LIMIT = 5,
        k: OLDER_K = None,
    ) -> SearchResult:
        """Passages on how to fix the bottleneck a profiler diagnosis found (its class, subtype and findings)."""
        return await run_tool("search_for_diagnosis", lambda: _search_for_diagnosis(diagnosis_json, k or limit))

    @server.tool()
    async def corpus_stats() -> dict[str, Any]:
        """What the corpus holds: documents, chunks, sources, index state."""
        return await run_tool("corpus_stats", lambda: _plain(_corpus("corpus_stats")()))

    add_server_info(server, TOOLS)
    return server
