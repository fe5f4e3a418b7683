"""Where jobs run: one kernel's check or optimize run each, here (local) or on a Ray cluster.

kernelloop grows no scheduler of its own. The local engine runs the jobs one after another, in
this process, on the visible GPU (as kernelloop always did); the Ray engine (engine/ray_engine.py,
`pip install 'kernelloop[ray]'`) hands each job to a Ray cluster as a task that holds one whole
GPU in a fresh worker process. Both take the same jobs and return the same outcomes, so the
callers (bench/check.py, graph/fanout.py) do not know which one ran them.

A job is a picklable function of picklable inputs, `fn(arg, ctx) -> value`: it reads no file of
the driver's and writes none (the caller ships what the job needs and writes what comes back).
Nothing here prints: progress goes to the callbacks the caller hands in."""

from __future__ import annotations

import os
import re
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict

from ..config import environment_value
from ..errors import ConfigError

EngineName = Literal["local", "ray"]
ENGINES: tuple[str, ...] = ("local", "ray")
GPU_MODEL_PREFIX = "gpu_model:"  # the custom Ray resource a node declares per GPU model (docs/engine.md)


class EngineSettings(BaseModel):
    """The engine's caps, each with a default (the CLI's --engine, --address, --job-timeout and
    --max-in-flight set them; KERNELLOOP_ENGINE and RAY_ADDRESS are read when the flags are absent)."""

    engine: EngineName = "local"
    address: str | None = None  # Ray: host:port of the head node, "auto", ray://…; None: $RAY_ADDRESS, else a local Ray
    job_timeout_s: float = 7200.0  # one job, from submission to its result; then it is cancelled and marked failed
    max_in_flight: int | None = None  # jobs submitted at once; None: the cluster's number of GPUs (one job per GPU)
    cpus_per_job: float = 1.0  # Ray CPUs a job reserves beside its GPU (nvcc and the harness run on the CPU)
    connect_timeout_s: float = 10.0  # how long a host:port address may take to answer before "no cluster there"
    poll_s: float = 1.0  # how often the driver wakes to check deadlines while jobs run
    match_gpu_model: bool = True  # a job naming a GPU model runs only on a node that declares it

    @classmethod
    def from_environment(cls, **given: Any) -> EngineSettings:
        """Flags given (None: not given) over KERNELLOOP_ENGINE / RAY_ADDRESS over the defaults."""
        values = {k: v for k, v in given.items() if v is not None}
        if "engine" not in values and environment_value("KERNELLOOP_ENGINE"):
            values["engine"] = environment_value("KERNELLOOP_ENGINE")
        if values.get("engine", "local") not in ENGINES:
            raise ConfigError(f"--engine {values['engine']!r}: use local or ray")
        if values.get("address") and values.get("engine", "local") != "ray":
            raise ConfigError("--address names a Ray cluster: add --engine ray")
        for name in ("job_timeout_s", "connect_timeout_s"):
            if name in values and not values[name] > 0:
                raise ConfigError(f"{name} must be more than 0 seconds, got {values[name]}")
        if values.get("max_in_flight") is not None and values["max_in_flight"] < 1:
            raise ConfigError(f"--max-in-flight must be at least 1, got {values['max_in_flight']}")
        return cls(**values)


class Placement(BaseModel):
    """Where one job ran."""

    engine: EngineName = "local"
    node_id: str = ""  # Ray's node id (hex); "" for the local engine
    hostname: str = ""
    gpu_index: int | None = None  # the GPU's index on its node (Ray's accelerator id)
    gpu_name: str = ""  # as nvidia-smi names it on that node ("" where none answers)
    gpu_model: str = ""  # the gpu_model resource the job asked for ("" when none)
    pid: int = 0  # the worker process (fresh per job on Ray)
    gpu_uuid: str = ""  # the physical GPU (nvidia-smi's GPU-…), to tell that no two jobs shared one
    started_at: float = 0.0  # wall clock (epoch seconds) in the worker: the job function began
    ended_at: float = 0.0  # ... and ended (0: it never did)

    @property
    def label(self) -> str:
        """One GPU of the cluster, e.g. `node7[3fa2c1]:gpu3` (the host, then Ray's node id, which tells
        two Ray nodes of one host apart): the key of the per-GPU progress."""
        node = f"[{self.node_id[:6]}]" if self.node_id else ""
        return f"{self.hostname or 'local'}{node}:gpu{'?' if self.gpu_index is None else self.gpu_index}"

    def describe(self) -> str:
        name = f" ({self.gpu_name})" if self.gpu_name else ""
        return f"{self.label}{name}"


