"""What kernelloop needs on this machine, checked and explained one line at a time.

:func:`run_checks` is pure: it prints nothing and returns one :class:`Check` per line.
A check is `required` when `optimize` cannot work without it (python, nvcc, a GPU, ncu,
permission to read the GPU's performance counters, CUPTI, a usable LLM base URL when one
is set); the API key and the model name are advice (the offline optimizer works without a key).

No check ever shows an API key: only :func:`kernelloop.llm_config.mask_key` of it.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Literal, NamedTuple
from urllib.parse import urlparse

from pydantic import BaseModel

from .errors import KernelloopError
from .llm_config import (
    KEY_ENV,
    KNOWN_NIM_CHAT_MODELS,
    MODEL_ENV,
    BASE_URL_ENV,
    COMMON_MISTAKES,
    SOURCE_NAMES,
    LLMConfig,
    base_url_problem,
    env_file_path,
    read_env_file,
    resolve_llm_config,
    suggest_model,
)
from .tools.toolkit import find_ncu  # the one search profile and verify use too


class Check(BaseModel):
    name: str
    status: Literal["ok", "warn", "fail"]
    detail: str
    fix: str = ""
    required: bool = True  # needed for `optimize`


class RunOutput(NamedTuple):
    returncode: int
    output: str  # stdout and stderr together


Runner = Callable[[Sequence[str], float], RunOutput]
"""Runs argv with a wall-clock timeout in seconds. Used for nvcc and ncu; tests pass a fake."""

NCU_TIMEOUT_S = 60.0
COMPILE_TIMEOUT_S = 120.0
ONLINE_TIMEOUT_S = 10.0

COUNTERS_FIX = (
    "profiling needs GPU performance counters: set NVreg_RestrictProfilingToAdminUsers=0 in /etc/modprobe.d "
    "(it takes effect only after a reboot), or run as root; in containers the capability CAP_SYS_ADMIN is "
    "required; vGPU profiles (cloud 'A16-4Q'-style, Colab) strip counters from guests — no setting helps there"
)
ENV_FILE_FIX = f"optional: put {KEY_ENV}=... in ./.env or export it"

_PROBE_SOURCE = r"""
#include <cstdio>
__global__ void kl_doctor_probe(float *x) { x[threadIdx.x] = 2.0f * threadIdx.x; }
int main() {
    float *d = nullptr;
    if (cudaMalloc(&d, 32 * sizeof(float)) != cudaSuccess) { std::fprintf(stderr, "error: cudaMalloc failed\n"); return 1; }
    kl_doctor_probe<<<1, 32>>>(d);
    cudaError_t e = cudaDeviceSynchronize();
    cudaFree(d);
    if (e != cudaSuccess) { std::fprintf(stderr, "error: %s\n", cudaGetErrorString(e)); return 2; }
    return 0;
}
"""
_METRIC = re.compile(r"gpu__time_duration\.sum\s+(?:([A-Za-z]+)\s+)?([0-9][0-9.,]*)")
_NCU_VERSION = re.compile(r"Version\s+([0-9][\w.\-]*)")


def default_runner(argv: Sequence[str], timeout_s: float) -> RunOutput:
    """subprocess.run with a timeout, no stdin, and no secret-looking variables in its env."""
    from .tools.sandbox import SECRET_NAME

    env = {k: v for k, v in os.environ.items() if not SECRET_NAME.search(k)}
    try:
        proc = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, env=env, start_new_session=True)
    except OSError as exc:
        return RunOutput(127, f"could not start {argv[0]}: {exc}")
    try:
        out, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        # ncu's target program is its child: kill the whole group, or the pipe stays open.
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            proc.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        return RunOutput(124, f"timed out after {timeout_s:g} s")
    return RunOutput(proc.returncode, out.decode("utf-8", "replace"))


def _first_error_line(text: str, returncode: int) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for pattern in ("==ERROR==", "error", "==WARNING=="):
        for ln in lines:
            if pattern.lower() in ln.lower():
                return ln[:300]
    return (lines[0][:300] if lines else "") or f"exit code {returncode}"


# --------------------------------------------------------------------------- toolchain and GPU


def check_python() -> Check:
    py = sys.version_info
    return Check(name="python", status="ok" if py >= (3, 11) else "fail",
                 detail=f"{py.major}.{py.minor}.{py.micro}", fix="kernelloop needs Python 3.11 or newer")


def check_nvcc() -> tuple[Check, Path | None]:
    from .tools.nvcc import find_toolchain

    try:
        tc = find_toolchain()
    except KernelloopError as exc:
        return Check(name="nvcc", status="fail", detail="not found", fix=str(exc)), None
    return Check(name="nvcc", status="ok", detail=f"{tc.nvcc} (CUDA {tc.version})"), tc.nvcc


def check_gpu():
    from .tools.gpu import detect_gpus

    gpus = detect_gpus()
    if not gpus:
        why = "nvidia-smi found none" if shutil.which("nvidia-smi") else "nvidia-smi is not installed: no driver"
        return Check(name="gpu", status="fail", detail=f"no NVIDIA GPU visible ({why})",
                     fix="verify and optimize run kernels: use a machine with an NVIDIA GPU and driver"), None
    g = gpus[0]
    more = f" (+{len(gpus) - 1} more)" if len(gpus) > 1 else ""
    return Check(name="gpu", status="ok", detail=f"{g.name}, {g.arch}, driver {g.driver_version}{more}"), g


def check_ncu(nvcc: Path | None, runner: Runner) -> tuple[Check, Path | None]:
    ncu = find_ncu(nvcc)
    if ncu is None:
        return Check(name="ncu", status="fail", detail="not found (not on PATH, not in the CUDA toolkit)",
                     fix="install Nsight Compute (the CUDA toolkit's nsight-compute package, or "
                         "developer.nvidia.com/nsight-compute) and put ncu on PATH: optimize profiles kernels "
                         "with it"), None
    run = runner([str(ncu), "--version"], 30.0)
    m = _NCU_VERSION.search(run.output)
    if run.returncode != 0 or not m:
        return Check(name="ncu", status="fail", detail=f"{ncu} does not run: {_first_error_line(run.output, run.returncode)}",
                     fix="reinstall Nsight Compute; `ncu --version` must print its version"), None
    return Check(name="ncu", status="ok", detail=f"{ncu} (Nsight Compute {m.group(1)})"), ncu


def check_counters(ncu: Path | None, nvcc: Path | None, gpu, runner: Runner) -> Check:
    """Can ncu read the GPU's performance counters? Profiles one launch of a tiny kernel."""
    from .tools.nvcc import arch_flags

    name = "counters"
    if gpu is None or ncu is None or nvcc is None:
        missing = "no GPU" if gpu is None else "no ncu" if ncu is None else "no nvcc"
        return Check(name=name, status="warn", detail=f"skipped: {missing}",
                     fix="the performance-counter check needs a GPU, ncu and nvcc")
    try:
        flags = arch_flags(gpu.arch)
    except KernelloopError:
        flags = ["-arch=native"]
    with tempfile.TemporaryDirectory(prefix="kl-doctor-") as tmp:
        src, prog = Path(tmp) / "probe.cu", Path(tmp) / "probe"
        src.write_text(_PROBE_SOURCE)
        build = runner([str(nvcc), "-O2", *flags, str(src), "-o", str(prog)], COMPILE_TIMEOUT_S)
        if build.returncode != 0:
            return Check(name=name, status="warn",
                         detail=f"could not build the probe program: {_first_error_line(build.output, build.returncode)}",
                         fix="check that nvcc can build for this GPU")
        run = runner([str(ncu), "--clock-control", "none", "--metrics", "gpu__time_duration.sum",
                      "--launch-count", "1", str(prog)], NCU_TIMEOUT_S)
    text = run.output
    if "ERR_NVGPUCTRPERM" in text or "permission" in text.lower():
        said = next((ln.strip() for ln in text.splitlines() if "ERR_NVGPUCTRPERM" in ln), None) or next(
            ln.strip() for ln in text.splitlines() if "permission" in ln.lower())
        return Check(name=name, status="fail",
                     detail=f"ncu may not read the GPU performance counters: {said[:200]}", fix=COUNTERS_FIX)
    m = _METRIC.search(text)
    if m:
        unit = f" {m.group(1)}" if m.group(1) else ""
        return Check(name=name, status="ok",
                     detail=f"ncu reads performance counters (probe kernel gpu__time_duration.sum = {m.group(2)}{unit})")
    return Check(name=name, status="warn",
                 detail=f"ncu printed no gpu__time_duration value: {_first_error_line(text, run.returncode)}",
                 fix="run the probe by hand: ncu --clock-control none --metrics gpu__time_duration.sum "
                     "--launch-count 1 <a CUDA program>")


