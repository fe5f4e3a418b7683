"""The verifier MCP server: the verify gate, and its static part on its own.

Tools: verifier_info, verify (needs a GPU), static_check (policy scan and builds; no GPU).
"""

from pathlib import Path
from typing import Annotated

from mcp.server.fastmcp import Context
from pydantic import Field

from ..verify.verdict import StaticCheck, Verdict
from .common import KernelloopMCP, ProgressBridge, add_server_info, new_server, run_tool

NAME = "kernelloop-verifier"
TOOLS = ["verify", "static_check"]
INSTRUCTIONS = (
    "Judge a candidate rewrite of a CUDA program's editable part against its baseline. static_check "
    "(no GPU) says whether the candidate passes the source/object policy and builds with the baseline's "
    "frozen harness. verify (GPU) runs the whole gate: policy, build, correctness on fresh seeds, memcheck, "
    "an independent timing audit, and a speedup with a confidence interval; it reports progress. "
    "Paths are on the machine this server runs on."
)

BaselinePath = Annotated[str, Field(description=(
    "Path of the baseline .cu program (follows docs/contract.md) on the server's machine."))]
CandidateSource = Annotated[str, Field(description=(
    "The candidate's source text: its editable part only, or a whole program (its main() is ignored)."))]


def _server_settings():
    """The server's settings: the run's own [verify] settings when kernelloop optimize started it,
    else its folder's and environment's."""
    from ..config import load_settings, run_verify_settings

    settings = load_settings()
    own = run_verify_settings()
    return settings if own is None else settings.model_copy(update={"verify": own})


def _verify(baseline_path: str, candidate_source: str | None, candidate_path: str | None,
            threshold: float | None, timing_pairs: int | None, seeds: int | None, progress: ProgressBridge) -> Verdict:
    from ..config import load_settings
    from ..errors import InputError
    from ..program.split import read_program
    from ..verify import gate  # looked up at call time: tests replace gate.verify_files

    if (candidate_source is None) == (candidate_path is None):
        raise InputError("give the candidate as candidate_source or as candidate_path (exactly one)")
    # A call may only tighten the server's settings: the caller may be the party being judged.
    settings = _server_settings()
    asked = {k: v for k, v in (("threshold", threshold), ("timing_pairs", timing_pairs), ("seeds", seeds))
             if v is not None}
    if asked:
        load_settings(asked, given_as="argument {}")  # each value valid on its own: one line if not
        looser = [f"{k} {v} (the server's is {getattr(settings.verify, k)})" for k, v in asked.items()
                  if v < getattr(settings.verify, k)]
        if looser:
            raise InputError(f"argument {', '.join(looser)}: a call may only tighten the gate, never loosen it")
        settings = settings.model_copy(update={"verify": settings.verify.model_copy(update=asked)})
    if candidate_path is not None:
        return gate.verify_files(Path(baseline_path), Path(candidate_path), settings, progress=progress)
    assert candidate_source is not None
    return gate.verify_sources(read_program(Path(baseline_path)), candidate_source, settings,
                               baseline_name=baseline_path, candidate_name="candidate_source", progress=progress)


def _one_of(timing_pairs: int | None, runs: int | None) -> int | None:
    """The timing_pairs argument, given under its name or its former one (runs), not both."""
    from ..errors import InputError

    if timing_pairs is not None and runs is not None:
        raise InputError("argument runs is the former name of timing_pairs; give timing_pairs alone")
    return runs if timing_pairs is None else timing_pairs


def _static_check(baseline_path: str, candidate_source: str, arch: str | None) -> StaticCheck:
    from ..program.split import read_program
    from ..verify.static_check import check_static_sources

    # The same settings as verify (the run's own when kernelloop optimize started the server), so the
    # pre-check judges as verify will; the arch asked for builds for another target only.
    settings = _server_settings()
    if arch:
        settings = settings.model_copy(update={"verify": settings.verify.model_copy(update={"arch": arch})})
    return check_static_sources(read_program(Path(baseline_path)), candidate_source, settings,
                                baseline_name=baseline_path, candidate_name="candidate_source")


def build_server() -> KernelloopMCP:
    server = new_server(NAME, INSTRUCTIONS)

    @server.tool()
    async def verify(
        baseline_path: BaselinePath,
        candidate_source: Annotated[str | None, Field(description=(
            "The candidate's source text (editable part or whole program). Give this or candidate_path."
        ))] = None,
        candidate_path: Annotated[str | None, Field(description=(
            "Path of the candidate .cu on the server's machine. Give this or candidate_source."))] = None,
        threshold: Annotated[float | None, Field(description="Minimum speedup to accept (default 1.2).")] = None,
        timing_pairs: Annotated[int | None, Field(description=(
            "Timed runs per program, interleaved in (candidate, baseline) pairs (default 7)."))] = None,
        runs: Annotated[int | None, Field(description="The former name of timing_pairs (give one).")] = None,
        seeds: Annotated[int | None, Field(description="Fresh seeds for the correctness check (default 2).")] = None,
        ctx: Context | None = None,
    ) -> Verdict:
        """Accept the candidate only if it passes the policy, builds, matches the baseline's results on
        fresh seeds, is clean under memcheck, is timed honestly and is faster by the threshold. Needs a GPU.

        Takes minutes; reports progress (stage: message) while it runs. Returns the verdict: accepted,
        a one-line summary, the reasons for a rejection, each gate's result and the timings."""
        bridge = ProgressBridge(ctx)
        return await run_tool("verify", lambda: _verify(baseline_path, candidate_source, candidate_path,
                                                         threshold, _one_of(timing_pairs, runs), seeds, bridge),
                              progress=bridge)

    @server.tool()
    async def static_check(
        baseline_path: BaselinePath,
        candidate_source: CandidateSource,
        arch: Annotated[str | None, Field(description=(
            "nvcc architecture; default: the setting, else the visible GPU's, else sm_86."))] = None,
    ) -> StaticCheck:
        """Check a candidate without running anything: the source and object policy (no printing, no
        timing tricks, no syscalls, no file access, ...) and the build with the baseline's frozen
        harness. No GPU needed. ok means verify would go on to run it."""
        return await run_tool("static_check", lambda: _static_check(baseline_path, candidate_source, arch))

    add_server_info(server, TOOLS)
    return server
