"""The engine switch without a Ray cluster: settings, the local engine, bench check on it (the same
results as before), bringing a run home, and the one-line exit-2 errors of `--engine ray`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types

import pytest

from kernelloop.config import load_settings
from kernelloop.engine import EngineSettings, Job, LocalEngine, Placement, gpu_model_resource
from kernelloop.errors import ConfigError

from .conftest import ROOT, run_cli_in_process
from .test_bench import GPU, _project, _record_by_hand


def _kl(*args, code="", cwd=None, env=None):
    """`kernelloop ARGS` in a fresh interpreter, after CODE (e.g. hiding Ray)."""
    program = f"import sys\n{code}\nfrom kernelloop.cli.app import main\nsys.argv = ['kernelloop', *{list(args)!r}]\nmain()"
    return subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, cwd=cwd, timeout=120,
                          env={**os.environ, "COLUMNS": "200", **(env or {})})


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


# -- settings --------------------------------------------------------------------------------

def test_engine_settings_flags_over_the_environment_over_defaults(monkeypatch):
    monkeypatch.delenv("KERNELLOOP_ENGINE", raising=False)
    assert EngineSettings.from_environment().engine == "local"
    monkeypatch.setenv("KERNELLOOP_ENGINE", "ray")
    assert EngineSettings.from_environment().engine == "ray"
    assert EngineSettings.from_environment(engine="local").engine == "local"
    s = EngineSettings.from_environment(engine="ray", address="h:6379", job_timeout_s=5, max_in_flight=2)
    assert (s.address, s.job_timeout_s, s.max_in_flight) == ("h:6379", 5, 2)


@pytest.mark.parametrize("given, message", [
    ({"engine": "dask"}, "use local or ray"), ({"engine": "local", "address": "h:1"}, "add --engine ray"),
    ({"engine": "ray", "job_timeout_s": 0}, "more than 0"), ({"engine": "ray", "max_in_flight": 0}, "at least 1")])
def test_engine_settings_mistakes_are_one_config_error(given, message, monkeypatch):
    monkeypatch.delenv("KERNELLOOP_ENGINE", raising=False)
    with pytest.raises(ConfigError, match=message):
        EngineSettings.from_environment(**given)


def test_a_gpu_model_is_a_ray_resource_name():
    assert gpu_model_resource("NVIDIA H200") == "gpu_model:NVIDIA_H200"
    assert gpu_model_resource(" NVIDIA H100 80GB HBM3 ") == "gpu_model:NVIDIA_H100_80GB_HBM3"
    assert gpu_model_resource("NVIDIA A100-SXM4-40GB") == "gpu_model:NVIDIA_A100-SXM4-40GB"


# -- the local engine ------------------------------------------------------------------------

def _double(arg, ctx):
    if arg == "boom":
        raise RuntimeError("the GPU fell off the bus")
    return arg * 2


def test_the_local_engine_runs_jobs_in_order_and_a_failure_stays_one_jobs():
    events = []
    run = LocalEngine().run([Job(key=k, fn=_double, arg=a) for k, a in (("a", 1), ("b", "boom"), ("c", 3))],
                            on_event=events.append)
    assert [(o.key, o.status, o.value) for o in run.outcomes] == [("a", "done", 2), ("b", "failed", None),
                                                                    ("c", "done", 6)]
    assert run.outcomes[1].reason == "RuntimeError: the GPU fell off the bus" and not run.interrupted
    assert [e.kind for e in events] == ["submitted", "done", "submitted", "failed", "submitted", "done"]
    assert events[-1].counts.model_dump() == {"pending": 0, "running": 0, "done": 2, "failed": 1, "cancelled": 0}


def test_ctrl_c_in_a_local_job_cancels_it_and_the_rest_and_keeps_what_finished():
    def interrupted(arg, ctx):
        raise KeyboardInterrupt

    engine = LocalEngine()
    run = engine.run([Job(key="a", fn=_double, arg=1), Job(key="b", fn=interrupted, arg=None),
                      Job(key="c", fn=_double, arg=2)])
    assert run.interrupted and [o.status for o in run.outcomes] == ["done", "cancelled", "cancelled"]
    stopped = engine.run([Job(key=k, fn=_double, arg=1) for k in "abc"],
                         on_event=lambda e: e.kind == "done" and engine.stop())
    assert stopped.interrupted and [o.status for o in stopped.outcomes] == ["done", "cancelled", "cancelled"]


def test_importing_kernelloop_and_running_the_local_engine_never_imports_ray():
    code = ("import sys, kernelloop, kernelloop.engine, kernelloop.bench.check, kernelloop.graph.fanout, "
            "kernelloop.cli.app\nfrom kernelloop.engine import Job, LocalEngine\n"
            "LocalEngine().run([Job(key='a', fn=lambda a, c: a, arg=1)])\nprint('ray' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.stdout.strip() == "False", r.stderr


# -- bench check on the local engine: the same results as before --------------------------------

def _fake_check(entry, reference, reference_text, current_text, settings, gpu, progress=None):
    from kernelloop.bench.check import KernelCheck

    if progress is not None:
        progress(entry.name)
    return KernelCheck(name=entry.name, program=str(entry.program), status="same", summary=f"{entry.name} on {gpu.name}",
                       regression_threshold=entry.regression_threshold, reference=reference, wall_s=1.5,
                       notes=["from the check"])


def _recorded_project(tmp_path, monkeypatch):
    from kernelloop.bench.suite import suite_entries

    root = _project(tmp_path)
    settings = load_settings(project_dir=root)
    for entry in suite_entries(settings, project_dir=root):
        _record_by_hand(entry)
    monkeypatch.chdir(root)
    return root, settings


def test_bench_check_on_the_local_engine_gives_the_results_it_gave_before(tmp_path, monkeypatch):
    import kernelloop.bench.check as check_module
    from kernelloop.bench.suite import suite_entries

    root, settings = _recorded_project(tmp_path, monkeypatch)
    monkeypatch.setattr(check_module, "detect_gpus", lambda: [GPU])
    monkeypatch.setattr(check_module, "check_kernel", _fake_check)
    # What the sequential loop made: check_kernel per kernel, in suite order, on the first GPU.
    before = []
    for one in check_module._prepare(suite_entries(settings), settings):
        result = _fake_check(one.entry, one.reference, one.reference_text, one.current_text, settings, GPU)
        result.reference_from, result.notes = one.reference_from, [*one.notes, *result.notes]
        before.append(result)
    for engine in (None, LocalEngine()):
        seen, stages = [], []
        check = check_module.check_suite(settings, engine=engine, on_kernel=seen.append, progress=stages.append)
        assert check.kernels == before and seen == before and stages == ["transpose", "row_softmax"]
        assert check.gpu == GPU and check.engine == "local" and not check.interrupted and check.exit_code == 0
        assert all(k.ran_on is None for k in check.kernels)


def test_ctrl_c_during_bench_check_reports_what_finished_and_exits_130(tmp_path, monkeypatch, capsys):
    import kernelloop.bench.check as check_module

    _recorded_project(tmp_path, monkeypatch)

    def second_interrupted(entry, *args, **kwargs):
        if entry.name == "row_softmax":
            raise KeyboardInterrupt
        return _fake_check(entry, *args, **kwargs)

    monkeypatch.setattr(check_module, "detect_gpus", lambda: [GPU])
    monkeypatch.setattr(check_module, "check_kernel", second_interrupted)
    code, out, err = run_cli_in_process(monkeypatch, capsys, tmp_path, "bench", "check", "--json")
    result = json.loads(out)
    assert code == 130 and result["interrupted"] and result["exit_code"] == 130
    assert [(k["name"], k["status"]) for k in result["kernels"]] == [("transpose", "same"), ("row_softmax", "error")]
    assert "was not checked: cancelled" in result["kernels"][1]["summary"]


# -- a run made on a worker comes home ---------------------------------------------------------

def test_a_run_from_a_worker_is_written_here_as_a_local_run(tmp_path, monkeypatch):
    from kernelloop.graph.fanout import RunBundle, import_run
    from kernelloop.runs.store import AttemptRecord, RunRecord, run_store

    monkeypatch.chdir(tmp_path)
    settings = load_settings({"runs_dir": tmp_path / "runs"}).model_copy(update={"data_dir": tmp_path / "data"})
    worker_dir, worker_kernel = "/tmp/kernelloop-job-x/runs/k/20261129-1200-ab", "/tmp/kernelloop-job-x/kernel/k.cu"
    record = RunRecord(run_id="20261129-1200-ab", kernel="k", kernel_path=worker_kernel, kernel_sha256="0" * 64,
                       started_at="2026-11-29T12:00:00+00:00", status="accepted", optimizer="offline",
                       best_speedup=1.5, run_dir=worker_dir, summary={"run_dir": worker_dir})
    attempt = AttemptRecord(run_id=record.run_id, iteration=1, approach="tiling", optimizer="offline", accepted=True,
                            kind="accepted", reason="", speedup=1.5, kernel="k", kernel_sha256="0" * 64)
    bundle = RunBundle(record=record, attempts=[attempt], worker_run_dir=worker_dir, worker_kernel_path=worker_kernel,
                       files={"summary.json": json.dumps({"run_dir": worker_dir}).encode(),
                              "attempts/1/candidate.cu": b"__global__ void k() {}\n", "blob.bin": b"\xff\x00",
                              "../../escape.txt": b"never written"})
    kernel = tmp_path / "k.cu"
    written = import_run(bundle, settings, str(kernel))
    root = tmp_path / "runs" / "k" / record.run_id
    assert written.run_dir == str(root) and written.kernel_path == str(kernel.resolve())
    assert json.loads((root / "summary.json").read_text()) == {"run_dir": str(root)}
    assert (root / "blob.bin").read_bytes() == b"\xff\x00" and (root / "attempts/1/candidate.cu").is_file()
    assert not (tmp_path / "runs" / "escape.txt").exists()
    store = run_store(settings)
    assert store.get_run(record.run_id).summary == {"run_dir": str(root)}
    assert [a.approach for a in store.attempts(record.run_id)] == ["tiling"]


# -- --engine ray: one line and exit code 2 ------------------------------------------------------

HIDE_RAY = "sys.modules['ray'] = None  # as if Ray were not installed"


@pytest.mark.parametrize("args", [["bench", "check", "--engine", "ray"],
                                  ["optimize", "kernels/naive_matmul.cu", "kernels/transpose.cu", "--engine", "ray"]],
                         ids=["bench check", "optimize"])
def test_engine_ray_without_ray_installed_is_one_line_exit_2(args):
    r = _kl(*args, code=HIDE_RAY, cwd=ROOT)
    assert r.returncode == 2 and "pip install 'kernelloop[ray]'" in _one_line(r.stderr)


def test_engine_ray_with_no_cluster_at_the_address_is_one_line_exit_2(tmp_path):
    pytest.importorskip("ray")
    with __import__("socket").socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    r = _kl("bench", "check", "--engine", "ray", "--address", f"127.0.0.1:{port}", cwd=tmp_path)
    line = _one_line(r.stderr)
    assert r.returncode == 2 and f"no Ray cluster answers at 127.0.0.1:{port}" in line and "ray start --head" in line
    r = _kl("bench", "check", "--address", f"127.0.0.1:{port}", cwd=tmp_path, env={"KERNELLOOP_ENGINE": ""})
    assert r.returncode == 2 and "add --engine ray" in _one_line(r.stderr)


def test_a_ray_cluster_without_a_gpu_is_one_line_exit_2(tmp_path, monkeypatch, capsys):
    fake = types.SimpleNamespace(is_initialized=lambda: True, cluster_resources=lambda: {"CPU": 8.0},
                                 shutdown=lambda: None, remote=lambda **options: (lambda fn: fn))
    monkeypatch.setitem(sys.modules, "ray", fake)
    code, _, err = run_cli_in_process(monkeypatch, capsys, tmp_path, "bench", "check", "--engine", "ray")
    assert code == 2 and "has no GPU" in _one_line(err) and "--num-gpus" in err


def test_placement_labels_tell_gpus_and_nodes_apart():
    a = Placement(engine="ray", node_id="3fa2c1deadbeef", hostname="h1", gpu_index=3, gpu_name="NVIDIA H200")
    assert a.label == "h1[3fa2c1]:gpu3" and a.describe() == "h1[3fa2c1]:gpu3 (NVIDIA H200)"
    assert Placement(hostname="h1").label == "h1:gpu?"


def test_jobs_sharing_a_gpu_finds_overlaps_on_one_gpu_only():
    from kernelloop.engine import Placement, jobs_sharing_a_gpu

    def at(gpu, began, ended, node="n1", uuid=""):
        return Placement(engine="ray", node_id=node, gpu_index=gpu, gpu_uuid=uuid, started_at=began, ended_at=ended)

    apart = {"a": at(0, 1, 2), "b": at(0, 2, 3), "c": at(1, 1.5, 2.5), "d": at(0, 1, 9, node="n2")}
    assert jobs_sharing_a_gpu(apart) == []
    # a long job overlapping a later one on the same GPU, found even with a short one between them
    shared = {"long": at(0, 1, 10), "short": at(0, 2, 3), "late": at(0, 5, 6), "other": at(1, 1, 10)}
    assert sorted(jobs_sharing_a_gpu(shared)) == [("long", "late"), ("long", "short")]
    # one physical GPU seen by two Ray nodes of one host at two indices: the uuid decides
    assert jobs_sharing_a_gpu({"x": at(0, 1, 3, uuid="GPU-1"), "y": at(1, 2, 4, node="n2", uuid="GPU-1")}) == [("x", "y")]
    assert jobs_sharing_a_gpu({"x": at(0, 1, 3, uuid="GPU-1"), "y": at(0, 2, 4, node="n2", uuid="GPU-2")}) == []
