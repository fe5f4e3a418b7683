"""`kernelloop bench record`: a kernel's reference, verified against itself before it is kept.

Recording runs the whole verifier with the program as both baseline and candidate (an A/A
check at the suite's regression threshold). That proves the program passes every gate `bench
check` will apply, measures its kernel time with spread on this GPU, and records per
experiment (seed, secret, size) the SHA-256 of its outputs. A program whose A/A check is not
SAME cannot be told apart from a regression by the check either: recording says so."""

from __future__ import annotations

import datetime
import hashlib
import os
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel, ValidationError

from .. import __version__
from ..config import Settings
from ..errors import EnvironmentProblem, InputError
from ..program.split import check_program
from ..tools.gpu import GpuInfo, detect_gpus
from ..verify.gate import verify_sources
from ..verify.regression import RegressionDecision
from ..verify.reproduce import RecordedExperiment
from ..verify.stats import Spread
from .suite import SuiteEntry, suite_entries


class Reference(BaseModel):
    """What `bench record` keeps for one kernel (reference.json, beside the program's copy)."""

    kernel: str
    program: str  # the program's path as the suite gives it
    program_sha256: str  # of the recorded copy (user headers inlined)
    recorded_at: str  # ISO 8601, UTC
    kernelloop_version: str
    gpu: str
    driver: str
    arch: str
    nvcc: str
    contract: int
    kernel_ms: Spread  # shown beside today's figures, never used to decide
    samples_ms: list[float]
    experiments: list[RecordedExperiment]
    self_check: RegressionDecision | None = None  # the A/A check at recording time


class Recorded(BaseModel):
    entry: SuiteEntry
    reference: Reference
    previous: Reference | None = None  # the reference this one replaced
    notes: list[str] = []


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()


def read_reference(entry: SuiteEntry) -> tuple[Reference, str]:
    """A kernel's recorded reference and its program text; one InputError when there is none."""
    if not entry.reference_record.is_file() or not entry.reference_program.is_file():
        raise InputError(f"kernel {entry.name!r} has no recorded reference in {entry.reference_dir}: run "
                         f"`kernelloop bench record {entry.name}` (on the GPU the checks will run on) and commit it")
    return parse_reference(entry, entry.reference_record.read_text(),
                           entry.reference_program.read_text(encoding="utf-8", errors="surrogateescape"),
                           str(entry.reference_record), str(entry.reference_program))


def parse_reference(entry: SuiteEntry, record_text: str, program_text: str, record_where: str,
                    program_where: str) -> tuple[Reference, str]:
    """A reference from its two files' texts (read from the working tree, or from git)."""
    try:
        reference = Reference.model_validate_json(record_text)
    except (ValidationError, ValueError) as exc:
        raise InputError(f"{record_where}: not a kernelloop reference ({str(exc).splitlines()[0]}); "
                         f"record it again with `kernelloop bench record {entry.name}`") from None
    if sha256_text(program_text) != reference.program_sha256:
        raise InputError(f"{program_where}: changed since it was recorded (its SHA-256 is not the one "
                         f"{record_where} names); record it again with `kernelloop bench record {entry.name}`")
    return reference, program_text


def _write_atomically(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(text, encoding="utf-8", errors="surrogateescape")
    os.replace(temporary, path)


def record_reference(entry: SuiteEntry, settings: Settings, gpu: GpuInfo,
                     progress: Callable | None = None) -> Recorded:
    text, _ = check_program(entry.program, settings.include_dirs)
    vs = settings.verify.model_copy(update={"timing_pairs": settings.bench.record_runs,
                                            "max_timing_pairs": max(settings.bench.record_runs, settings.bench.max_pairs),
                                            "seeds": settings.bench.record_seeds,
                                            "confidence": settings.bench.regression_confidence})
    verdict = verify_sources(text, text, settings.model_copy(update={"verify": vs}),
                             baseline_name=str(entry.program), candidate_name=str(entry.program), progress=progress,
                             gpu=gpu, regression=entry.regression_threshold, baseline_include_dirs=[])
    if verdict.regression is None:
        first = next((g for g in verdict.gates if g.status == "fail"), None)
        why = f"{first.gate}: {first.detail}" if first else verdict.summary
        raise InputError(f"{entry.program}: not recorded: checked against itself it fails a gate ({why})")
    notes: list[str] = []
    if verdict.regression.outcome != "same" or not verdict.accepted:
        notes.append(f"checked against itself: {verdict.summary}. `bench check` may not decide on this GPU at a "
                     f"{entry.regression_threshold:.0%} threshold: record again on a quiet GPU, or raise the "
                     "kernel's regression_threshold")
    experiments = [RecordedExperiment(seed=c.seed, secret=c.secret, size_index=c.size_index, size_draw=c.size_draw,
                                      output_sha256=c.baseline_sha256)
                   for c in verdict.checks if c.phase == "correctness" and c.baseline_sha256]
    reference = Reference(
        kernel=entry.name, program=entry.program_as_given, program_sha256=sha256_text(text),
        recorded_at=datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        kernelloop_version=__version__, gpu=gpu.name, driver=gpu.driver_version, arch=verdict.arch,
        nvcc=verdict.nvcc_version, contract=verdict.contract, kernel_ms=Spread.of(verdict.baseline_kernel_ms),
        samples_ms=verdict.baseline_kernel_ms, experiments=experiments, self_check=verdict.regression)
    previous = None
    if entry.reference_record.is_file():
        try:
            previous = Reference.model_validate_json(entry.reference_record.read_text())
        except (ValidationError, ValueError):
            notes.append(f"{entry.reference_record} was not a readable reference; replaced")
    _write_atomically(entry.reference_program, text)
    _write_atomically(entry.reference_record, reference.model_dump_json(indent=2) + "\n")
    return Recorded(entry=entry, reference=reference, previous=previous, notes=notes)


def record_suite(settings: Settings, *, names: list[str] | None = None, progress: Callable | None = None,
                 on_kernel: Callable[[Recorded], None] | None = None) -> list[Recorded]:
    """Record every kernel of the suite (or those named), each program checked before any GPU work."""
    entries = suite_entries(settings, names=names)
    for entry in entries:
        check_program(entry.program, settings.include_dirs)
    gpus = detect_gpus()
    if not gpus:
        raise EnvironmentProblem("bench record needs a CUDA GPU (the reference is measured); run `kernelloop doctor`")
    recorded = []
    for entry in entries:
        recorded.append(record_reference(entry, settings, gpus[0], progress))
        if on_kernel is not None:
            on_kernel(recorded[-1])
    return recorded
