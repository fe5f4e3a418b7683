"""`kernelloop optimize a.cu b.cu …`: one optimize run per kernel, each an engine job
(engine/base.py): one after another on this GPU (local), or spread over a Ray cluster's GPUs.

On the local engine each run writes its run folder and run log entry here, as a single
`kernelloop optimize` does. On Ray a run happens in a private scratch folder on the worker
(its own run folder, run log and build cache) and comes home as a RunBundle: the driver writes
the run folder under its runs_dir and the run and its attempts into its run log, so `kernelloop
runs list|show`, `verify-cert` and the reports see it as a local run. What does not come home:
the LangGraph checkpoint (a run on Ray cannot be `--resume`d)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from ..config import Settings
from ..engine.base import Engine, EngineEvent, Job, JobContext, JobOutcome, LocalEngine, Placement
from ..errors import InputError
from ..llm_config import LLMConfig
from ..runs.artifacts import kernel_name
from ..runs.store import AttemptRecord, RunRecord, run_store


class OptimizeJob(BaseModel):
    """One kernel's optimize run as an engine job: everything it needs, picklable."""

    kernel_path: str  # as the driver names it (the run log keeps this path)
    kernel_text: str  # its text, the user's own headers inlined: a job on another node reads no file of ours
    settings: Settings
    llm: LLMConfig
    optimizer_kind: str | None = None
    memory: list[AttemptRecord] = []  # the driver's past attempts on this kernel (the optimizer's memory)


class RunBundle(BaseModel):
    """A run made on a worker, to be written on the driver."""

    record: RunRecord
    attempts: list[AttemptRecord]
    files: dict[str, bytes]  # the run folder's files, by path relative to it
    worker_run_dir: str
    worker_kernel_path: str


class KernelRun(BaseModel):
    """One kernel's run, as the driver's run log has it."""

    kernel: str  # the program's path
    status: str  # accepted | exhausted | error | interrupted (the run's own); failed | cancelled (the job's)
    run_id: str = ""
    run_dir: str = ""
    best_speedup: float | None = None
    reason: str = ""
    ran_on: Placement | None = None
    wall_s: float = 0.0


class OptimizeMany(BaseModel):
    engine: str
    runs: list[KernelRun]
    interrupted: bool = False
    wall_s: float = 0.0

    @property
    def exit_code(self) -> int:
        """0: every kernel accepted; 2: a run could not be made (a job failed); 3: otherwise."""
        statuses = {r.status for r in self.runs}
        if statuses & {"failed", "error"}:
            return 2
        return 0 if statuses == {"accepted"} else 3


def _drive(kernel: Path, settings: Settings, job: OptimizeJob, progress: Callable[[Any], None] | None) -> str:
    """One optimize run to its end; its run id."""
    from .optimize import optimize

    run_id = ""

    async def drive() -> None:
        nonlocal run_id
        async for event in optimize(kernel, settings, job.llm, optimizer_kind=job.optimizer_kind):
            run_id = run_id or event.data.get("run_id", "")
            if progress is not None:
                progress(event)

    asyncio.run(drive())
    return run_id


def optimize_job(job: OptimizeJob, ctx: JobContext) -> KernelRun | RunBundle:
    """The engine job: here, a run as `kernelloop optimize` makes it; on a worker, a run in its
    scratch folder, returned whole (RunBundle) for the driver to write."""
    if not ctx.remote:
        started = time.monotonic()
        run_id = _drive(Path(job.kernel_path), job.settings, job, ctx.progress)
        record = run_store(job.settings).get_run(run_id)
        return KernelRun(kernel=job.kernel_path, status=record.status, run_id=run_id, run_dir=record.run_dir,
                         best_speedup=record.best_speedup, reason=record.reason, wall_s=time.monotonic() - started)
    scratch = ctx.scratch_dir or Path.cwd()
    kernel = scratch / "kernel" / Path(job.kernel_path).name
    kernel.parent.mkdir(parents=True, exist_ok=True)
    kernel.write_text(job.kernel_text, encoding="utf-8", errors="surrogateescape")
    settings = job.settings.model_copy(update={
        "optimize": job.settings.optimize.model_copy(update={"runs_dir": scratch / "runs"}),
        "data_dir": scratch / "data", "cache_dir": scratch / "cache"})
    store = run_store(settings)
    for attempt in job.memory:
        store.add_attempt(attempt)
    run_id = _drive(kernel, settings, job, None)
    record = store.get_run(run_id)
    root = Path(record.run_dir)
    files = {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}
    return RunBundle(record=record, attempts=store.attempts(run_id), files=files, worker_run_dir=str(root),
                     worker_kernel_path=str(kernel))


def _moved(data: Any, old: dict[str, str]) -> Any:
    text = json.dumps(data)
    for before, after in old.items():
        text = text.replace(json.dumps(before)[1:-1], json.dumps(after)[1:-1])
    return json.loads(text)


