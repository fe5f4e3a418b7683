"""The Ray engine on a local two-node Ray cluster with fake GPUs (num_gpus declared, no CUDA), running
scripted jobs: one job per GPU at a time, a fresh process per job, failures, cancellation, timeouts,
GPU-model placement, and bench check's jobs through Ray (no GPU: each says so)."""

from __future__ import annotations

import os
import socket
import sys
import time

import pytest

ray = pytest.importorskip("ray")
from ray import cloudpickle  # noqa: E402

from kernelloop.engine import EngineSettings, Job, LocalEngine, jobs_sharing_a_gpu  # noqa: E402
from kernelloop.engine.ray_engine import RayEngine  # noqa: E402

cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the scripted jobs travel by value to the workers

MODEL_A, MODEL_B = "Fake GPU A", "Fake GPU B"


@pytest.fixture(scope="module")
def cluster():
    """Two Ray nodes on this machine: the head with 2 fake GPUs of model A, a second with 1 of model B."""
    from ray.cluster_utils import Cluster

    common = {"include_dashboard": False, "object_store_memory": 80 * 1024 * 1024}
    c = Cluster(initialize_head=True, head_node_args={
        **common, "num_cpus": 2, "num_gpus": 2, "resources": {"gpu_model:Fake_GPU_A": 2}})
    c.add_node(num_cpus=1, num_gpus=1, resources={"gpu_model:Fake_GPU_B": 1}, object_store_memory=80 * 1024 * 1024)
    ray.init(address=c.address, log_to_driver=False)
    yield c
    ray.shutdown()
    c.shutdown()


@pytest.fixture
def engine(cluster):
    return RayEngine(EngineSettings(engine="ray", poll_s=0.2))


def sleeper(arg, ctx):
    """A scripted job: where it ran, when, in which process; sleeps ARG["s"] seconds."""
    began = time.time()
    time.sleep(arg["s"])
    if arg.get("marker"):
        open(arg["marker"], "w").close()
    return {"node": ctx.placement.node_id, "gpu": ctx.placement.gpu_index, "pid": os.getpid(),
            "cuda_visible": os.environ.get("CUDA_VISIBLE_DEVICES"), "began": began, "ended": time.time()}


def crasher(arg, ctx):
    os._exit(3)  # a dead worker, as a crashed CUDA context leaves it


def raiser(arg, ctx):
    raise ValueError("the kernel's outputs differ")


def test_one_job_per_gpu_at_a_time_in_a_fresh_process_each(engine):
    events = []
    jobs = [Job(key=f"j{i}", fn=sleeper, arg={"s": 0.6}) for i in range(6)]
    run = engine.run(jobs, on_event=events.append)
    assert [o.status for o in run.outcomes] == ["done"] * 6 and not run.interrupted
    values = [o.value for o in run.outcomes]
    assert len({v["pid"] for v in values}) == 6  # max_calls=1: a fresh worker per job
    by_gpu: dict = {}
    for v in values:
        assert v["cuda_visible"] == str(v["gpu"])  # Ray hands the job its one GPU
        by_gpu.setdefault((v["node"], v["gpu"]), []).append((v["began"], v["ended"]))
    for spans in by_gpu.values():  # never two jobs on one GPU at once
        spans.sort()
        assert all(earlier[1] <= later[0] for earlier, later in zip(spans, spans[1:])), spans
    assert jobs_sharing_a_gpu({o.key: o.placement for o in run.outcomes}) == []  # as the placements tell it
    assert all(o.placement.started_at <= o.placement.ended_at for o in run.outcomes)
    assert max(e.counts.running for e in events) <= 3  # at most one job per GPU of the cluster in flight
    last = events[-1]
    assert last.counts.done == 6 and last.counts.running == last.counts.pending == 0
    assert sum(t.done for t in last.per_gpu.values()) == 6 and run.per_gpu == last.per_gpu


def test_results_say_which_node_and_gpu(engine, cluster):
    run = engine.run([Job(key="a", fn=sleeper, arg={"s": 0})])
    placement = run.outcomes[0].placement
    assert placement.engine == "ray" and placement.hostname == socket.gethostname()
    assert placement.node_id in {n["NodeID"] for n in ray.nodes()} and placement.gpu_index in (0, 1)
    assert placement.label.endswith(f":gpu{placement.gpu_index}") and run.outcomes[0].run_s >= 0
    assert run.outcomes[0].wall_s >= run.outcomes[0].run_s


def test_a_job_that_dies_or_raises_fails_alone(engine):
    jobs = [Job(key="ok1", fn=sleeper, arg={"s": 0}), Job(key="dies", fn=crasher, arg=None),
            Job(key="raises", fn=raiser, arg=None), Job(key="ok2", fn=sleeper, arg={"s": 0})]
    run = engine.run(jobs)
    status = {o.key: o for o in run.outcomes}
    assert status["ok1"].status == status["ok2"].status == "done"
    assert status["dies"].status == "failed" and "worker process died" in status["dies"].reason
    assert status["raises"].status == "failed" and status["raises"].reason == "ValueError: the kernel's outputs differ"
    assert status["raises"].placement is not None  # a job that raised still says where it ran


def test_ctrl_c_cancels_the_jobs_not_back_and_reports_what_finished(engine, tmp_path):
    def interrupt(event):
        if event.kind == "done":
            raise KeyboardInterrupt  # as Ctrl-C lands while the driver waits

    jobs = [Job(key="quick", fn=sleeper, arg={"s": 0})] + [
        Job(key=f"slow{i}", fn=sleeper, arg={"s": 2.5, "marker": str(tmp_path / f"slow{i}")}) for i in range(4)]
    run = engine.run(jobs, on_event=interrupt)
    assert run.interrupted
    assert run.outcomes[0].status == "done"
    assert [o.status for o in run.outcomes[1:]] == ["cancelled"] * 4
    time.sleep(3)
    assert not list(tmp_path.iterdir())  # no cancelled job ran to its end