def check_cupti():
    from .tools.cupti import find_cupti

    try:
        paths = find_cupti()
    except KernelloopError as exc:
        return Check(name="cupti", status="fail", detail="not found", fix=str(exc)), None
    return Check(name="cupti", status="ok", detail=f"{paths.lib_file}"), paths


def _unusable_folder(path: Path) -> str | None:
    """Why kernelloop could not write into `path` (creating it if needed), or None."""
    if path.exists():
        if not path.is_dir():
            return f"{path} is not a folder"
        return None if os.access(path, os.W_OK) else f"{path} is not writable"
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        return f"{parent} is not a folder, so {path} cannot be created"
    if not os.access(parent, os.W_OK) or str(parent).startswith(("/proc", "/sys")):
        return f"{path} cannot be created ({parent} is not writable)"
    return None


def check_settings(cwd: Path | None = None) -> Check:
    """kernelloop.toml and the KERNELLOOP_* variables: valid, and the folders kernelloop writes usable."""
    from .config import load_settings, unknown_environment
    from .corpus.dense import requested_backend

    try:
        settings = load_settings(project_dir=cwd)
        requested_backend()  # KERNELLOOP_EMBEDDINGS, read where retrieval runs
    except KernelloopError as exc:
        return Check(name="settings", status="fail", detail=str(exc).splitlines()[0],
                     fix="fix the setting named (kernelloop.toml, a KERNELLOOP_* variable); docs: README 'Settings'")
    for name, folder in (("data_dir", settings.data_dir), ("cache_dir", settings.cache_dir)):
        why = _unusable_folder(Path(folder))
        if why:
            return Check(name="settings", status="fail", detail=f"{name}: {why}",
                         fix=f"set KERNELLOOP_{name.upper()} (or {name} in kernelloop.toml) to a writable folder")
    unknown = unknown_environment()
    if unknown:
        name, close = unknown[0]
        more = f" (and {len(unknown) - 1} more)" if len(unknown) > 1 else ""
        return Check(name="settings", status="warn", required=False,
                     detail=f"{name} is set but kernelloop reads no such variable{more}",
                     fix=f"did you mean {close}?" if close else "unset it, or see README 'Settings' for the names")
    return Check(name="settings", status="ok", detail=f"data {settings.data_dir}, cache {settings.cache_dir}")


