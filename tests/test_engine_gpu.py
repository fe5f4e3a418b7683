"""`bench check --engine ray` on a one-GPU Ray cluster that the command starts on this machine: the
same verdicts as the local engine, each kernel's check in a Ray task on the GPU (node, GPU name and
index recorded), and the overhead per job measured (recorded as test properties: the figure goes
into docs/engine.md). Needs a GPU and Ray; memcheck off as in tests/gpu/test_bench_gpu.py."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import pytest

from .conftest import ROOT

pytestmark = pytest.mark.gpu
# KL_ENGINE_GPU_KERNELS="sum_reduction histogram" picks others (the two quickest checks: a shorter device call)
KERNELS = tuple(os.environ.get("KL_ENGINE_GPU_KERNELS", "transpose row_softmax sum_reduction").split())


def _kl(project, *args, cache=None):
    env = {**os.environ, "KERNELLOOP_VERIFY_MEMCHECK": "off", "KERNELLOOP_ENGINE": ""}
    env.pop("RAY_ADDRESS", None)
    if cache is not None:
        env["KERNELLOOP_CACHE_DIR"] = str(cache)
    started = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "kernelloop", *args], cwd=project, env=env, capture_output=True,
                       text=True, timeout=550)
    return r, time.monotonic() - started


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    pytest.importorskip("ray")
    root = tmp_path_factory.mktemp("bench-ray")
    lines = []
    for name in KERNELS:
        shutil.copy(ROOT / "kernels" / f"{name}.cu", root / f"{name}.cu")
        lines += ["[[bench.kernels]]", f'name = "{name}"', f'program = "{name}.cu"']
    (root / "kernelloop.toml").write_text("\n".join(lines) + "\n")
    recorded, _ = _kl(root, "bench", "record", "--json")
    assert recorded.returncode == 0, recorded.stderr[-2000:]
    return root


def test_the_suite_through_ray_gives_the_local_verdicts_and_says_where_it_ran(project, record_property):
    results, walls = {}, {}
    for engine in ("local", "ray"):  # each with a cold build cache: the Ray jobs build in scratch folders
        with tempfile.TemporaryDirectory(prefix="kl-cache-") as cache:
            r, walls[engine] = _kl(project, "bench", "check", "--json", "--engine", engine, cache=cache)
        assert r.returncode in (0, 3), r.stdout[-3000:] + r.stderr[-2000:]
        results[engine] = json.loads(r.stdout)
    local, ray = ({k["name"]: k for k in results[e]["kernels"]} for e in ("local", "ray"))
    assert results["ray"]["engine"] == "ray" and set(local) == set(ray) == set(KERNELS)
    for name in KERNELS:
        record_property(f"{name}_local", f"{local[name]['status']} {local[name]['summary']} "
                                         f"({local[name]['wall_s']:.1f} s)")
        record_property(f"{name}_ray", f"{ray[name]['status']} {ray[name]['summary']} ({ray[name]['wall_s']:.1f} s)")
        assert ray[name]["status"] == local[name]["status"] == "same"
        placement = ray[name]["ran_on"]
        assert placement["engine"] == "ray" and placement["gpu_index"] == 0 and placement["gpu_name"]
        assert placement["node_id"] and placement["gpu_model"].startswith("gpu_model:")
        assert local[name]["ran_on"] is None
    n = len(KERNELS)
    # The command's wall time: Ray's start, one fresh worker per job, shipping inputs and results.
    per_job = (walls["ray"] - walls["local"]) / n
    in_jobs = sum(k["wall_s"] for k in ray.values()) - sum(k["wall_s"] for k in local.values())
    record_property("local_command_s", f"{walls['local']:.1f}")
    record_property("ray_command_s", f"{walls['ray']:.1f}")
    record_property("ray_overhead_per_job_s", f"{per_job:.2f}")
    record_property("ray_check_time_difference_s", f"{in_jobs:.2f}")  # the checks themselves, inside the jobs
    print(f"\nengine overhead: local {walls['local']:.1f} s, ray {walls['ray']:.1f} s for {n} kernels: "
          f"{per_job:+.2f} s per job ({in_jobs:+.2f} s of it inside the checks)")
