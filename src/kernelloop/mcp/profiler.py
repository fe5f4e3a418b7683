"""The profiler MCP server: build, resource usage, Nsight Compute profile, diagnosis.

Tools: profiler_info, compile_check, resource_usage, profile, diagnose_report.
Only `profile` needs a GPU; the rest need nvcc (diagnose_report not even that).
"""

from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, Field

from ..config import Settings
from ..profiler.diagnosis import Diagnosis
from ..profiler.run import ProfileResult
from ..tools.resources import ResourceUsage
from .common import KernelloopMCP, add_server_info, new_server, run_tool

NAME = "kernelloop-profiler"
TOOLS = ["compile_check", "resource_usage", "profile", "diagnose_report"]
INSTRUCTIONS = (
    "Inspect CUDA programs. compile_check and resource_usage need only nvcc (no GPU): does a source build, "
    "and how many registers / how much shared memory each kernel uses and what occupancy that allows. "
    "profile runs Nsight Compute on a GPU and diagnoses the hot kernel; diagnose_report diagnoses an "
    "existing .ncu-rep without a GPU. Paths are on the machine this server runs on."
)
LOG_LINES = 60

Source = Annotated[str, Field(description="The whole CUDA source text (.cu), not a path.")]
Arch = Annotated[str | None, Field(description=(
    "nvcc architecture, e.g. sm_90 (H100/H200), sm_86 (A10); default: the verify.arch setting, else the "
    "visible GPU's, else sm_86 (as `kernelloop verify` builds it)."))]
SourceName = Annotated[str, Field(description=(
    "The file name the source came from (e.g. vectorAdd.cu), for messages such as the `kernelloop init` "
    "command that wraps it."))]


class CompileCheck(BaseModel):
    """Whether a CUDA program builds, and how."""

    ok: bool
    arch: str
    mode: Literal["contract", "whole program"]  # contract: editable part + harness, as verify builds it
    contract_ok: bool  # the source follows docs/contract.md (an editable part, a main below it)
    contract_problem: str | None = None  # why not, when it does not (then it is built as a whole program)
    split_mode: str | None = None  # "markers" | "default" when contract_ok
    stage: str  # the build step reached: "done", or where it failed
    log: str = ""  # the compiler's output (its last lines)
    flags: list[str] = []
    cached: bool = False
    seconds: float = 0.0


# The resource report's models live with the one function that makes them (tools.resources).


def _tail(text: str, lines: int = LOG_LINES) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def _arch(arch: str | None) -> tuple[str, Settings]:
    """The architecture asked for, else the one verify builds for (choose_arch), and the settings."""
    from ..config import load_settings
    from ..verify.static_check import choose_arch

    settings = load_settings({"arch": arch} if arch else None, given_as="argument {}")
    return choose_arch(settings)[0], settings


def _compile_check(source: str, arch: str | None, name: str) -> CompileCheck:
    from ..errors import InputError
    from ..program.split import require_cuda, split_program
    from ..tools.nvcc import build_program, build_whole_program, find_toolchain

    require_cuda(source, name)
    arch, settings = _arch(arch)
    toolchain = find_toolchain(build_flags=settings.verify.build_flags)
    try:
        split = split_program(source, name)
    except InputError as exc:
        build = build_whole_program(source, arch=arch, cache_dir=settings.cache_dir, toolchain=toolchain)
        return CompileCheck(ok=build.ok, arch=arch, mode="whole program", contract_ok=False,
                            contract_problem=str(exc), stage=build.stage, log=_tail(build.log), flags=build.flags,
                            cached=build.cached, seconds=build.seconds)
    build = build_program(split.editable_unit(), split.harness_unit(), arch=arch, cache_dir=settings.cache_dir,
                          toolchain=toolchain)
    return CompileCheck(ok=build.ok, arch=arch, mode="contract", contract_ok=True, split_mode=split.mode,
                        stage=build.stage, log=_tail(build.log), flags=build.flags, cached=build.cached,
                        seconds=build.seconds)


