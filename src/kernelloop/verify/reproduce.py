"""Run a program again on recorded experiments and see whether its outputs are the same bits.

A certificate (`verify-cert`) and a bench reference (`bench check`) both record, per experiment
(seed, stream secret, size), the SHA-256 of what the program produced. Re-running it here tells
whether this machine reproduces them: on the same GPU, driver and nvcc it should, bit for bit;
elsewhere floating-point results may differ, which is information, not a verdict."""

from __future__ import annotations

from pydantic import BaseModel

from ..config import Settings
from ..program.split import split_program
from ..tools.nvcc import build_program, find_toolchain
from ..tools.sandbox import Limits
from .program_run import output_digest, run_program


class RecordedExperiment(BaseModel):
    seed: int
    secret: str = ""  # hex (contract v2); "" for a v1 program
    size_index: int = 0
    size_draw: int | None = None
    output_sha256: str


class Reproduction(BaseModel):
    built: bool
    problem: str = ""  # why it could not be checked ("" when it was)
    differing: list[int] = []  # seeds whose outputs differ from the recorded ones
    checked: int = 0

    @property
    def reproduced(self) -> bool:
        return self.built and not self.problem and not self.differing and self.checked > 0


def reproduce_outputs(program_text: str, name: str, experiments: list[RecordedExperiment], settings: Settings,
                      arch: str) -> Reproduction:
    """Build PROGRAM for ARCH and re-run each recorded experiment, comparing output digests."""
    if not experiments:
        return Reproduction(built=False, problem="no experiments were recorded")
    split = split_program(program_text, name, [])  # self-contained: headers were inlined when it was recorded
    build = build_program(split.editable_unit(), split.harness_unit(), arch=arch, cache_dir=settings.cache_dir,
                          toolchain=find_toolchain(build_flags=settings.verify.build_flags))
    if not build.ok or build.binary is None:
        return Reproduction(built=False, problem=f"the program does not build here ({build.stage})")
    vs = settings.verify
    limits = Limits(wall_timeout_s=vs.run_timeout_s, memory_bytes=vs.memory_limit_bytes,
                    stdout_cap_bytes=vs.stdout_cap_bytes, file_size_bytes=vs.output_dump_max_bytes)
    differing: list[int] = []
    for experiment in experiments:
        run = run_program(build.binary, seed=experiment.seed, limits=limits, size_index=experiment.size_index,
                          size_draw=experiment.size_draw,
                          secret=bytes.fromhex(experiment.secret) if experiment.secret else None)
        if not run.result.ok or output_digest(run) != experiment.output_sha256:
            differing.append(experiment.seed)
    return Reproduction(built=True, differing=differing, checked=len(experiments))