def test_stop_from_a_callback_cancels_the_rest(engine):
    def stop_after_first(event):
        if event.kind == "done":
            engine.stop()

    run = engine.run([Job(key=f"j{i}", fn=sleeper, arg={"s": 0 if i == 0 else 3}) for i in range(5)],
                     on_event=stop_after_first)
    assert run.interrupted and run.outcomes[0].status == "done"
    assert {o.status for o in run.outcomes[1:]} == {"cancelled"}


def test_a_job_past_its_timeout_is_cancelled_and_failed(cluster):
    # the limit counts from submission: wide enough that a quick job's worker starts within it on a
    # loaded 2-core CI machine (1.5 s was not: the quick job timed out too)
    engine = RayEngine(EngineSettings(engine="ray", job_timeout_s=8.0, poll_s=0.2))
    run = engine.run([Job(key="hangs", fn=sleeper, arg={"s": 120}), Job(key="quick", fn=sleeper, arg={"s": 0})])
    hangs, quick = run.outcomes
    assert quick.status == "done", quick.reason
    assert hangs.status == "failed" and "timed out after 8 s" in hangs.reason


def test_a_job_runs_only_on_a_node_with_its_gpu_model(engine, cluster):
    head = ray.get_runtime_context().get_node_id()  # the driver is on the head (model A)
    jobs = [Job(key=f"b{i}", fn=sleeper, arg={"s": 0.3}, gpu_model=MODEL_B) for i in range(3)] + [
        Job(key=f"a{i}", fn=sleeper, arg={"s": 0.3}, gpu_model=MODEL_A) for i in range(3)] + [
        Job(key="c", fn=sleeper, arg={"s": 0}, gpu_model="Fake GPU C")]
    run = engine.run(jobs)
    for o in run.outcomes[:3]:
        assert o.status == "done" and o.value["node"] != head and o.placement.gpu_model == "gpu_model:Fake_GPU_B"
    for o in run.outcomes[3:6]:
        assert o.status == "done" and o.value["node"] == head
    assert run.outcomes[6].status == "failed" and "no node of the Ray cluster declares one" in run.outcomes[6].reason
    assert "gpu_model:Fake_GPU_C" in run.outcomes[6].reason
    anywhere = RayEngine(EngineSettings(engine="ray", match_gpu_model=False)).run(
        [Job(key="c", fn=sleeper, arg={"s": 0}, gpu_model="Fake GPU C")])
    assert anywhere.outcomes[0].status == "done"


def test_the_local_and_ray_engines_return_the_same_values(engine):
    jobs = [Job(key=f"j{i}", fn=_square, arg=i) for i in range(3)]
    assert [o.value for o in engine.run(jobs).outcomes] == [o.value for o in LocalEngine().run(jobs).outcomes]


def _square(arg, ctx):
    return arg * arg


def test_bench_check_runs_each_kernel_as_a_ray_job(engine, tmp_path, monkeypatch):
    # No GPU here: each kernel's job reaches a worker with a fake GPU and says nvidia-smi shows none,
    # or, pinned to its reference's GPU model that no node declares, says which resource is missing.
    from kernelloop.bench.check import check_suite
    from kernelloop.bench.suite import suite_entries
    from kernelloop.config import load_settings

    from .test_bench import _project, _record_by_hand

    root = _project(tmp_path)
    settings = load_settings(project_dir=root)
    for entry in suite_entries(settings, project_dir=root):
        _record_by_hand(entry)
    monkeypatch.chdir(root)
    pinned = check_suite(settings, engine=engine)
    assert pinned.engine == "ray" and [k.status for k in pinned.kernels] == ["error", "error"]
    assert all("gpu_model:NVIDIA_H100_80GB_HBM3" in k.summary for k in pinned.kernels)
    seen = []
    anywhere = check_suite(settings, engine=RayEngine(EngineSettings(engine="ray", match_gpu_model=False)),
                           on_kernel=seen.append)
    assert sorted(k.name for k in seen) == ["row_softmax", "transpose"]
    for k in anywhere.kernels:
        assert k.status == "error" and "no CUDA GPU visible on" in k.summary and k.ran_on is not None
        assert k.ran_on.engine == "ray" and k.ran_on.node_id


def test_optimize_several_kernels_on_ray_ships_each_as_a_job(engine, tmp_path, monkeypatch):
    # No GPU here: each run reaches its worker (inputs pickled, the kernel written in its scratch
    # folder) and fails there saying so; the driver needed none, and wrote nothing.
    from kernelloop.config import load_settings
    from kernelloop.graph.fanout import optimize_kernels
    from kernelloop.llm_config import resolve_llm_config

    from .conftest import ROOT

    monkeypatch.chdir(tmp_path)
    settings = load_settings({"runs_dir": tmp_path / "runs"})
    kernels = [ROOT / "kernels" / "transpose.cu", ROOT / "kernels" / "row_softmax.cu"]
    result = optimize_kernels(kernels, settings, resolve_llm_config(None, None, None), engine=engine,
                              optimizer_kind="offline")
    assert result.engine == "ray" and result.exit_code == 2 and not result.interrupted
    for run in result.runs:
        assert run.status == "failed" and "needs a CUDA GPU" in run.reason and run.ran_on.engine == "ray"
    assert not (tmp_path / "runs").exists()
