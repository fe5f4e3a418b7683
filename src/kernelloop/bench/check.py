"""`kernelloop bench check`: each kernel of the suite against its recorded reference, here and now.

Per kernel, the recorded reference program is the verifier's baseline and the current program
its candidate: every gate applies (a kernel that became wrong fails, whatever its speed), then
the regression rule (verify/regression.py) on interleaved pairs measured in this run, on this
GPU. The reference's recorded figures (another day, maybe another GPU) are shown, never used
to decide. Exit codes are distinct so a CI job can act on them (see `exit_code`)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Literal

from pydantic import BaseModel

from ..config import Settings
from ..errors import EnvironmentProblem, InputError, KernelloopError
from ..program.scanner import normalized
from ..program.split import check_program, split_program
from ..tools.gpu import GpuInfo, detect_gpus
from ..verify.gate import verify_sources
from ..verify.regression import RegressionDecision
from ..verify.reproduce import Reproduction, reproduce_outputs
from ..verify.verdict import Reason, Verdict
from .reference import Reference, read_reference
from .suite import SuiteEntry, suite_entries

Status = Literal["same", "faster", "slower", "failed", "ambiguous", "error"]

EXIT_OK = 0  # every kernel SAME or FASTER
EXIT_REGRESSION = 1  # a kernel SLOWER, or failing a correctness (or any other) gate
EXIT_USAGE = 2  # a usage or environment problem (also: a kernel that could not be checked)
EXIT_UNDECIDED = 3  # no regression found, but a kernel was AMBIGUOUS or the GPU disturbed: a CI may retry


class KernelCheck(BaseModel):
    name: str
    program: str
    status: Status
    summary: str  # one line: the verdict and its figures, or what failed
    regression_threshold: float
    decision: RegressionDecision | None = None
    reference: Reference | None = None  # as recorded: its figures are shown, never used to decide
    reproduction: Reproduction | None = None  # whether the reference program reproduces its recorded outputs here
    reference_varies: bool = False  # its results vary between runs (float atomics): no bit-for-bit match expected
    verdict: Verdict | None = None
    wall_s: float = 0.0


class BenchCheck(BaseModel):
    gpu: GpuInfo
    kernels: list[KernelCheck]
    wall_s: float

    @property
    def exit_code(self) -> int:
        statuses = {k.status for k in self.kernels}
        if statuses & {"slower", "failed"}:
            return EXIT_REGRESSION
        if "error" in statuses:
            return EXIT_USAGE
        if "ambiguous" in statuses:
            return EXIT_UNDECIDED
        return EXIT_OK


def harness_changed(reference_text: str, current_text: str, name: str) -> bool:
    """Whether the frozen code (preamble and harness) differs: then the reference measures another
    experiment (other sizes, other inputs) and must be recorded again."""
    before, after = split_program(reference_text, name), split_program(current_text, name)
    return normalized(before.preamble + before.harness) != normalized(after.preamble + after.harness)


def status_of(verdict: Verdict) -> Status:
    """The kernel's status from its verdict: any gate but speed failing is a failure."""
    reasons = set(verdict.reasons)
    if reasons - {Reason.slower, Reason.inconclusive}:
        return "failed"
    if Reason.slower in reasons:
        return "slower"
    if Reason.inconclusive in reasons or verdict.regression is None:
        return "ambiguous"
    return verdict.regression.outcome


def _prepare(entries: list[SuiteEntry], settings: Settings) -> list[tuple[SuiteEntry, Reference, str, str]]:
    """Everything a check needs, read and checked before any GPU work (one InputError if not)."""
    prepared = []
    for entry in entries:
        reference, reference_text = read_reference(entry)
        current_text, _ = check_program(entry.program, settings.include_dirs)
        if harness_changed(reference_text, current_text, str(entry.program)):
            raise InputError(f"{entry.program}: its harness (the code outside the editable part) changed since "
                             f"kernel {entry.name!r} was recorded, so the reference measures another experiment: "
                             f"record it again with `kernelloop bench record {entry.name}`")
        prepared.append((entry, reference, reference_text, current_text))
    return prepared


def check_kernel(entry: SuiteEntry, reference: Reference, reference_text: str, current_text: str,
                 settings: Settings, gpu: GpuInfo, progress: Callable | None = None) -> KernelCheck:
    bench = settings.bench
    started = time.monotonic()
    vs = settings.verify.model_copy(update={"runs": bench.pairs, "max_runs": max(bench.pairs, bench.max_pairs),
                                            "confidence": bench.regression_confidence})
    result = KernelCheck(name=entry.name, program=str(entry.program), status="error", summary="",
                         regression_threshold=entry.regression_threshold, reference=reference)
    try:
        verdict = verify_sources(reference_text, current_text, settings.model_copy(update={"verify": vs}),
                                 baseline_name=f"{entry.name} reference ({entry.reference_program})",
                                 candidate_name=str(entry.program), progress=progress, gpu=gpu,
                                 regression=entry.regression_threshold)
    except KernelloopError as exc:  # the reference itself cannot be run here: this kernel is unchecked
        result.summary = str(exc)
        result.wall_s = time.monotonic() - started
        return result
    result.verdict, result.decision, result.status = verdict, verdict.regression, status_of(verdict)
    if result.status in ("same", "faster", "slower") and verdict.regression is not None:
        result.summary = verdict.regression.describe()
    else:
        result.summary = verdict.summary
    result.reference_varies = any("vary between runs" in note for note in verdict.notes)
    result.reproduction = reproduce_outputs(reference_text, str(entry.reference_program), reference.experiments,
                                            settings, verdict.arch)
    result.wall_s = time.monotonic() - started
    return result


def check_suite(settings: Settings, *, names: list[str] | None = None, progress: Callable | None = None,
                on_kernel: Callable[[KernelCheck], None] | None = None) -> BenchCheck:
    started = time.monotonic()
    prepared = _prepare(suite_entries(settings, names=names), settings)
    gpus = detect_gpus()
    if not gpus:
        raise EnvironmentProblem("bench check needs a CUDA GPU; run `kernelloop doctor`")
    results = []
    for entry, reference, reference_text, current_text in prepared:
        result = check_kernel(entry, reference, reference_text, current_text, settings, gpus[0], progress)
        results.append(result)
        if on_kernel is not None:
            on_kernel(result)
    return BenchCheck(gpu=gpus[0], kernels=results, wall_s=time.monotonic() - started)