def jobs_sharing_a_gpu(placements: dict[str, Placement]) -> list[tuple[str, str]]:
    """Pairs of jobs (by key) that ran on one GPU at overlapping times, from where and when each
    says it ran (a GPU: its node and uuid, else its index there). Empty when every GPU ran one job
    at a time; a placement with no times (the local engine, a job that never reported) is left out."""
    by_gpu: dict[tuple[str, str], list[tuple[float, float, str]]] = {}
    for key, p in placements.items():
        if p.started_at and p.ended_at:
            # a uuid names one physical GPU anywhere (two Ray nodes of one host may see it)
            gpu = ("", p.gpu_uuid) if p.gpu_uuid else (p.node_id, f"index {p.gpu_index}")
            by_gpu.setdefault(gpu, []).append((p.started_at, p.ended_at, key))
    pairs = []
    for spans in by_gpu.values():
        spans.sort()
        latest_end, latest_key = spans[0][1], spans[0][2]
        for began, ended, key in spans[1:]:
            if began < latest_end:
                pairs.append((latest_key, key))
            if ended > latest_end:
                latest_end, latest_key = ended, key
    return pairs


JobStatus = Literal["done", "failed", "cancelled"]


class JobOutcome(BaseModel):
    """What came back for one job: its value, or why there is none."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    key: str
    status: JobStatus
    value: Any = None
    reason: str = ""  # one line: why the job failed or was cancelled
    placement: Placement | None = None  # None: the job never reported (it crashed, or never started)
    wall_s: float = 0.0  # on the driver: submission to result
    run_s: float = 0.0  # in the worker: the job function alone

    @property
    def overhead_s(self) -> float:
        """What the engine added to the job: wall time beyond the job function's own."""
        return max(0.0, self.wall_s - self.run_s)


class EngineCounts(BaseModel):
    pending: int = 0
    running: int = 0  # submitted and not yet back (the local engine: the one job running)
    done: int = 0
    failed: int = 0
    cancelled: int = 0


class GpuTally(BaseModel):
    done: int = 0
    failed: int = 0
    busy_s: float = 0.0  # sum of the job functions' run times on this GPU


class EngineEvent(BaseModel):
    """Progress on the driver: a job was submitted or came back. `per_gpu` tallies the jobs that
    came back, by the GPU they ran on (Ray says where a task ran when it returns)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    kind: Literal["submitted", "done", "failed", "cancelled"]
    key: str
    engine: EngineName
    counts: EngineCounts
    per_gpu: dict[str, GpuTally] = {}
    outcome: JobOutcome | None = None  # for done / failed / cancelled


@dataclass
class JobContext:
    """What the engine tells a job about where it runs."""

    placement: Placement
    gpu: Any = None  # tools.gpu.GpuInfo of the GPU this job holds, where nvidia-smi names it
    progress: Callable[[Any], None] | None = None  # the local engine only: the caller's progress callback
    scratch_dir: Path | None = None  # Ray only: a private folder for this job, removed when it ends
    remote: bool = False  # True: not on the driver's process (ship inputs in, results home)


JobFunction = Callable[[Any, JobContext], Any]


@dataclass
class Job:
    """One unit of work: `fn(arg, ctx)`. `fn` must be importable by name (a module-level function)
    and `arg` picklable. `gpu_model`: run only on a GPU of this model (e.g. the reference's)."""

    key: str
    fn: JobFunction
    arg: Any
    gpu_model: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)  # the caller's own, never sent to a worker


class Engine(Protocol):
    name: EngineName

    def run(self, jobs: list[Job], *, on_event: Callable[[EngineEvent], None] | None = None,
            progress: Callable[[Any], None] | None = None) -> EngineRun: ...

    def stop(self) -> None: ...

    def close(self) -> None: ...


class EngineRun(BaseModel):
    """Every job's outcome, in the order the jobs were given."""

    engine: EngineName
    outcomes: list[JobOutcome]
    interrupted: bool = False  # Ctrl-C: the jobs not back were cancelled (status "cancelled")
    wall_s: float = 0.0
    per_gpu: dict[str, GpuTally] = {}


