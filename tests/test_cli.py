"""The command line: exit codes and one-line errors, run as a user would run it."""

from __future__ import annotations

import os
import subprocess
import sys

from .conftest import ROOT


def kl(*args, env=None, cwd=None):
    full_env = {**os.environ, **(env or {})}
    return subprocess.run([sys.executable, "-m", "kernelloop", *args], capture_output=True, text=True,
                          env=full_env, cwd=cwd or ROOT, timeout=120)


def one_error_line(r):
    lines = [ln for ln in r.stderr.strip().splitlines() if ln.strip()]
    assert "Traceback" not in r.stderr
    return " ".join(lines)


def test_version():
    r = kl("--version")
    assert r.returncode == 0 and "kernelloop 0." in r.stdout


def test_missing_file_exits_2(tmp_path):
    r = kl("verify", "kernels/naive_matmul.cu", str(tmp_path / "nope.cu"))
    assert r.returncode == 2 and "nope.cu: no such file" in one_error_line(r)


def test_not_a_cuda_program_exits_2(tmp_path):
    f = tmp_path / "hello.cu"
    f.write_text("int main() { return 0; }\n")
    r = kl("verify", str(f), "kernels/naive_matmul.cu")
    assert r.returncode == 2 and "not a CUDA program" in one_error_line(r)


def test_binary_file_exits_2(tmp_path):
    f = tmp_path / "blob.cu"
    f.write_bytes(b"\x7fELF\x00\x01\x02")
    r = kl("verify", str(f), "kernels/naive_matmul.cu")
    assert r.returncode == 2 and "binary file" in one_error_line(r)


def test_no_gpu_exits_2_and_points_at_doctor(tmp_path):
    # nvidia-smi cannot be found with this PATH, whatever the machine has
    r = kl("verify", "kernels/naive_matmul.cu", "kernels/naive_matmul.cu",
           env={"PATH": os.path.dirname(sys.executable) + ":/usr/local/bin:/usr/bin:/bin".replace("/usr/bin:", "/usr/bin:") ,
                "KERNELLOOP_CACHE_DIR": str(tmp_path)})
    if "nvidia-smi" in subprocess.run(["sh", "-c", "command -v nvidia-smi"], capture_output=True, text=True).stdout:
        return  # a GPU machine: covered by the gpu tests
    assert r.returncode == 2
    assert one_error_line(r) == "error: verify needs a CUDA GPU; run `kernelloop doctor`"


def test_no_nvcc_exits_2(tmp_path):
    r = kl("verify", "kernels/naive_matmul.cu", "kernels/naive_matmul.cu",
           env={"PATH": os.path.dirname(sys.executable), "KERNELLOOP_CACHE_DIR": str(tmp_path)})
    assert r.returncode == 2 and "nvcc not found" in one_error_line(r)


def test_bad_setting_exits_2():
    r = kl("verify", "--threshold", "0.9", "kernels/naive_matmul.cu", "kernels/naive_matmul.cu")
    assert r.returncode == 2 and "threshold" in one_error_line(r)


def test_usage_error_exits_2():
    assert kl("verify", "--bogus").returncode == 2


def test_doctor_reports_truthfully_without_a_gpu():
    r = kl("doctor")
    assert "nvcc" in r.stdout and "gpu" in r.stdout and "Traceback" not in r.stderr
    has_gpu = "nvidia-smi" in subprocess.run(["sh", "-c", "command -v nvidia-smi"], capture_output=True, text=True).stdout
    if not has_gpu:
        assert r.returncode == 1 and "no NVIDIA GPU visible" in r.stdout
