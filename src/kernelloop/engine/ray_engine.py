"""The Ray engine: each job a Ray task holding one whole GPU, in a fresh worker process.

- `num_gpus=1`: Ray gives a task one GPU of its own (CUDA_VISIBLE_DEVICES names it), so one job
  per GPU at a time: timing is honest only on a GPU nobody else uses.
- `max_calls=1`: the worker process exits after its one job, so a crashed CUDA context or a
  leftover process never touches the next job.
- `max_retries=0`: a job whose worker died is marked failed with the reason, never run again
  silently (a kernel that crashes its GPU should say so, not crash a second GPU).
- A job naming a GPU model asks for a sliver of the custom resource `gpu_model:<MODEL>` that the
  nodes with that GPU declare (`ray start --resources='{"gpu_model:NVIDIA_H200": 8}'`).

At most `max_in_flight` jobs (default: the cluster's GPUs) are submitted at once; a job not back
within `job_timeout_s` is cancelled and marked failed; Ctrl-C cancels every job not back and
returns what finished. Results come back as values: the caller writes them on the driver."""

from __future__ import annotations

import logging
import os
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import EnvironmentProblem
from .base import (EngineEvent, EngineRun, EngineSettings, Job, JobContext, JobOutcome, Placement, Tally,
                   gpu_model_resource, one_line)

INSTALL_HINT = "--engine ray needs Ray on this machine: pip install 'kernelloop[ray]'"
GPU_MODEL_SLIVER = 0.001  # of a node's gpu_model resource per job: it selects the node, never limits the count


def _import_ray():
    try:
        import ray
    except ImportError:
        raise EnvironmentProblem(INSTALL_HINT) from None
    return ray


def _reachable(address: str, timeout_s: float) -> str | None:
    """For a host:port address, why nothing answers there (None: something listens). Ray itself
    retries an unreachable address for minutes; this says so in seconds."""
    if address == "auto" or "://" in address or ":" not in address:
        return None
    host, _, port = address.rpartition(":")
    if not port.isdigit():
        return None
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
            return None
    except OSError as exc:
        return exc.strerror or str(exc) or type(exc).__name__


def _local_gpu_models() -> dict[str, float]:
    """This machine's GPUs as gpu_model resources, e.g. {"gpu_model:NVIDIA_H200": 8.0}."""
    from ..tools.gpu import detect_gpus

    models: dict[str, float] = {}
    for gpu in detect_gpus():
        models[gpu_model_resource(gpu.name)] = models.get(gpu_model_resource(gpu.name), 0.0) + 1.0
    return models


def _worker_gpu(ids: list[str]) -> Any:
    """The GpuInfo of the GPU Ray gave this task (nvidia-smi numbers GPUs as Ray does), or None."""
    if not ids or not ids[0].isdigit():
        return None
    from ..tools.gpu import detect_gpus

    return next((g for g in detect_gpus() if g.index == int(ids[0])), None)


def run_in_worker(fn: Callable, arg: Any, gpu_model: str) -> dict[str, Any]:
    """The body of every task, in its fresh worker: where it runs, then the job. An exception the
    job raises comes back as a reason (with where it ran); a worker that dies comes back as
    Ray's WorkerCrashedError."""
    import ray

    context = ray.get_runtime_context()
    ids = [str(i) for i in context.get_accelerator_ids().get("GPU", [])]
    gpu = _worker_gpu(ids)
    placement = Placement(engine="ray", node_id=context.get_node_id(), hostname=socket.gethostname(),
                          gpu_index=int(ids[0]) if ids and ids[0].isdigit() else None,
                          gpu_name=gpu.name if gpu is not None else "", gpu_model=gpu_model, pid=os.getpid(),
                          gpu_uuid=gpu.uuid if gpu is not None else "")
    scratch = Path(tempfile.mkdtemp(prefix="kernelloop-job-"))
    began = time.monotonic()
    placement.started_at = time.time()
    try:
        value = fn(arg, JobContext(placement=placement, gpu=gpu, scratch_dir=scratch, remote=True))
        placement.ended_at = time.time()
        return {"ok": True, "value": value, "placement": placement, "run_s": time.monotonic() - began}
    except Exception as exc:
        placement.ended_at = time.time()
        return {"ok": False, "reason": one_line(exc), "placement": placement, "run_s": time.monotonic() - began}
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