def gpu_model_resource(name: str) -> str:
    """The Ray resource that says a node has GPUs of this model: `gpu_model:NVIDIA_H200` for
    "NVIDIA H200" (characters other than letters, digits, `.`, `-` become `_`)."""
    return GPU_MODEL_PREFIX + re.sub(r"[^A-Za-z0-9.\-]+", "_", name.strip()).strip("_")


def one_line(exc: BaseException) -> str:
    """An exception as one line for a job's reason."""
    text = " ".join(str(exc).split())
    from ..errors import KernelloopError

    if isinstance(exc, KernelloopError):
        return text or type(exc).__name__
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class Tally:
    """Counts and per-GPU tallies as jobs go and come back (shared by both engines)."""

    def __init__(self, engine: EngineName, total: int, on_event: Callable[[EngineEvent], None] | None) -> None:
        self.engine, self.on_event = engine, on_event
        self.counts = EngineCounts(pending=total)
        self.per_gpu: dict[str, GpuTally] = {}

    def submitted(self, key: str) -> None:
        self.counts.pending -= 1
        self.counts.running += 1
        self._emit("submitted", key, None)

    def came_back(self, outcome: JobOutcome, *, was_running: bool = True) -> None:
        if was_running:
            self.counts.running -= 1
        else:
            self.counts.pending -= 1
        setattr(self.counts, outcome.status, getattr(self.counts, outcome.status) + 1)
        if outcome.placement is not None and outcome.status != "cancelled":
            one = self.per_gpu.setdefault(outcome.placement.label, GpuTally())
            one.busy_s += outcome.run_s
            if outcome.status == "done":
                one.done += 1
            else:
                one.failed += 1
        self._emit(outcome.status, outcome.key, outcome)

    def _emit(self, kind: str, key: str, outcome: JobOutcome | None) -> None:
        if self.on_event is not None:
            self.on_event(EngineEvent(kind=kind, key=key, engine=self.engine, counts=self.counts.model_copy(),
                                      per_gpu={k: v.model_copy() for k, v in self.per_gpu.items()}, outcome=outcome))


class LocalEngine:
    """The default: each job in this process, one after another, on the visible GPU. A job that
    raises is marked failed and the next one runs; Ctrl-C propagates (the caller says so)."""

    name: EngineName = "local"

    def __init__(self, settings: EngineSettings | None = None) -> None:
        self.settings = settings or EngineSettings()
        self._stop = False

    def run(self, jobs: list[Job], *, on_event: Callable[[EngineEvent], None] | None = None,
            progress: Callable[[Any], None] | None = None) -> EngineRun:
        started = time.monotonic()
        self._stop = False
        tally = Tally("local", len(jobs), on_event)
        placement = Placement(engine="local", hostname=socket.gethostname(), pid=os.getpid())
        outcomes: list[JobOutcome] = []
        interrupted = False
        try:
            for job in jobs:
                if self._stop:
                    raise KeyboardInterrupt
                tally.submitted(job.key)
                began = time.monotonic()
                try:
                    value = job.fn(job.arg, JobContext(placement=placement, progress=progress))
                    outcome = JobOutcome(key=job.key, status="done", value=value)
                except Exception as exc:  # this job failed; the next one runs
                    outcome = JobOutcome(key=job.key, status="failed", reason=one_line(exc))
                outcome.wall_s = outcome.run_s = time.monotonic() - began
                outcomes.append(outcome)
                tally.came_back(outcome)
        except KeyboardInterrupt:  # Ctrl-C: the job running and those after it are cancelled
            interrupted = True
            tally.on_event = None
            running = tally.counts.running > 0
            for job in jobs[len(outcomes):]:
                outcomes.append(JobOutcome(key=job.key, status="cancelled", reason="cancelled (interrupted)"))
                tally.came_back(outcomes[-1], was_running=running)
                running = False
        return EngineRun(engine="local", outcomes=outcomes, interrupted=interrupted, wall_s=time.monotonic() - started,
                         per_gpu=tally.per_gpu)

    def stop(self) -> None:
        """Stop after the job running now (a callback may call it): the rest are cancelled."""
        self._stop = True

    def close(self) -> None:
        pass

    def __enter__(self) -> LocalEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def make_engine(settings: EngineSettings) -> Engine:
    """The engine the settings name. Ray is imported only here, only for `ray`: a missing Ray, no
    cluster at the address or a cluster without a GPU is one EnvironmentProblem."""
    if settings.engine == "ray":
        from .ray_engine import RayEngine

        return RayEngine(settings)
    return LocalEngine(settings)