def check_cupti_build(found: bool, cwd: Path | None = None) -> Check:
    """Build (or reuse) the CUPTI injection library verify's timing audit loads."""
    from .config import load_settings
    from .tools.cupti import build_injection_library

    name = "cupti-inject"
    if not found:
        return Check(name=name, status="fail", detail="skipped: CUPTI not found", fix="install CUPTI first (see above)")
    try:
        cache_dir = load_settings(project_dir=cwd).cache_dir / "cupti"
    except KernelloopError:
        return Check(name=name, status="fail", detail="skipped: the settings are not valid",
                     fix="fix the settings first (see above)")
    try:
        lib = build_injection_library(cache_dir)
    except KernelloopError as exc:
        head, _, log = str(exc).partition("\n")
        why = f" ({_first_error_line(log, 1)})" if log.strip() else ""
        return Check(name=name, status="fail", detail="the CUPTI injection library does not build",
                     fix=head[:400] + why)
    return Check(name=name, status="ok", detail=f"built {lib}")


def check_sanitizer(nvcc: Path | None) -> Check:
    from .tools.sanitizer import find_compute_sanitizer

    sanitizer = find_compute_sanitizer(nvcc)
    return Check(name="compute-sanitizer", status="ok" if sanitizer else "warn", required=False,
                 detail=str(sanitizer) if sanitizer else "not found",
                 fix="install the CUDA toolkit's compute-sanitizer; without it the memcheck gate is skipped")


