"""`kernelloop doctor` and the LLM settings it reports: one line per check, never a key."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from kernelloop import doctor
from kernelloop.doctor import Check, RunOutput, check_counters, check_model, check_ncu, check_online, exit_code
from kernelloop.llm_config import (
    DEFAULT_BASE_URL,
    DEFAULT_MODEL,
    KNOWN_NIM_CHAT_MODELS,
    LLMConfig,
    mask_key,
    resolve_llm_config,
    suggest_model,
)
from kernelloop.tools.gpu import GpuInfo

from .conftest import ROOT

ENV_SECRET = "nvapi-SECRETSECRET" + "e" * 52  # 70 characters, like a real key
DOTENV_SECRET = "nvapi-DOTENVSECRET" + "d" * 40
LLM_VARS = ("NVIDIA_API_KEY", "KERNELLOOP_MODEL", "KERNELLOOP_BASE_URL")


def _has_gpu() -> bool:
    return "nvidia-smi" in subprocess.run(["sh", "-c", "command -v nvidia-smi"], capture_output=True,
                                          text=True).stdout


def kl(*args, cwd, env=None):
    base = {k: v for k, v in os.environ.items() if k not in LLM_VARS}
    base["PYTHONPATH"] = str(ROOT / "src") + os.pathsep + base.get("PYTHONPATH", "")
    base["COLUMNS"] = "400"  # one line per check, whatever rich would wrap at
    base["KERNELLOOP_CACHE_DIR"] = str(Path(cwd) / ".kl-cache")  # the CUPTI build stays in the test's folder
    return subprocess.run([sys.executable, "-m", "kernelloop", *args], capture_output=True, text=True,
                           env={**base, **(env or {})}, cwd=cwd, timeout=300)


@pytest.fixture
def no_llm_env(monkeypatch):
    for name in LLM_VARS:
        monkeypatch.delenv(name, raising=False)


# --------------------------------------------------------------------------- the command, end to end


def test_doctor_without_gpu_fails_cleanly_and_never_prints_the_key(tmp_path):
    (tmp_path / ".env").write_text(f"NVIDIA_API_KEY={DOTENV_SECRET}\n")
    r = kl("doctor", cwd=tmp_path, env={"NVIDIA_API_KEY": ENV_SECRET})
    both = r.stdout + r.stderr
    assert "Traceback" not in both
    assert ENV_SECRET not in both and DOTENV_SECRET not in both and "SECRETSECRET" not in both
    assert f"nvap… ({len(ENV_SECRET)} chars) from environment" in r.stdout  # the environment beats ./.env
    assert ".env: found" in r.stdout
    if not _has_gpu():
        assert r.returncode == 1
        assert "✗ gpu: no NVIDIA GPU visible" in r.stdout
        assert "! counters: skipped: no GPU" in r.stdout


def test_doctor_key_from_dotenv_only_is_masked(tmp_path):
    (tmp_path / ".env").write_text(f"NVIDIA_API_KEY={DOTENV_SECRET}\n")
    r = kl("doctor", "--json", cwd=tmp_path)
    assert DOTENV_SECRET not in r.stdout + r.stderr and "DOTENVSECRET" not in r.stdout + r.stderr
    checks = {c["name"]: c for c in json.loads(r.stdout)}
    assert checks["api-key"]["status"] == "ok"
    assert checks["api-key"]["detail"] == f"nvap… ({len(DOTENV_SECRET)} chars) from ./.env"
    assert set(checks) >= {"python", "nvcc", "gpu", "ncu", "counters", "cupti", "cupti-inject", ".env", "api-key",
                           "model"}
    assert "online" not in checks
    if not _has_gpu():
        assert r.returncode == 1 and checks["gpu"]["status"] == "fail"
        assert checks["counters"]["status"] == "warn" and checks["counters"]["detail"] == "skipped: no GPU"


def test_doctor_without_key_warns_but_key_is_not_required(tmp_path):
    r = kl("doctor", "--json", cwd=tmp_path)
    checks = {c["name"]: c for c in json.loads(r.stdout)}
    assert checks["api-key"]["status"] == "warn" and checks["api-key"]["required"] is False
    assert checks[".env"]["status"] == "warn"
    assert checks[".env"]["fix"] == "optional: put NVIDIA_API_KEY=... in ./.env or export it"


def test_exit_code_counts_only_required_checks():
    assert exit_code([Check(name="a", status="ok", detail=""), Check(name="k", status="warn", detail="", required=False),
                      Check(name="o", status="fail", detail="", required=False)]) == 0
    assert exit_code([Check(name="gpu", status="fail", detail="")]) == 1


# --------------------------------------------------------------------------- .env and precedence


def test_dotenv_is_read_from_the_current_directory_only(tmp_path, monkeypatch, no_llm_env):
    (tmp_path / ".env").write_text("NVIDIA_API_KEY=nvapi-from-the-parent-directory\nKERNELLOOP_MODEL=meta/x\n")
    child = tmp_path / "project"
    child.mkdir()
    cfg = resolve_llm_config(cwd=child)
    assert cfg.api_key is None and cfg.key_source == "none" and cfg.model == DEFAULT_MODEL
    monkeypatch.chdir(child)  # the default is Path.cwd(), not a parent, not the package directory
    assert resolve_llm_config().api_key is None
    env_check, _ = doctor.check_env_file(None)
    assert env_check.status == "warn" and str(child) in env_check.detail
    monkeypatch.chdir(tmp_path)
    assert resolve_llm_config().key_source == ".env"


def test_doctor_does_not_change_os_environ(tmp_path, no_llm_env):
    (tmp_path / ".env").write_text("NVIDIA_API_KEY=nvapi-only-in-dotenv-000000\nKERNELLOOP_MODEL=meta/llama-3.3-70b-instruct\n")
    before = dict(os.environ)
    env_check, values = doctor.check_env_file(tmp_path)
    cfg = resolve_llm_config(cwd=tmp_path)
    assert env_check.status == "ok" and "sets NVIDIA_API_KEY, KERNELLOOP_MODEL" in env_check.detail
    assert values["KERNELLOOP_MODEL"] == "meta/llama-3.3-70b-instruct" and cfg.model == values["KERNELLOOP_MODEL"]
    assert dict(os.environ) == before


def test_precedence_flag_environment_dotenv_default(tmp_path):
    (tmp_path / ".env").write_text("NVIDIA_API_KEY=nvapi-dotenv-1234567890\nKERNELLOOP_MODEL=dot/model\n"
                                   "KERNELLOOP_BASE_URL=https://dotenv.example/v1\n")
    env = {"NVIDIA_API_KEY": "nvapi-environment-123456", "KERNELLOOP_MODEL": "env/model",
           "KERNELLOOP_BASE_URL": "https://env.example/v1/"}

    flag = resolve_llm_config("flag/model", "https://flag.example/v1", "nvapi-flag-1234567890", cwd=tmp_path,
                              environ=env)
    assert (flag.model, flag.base_url, flag.key_source) == ("flag/model", "https://flag.example/v1", "flag")
    assert flag.api_key.get_secret_value() == "nvapi-flag-1234567890"

    from_env = resolve_llm_config(cwd=tmp_path, environ=env)
    assert (from_env.model, from_env.base_url, from_env.key_source) == ("env/model", "https://env.example/v1",
                                                                        "environment")
    assert from_env.api_key.get_secret_value() == "nvapi-environment-123456"

    from_dotenv = resolve_llm_config(cwd=tmp_path, environ={"NVIDIA_API_KEY": ""})  # empty counts as unset
    assert (from_dotenv.model, from_dotenv.base_url, from_dotenv.key_source) == ("dot/model",
                                                                                 "https://dotenv.example/v1", ".env")
    assert from_dotenv.api_key.get_secret_value() == "nvapi-dotenv-1234567890"

    defaults = resolve_llm_config(cwd=tmp_path / "elsewhere", environ={})
    assert (defaults.model, defaults.base_url, defaults.key_source, defaults.api_key) == (
        DEFAULT_MODEL, DEFAULT_BASE_URL, "none", None)
    assert DEFAULT_MODEL == "nvidia/llama-3.3-nemotron-super-49b-v1"
    assert DEFAULT_BASE_URL == "https://integrate.api.nvidia.com/v1"


def test_environment_default_is_os_environ(tmp_path, monkeypatch, no_llm_env):
    monkeypatch.setenv("NVIDIA_API_KEY", "nvapi-os-environ-12345")
    monkeypatch.setenv("KERNELLOOP_MODEL", "meta/llama-3.1-405b-instruct")
    cfg = resolve_llm_config(cwd=tmp_path)
    assert cfg.key_source == "environment" and cfg.model == "meta/llama-3.1-405b-instruct"


def test_secret_never_leaks_from_the_config():
    cfg = LLMConfig(api_key=ENV_SECRET, key_source="environment")
    for text in (repr(cfg), str(cfg), cfg.model_dump_json(), json.dumps(cfg.model_dump(mode="json")),
                 str(cfg.model_dump()), f"{cfg}", cfg.masked_key):
        assert ENV_SECRET not in text and "SECRETSECRET" not in text
    assert cfg.masked_key == "nvap… (70 chars)"
    assert cfg.api_key.get_secret_value() == ENV_SECRET
    assert mask_key("short-key") == "… (9 chars)"  # too short to show 4 characters of it


# --------------------------------------------------------------------------- ncu and performance counters

H100 = GpuInfo(index=0, name="NVIDIA H100 80GB HBM3", compute_capability="9.0", driver_version="580.1")
NCU_OK = """==PROF== Connected to process 4242 (/tmp/kl-doctor-x/probe)
==PROF== Profiling "kl_doctor_probe" - 0: 0%....50%....100% - 1 pass
==PROF== Disconnected from process 4242
[4242] probe@127.0.0.1
  kl_doctor_probe(float *) (1, 1, 1)x(32, 1, 1), Context 1, Stream 7, Device 0, CC 9.0
    Section: Command line profiler metrics
    ---------------------- ----------- ------------
    Metric Name            Metric Unit Metric Value
    ---------------------- ----------- ------------
    gpu__time_duration.sum     usecond         1.95
    ---------------------- ----------- ------------