class RayEngine:
    name = "ray"

    def __init__(self, settings: EngineSettings | None = None) -> None:
        self.settings = settings or EngineSettings(engine="ray")
        self.ray = _import_ray()
        self._started_here = False
        self._stop = threading.Event()
        self._connect()
        self._task = self.ray.remote(num_gpus=1, max_calls=1, max_retries=0)(run_in_worker)

    # -- the cluster ----------------------------------------------------------------------

    def _connect(self) -> None:
        ray, s = self.ray, self.settings
        address = s.address or os.environ.get("RAY_ADDRESS") or None
        where = f"at {address}" if address else "on this machine"
        if not ray.is_initialized():
            if address is not None:
                problem = _reachable(address, s.connect_timeout_s)
                if problem is not None:
                    raise EnvironmentProblem(f"no Ray cluster answers at {address} ({problem}); start one with "
                                             "`ray start --head` on a GPU host, or check --address / RAY_ADDRESS "
                                             "(docs/engine.md)")
            # No address: a Ray of our own on this machine ("local": never a cluster found in /tmp/ray),
            # its GPUs' models declared as a `ray start --resources` would (docs/engine.md).
            init = {"address": address} if address else {"address": "local", "include_dashboard": False,
                                                           "resources": _local_gpu_models()}
            ray_log = logging.getLogger("ray")  # Ray's own notices on connecting are not kernelloop's to print
            level = ray_log.level
            ray_log.setLevel(logging.ERROR)
            try:
                ray.init(**init, log_to_driver=False, configure_logging=False)
            except Exception as exc:  # Ray's own ConnectionError, RuntimeError, …: one line
                raise EnvironmentProblem(f"could not connect to the Ray cluster {where}: {one_line(exc)}") from None
            finally:
                ray_log.setLevel(level)
            self._started_here = True
        self.resources = dict(ray.cluster_resources())
        self.gpus = int(self.resources.get("GPU", 0))
        if self.gpus < 1:
            self.close()
            raise EnvironmentProblem(f"the Ray cluster {where} has no GPU (ray.cluster_resources() lists none): "
                                     "start its nodes on GPU hosts (`ray start … --num-gpus N`, docs/engine.md)")

    def close(self) -> None:
        if self._started_here and self.ray.is_initialized():
            self.ray.shutdown()
        self._started_here = False

    def __enter__(self) -> RayEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the jobs -------------------------------------------------------------------------

    def _submit(self, job: Job):
        options: dict[str, Any] = {"num_cpus": self.settings.cpus_per_job, "name": f"kernelloop:{job.key}"}
        model = ""
        if job.gpu_model and self.settings.match_gpu_model:
            model = gpu_model_resource(job.gpu_model)
            options["resources"] = {model: GPU_MODEL_SLIVER}
        return self._task.options(**options).remote(job.fn, job.arg, model)

    def _unplaceable(self, job: Job) -> str | None:
        if not job.gpu_model or not self.settings.match_gpu_model:
            return None
        model = gpu_model_resource(job.gpu_model)
        if self.resources.get(model, 0) > 0:
            return None
        return (f"needs a {job.gpu_model} (the GPU its reference was recorded on) and no node of the Ray cluster "
                f"declares one: start such nodes with --resources='{{\"{model}\": N}}' (docs/engine.md), or "
                "pass --any-gpu-model")

    def _outcome(self, job: Job, ref, submitted: float) -> JobOutcome:
        ray = self.ray
        wall = time.monotonic() - submitted
        try:
            got = ray.get(ref)
        except ray.exceptions.TaskCancelledError:
            return JobOutcome(key=job.key, status="cancelled", reason="cancelled", wall_s=wall)
        except ray.exceptions.WorkerCrashedError as exc:
            return JobOutcome(key=job.key, status="failed", wall_s=wall,
                              reason=f"its worker process died (a crash, os._exit or out of memory): {_first_line(exc)}")
        except ray.exceptions.RayError as exc:  # RayTaskError (pickling), node died, object lost, …
            return JobOutcome(key=job.key, status="failed", wall_s=wall, reason=_first_line(exc))
        if got["ok"]:
            return JobOutcome(key=job.key, status="done", value=got["value"], placement=got["placement"],
                              run_s=got["run_s"], wall_s=wall)
        return JobOutcome(key=job.key, status="failed", reason=got["reason"], placement=got["placement"],
                          run_s=got["run_s"], wall_s=wall)

    def run(self, jobs: list[Job], *, on_event: Callable[[EngineEvent], None] | None = None,
            progress: Callable[[Any], None] | None = None) -> EngineRun:
        """Every job, at most max_in_flight (default: one per GPU of the cluster) at once. `progress`
        (the local engine's per-stage callback) does not cross to workers: `on_event` reports."""
        ray, s = self.ray, self.settings
        started = time.monotonic()
        self._stop.clear()
        tally = Tally("ray", len(jobs), on_event)
        outcomes: dict[int, JobOutcome] = {}
        waiting = list(enumerate(jobs))
        in_flight: dict[Any, tuple[int, Job, float]] = {}  # ref -> (job's index, job, submitted at)
        cap = s.max_in_flight or self.gpus
        interrupted = False
        try:
            while waiting or in_flight:
                if self._stop.is_set():
                    raise KeyboardInterrupt
                while waiting and len(in_flight) < cap:
                    i, job = waiting.pop(0)
                    why = self._unplaceable(job)
                    if why is not None:
                        outcomes[i] = JobOutcome(key=job.key, status="failed", reason=why)
                        tally.came_back(outcomes[i], was_running=False)
                        continue
                    in_flight[self._submit(job)] = (i, job, time.monotonic())
                    tally.submitted(job.key)
                if not in_flight:
                    continue
                deadline = min(t for _, _, t in in_flight.values()) + s.job_timeout_s
                ready, _ = ray.wait(list(in_flight), num_returns=1,
                                    timeout=max(0.0, min(s.poll_s, deadline - time.monotonic())))
                for ref in ready:
                    i, job, submitted = in_flight.pop(ref)
                    outcomes[i] = self._outcome(job, ref, submitted)
                    tally.came_back(outcomes[i])
                now = time.monotonic()
                for ref, (i, job, submitted) in list(in_flight.items()):
                    if now - submitted >= s.job_timeout_s:
                        self.cancel([ref])
                        del in_flight[ref]
                        outcomes[i] = JobOutcome(
                            key=job.key, status="failed", wall_s=now - submitted,
                            reason=f"timed out after {s.job_timeout_s:g} s (job_timeout_s, --job-timeout); cancelled")
                        tally.came_back(outcomes[i])
        except KeyboardInterrupt:
            interrupted = True
            tally.on_event = None  # a callback that stopped the run is not called again
            self.cancel(list(in_flight))
            for ref, (i, job, submitted) in in_flight.items():
                outcomes[i] = JobOutcome(key=job.key, status="cancelled", wall_s=time.monotonic() - submitted,
                                         reason="cancelled (interrupted)")
                tally.came_back(outcomes[i])
            for i, job in waiting:
                outcomes[i] = JobOutcome(key=job.key, status="cancelled", reason="not started (interrupted)")
                tally.came_back(outcomes[i], was_running=False)
        return EngineRun(engine="ray", outcomes=[outcomes.get(i) or JobOutcome(
            key=job.key, status="cancelled", reason="cancelled (interrupted)") for i, job in enumerate(jobs)], interrupted=interrupted,
                         wall_s=time.monotonic() - started, per_gpu=tally.per_gpu)

    def stop(self) -> None:
        """Stop a run from another thread or a callback: the jobs not back are cancelled, as on Ctrl-C."""
        self._stop.set()

    def cancel(self, refs: list) -> None:
        """Cancel tasks: a queued one never starts; a running one's worker is killed (force: the
        worker is thrown away after its job anyway, max_calls=1)."""
        for ref in refs:
            try:
                self.ray.cancel(ref, force=True)
            except Exception:  # already finished, or the cluster is gone: nothing left to stop
                pass


def _first_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__