def check_sandbox() -> Check:
    from .errors import ConfigError
    from .tools.sandbox import Limits, describe_isolation, sandbox_uid_base

    try:
        sandbox_uid_base()
    except ConfigError as exc:
        return Check(name="sandbox", status="fail", required=True, detail=str(exc),
                     fix="unset KERNELLOOP_SANDBOX_UID_BASE, or set it to the first of 4000 unused uids")
    iso = describe_isolation(Limits())
    return Check(name="sandbox", status="ok" if iso.network == "namespace" else "warn", required=False,
                 detail=iso.summary(), fix="; ".join(iso.notes))


# --------------------------------------------------------------------------- LLM settings


def check_env_file(cwd: Path | None) -> tuple[Check, dict[str, str] | None]:
    """./.env of the current directory only. Returns its values (None when unreadable)."""
    path = env_file_path(cwd)
    if not path.is_file():
        return Check(name=".env", status="warn", required=False, detail=f"no .env in {path.parent}",
                     fix=ENV_FILE_FIX), {}
    try:
        values = read_env_file(cwd)
    except KernelloopError as exc:
        return Check(name=".env", status="warn", required=False, detail=str(exc),
                     fix="make ./.env a readable UTF-8 file of NAME=value lines"), None
    relevant = [k for k in (KEY_ENV, MODEL_ENV, BASE_URL_ENV) if values.get(k, "").strip()]
    sets = f"sets {', '.join(relevant)}" if relevant else f"sets none of {KEY_ENV}, {MODEL_ENV}, {BASE_URL_ENV}"
    return Check(name=".env", status="ok", required=False, detail=f"found {path} ({sets})"), values


def check_api_key(cfg: LLMConfig) -> Check:
    if cfg.api_key is None:
        return Check(name="api-key", status="warn", required=False, detail=f"{KEY_ENV} not set",
                     fix=f"optional: the offline optimizer works without it; for the LLM optimizer get a key at "
                         f"build.nvidia.com and put {KEY_ENV}=... in ./.env or export it")
    detail = f"{cfg.masked_key} from {'./.env' if cfg.key_source == '.env' else cfg.key_source}"
    if cfg.nvidia_hosted and not cfg.api_key.get_secret_value().startswith("nvapi-"):
        return Check(name="api-key", status="warn", required=False, detail=detail + ", does not start with nvapi-",
                     fix="keys from build.nvidia.com start with nvapi-: check that the whole key was copied")
    return Check(name="api-key", status="ok", required=False, detail=detail)


