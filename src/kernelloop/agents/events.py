"""What the loop tells its caller while it runs (the CLI renders these; the core never prints)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel

EventKind = Literal["node", "progress", "proposal", "verdict", "info", "done"]


class LoopEvent(BaseModel):
    kind: EventKind
    node: str = ""  # profiler | researcher | optimizer | check | verifier | accept | finish
    iteration: int = 0
    message: str = ""
    data: dict[str, Any] = {}
