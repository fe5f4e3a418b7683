"""`kernelloop bench check`: each kernel of the suite against its recorded reference, here and now.

Per kernel, the recorded reference program is the verifier's baseline and the current program
its candidate: every gate applies (a kernel that became wrong fails, whatever its speed), then
the regression rule (verify/regression.py) on interleaved pairs measured in this run, on this
GPU. The reference's recorded figures (another day, maybe another GPU) are shown, never used
to decide. Exit codes are distinct so a CI job can act on them (see `exit_code`)."""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from ..config import Settings
from ..engine.base import Engine, EngineEvent, Job, JobContext, JobOutcome, LocalEngine, Placement
from ..errors import EnvironmentProblem, InputError, KernelloopError
from ..program.scanner import normalized
from ..program.split import check_program, split_program
from ..tools.gpu import GpuInfo, detect_gpus
from ..verify.gate import verify_sources
from ..verify.regression import RegressionDecision
from ..verify.reproduce import Reproduction, reproduce_outputs
from ..verify.verdict import Reason, Verdict
from .reference import Reference, parse_reference, read_reference
from .suite import SuiteEntry, suite_entries
from .trusted import Revision

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
    reference_from: str = "the working tree"  # or the trusted revision (--against REV)
    notes: list[str] = []  # what the reader must know beside the verdict (a new kernel, a re-recorded reference)
    wall_s: float = 0.0
    ran_on: Placement | None = None  # the node and GPU it was checked on (an engine other than local; docs/engine.md)


class BenchCheck(BaseModel):
    gpu: GpuInfo
    kernels: list[KernelCheck]
    wall_s: float
    against: str | None = None  # the revision references and settings came from; None: the working tree
    engine: str = "local"  # where the kernels were checked: local (this GPU) or ray (docs/engine.md)
    interrupted: bool = False  # Ctrl-C: the kernels not checked say "cancelled"

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


def harness_changed(reference_text: str, current_text: str, name: str,
                    include_dirs: list[Path] | None = None) -> bool:
    """Whether the frozen code (preamble and harness) differs: then the reference measures another
    experiment (other sizes, other inputs) and must be recorded again. The reference is
    self-contained (its headers were inlined when it was recorded); the current program's
    headers come from INCLUDE_DIRS, so a changed header shows as a changed harness."""
    before, after = split_program(reference_text, name, []), split_program(current_text, name, include_dirs)
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


class Prepared(BaseModel):
    """One kernel, read and checked before any GPU work: what it is compared with, or why it cannot be."""

    entry: SuiteEntry
    reference: Reference | None = None
    reference_text: str = ""
    current_text: str = ""
    reference_from: str = "the working tree"
    notes: list[str] = []
    problem: str = ""  # the kernel cannot be checked (`--against`: its program was removed)


def _comparable(entry: SuiteEntry, reference: Reference, reference_text: str, settings: Settings,
                reference_from: str) -> Prepared:
    current_text, _ = check_program(entry.program, settings.include_dirs)
    if harness_changed(reference_text, current_text, str(entry.program), settings.include_dirs):
        raise InputError(f"{entry.program}: its harness (the code outside the editable part) changed since "
                         f"kernel {entry.name!r} was recorded, so the reference measures another experiment: "
                         f"record it again with `kernelloop bench record {entry.name}`")
    return Prepared(entry=entry, reference=reference, reference_text=reference_text, current_text=current_text,
                    reference_from=reference_from)


def _prepare(entries: list[SuiteEntry], settings: Settings) -> list[Prepared]:
    """Everything a check needs, read and checked before any GPU work (one InputError if not)."""
    return [_comparable(entry, *read_reference(entry), settings, "the working tree") for entry in entries]