def check_base_url(cfg: LLMConfig, environ: Mapping[str, str] | None = None) -> Check:
    """The LLM endpoint's base URL (flag, environment, ./.env) and, when set, the retrieval endpoint's
    (KERNELLOOP_NIM_BASE_URL): each must be an http(s) URL with a host. A bad LLM URL breaks
    `optimize` (auto picks the OpenAI-compatible optimizer for any URL but NVIDIA's), so it counts."""
    from .corpus.nvidia import BASE_URL_ENV as NIM_BASE_URL_ENV

    env = os.environ if environ is None else environ
    problem = base_url_problem(cfg.base_url)
    if problem:
        where = SOURCE_NAMES[cfg.base_url_source]
        return Check(name="base-url", status="fail", detail=f"{where} {cfg.base_url!r} {problem}",
                     fix=f"set {BASE_URL_ENV} (or --base-url) to the endpoint's base, e.g. "
                         "https://integrate.api.nvidia.com/v1 or http://127.0.0.1:8000/v1; unset it for NVIDIA's API")
    nim_url = env.get(NIM_BASE_URL_ENV, "").strip()
    nim_problem = base_url_problem(nim_url) if nim_url else None
    if nim_problem:
        return Check(name="base-url", status="fail", required=False,
                     detail=f"${NIM_BASE_URL_ENV} {nim_url!r} {nim_problem}",
                     fix=f"set {NIM_BASE_URL_ENV} to an http(s) URL or unset it; until then NVIDIA retrieval "
                         "falls back to BM25")
    return Check(name="base-url", status="ok", required=False,
                 detail=f"{cfg.base_url} ({SOURCE_NAMES[cfg.base_url_source]})")


def check_model(cfg: LLMConfig) -> Check:
    if not cfg.nvidia_hosted:
        return Check(name="model", status="ok", required=False,
                     detail=f"{cfg.model} at {cfg.base_url} (custom endpoint: name not checked offline)")
    if cfg.model in KNOWN_NIM_CHAT_MODELS:
        return Check(name="model", status="ok", required=False, detail=f"{cfg.model} (a known NIM chat model)")
    hint = suggest_model(cfg.model)
    if cfg.model in COMMON_MISTAKES or hint:
        fix = (f"did you mean {hint}? A wrong name returns 404, easily mistaken for an auth problem; "
               f"set {MODEL_ENV} (in the environment or ./.env)")
    else:
        fix = ("not in kernelloop's short list of NIM chat models (it may still exist): run "
               "`kernelloop doctor --online` to ask the service")
    return Check(name="model", status="warn", required=False, detail=f"{cfg.model}: not a known NIM chat model",
                 fix=fix)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Never follow a redirect: it would carry the Authorization header to another URL."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):  # noqa: D401
        return None


def _loopback(host: str) -> bool:
    return host in ("localhost", "127.0.0.1", "::1") or host.startswith("127.")