def import_run(bundle: RunBundle, settings: Settings, kernel_path: str) -> RunRecord:
    """Write a run made on a worker as a local run would be: its folder under runs_dir
    (runs/<kernel>/<run id>/), the run and its attempts in the run log, the worker's paths in
    them replaced by ours."""
    record = bundle.record
    base = settings.optimize.runs_dir.expanduser()
    base = base if base.is_absolute() else Path.cwd() / base
    root = base / record.kernel / record.run_id
    if record.kernel != kernel_name(Path(record.kernel + ".cu")) or \
            any(not part or part in (".", "..") or "/" in part or "\\" in part for part in (record.kernel, record.run_id)):
        raise InputError(f"the run from the cluster names its folder {record.kernel!r}/{record.run_id!r}, which is not "
                         f"one folder under {base}; it was not written")
    if root.exists():
        raise InputError(f"{root}: a run folder of this id is already here; the run from the cluster was not written")
    old = {bundle.worker_run_dir: str(root), bundle.worker_kernel_path: str(Path(kernel_path).resolve())}
    for name, data in bundle.files.items():
        target = (root / name).resolve()
        if not target.is_relative_to(root.resolve()):
            continue  # a name reaching outside the run folder is never written
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            target.write_bytes(data)
            continue
        for before, after in old.items():
            text = text.replace(before, after)
        target.write_bytes(text.encode("utf-8"))
    record = record.model_copy(update={"run_dir": str(root), "kernel_path": old[bundle.worker_kernel_path],
                                       "options": _moved(record.options, old), "summary": _moved(record.summary, old)})
    store = run_store(settings)
    store.start_run(record)
    for attempt in bundle.attempts:
        store.add_attempt(attempt)
    return record


def optimize_kernels(kernels: list[Path], settings: Settings, llm: LLMConfig, *, engine: Engine | None = None,
                     optimizer_kind: str | None = None, progress: Callable[[Any], None] | None = None,
                     on_event: Callable[[EngineEvent], None] | None = None,
                     on_run: Callable[[KernelRun], None] | None = None) -> OptimizeMany:
    """Optimize each kernel, one engine job each. Every input is checked first (one InputError
    before any run starts); a run that fails is marked so and the others go on."""
    from .inputs import check_inputs

    started = time.monotonic()
    engine = engine or LocalEngine()
    remote = engine.name != "local"
    store = run_store(settings)
    jobs = []
    for i, path in enumerate(kernels):
        checked = check_inputs(path, settings, require_gpu=not remote)  # a GPU on the driver only for local runs
        memory = []
        if remote:
            import hashlib

            sha = hashlib.sha256(checked.text.encode()).hexdigest()
            memory = store.memory(kernel_name(path), sha, limit=settings.optimize.memory_attempts)
        jobs.append(Job(key=f"{i}:{path}", fn=optimize_job, meta={"index": i}, arg=OptimizeJob(
            kernel_path=str(path), kernel_text=checked.text, settings=settings, llm=llm,
            optimizer_kind=optimizer_kind, memory=memory)))
    runs: list[KernelRun | None] = [None] * len(jobs)

    def finished(job: Job, outcome: JobOutcome) -> KernelRun:
        path = job.arg.kernel_path
        if outcome.status != "done":
            return KernelRun(kernel=path, status=outcome.status, reason=outcome.reason, ran_on=outcome.placement,
                             wall_s=outcome.wall_s)
        if isinstance(outcome.value, RunBundle):
            try:
                record = import_run(outcome.value, settings, path)
            except (OSError, InputError) as exc:
                return KernelRun(kernel=path, status="failed", ran_on=outcome.placement, wall_s=outcome.wall_s,
                                 reason=f"the run came back but could not be written here: {exc}")
            return KernelRun(kernel=path, status=record.status, run_id=record.run_id, run_dir=record.run_dir,
                             best_speedup=record.best_speedup, reason=record.reason, ran_on=outcome.placement,
                             wall_s=outcome.wall_s)
        return outcome.value

    by_key = {job.key: job for job in jobs}

    def came_back(event: EngineEvent) -> None:
        if event.outcome is not None:
            job = by_key[event.key]
            runs[job.meta["index"]] = finished(job, event.outcome)
            if on_run is not None:
                on_run(runs[job.meta["index"]])
        if on_event is not None:
            on_event(event)

    run = engine.run(jobs, on_event=came_back, progress=progress)
    for job, outcome in zip(jobs, run.outcomes):
        if runs[job.meta["index"]] is None:
            runs[job.meta["index"]] = finished(job, outcome)
    return OptimizeMany(engine=engine.name, runs=[r for r in runs if r is not None], interrupted=run.interrupted,
                        wall_s=time.monotonic() - started)
