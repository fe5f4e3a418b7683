"""The command line: exit codes and one-line errors, run as a user would run it."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from .conftest import ROOT, shared_cache_dir


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
        pytest.skip("a GPU machine: covered by the gpu tests")
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


# -- kernelloop verify --static: every gate that needs no GPU, with real nvcc ---------------


@pytest.fixture(scope="module")
def static_env(tmp_path_factory):
    """One build cache for the module: the baseline is compiled once."""
    return {"KERNELLOOP_CACHE_DIR": str(shared_cache_dir())}


def has_gpu() -> bool:
    return "nvidia-smi" in subprocess.run(["sh", "-c", "command -v nvidia-smi"], capture_output=True, text=True).stdout


@pytest.mark.nvcc
def test_static_check_passes_an_honest_candidate(static_env):
    r = kl("verify", "--static", "kernels/naive_matmul.cu", "src/kernelloop/exemplars/matmul_smem_tiling.cu", env=static_env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "passes every static gate" in r.stdout and "Traceback" not in r.stderr
    if not has_gpu():
        assert "arch sm_86 (default (no GPU visible))" in " ".join(r.stdout.split())


@pytest.mark.nvcc
def test_static_check_json_rejects_reduced_precision_and_the_flag_allows_it(static_env):
    r = kl("verify", "--static", "--json", "kernels/naive_matmul.cu",
           "tests/fixtures/candidates/matmul/bf16_mma.cu", env=static_env)
    assert r.returncode == 1, r.stdout + r.stderr
    check = json.loads(r.stdout)
    assert check["ok"] is False and check["reasons"] == ["reduced_precision"]
    assert check["violations"][0]["rule"] == "reduced_precision" and check["precision_source"] in ("sass", "ptx")
    assert check["arch"] == ("sm_86" if not has_gpu() else check["arch"])
    r = kl("verify", "--static", "--json", "--allow-reduced-precision", "kernels/naive_matmul.cu",
           "tests/fixtures/candidates/matmul/bf16_mma.cu", env=static_env)
    assert r.returncode == 0, r.stdout + r.stderr
    check = json.loads(r.stdout)
    assert check["ok"] is True and check["allow_reduced_precision"] is True and check["precision_source"] == ""


@pytest.mark.nvcc
def test_static_check_names_the_policy_rule(static_env):
    r = kl("verify", "--static", "kernels/naive_matmul.cu", "tests/fixtures/candidates/matmul/planted_window.cu",
           "--arch", "sm_90", env=static_env)
    assert r.returncode == 1 and "rejected" in r.stdout
    assert "timing (source line" in " ".join(r.stdout.split()) and "cudaEventElapsedTime" in r.stdout


def test_static_check_missing_file_exits_2_with_one_line(tmp_path):
    r = kl("verify", "--static", "kernels/naive_matmul.cu", str(tmp_path / "nope.cu"))
    assert r.returncode == 2 and "nope.cu: no such file" in one_error_line(r)


@pytest.mark.nvcc
def test_static_check_bad_arch_exits_2_with_one_line(tmp_path):
    r = kl("verify", "--static", "--arch", "sm_1x", "kernels/naive_matmul.cu", "src/kernelloop/exemplars/matmul_smem_tiling.cu",
           env={"KERNELLOOP_CACHE_DIR": str(tmp_path)})
    assert r.returncode == 2 and "--arch 'sm_1x'" in one_error_line(r)


def test_static_check_without_nvcc_exits_2(tmp_path):
    r = kl("verify", "--static", "kernels/naive_matmul.cu", "src/kernelloop/exemplars/matmul_smem_tiling.cu",
           env={"PATH": os.path.dirname(sys.executable), "KERNELLOOP_CACHE_DIR": str(tmp_path)})
    assert r.returncode == 2 and "nvcc not found" in one_error_line(r)


@pytest.mark.parametrize("command", [["optimize"], ["verify", "--static", "{f}", "{f}"], ["verify", "{f}", "{f}"],
                                     ["profile"]])
def test_a_program_outside_the_contract_ends_in_one_line_before_any_gpu_work(command):
    # A program as a CUDA developer writes it (its own main and checks, no harness): the
    # contract is checked from the text first, before tools, compilers or the GPU. Under 3 s (issue 10)
    # is judged by the CPU time the command and its children take: wall time on a machine whose cores
    # other test workers' compilers share measured the load (3.1 s, with 0.9 s of it the command's own).
    import resource
    import time
    f = "tests/fixtures/outside/vector_add.cu"
    args = [a.format(f=f) for a in command] + ([f] if "{f}" not in " ".join(command) else [])
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    r = kl(*args)
    elapsed = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    line = one_error_line(r)
    assert r.returncode == 2 and "not a kernelloop program yet" in line and "Writing a v2 harness" in line
    assert "ncu" not in line and "GPU" not in line
    assert cpu < 3.0 and elapsed < 20.0, (cpu, elapsed)


# -- --rtol/--atol: every output, or NAME=VALUE for one (verify and optimize) -----------------


@pytest.mark.parametrize("command", [["verify", "kernels/naive_matmul.cu", "kernels/naive_matmul.cu"],
                                     ["optimize", "kernels/naive_matmul.cu"]])
def test_a_bad_tolerance_flag_is_one_line_and_exit_2(command):
    r = kl(*command, "--rtol", "out=1e-4", "--rtol", "out=fast")
    assert r.returncode == 2 and "error: --rtol 'out=fast': 'fast' is not a number" in one_error_line(r)
    r = kl(*command, "--atol", "=0")
    assert r.returncode == 2 and "--atol '=0': give a number (every output) or NAME=NUMBER" in one_error_line(r)


def test_tolerance_flags_take_a_number_or_name_value_pairs():
    # both forms parse: the error that ends the command is the threshold's, after them
    r = kl("verify", "--rtol", "1e-3", "--rtol", "out=1e-4", "--atol", "dbias=1e-6", "--threshold", "0.9",
           "kernels/naive_matmul.cu", "kernels/naive_matmul.cu")
    assert r.returncode == 2 and "threshold" in one_error_line(r) and "tol" not in one_error_line(r)
    for command in ("verify", "optimize"):
        text = " ".join(kl(command, "--help").stdout.split())
        assert "--rtol [NAME=]RTOL" in text and "--atol [NAME=]ATOL" in text and "NAME=RTOL for the output" in text


def test_init_capture_without_a_gpu_exits_2_in_one_line(tmp_path):
    if "nvidia-smi" in subprocess.run(["sh", "-c", "command -v nvidia-smi"], capture_output=True, text=True).stdout:
        pytest.skip("a GPU machine: capture is covered by tests/gpu/test_capture_gpu.py")
    r = kl("init", str(ROOT / "tests" / "fixtures" / "outside" / "vector_add.cu"), "-o", str(tmp_path / "out.cu"),
           "--capture", env={"KERNELLOOP_CACHE_DIR": str(tmp_path / "cache")})
    assert r.returncode == 2 and "--capture runs your program on a GPU and none is visible" in one_error_line(r)
    assert not (tmp_path / "out.cu").exists()
    r = kl("init", str(ROOT / "tests" / "fixtures" / "outside" / "vector_add.cu"), "-o", str(tmp_path / "out.cu"),
           "--capture-command", "./app")
    assert r.returncode == 2 and "add --capture" in one_error_line(r)


def test_an_unknown_project_setting_is_reported(tmp_path):
    (tmp_path / "kernelloop.toml").write_text("[verfy]\nrtol = 1e-4\n")
    r = kl("verify", "--static", str(ROOT / "kernels" / "naive_matmul.cu"), str(ROOT / "kernels" / "naive_matmul.cu"),
           cwd=tmp_path)
    assert r.returncode == 2 and "unknown setting verfy" in one_error_line(r)


# -- text from data is printed as it is; errors a user causes are one line, exit 2 -------------

def test_brackets_in_names_are_printed_literally_never_read_as_markup(tmp_path):
    r = kl("runs", "show", "[/]", env={"KERNELLOOP_DATA_DIR": str(tmp_path / "data")})
    assert r.returncode == 2 and "no run '[/]'" in one_error_line(r)
    missing = tmp_path / "dir" / "[v2]" / "k.cu"
    r = kl("verify", "kernels/naive_matmul.cu", str(missing))
    assert r.returncode == 2 and str(missing) in one_error_line(r)


def test_brackets_in_data_are_printed_literally_never_read_as_markup(tmp_path):
    folder = tmp_path / "d[v2]"
    folder.mkdir()
    bad = folder / "k.cu"
    text = (ROOT / "kernels" / "sum_reduction.cu").read_text()
    begin = text.index("// kernelloop: editable begin")
    bad.write_text(text[:begin] + "// kernelloop: editable begin\n__global__ void broken(float* sdata) "
                   "{ sdata[tid] = 1.0f; }\n" + text[text.index("// kernelloop: editable end"):])
    r = kl("verify", "--static", "--arch", "sm_90", str(ROOT / "kernels" / "sum_reduction.cu"), str(bad),
           env={"KERNELLOOP_CACHE_DIR": str(tmp_path / "cache")})
    assert "Traceback" not in r.stderr and "MarkupError" not in r.stderr
    assert "sdata[tid]" in r.stdout + r.stderr  # the compiler's log keeps its subscripts


def test_the_settings_file_is_reported_with_its_brackets(tmp_path):
    (tmp_path / "kernelloop.toml").write_text("[verfy]\nruns = 9\n")
    r = kl("verify", "a.cu", "b.cu", cwd=tmp_path)
    assert r.returncode == 2 and "unknown setting verfy (did you mean [verify]?)" in one_error_line(r)


def test_a_folder_kernelloop_cannot_use_is_one_line_exit_2(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    r = kl("runs", "list", env={"KERNELLOOP_DATA_DIR": str(blocker / "data")})
    assert r.returncode == 2
    line = one_error_line(r)
    assert line.startswith("error: ") and "KERNELLOOP_DATA_DIR" in line


@pytest.mark.parametrize("args", [["-h"], ["runs", "-h"], ["corpus", "-h"], ["verify", "-h"]])
def test_dash_h_is_help(args):
    r = kl(*args)
    assert r.returncode == 0 and "Usage:" in r.stdout


def test_a_data_folder_whose_run_log_cannot_be_opened_is_one_line_exit_2(tmp_path):
    # a folder that exists but cannot be written (a read-only mount; here the log's own name taken by a folder,
    # which root cannot write through either): sqlite's error, not a traceback
    data = tmp_path / "data"
    (data / "runs.sqlite").mkdir(parents=True)
    for args in (("runs", "list"), ("runs", "show", "20261121-1015")):
        r = kl(*args, env={"KERNELLOOP_DATA_DIR": str(data)})
        assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
        assert "cannot use the run log" in one_error_line(r) and "KERNELLOOP_DATA_DIR" in one_error_line(r)