def check_online(cfg: LLMConfig, *, timeout_s: float = ONLINE_TIMEOUT_S) -> Check:
    """GET <base_url>/models with the key; is the model listed? The key never appears in the result."""
    from . import __version__

    name = "online"
    key = cfg.api_key.get_secret_value() if cfg.api_key else None

    def scrub(text: str) -> str:
        return text.replace(key, "***") if key else text

    url = f"{cfg.base_url}/models"
    parsed = urlparse(url)
    host = (parsed.hostname or "").lower()
    if parsed.scheme not in ("http", "https") or not host:
        return Check(name=name, status="fail", required=False, detail=f"base URL {scrub(cfg.base_url)!r} is not an http(s) URL",
                     fix=f"set {BASE_URL_ENV} to e.g. https://integrate.api.nvidia.com/v1")
    headers = {"Accept": "application/json", "User-Agent": f"kernelloop/{__version__}"}
    key_note = ""
    if key and parsed.scheme == "http" and not _loopback(host):
        key_note = " (key not sent: plain http)"
    elif key:
        headers["Authorization"] = f"Bearer {key}"
    handlers: list[urllib.request.BaseHandler] = [_NoRedirect()]
    if _loopback(host):
        handlers.append(urllib.request.ProxyHandler({}))
    opener = urllib.request.build_opener(*handlers)
    try:
        with opener.open(urllib.request.Request(url, headers=headers), timeout=timeout_s) as resp:
            body = resp.read(16 << 20)
    except urllib.error.HTTPError as exc:
        if exc.code in (401, 403):
            what = "the key was refused" if key and not key_note else "the service wants a key"
            return Check(name=name, status="fail", required=False,
                         detail=f"{what}: {scrub(url)} answered HTTP {exc.code}{key_note}",
                         fix=f"check {KEY_ENV} (in the environment or ./.env); a new key comes from build.nvidia.com")
        if 300 <= exc.code < 400:
            return Check(name=name, status="fail", required=False,
                         detail=f"{scrub(url)} redirects (HTTP {exc.code}); not followed",
                         fix=f"set {BASE_URL_ENV} to the final URL")
        return Check(name=name, status="fail", required=False, detail=f"{scrub(url)} answered HTTP {exc.code}",
                     fix="check the base URL; retry later if the service is down")
    except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        return Check(name=name, status="fail", required=False,
                     detail=f"could not reach {scrub(cfg.base_url)}: {scrub(str(reason))[:200]}",
                     fix="check the network (proxy, firewall) and the base URL")
    try:
        ids = [m["id"] for m in json.loads(body)["data"] if isinstance(m, dict) and isinstance(m.get("id"), str)]
    except (ValueError, KeyError, TypeError):
        return Check(name=name, status="fail", required=False,
                     detail=f"{scrub(url)} did not answer with an OpenAI-style model list",
                     fix="check the base URL (it should end in /v1, e.g. https://integrate.api.nvidia.com/v1)")
    if cfg.model not in ids:
        closest = suggest_model(cfg.model, ids)
        return Check(name=name, status="fail", required=False,
                     detail=f"the service does not list {cfg.model}; closest: {closest or 'none'}",
                     fix=(f"set {MODEL_ENV} to {closest}" if closest else
                          f"pick a model from {scrub(url)}") + "; a wrong name returns 404, not an auth error")
    note = ""
    if cfg.nvidia_hosted:
        note = "; NVIDIA answers /models without checking keys, so a refused key shows only at the first request"
    return Check(name=name, status="ok", required=False,
                 detail=f"{scrub(cfg.base_url)} lists {cfg.model} ({len(ids)} models){key_note}{note}")


# --------------------------------------------------------------------------- all together


def run_checks(
    *,
    online: bool = False,
    ncu_runner: Runner | None = None,
    cwd: Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> list[Check]:
    """Every check, in display order. Prints nothing; never shows an API key.

    `ncu_runner` runs nvcc and ncu (default: :func:`default_runner`); `cwd` is where
    ./.env and ./kernelloop.toml are looked for (default: the current directory);
    `environ` replaces os.environ for the LLM settings; `online` adds a request to
    `<base_url>/models`.
    """
    runner = ncu_runner or default_runner
    checks: list[Check] = [check_python(), check_settings(cwd)]
    nvcc_check, nvcc = check_nvcc()
    gpu_check, gpu = check_gpu()
    ncu_check, ncu = check_ncu(nvcc, runner)
    checks += [nvcc_check, gpu_check, ncu_check, check_counters(ncu, nvcc, gpu, runner)]
    cupti_check, cupti = check_cupti()
    checks += [cupti_check, check_cupti_build(cupti is not None, cwd), check_sanitizer(nvcc), check_sandbox()]

    env_check, dotenv = check_env_file(cwd)
    cfg = resolve_llm_config(cwd=cwd, environ=environ, dotenv=dotenv or {})
    checks += [env_check, check_api_key(cfg), check_base_url(cfg, environ), check_model(cfg)]
    if online:
        checks.append(check_online(cfg))
    return checks


def exit_code(checks: Sequence[Check]) -> int:
    """0 when everything `optimize` needs is there, else 1."""
    return 0 if all(c.status != "fail" for c in checks if c.required) else 1