def _prepare_against(revision: Revision, trusted: Settings, working: Settings,
                     names: list[str] | None) -> list[Prepared]:
    """The kernels of REV's suite, each against REV's reference; then the kernels the change adds,
    against the references the change brings (said to be new)."""
    entries = suite_entries(trusted, project_dir=revision.project_dir, names=names, programs_must_exist=False)
    prepared: list[Prepared] = []
    for entry in entries:
        if not entry.program.is_file():
            prepared.append(Prepared(entry=entry, reference_from=revision.rev, problem=(
                f"kernel {entry.name!r} is in the suite at {revision.rev}, but its program {entry.program} is not "
                "in this change: removing a kernel from the suite is a change to review, not one to check")))
            continue
        record, program = revision.read(entry.reference_record), revision.read(entry.reference_program)
        if record is None or program is None:
            raise InputError(f"kernel {entry.name!r} has no recorded reference at {revision.rev} "
                             f"({revision.label(entry.reference_dir)}): record it there first (`kernelloop bench "
                             f"record {entry.name}`, committed), or check without --against")
        reference, text = parse_reference(entry, record, program, revision.label(entry.reference_record),
                                          revision.label(entry.reference_program))
        one = _comparable(entry, reference, text, trusted, revision.rev)
        if entry.reference_program.is_file() and entry.reference_record.is_file() and (
                entry.reference_program.read_text(encoding="utf-8", errors="surrogateescape") != program
                or entry.reference_record.read_text() != record):
            one.notes.append(f"this change records a new reference for {entry.name}; it is checked against "
                             f"{revision.rev}'s (record again once the change is in)")
        prepared.append(one)
    known = {e.name for e in entries}
    added = [e for e in suite_entries(working, project_dir=revision.project_dir, programs_must_exist=False)
             if e.name not in known and (not names or e.name in names)]
    unknown = [n for n in names or [] if n not in known and n not in {e.name for e in added}]
    if unknown:
        raise InputError(f"no kernel named {', '.join(map(repr, unknown))} in the suite at {revision.rev} or in "
                         "the working tree")
    for entry in added:
        if not entry.program.is_file():
            raise InputError(f"{entry.program}: no such file (kernel {entry.name!r} of [[bench.kernels]])")
        one = _comparable(entry, *read_reference(entry), working, "the working tree")
        one.notes.append(f"new in this change (not in the suite at {revision.rev}): checked against the reference "
                         "the change brings, which nobody has reviewed yet")
        prepared.append(one)
    return prepared


def check_kernel(entry: SuiteEntry, reference: Reference, reference_text: str, current_text: str,
                 settings: Settings, gpu: GpuInfo, progress: Callable | None = None) -> KernelCheck:
    """Every verify gate, then the regression rule, with REFERENCE as the baseline."""
    bench = settings.bench
    started = time.monotonic()
    vs = settings.verify.model_copy(update={"timing_pairs": bench.pairs, "max_timing_pairs": max(bench.pairs, bench.max_pairs),
                                            "confidence": bench.regression_confidence})
    result = KernelCheck(name=entry.name, program=str(entry.program), status="error", summary="",
                         regression_threshold=entry.regression_threshold, reference=reference)
    try:
        verdict = verify_sources(reference_text, current_text, settings.model_copy(update={"verify": vs}),
                                 baseline_name=f"{entry.name} reference ({entry.reference_program})",
                                 candidate_name=str(entry.program), progress=progress, gpu=gpu,
                                 regression=entry.regression_threshold, baseline_include_dirs=[])
    except KernelloopError as exc:  # the reference itself cannot be run here: this kernel is unchecked
        result.summary = str(exc)
        result.wall_s = time.monotonic() - started
        return result
    result.verdict, result.decision, result.status = verdict, verdict.regression, status_of(verdict)
    if verdict.regression is not None and result.status == verdict.regression.outcome:
        result.summary = verdict.regression.describe()
    else:
        result.summary = verdict.summary
    result.reference_varies = any("vary between runs" in note for note in verdict.notes)
    result.reproduction = reproduce_outputs(reference_text, str(entry.reference_program), reference.experiments,
                                            settings, verdict.arch)
    result.wall_s = time.monotonic() - started
    return result


def check_suite(settings: Settings, *, names: list[str] | None = None, progress: Callable | None = None,
                on_kernel: Callable[[KernelCheck], None] | None = None, against: Revision | None = None,
                working: Settings | None = None, engine: Engine | None = None,
                on_event: Callable[[EngineEvent], None] | None = None) -> BenchCheck:
    """Check the suite. With `against` (REV), SETTINGS are REV's (trusted_settings) and WORKING the
    working tree's, which only adds the kernels the change brings. ENGINE runs each kernel's check
    as one job (default: locally, one after another); `on_event` hears its progress."""
    started = time.monotonic()
    # The engine only when one is given: callers (and tests) that replace _check_prepared keep its old signature.
    where = {} if engine is None and on_event is None else {"engine": engine, "on_event": on_event}
    if against is None:
        prepared = _prepare(suite_entries(settings, names=names), settings)
    else:
        prepared = _prepare_against(against, settings, working or settings, names)
        # Nothing the check runs or trusts as its own comes from a place the change can write: a
        # cache_dir inside the checkout would hand it the reference's build (red team round 48).
        private = Path(tempfile.mkdtemp(prefix="kernelloop-bench-"))
        try:
            return _check_prepared(prepared, settings.model_copy(update={"cache_dir": private}), started,
                                   progress, on_kernel, against.rev, **where)
        finally:
            shutil.rmtree(private, ignore_errors=True)
    return _check_prepared(prepared, settings, started, progress, on_kernel, None, **where)


class CheckJob(BaseModel):
    """One kernel's check as an engine job: everything it needs, picklable, no file read."""

    prepared: Prepared
    settings: Settings
    gpu: GpuInfo | None = None  # the local engine: the driver's GPU; None: the GPU the job holds