def _resource_usage(source: str, arch: str | None, block_size: int | None) -> ResourceUsage:
    from ..program.split import require_cuda
    from ..tools.resources import resource_usage

    require_cuda(source, "source")
    return resource_usage(source, arch=_arch(arch)[0], block_size=block_size)


def _profile(path: str, kernel: str | None, section_set: Literal["full", "fast"]) -> ProfileResult:
    from ..config import load_settings
    from ..errors import EnvironmentProblem
    from ..profiler.run import profile_file
    from ..tools.gpu import detect_gpus

    # Checked first: without a GPU, whatever else is missing (ncu, ...) is beside the point.
    if not detect_gpus():
        raise EnvironmentProblem("profile needs a CUDA GPU and none is visible here (nvidia-smi); "
                                 "diagnose_report reads an existing .ncu-rep without one")
    return profile_file(Path(path), load_settings(), kernel=kernel, section_set=section_set)


def _diagnose(report_path: str, kernel: str | None) -> Diagnosis:
    from ..errors import InputError
    from ..profiler.run import diagnose_report

    path = Path(report_path)
    if not path.is_file():
        raise InputError(f"{report_path}: no such file (the path is read on the server's machine)")
    return diagnose_report(path, kernel=kernel)


def build_server() -> KernelloopMCP:
    server = new_server(NAME, INSTRUCTIONS)

    @server.tool()
    async def compile_check(source: Source, arch: Arch = None, filename: SourceName = "program.cu") -> CompileCheck:
        """Does this CUDA program build? No GPU needed.

        A program that follows the kernelloop contract (an editable part with its kernels, a main()
        harness below it) is built the way verify builds it: two translation units, the editable
        part's symbols contained. Anything else is built as one whole program. Returns ok, the
        build stage reached and the compiler log."""
        return await run_tool("compile_check", lambda: _compile_check(source, arch, filename))

    @server.tool()
    async def resource_usage(
        source: Source,
        arch: Arch = None,
        block_size: Annotated[int | None, Field(ge=1, le=1024, description=(
            "Threads per block of the launch; omit for a table of 64..1024 threads."))] = None,
    ) -> ResourceUsage:
        """Registers, shared memory, stack and spills per kernel (ptxas -v), and theoretical occupancy.

        No GPU needed. Occupancy follows NVIDIA's occupancy calculator for `arch`; the limiting
        factors (registers, shared memory, warps, blocks, barriers) are named."""
        return await run_tool("resource_usage", lambda: _resource_usage(source, arch, block_size))

    @server.tool()
    async def profile(
        path: Annotated[str, Field(description="Path of the .cu program on the server's machine.")],
        kernel: Annotated[str | None, Field(description=(
            "Regex on the kernel name to profile; default: the kernel with the most GPU time."))] = None,
        section_set: Annotated[Literal["full", "fast"], Field(description=(
            "Nsight Compute sections: full (every section) or fast (enough for the diagnosis, quicker)."))] = "full",
    ) -> ProfileResult:
        """Profile one launch of the program's hot kernel with Nsight Compute and diagnose it. Needs a GPU.

        Builds the program, finds the hot kernel, runs ncu on the launch of it that takes the time
        (the heaviest launch configuration, past its warm-up launch), and returns the
        diagnosis (primary bottleneck, findings with the fix to try), the kept .ncu-rep path, ptxas
        resources and occupancy."""
        return await run_tool("profile", lambda: _profile(path, kernel, section_set))

    @server.tool()
    async def diagnose_report(
        report_path: Annotated[str, Field(description="Path of an .ncu-rep file on the server's machine.")],
        kernel: Annotated[str | None, Field(description=(
            "Regex on the kernel name when the report holds several kernels."))] = None,
    ) -> Diagnosis:
        """Diagnose an existing Nsight Compute report (.ncu-rep). No GPU needed.

        Returns the primary bottleneck (memory-, compute-, latency- or launch-bound), the subtype,
        a one-line summary with the fix, findings with their evidence, NVIDIA's own rule results
        and the roofline position."""
        return await run_tool("diagnose_report", lambda: _diagnose(report_path, kernel))

    add_server_info(server, TOOLS)
    return server
