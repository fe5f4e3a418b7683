"""One interface for every optimizer: a request in, one candidate editable part out.

The graph's optimizer node builds an :class:`OptimizeRequest` (the program, the current best
editable part, the profiler's diagnosis, research notes, what failed before) and calls
:meth:`Optimizer.propose`. The answer is a :class:`Proposal`: the complete editable part
of a candidate (never a diff, never elided), a short label of the approach, and for LLM
optimizers the prompt, the raw response and token counts. Every proposal goes through the
same verifier, whichever optimizer wrote it.
"""

from __future__ import annotations

from typing import Literal, Protocol, runtime_checkable

from pydantic import BaseModel, Field

from ..profiler.diagnosis import Diagnosis


class ResearchNote(BaseModel):
    """One passage the researcher found for the diagnosis."""

    title: str
    source: str  # where it comes from (note id, file, URL)
    text: str
    score: float = 0.0


FailureKind = Literal["compile", "policy", "correctness", "not_faster", "timing", "run_failed", "memcheck",
                      "invalid_response", "other"]


class FailedAttempt(BaseModel):
    """Anti-context: an attempt that did not clear the bar, and why."""

    iteration: int
    approach: str  # the proposal's label
    kind: FailureKind
    reason: str  # one line: the verdict's summary
    excerpt: str = ""  # compile errors, first mismatching values, or the measured speedup
    speedup: float | None = None  # measured, when it got that far
    source: str = ""  # the candidate's editable part (LLM prompts may show its start)


class PastAttempt(BaseModel):
    """Memory across runs: what an earlier run of the same kernel tried."""

    run_id: str
    approach: str
    accepted: bool
    reason: str
    speedup: float | None = None


class OptimizeRequest(BaseModel):
    kernel_name: str  # the program's file stem
    program: str  # the whole baseline program (preamble + editable part + frozen harness)
    baseline_editable: str  # the baseline's editable part
    current_editable: str  # what to improve: the baseline's, or the best accepted so far
    preamble: str = ""  # includes and macros shared by both translation units (frozen)
    harness: str = ""  # the frozen harness (read-only context: how the launcher is called)
    exported: list[str] = []  # declarations of the editable functions the harness calls (keep them)
    diagnosis: Diagnosis | None = None
    research: list[ResearchNote] = []
    failed_attempts: list[FailedAttempt] = []  # this run's, oldest first
    memory: list[PastAttempt] = []  # earlier runs of this kernel
    compile_errors: str | None = None  # inner compile-fix loop: nvcc's errors for `previous_source`
    previous_source: str | None = None  # the candidate those errors belong to
    iteration: int = 1
    gpu_name: str = ""
    arch: str = "sm_90"
    threshold: float = 1.2
    best_speedup: float = 1.0  # of current_editable over the baseline


class TokenUsage(BaseModel):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0


class Message(BaseModel):
    role: Literal["system", "user", "assistant"]
    content: str


class Proposal(BaseModel):
    source: str  # the complete candidate editable part
    approach: str  # short label, e.g. "register-blocked tiles BM=64 BN=64 BK=16 TM=4 TN=4"
    optimizer: str  # which optimizer wrote it: "offline", "nim", "openai"
    prompt: list[Message] = []  # LLM optimizers: the messages sent
    response: str = ""  # LLM optimizers: the raw answer
    tokens: TokenUsage | None = None
    model: str = ""
    thinking_s: float = 0.0  # wall time inside the optimizer (network and model time included)
    notes: list[str] = Field(default_factory=list)  # e.g. what the response cleaner removed


class NoMoreCandidates(Exception):
    """The optimizer has nothing left to try (the offline library is exhausted for this kernel)."""


class InvalidResponse(Exception):
    """An LLM's answer could not be turned into a candidate (no code, elided, non-ASCII, ...)."""

    def __init__(self, message: str, *, response: str = "", prompt: list[Message] | None = None,
                 tokens: TokenUsage | None = None, thinking_s: float = 0.0) -> None:
        super().__init__(message)
        self.response = response
        self.prompt = prompt or []
        self.tokens = tokens
        self.thinking_s = thinking_s


@runtime_checkable
class Optimizer(Protocol):
    name: str  # "offline" | "nim" | "openai"

    def propose(self, request: OptimizeRequest) -> Proposal:
        """One candidate for `request`. Raises NoMoreCandidates, InvalidResponse, or a KernelloopError
        (a problem the user can fix: bad key, unknown model) — nothing else for expected failures."""
        ...
