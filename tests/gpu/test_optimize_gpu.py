"""`kernelloop optimize` end to end on a real GPU, as a new user runs it: no key (so the
offline optimizer), fresh data and cache folders, the three MCP servers over stdio.

Set KERNELLOOP_GPU_REPORT_DIR=folder to keep every run's summary.json there."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ..conftest import ROOT

pytestmark = pytest.mark.gpu
SUITE = ["naive_matmul", "row_softmax", "sum_reduction", "transpose", "stencil2d", "histogram"]


def optimize(kernel: str, tmp: Path, *extra: str) -> tuple[subprocess.CompletedProcess, Path]:
    env = {k: v for k, v in os.environ.items() if k not in ("NVIDIA_API_KEY", "KERNELLOOP_BASE_URL")}
    env.update(KERNELLOOP_DATA_DIR=str(tmp / "data"), KERNELLOOP_CACHE_DIR=str(tmp / "cache"))
    runs = tmp / "runs"
    proc = subprocess.run([sys.executable, "-m", "kernelloop", "optimize", str(ROOT / "kernels" / f"{kernel}.cu"),
                           "--runs-dir", str(runs), "--json", *extra], cwd=tmp, env=env, capture_output=True,
                          text=True, timeout=900)
    keep = os.environ.get("KERNELLOOP_GPU_REPORT_DIR")
    if keep and proc.stdout.strip().startswith("{"):
        Path(keep).mkdir(parents=True, exist_ok=True)
        (Path(keep) / f"{kernel}.json").write_text(proc.stdout)
    return proc, runs


@pytest.mark.parametrize("kernel", SUITE)
def test_offline_optimize_is_accepted_within_three_iterations(kernel, tmp_path):
    proc, runs = optimize(kernel, tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-2000:]
    summary = json.loads(proc.stdout)
    assert summary["status"] == "accepted" and summary["optimizer"] == "offline"
    assert summary["verify"]["iteration_accepted"] <= 3 and summary["verify"]["speedup"] >= 1.2
    assert summary["verify"]["correctness"] == "match" and summary["gpu"]
    folder = Path(summary["run_dir"])
    assert folder.parent.parent == runs
    for name in ("best.cu", "certificate.json", "report.md", "summary.json", "profile-baseline.json",
                 "profile-best.json", "iter-01/candidate.cu", "iter-01/verdict.json"):
        assert (folder / name).is_file(), name
    if kernel == "naive_matmul":
        assert summary["verify"]["speedup"] >= 3.0  # the goal for the offline optimizer
        check = subprocess.run([sys.executable, "-m", "kernelloop", "verify-cert", str(folder / "certificate.json"),
                                "--json"], capture_output=True, text=True, timeout=600,
                               env={**os.environ, "KERNELLOOP_CACHE_DIR": str(tmp_path / "cache")})
        assert check.returncode == 0, check.stdout[-3000:] + check.stderr[-2000:]
        result = json.loads(check.stdout)
        assert [c["status"] for c in result["checks"]] == ["pass"] * 5