"""
NCU_PERM = """==PROF== Connected to process 4242 (/tmp/kl-doctor-x/probe)
==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance Counters on the target device 0. For instructions on enabling permissions and to get more information see https://developer.nvidia.com/ERR_NVGPUCTRPERM
==PROF== Disconnected from process 4242
"""
NCU_OTHER = """==PROF== Connected to process 4242 (/tmp/kl-doctor-x/probe)
==ERROR== The application returned an error code (2).
==WARNING== No kernels were profiled.
"""


class FakeRunner:
    """nvcc always builds; ncu answers with canned output."""

    def __init__(self, ncu_output: str, ncu_rc: int = 0, nvcc_rc: int = 0, nvcc_output: str = ""):
        self.ncu_output, self.ncu_rc, self.nvcc_rc, self.nvcc_output = ncu_output, ncu_rc, nvcc_rc, nvcc_output
        self.calls: list[tuple[list[str], float]] = []

    def __call__(self, argv, timeout_s):
        self.calls.append((list(argv), timeout_s))
        if Path(argv[0]).name == "nvcc":
            if "-o" in argv:
                Path(argv[argv.index("-o") + 1]).write_bytes(b"")
            return RunOutput(self.nvcc_rc, self.nvcc_output)
        if argv[1:] == ["--version"]:
            return RunOutput(0, "NVIDIA (R) Nsight Compute Command Line Profiler\nCopyright (c) 2018-2025 NVIDIA "
                                "Corporation\nVersion 2025.3.1.0 (build 36398880) (public-release)\n")
        return RunOutput(self.ncu_rc, self.ncu_output)


def counters(runner, gpu=H100):
    return check_counters(Path("/fake/bin/ncu"), Path("/fake/bin/nvcc"), gpu, runner)


def test_counters_ok_with_a_value():
    runner = FakeRunner(NCU_OK)
    c = counters(runner)
    assert c.status == "ok" and "1.95 usecond" in c.detail and c.required
    (build, build_timeout), (profile, timeout) = runner.calls
    assert build[0] == "/fake/bin/nvcc" and "-arch=sm_90" in build
    assert profile[:-1] == ["/fake/bin/ncu", "--clock-control", "none", "--metrics", "gpu__time_duration.sum",
                            "--launch-count", "1"]
    assert profile[-1] == build[build.index("-o") + 1] and timeout == 60


def test_counters_permission_denied_fails_with_the_fix():
    c = counters(FakeRunner(NCU_PERM, ncu_rc=1))
    assert c.status == "fail" and "ERR_NVGPUCTRPERM - The user does not have permission" in c.detail
    assert "NVreg_RestrictProfilingToAdminUsers=0" in c.fix and "reboot" in c.fix
    assert "CAP_SYS_ADMIN" in c.fix and "vGPU" in c.fix and "no setting helps" in c.fix


def test_counters_other_error_warns_with_the_first_error_line():
    c = counters(FakeRunner(NCU_OTHER, ncu_rc=2))
    assert c.status == "warn" and "==ERROR== The application returned an error code (2)." in c.detail


def test_counters_generic_permission_message_fails_too():
    c = counters(FakeRunner("==ERROR== Insufficient permission to profile this process\n", ncu_rc=1))
    assert c.status == "fail" and "Insufficient permission" in c.detail


def test_counters_timeout_warns():
    c = counters(FakeRunner("timed out after 60 s", ncu_rc=124))
    assert c.status == "warn" and "timed out after 60 s" in c.detail


def test_default_runner_keeps_secrets_from_the_programs_it_runs(monkeypatch):
    monkeypatch.setenv("NVIDIA_API_KEY", ENV_SECRET)
    run = doctor.default_runner(["sh", "-c", 'echo "[$NVIDIA_API_KEY]"; exit 3'], 10)
    assert run == RunOutput(3, "[]\n")
    assert doctor.default_runner(["sh", "-c", "sleep 20"], 0.5) == RunOutput(124, "timed out after 0.5 s")


def test_counters_probe_build_failure_warns():
    c = counters(FakeRunner(NCU_OK, nvcc_rc=1, nvcc_output="nvcc fatal   : Unsupported gpu architecture 'sm_90'\n"))
    assert c.status == "warn" and "Unsupported gpu architecture" in c.detail


def test_counters_skipped_without_gpu_or_ncu():
    runner = FakeRunner(NCU_OK)
    assert counters(runner, gpu=None).model_dump(include={"status", "detail"}) == {"status": "warn",
                                                                                  "detail": "skipped: no GPU"}
    c = check_counters(None, Path("/fake/bin/nvcc"), H100, runner)
    assert c.status == "warn" and c.detail == "skipped: no ncu"
    assert runner.calls == []


def test_ncu_version(monkeypatch):
    monkeypatch.setattr(doctor, "find_ncu", lambda nvcc=None: Path("/fake/bin/ncu"))
    c, ncu = check_ncu(None, FakeRunner(""))
    assert c.status == "ok" and c.detail == "/fake/bin/ncu (Nsight Compute 2025.3.1.0)" and ncu == Path("/fake/bin/ncu")
    monkeypatch.setattr(doctor, "find_ncu", lambda nvcc=None: None)
    c, ncu = check_ncu(None, FakeRunner(""))
    assert c.status == "fail" and c.required and ncu is None


def test_run_checks_passes_the_runner_through(monkeypatch, tmp_path, no_llm_env):
    import kernelloop.tools.gpu as gpu_mod

    monkeypatch.setattr(gpu_mod, "detect_gpus", lambda *a, **k: [H100])
    monkeypatch.setattr(doctor, "find_ncu", lambda nvcc=None: Path("/fake/bin/ncu"))
    monkeypatch.setattr(doctor, "check_nvcc", lambda: (Check(name="nvcc", status="ok", detail="fake"),
                                                       Path("/fake/bin/nvcc")))
    monkeypatch.setattr(doctor, "check_cupti_build", lambda found, cwd=None: Check(name="cupti-inject", status="ok",
                                                                                   detail="fake"))
    checks = {c.name: c for c in doctor.run_checks(ncu_runner=FakeRunner(NCU_PERM, ncu_rc=1), cwd=tmp_path)}
    assert checks["gpu"].status == "ok" and checks["ncu"].status == "ok"
    assert checks["counters"].status == "fail"
    assert exit_code(list(checks.values())) == 1
    checks = doctor.run_checks(ncu_runner=FakeRunner(NCU_OK), cwd=tmp_path)
    assert {c.name: c.status for c in checks}["counters"] == "ok"


# --------------------------------------------------------------------------- model names


def test_known_model_is_ok():
    c = check_model(LLMConfig(model="nvidia/nvidia-nemotron-nano-9b-v2"))
    assert c.status == "ok" and not c.required
    assert all(check_model(LLMConfig(model=m)).status == "ok" for m in KNOWN_NIM_CHAT_MODELS)


def test_classic_nano_typo_is_caught():
    c = check_model(LLMConfig(model="nvidia/nemotron-nano-9b-v2"))
    assert c.status == "warn"
    assert ("did you mean nvidia/nvidia-nemotron-nano-9b-v2? A wrong name returns 404, easily mistaken for an "
            "auth problem") in c.fix


def test_near_miss_gets_the_closest_known_name():
    assert suggest_model("meta/llama-3.3-70b-instruc") == "meta/llama-3.3-70b-instruct"
    assert suggest_model("Qwen/Qwen2.5-Coder-32B-Instruct") == "qwen/qwen2.5-coder-32b-instruct"
    c = check_model(LLMConfig(model="nvidia/llama-3.3-nemotron-super-49b"))
    assert c.status == "warn" and "did you mean nvidia/llama-3.3-nemotron-super-49b-v1?" in c.fix
    far = check_model(LLMConfig(model="zzz/completely-different"))
    assert far.status == "warn" and "--online" in far.fix


def test_custom_base_url_skips_the_known_list():
    c = check_model(LLMConfig(model="my-finetune", base_url="http://127.0.0.1:8000/v1"))
    assert c.status == "ok" and "custom endpoint" in c.detail
    assert check_model(LLMConfig(model="nvidia/nemotron-nano-9b-v2",
                                 base_url="https://my-nim.internal.example/v1")).status == "ok"


# --------------------------------------------------------------------------- --online, against a local fake


GOOD_KEY = "nvapi-GOODKEY" + "g" * 57
SERVED = ["meta/llama-3.3-70b-instruct", "nvidia/nvidia-nemotron-nano-9b-v2", "nvidia/llama-3.3-nemotron-super-49b-v1"]


@pytest.fixture
def fake_nim():
    seen: list[str | None] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            seen.append(self.headers.get("Authorization"))
            if self.path != "/v1/models":
                self._send(404, {"detail": "not found"})
            elif self.headers.get("Authorization") != f"Bearer {GOOD_KEY}":
                self._send(401, {"status": 401, "title": "Unauthorized", "detail": "Authentication failed"})
            else:
                self._send(200, {"object": "list", "data": [{"id": m, "object": "model"} for m in SERVED]})

        def _send(self, code, payload):
            body = json.dumps(payload).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", seen
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def test_online_valid_key_and_listed_model(fake_nim):
    base, seen = fake_nim
    c = check_online(LLMConfig(api_key=GOOD_KEY, model="meta/llama-3.3-70b-instruct", base_url=base))
    assert c.status == "ok" and "lists meta/llama-3.3-70b-instruct" in c.detail
    assert seen == [f"Bearer {GOOD_KEY}"]  # the key reached the server, in the Authorization header
    assert GOOD_KEY not in c.detail + c.fix


def test_online_wrong_key_is_refused(fake_nim):
    base, seen = fake_nim
    wrong = "nvapi-WRONGKEY" + "w" * 56
    c = check_online(LLMConfig(api_key=wrong, model="meta/llama-3.3-70b-instruct", base_url=base))
    assert c.status == "fail" and "the key was refused" in c.detail and "401" in c.detail
    assert seen == [f"Bearer {wrong}"] and wrong not in c.detail + c.fix and "WRONGKEY" not in c.detail + c.fix


def test_online_unlisted_model_fails_with_a_suggestion(fake_nim):
    base, _ = fake_nim
    c = check_online(LLMConfig(api_key=GOOD_KEY, model="nvidia/nemotron-nano-9b-v2", base_url=base))
    assert c.status == "fail"
    assert c.detail == "the service does not list nvidia/nemotron-nano-9b-v2; closest: nvidia/nvidia-nemotron-nano-9b-v2"


def test_online_server_down():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    base = f"http://127.0.0.1:{port}/v1"
    c = check_online(LLMConfig(api_key=GOOD_KEY, base_url=base), timeout_s=5)
    assert c.status == "fail" and c.detail.startswith(f"could not reach {base}: ")
    assert GOOD_KEY not in c.detail + c.fix


def test_online_through_the_cli(fake_nim, tmp_path):
    base, seen = fake_nim
    (tmp_path / ".env").write_text(f"NVIDIA_API_KEY={GOOD_KEY}\n")
    r = kl("doctor", "--online", cwd=tmp_path,
           env={"KERNELLOOP_BASE_URL": base, "KERNELLOOP_MODEL": "nvidia/nvidia-nemotron-nano-9b-v2"})
    assert "Traceback" not in r.stderr
    assert f"✓ online: {base} lists nvidia/nvidia-nemotron-nano-9b-v2" in r.stdout
    assert seen == [f"Bearer {GOOD_KEY}"]
    assert GOOD_KEY not in r.stdout + r.stderr and "GOODKEY" not in r.stdout + r.stderr
    assert f"nvap… ({len(GOOD_KEY)} chars) from ./.env" in r.stdout



def test_doctor_names_a_broken_settings_file_and_an_unusable_data_folder(tmp_path, monkeypatch):
    monkeypatch.delenv("KERNELLOOP_DATA_DIR", raising=False)  # the project file's folders, not the tests'
    monkeypatch.delenv("KERNELLOOP_CACHE_DIR", raising=False)
    (tmp_path / "kernelloop.toml").write_text("verify = 3\n")
    settings = doctor.check_settings(tmp_path)
    assert settings.status == "fail" and "[verify] must be a table" in settings.detail
    assert doctor.check_cupti_build(True, tmp_path).detail == "skipped: the settings are not valid"
    (tmp_path / "kernelloop.toml").unlink()
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    (tmp_path / "kernelloop.toml").write_text(f'data_dir = "{blocker / "data"}"\n')
    settings = doctor.check_settings(tmp_path)
    assert settings.status == "fail" and "data_dir" in settings.detail and "KERNELLOOP_DATA_DIR" in settings.fix
    (tmp_path / "kernelloop.toml").write_text(f'data_dir = "{tmp_path / "fine"}"\ncache_dir = "{tmp_path / "c"}"\n')
    assert doctor.check_settings(tmp_path).status == "ok"



def test_doctor_says_whether_nvidia_smi_is_missing_or_found_no_gpu(monkeypatch):
    import shutil as shutil_module

    monkeypatch.setattr("kernelloop.tools.gpu.detect_gpus", lambda: [])
    monkeypatch.setattr(shutil_module, "which", lambda name, *a, **k: None)
    check, _ = doctor.check_gpu()
    assert check.status == "fail" and "nvidia-smi is not installed" in check.detail
    monkeypatch.setattr(shutil_module, "which", lambda name, *a, **k: "/usr/bin/nvidia-smi")
    check, _ = doctor.check_gpu()
    assert "nvidia-smi found none" in check.detail


# --------------------------------------------------------------------------- piped output, base URL, settings


def test_piped_doctor_prints_one_line_per_check_however_long(monkeypatch):
    from typer.testing import CliRunner

    from kernelloop.cli.app import app

    long = "a detail long enough to wrap at any terminal width " * 4
    checks = [Check(name=f"check-{i}", status=status, detail=long, fix=long)
              for i, status in enumerate(["ok", "warn", "fail"] * 4)]
    monkeypatch.setattr(doctor, "run_checks", lambda online=False: checks)
    monkeypatch.delenv("COLUMNS", raising=False)  # piped: rich would wrap at 80 columns
    r = CliRunner().invoke(app, ["doctor"])
    assert r.exit_code == 1
    lines = r.stdout.splitlines()
    assert len(lines) == 12 and all(line.split(" ", 1)[1].startswith(f"check-{i}:") for i, line in enumerate(lines))


@pytest.mark.parametrize("url", ["notaurl", "ftp://host/v1", "http:///v1", "https://host:port/v1",
                                 "localhost:8000/v1", "https://host/v1?key=1"])
def test_a_bad_base_url_fails_the_doctor_and_names_where_it_came_from(url):
    cfg = resolve_llm_config(environ={"KERNELLOOP_BASE_URL": url}, dotenv={})
    check = doctor.check_base_url(cfg, environ={})
    assert check.status == "fail" and check.required and exit_code([check]) == 1
    assert check.detail.startswith(f"$KERNELLOOP_BASE_URL {url!r} ") and "KERNELLOOP_BASE_URL" in check.fix
    from_file = doctor.check_base_url(resolve_llm_config(environ={}, dotenv={"KERNELLOOP_BASE_URL": url}), environ={})
    assert "in ./.env" in from_file.detail


def test_a_good_base_url_passes_and_a_bad_retrieval_url_is_advice():
    for url in (None, "http://127.0.0.1:8000/v1", "https://integrate.api.nvidia.com/v1/"):
        cfg = resolve_llm_config(environ={"KERNELLOOP_BASE_URL": url} if url else {}, dotenv={})
        assert doctor.check_base_url(cfg, environ={}).status == "ok"
    check = doctor.check_base_url(resolve_llm_config(environ={}, dotenv={}),
                                  environ={"KERNELLOOP_NIM_BASE_URL": "integrate.api.nvidia.com"})
    assert check.status == "fail" and not check.required and "KERNELLOOP_NIM_BASE_URL" in check.detail


def test_the_optimizer_refuses_a_bad_base_url_in_one_line():
    from kernelloop.config import OptimizeSettings
    from kernelloop.errors import ConfigError
    from kernelloop.optimizers.factory import make_optimizer

    cfg = resolve_llm_config(cli_base_url="notaurl", environ={}, dotenv={})
    with pytest.raises(ConfigError, match=r"--base-url 'notaurl' is not a URL") as info:
        make_optimizer("auto", cfg, OptimizeSettings())
    assert "\n" not in str(info.value)


def test_doctor_names_a_bad_setting_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELLOOP_VERIFY_THRESHOLD", "abc")
    check = doctor.check_settings(tmp_path)
    assert check.status == "fail" and check.required and "KERNELLOOP_VERIFY_THRESHOLD=abc" in check.detail


@pytest.mark.parametrize("variable, value, check_name, words", [
    ("KERNELLOOP_EMBEDDINGS", "bogus", "settings", "KERNELLOOP_EMBEDDINGS=bogus: use one of auto, nvidia, local, off"),
    ("KERNELLOOP_SANDBOX_UID_BASE", "abc", "sandbox", "KERNELLOOP_SANDBOX_UID_BASE=abc: not a whole number"),
    ("KERNELLOOP_SANDBOX_UID_BASE", "0", "sandbox", "KERNELLOOP_SANDBOX_UID_BASE=0: use a uid from 1000"),
])
def test_doctor_names_a_bad_variable_read_outside_the_settings_file(tmp_path, monkeypatch, variable, value,
                                                                     check_name, words):
    monkeypatch.setenv(variable, value)
    check = doctor.check_settings(tmp_path) if check_name == "settings" else doctor.check_sandbox()
    assert check.status == "fail" and words in check.detail, check