def check_job(job: CheckJob, ctx: JobContext) -> KernelCheck:
    """One kernel's check, a function of its inputs alone (engine.base.Job). On a Ray worker it
    builds in the job's private scratch folder (ctx.scratch_dir), never a cache another job wrote."""
    one, settings, gpu = job.prepared, job.settings, job.gpu or ctx.gpu
    if gpu is None:
        gpus = detect_gpus()
        if not gpus:
            raise EnvironmentProblem(f"no CUDA GPU visible on {ctx.placement.describe()} (nvidia-smi)")
        gpu = gpus[0]
    if ctx.scratch_dir is not None:
        cache = ctx.scratch_dir / "cache"
        cache.mkdir(parents=True, exist_ok=True)
        settings = settings.model_copy(update={"cache_dir": cache})
    assert one.reference is not None  # jobs are made only for kernels with a reference
    return check_kernel(one.entry, one.reference, one.reference_text, one.current_text, settings, gpu, ctx.progress)


def _unchecked(one: Prepared, summary: str) -> KernelCheck:
    return KernelCheck(name=one.entry.name, program=str(one.entry.program), status="error", summary=summary,
                       regression_threshold=one.entry.regression_threshold, reference_from=one.reference_from)


def _from_outcome(one: Prepared, outcome: JobOutcome, remote: bool) -> KernelCheck:
    if outcome.status == "done":
        result = outcome.value
    else:
        where = f" on {outcome.placement.describe()}" if remote and outcome.placement is not None else ""
        verb = "was not checked" if outcome.status == "cancelled" else f"could not be checked{where}"
        result = _unchecked(one, f"{one.entry.name} {verb}: {outcome.reason}")
        result.wall_s = outcome.wall_s
        result.ran_on = outcome.placement if remote else None
        return result
    result.reference_from, result.notes = one.reference_from, [*one.notes, *result.notes]
    if remote:
        result.ran_on = outcome.placement
    return result


def _cluster_gpu(results: list[KernelCheck]) -> GpuInfo:
    """BenchCheck.gpu for a run over a cluster: the GPU the kernels ran on (its models, joined)."""
    seen = [k.verdict.gpu for k in results if k.verdict is not None]
    if not seen:
        return GpuInfo(index=-1, name="no GPU reported (every job failed)", compute_capability="?", driver_version="?")
    names = sorted({g.name for g in seen})
    drivers = sorted({g.driver_version for g in seen})
    return seen[0].model_copy(update={"index": -1, "name": ", ".join(names), "driver_version": ", ".join(drivers)})


def _check_prepared(prepared: list[Prepared], settings: Settings, started: float, progress: Callable | None,
                    on_kernel: Callable[[KernelCheck], None] | None, against: str | None,
                    engine: Engine | None = None, on_event: Callable[[EngineEvent], None] | None = None) -> BenchCheck:
    """Each kernel as one job on ENGINE (default: the local one, on this machine's GPU, one after another)."""
    remote = engine is not None and engine.name != "local"
    gpu = None
    if not remote:
        gpus = detect_gpus()
        if not gpus:
            raise EnvironmentProblem("bench check needs a CUDA GPU; run `kernelloop doctor`")
        gpu = gpus[0]
    results: list[KernelCheck | None] = [None] * len(prepared)
    jobs: list[Job] = []
    for i, one in enumerate(prepared):
        if one.problem or one.reference is None:
            results[i] = _unchecked(one, one.problem)
            if on_kernel is not None:
                on_kernel(results[i])
            continue  # with --against, REV's [verify] settings for a new kernel too:
        jobs.append(Job(key=one.entry.name, fn=check_job, arg=CheckJob(prepared=one, settings=settings, gpu=gpu),
                        gpu_model=one.reference.gpu if remote else None, meta={"index": i}))
    by_key = {job.key: job.meta["index"] for job in jobs}

    def came_back(event: EngineEvent) -> None:
        if event.outcome is not None:
            i = by_key[event.key]
            results[i] = _from_outcome(prepared[i], event.outcome, remote)
            if on_kernel is not None:
                on_kernel(results[i])
        if on_event is not None:
            on_event(event)

    run = (engine or LocalEngine()).run(jobs, on_event=came_back, progress=progress)
    for job, outcome in zip(jobs, run.outcomes):  # what no event delivered (a run stopped in a callback)
        i = job.meta["index"]
        if results[i] is None:
            results[i] = _from_outcome(prepared[i], outcome, remote)
    kernels = [r for r in results if r is not None]
    return BenchCheck(gpu=gpu if gpu is not None else _cluster_gpu(kernels), kernels=kernels,
                      wall_s=time.monotonic() - started, against=against, engine=engine.name if engine else "local",
                      interrupted=run.interrupted)
