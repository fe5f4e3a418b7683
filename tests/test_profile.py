"""`kernelloop profile`: reports diagnosed without a GPU, and every user error as one line."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys

import pytest

from kernelloop.config import Settings
from kernelloop.errors import EnvironmentProblem, InputError
from kernelloop.profiler import run as prun
from kernelloop.tools.gpu import GpuInfo

from .conftest import FIXTURES, ROOT

REPORT = FIXTURES / "ncu" / "suite" / "naive_matmul.ncu-rep"


def kl(*args, env=None):
    return subprocess.run([sys.executable, "-m", "kernelloop", *args], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, **(env or {})}, timeout=300)


def test_report_is_diagnosed_without_a_gpu():
    r = kl("profile", "--report", str(REPORT))
    assert r.returncode == 0, r.stderr
    assert "L1/load-store limited" in r.stdout and "shared memory" in r.stdout


def test_report_as_json():
    r = kl("profile", "--report", str(REPORT), "--json")
    d = json.loads(r.stdout)
    assert d["primary"] == "memory-bound" and d["findings"][0]["rule"] == "l1-lsu-limited"


@pytest.mark.parametrize("args, message", [
    (["--report", "missing.ncu-rep"], "missing.ncu-rep"),
    (["--report", "README.md"], "README.md"),
    (["--report", str(REPORT), "--kernel", "no_such_kernel"], "no kernel matching"),
    ([], "give a CUDA program"),
    (["kernels/naive_matmul.cu", "--set", "huge"], "--set"),
])
def test_bad_input_is_one_line_exit_2(args, message):
    r = kl("profile", *args)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr and message in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_a_report_from_another_ncu_format_is_refused(tmp_path):
    data = bytearray(REPORT.read_bytes())
    # the reader's own tests establish where the format number lives; flip the NVR header version
    bad = tmp_path / "other.ncu-rep"
    idx = data.find(b"NVR")
    assert idx >= 0
    data[idx + 4] = 3 if data[idx + 4] != 3 else 4
    bad.write_bytes(bytes(data))
    r = kl("profile", "--report", str(bad))
    assert r.returncode == 2 and "Traceback" not in r.stderr


def test_profiling_without_a_gpu_says_so(tmp_path):
    if shutil.which("nvidia-smi"):
        pytest.skip("a GPU machine")
    r = kl("profile", "kernels/naive_matmul.cu", env={"KERNELLOOP_CACHE_DIR": str(tmp_path)})
    assert r.returncode == 2
    assert "GPU" in r.stderr or "ncu" in r.stderr  # no ncu here either: one line either way


@pytest.mark.nvcc
def test_ncu_without_counter_permission_is_one_clear_error(tmp_path, monkeypatch):
    fake = tmp_path / "ncu"
    fake.write_text("#!/bin/sh\necho '==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access "
                    "NVIDIA GPU Performance Counters on the target device 0.'\nexit 1\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setattr(prun, "find_ncu", lambda: fake)
    monkeypatch.setattr(prun, "detect_gpus", lambda: [GpuInfo(index=0, name="fake", compute_capability="9.0",
                                                                driver_version="0")])
    monkeypatch.setattr(prun, "_kernels_by_time", lambda binary, settings: [])
    with pytest.raises(EnvironmentProblem, match="ERR_NVGPUCTRPERM.*reboot"):
        prun.profile_file(ROOT / "kernels" / "naive_matmul.cu", Settings(cache_dir=tmp_path / "c", data_dir=tmp_path))


def test_kernel_name_that_matches_nothing_lists_the_kernels():
    kernels = [prun.KernelLaunches(name="_Z3fooPf", launches=22, total_ms=5.0)]
    with pytest.raises(InputError, match="no kernel matching 'bar'; the program launches: _Z3fooPf"):
        prun._pick_kernel(kernels, "bar")
    assert prun._pick_kernel(kernels, "foo").name == "_Z3fooPf"
    assert prun._pick_kernel(kernels, None).name == "_Z3fooPf"


@pytest.mark.nvcc
def test_resources_command_without_a_gpu():
    r = kl("resources", "src/kernelloop/exemplars/matmul_smem_tiling.cu", "--block", "1024", "--json")
    assert r.returncode == 0, r.stderr
    (entry,) = json.loads(r.stdout)
    assert entry["kernel"]["static_shared_bytes"] == 8192 and entry["kernel"]["registers"] > 0
    assert entry["occupancy"][0]["theoretical_occupancy_pct"] == 100.0


def test_resources_command_errors():
    assert kl("resources", "nope.cu").returncode == 2
    r = kl("resources", "kernels/naive_matmul.cu", "--arch", "sm_1")
    assert r.returncode == 2 and "Traceback" not in r.stderr


def test_ncu_command_profiles_one_launch_of_the_hot_kernel():
    hot = prun.KernelLaunches(name="_Z19naive_matmul_kernelPKfS0_Pfi", launches=22, total_ms=9.0)
    argv = prun.ncu_command(prun.Path("/x/ncu"), chosen=hot, kernel=None, section_set="full", clock_control="none")
    assert argv == ["/x/ncu", "--set", "full", "--clock-control", "none", "--kernel-name-base", "mangled",
                    "-k", "regex:^_Z19naive_matmul_kernelPKfS0_Pfi$", "--launch-skip", "1", "--launch-count", "1",
                    "-f", "-o", "profile"]
    once = hot.model_copy(update={"launches": 1})
    fast = prun.ncu_command(prun.Path("ncu"), chosen=once, kernel=None, section_set="fast", clock_control="base")
    assert fast[fast.index("--launch-skip") + 1] == "0" and "--set" not in fast
    assert fast.count("--section") == len(prun.FAST_SECTIONS)
    # every option is followed by its own value
    for flag in ("--clock-control", "--launch-skip", "--launch-count", "-o", "-k"):
        assert not fast[fast.index(flag) + 1].startswith("-")
