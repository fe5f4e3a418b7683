"""What `kernelloop optimize` checks before anything heavy starts: the program follows the
contract, and a GPU is there to profile and verify on.

Light on purpose (no LangGraph, no MCP): the CLI calls it first, so a machine without a GPU
hears so in well under a second, before the agent loop and its servers are even imported."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..config import Settings
from ..errors import EnvironmentProblem
from ..program.split import ProgramSplit, check_program
from ..tools.gpu import detect_gpus

NO_GPU = ("optimize needs a CUDA GPU to profile and verify, and none is visible here (nvidia-smi); "
          "`kernelloop doctor` explains what is missing")


def _arch(settings: Settings, require_gpu: bool) -> tuple[str, str]:
    """(arch, GPU name) of the GPU the run will verify on."""
    gpus = detect_gpus()
    if not gpus:
        if require_gpu:
            raise EnvironmentProblem(NO_GPU)
        from ..verify.static_check import choose_arch  # the arch every command builds for without a GPU

        return choose_arch(settings)[0], ""
    return settings.verify.arch or gpus[0].arch, gpus[0].name


def require_gpu() -> None:
    """One line, exit code 2, when no GPU is visible (a resumed run checks this before loading its run)."""
    if not detect_gpus():
        raise EnvironmentProblem(NO_GPU)


@dataclass(frozen=True)
class CheckedInput:
    path: Path
    text: str
    split: ProgramSplit
    arch: str
    gpu: str  # the GPU's name ("" when none is required and none is visible)


def check_inputs(path: Path, settings: Settings, *, require_gpu: bool = True) -> CheckedInput:
    """The program's text and split, and the GPU's arch and name; each problem a user can fix
    is one clear error, raised before anything starts (servers, optimizer, GPU time)."""
    text, split = check_program(path)
    arch, gpu = _arch(settings, require_gpu)
    return CheckedInput(path=path, text=text, split=split, arch=arch, gpu=gpu)
