"""The CUPTI injection library: locating CUPTI, building the library, reading its traces."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from kernelloop.tools import cupti
from kernelloop.tools.cupti import (
    CuptiTrace,
    CuptiUnavailable,
    build_injection_library,
    find_cupti,
    injection_env,
    read_trace,
)


def _cupti_or_skip() -> cupti.CuptiPaths:
    try:
        return find_cupti()
    except CuptiUnavailable as err:
        pytest.skip(f"cupti.h / libcupti not found on this machine: {err}")


def _nm_dynamic_symbols(lib: Path) -> str:
    if shutil.which("nm") is None:
        pytest.skip("nm (binutils) is not installed")
    return subprocess.run(["nm", "-D", "--defined-only", str(lib)], capture_output=True, text=True, check=True).stdout


# --------------------------------------------------------------------------- building


@pytest.mark.nvcc
def test_build_exports_initialize_injection_and_caches(tmp_path: Path) -> None:
    _cupti_or_skip()
    if shutil.which("g++") is None:
        pytest.skip("g++ is not installed")
    cache = tmp_path / "cache"
    lib = build_injection_library(cache)
    assert lib.name == "libkl_cupti_inject.so"
    assert lib.is_file() and lib.stat().st_size > 0
    assert lib.parent.parent == cache
    assert len(lib.parent.name) == 64  # sha256 hex

    symbols = _nm_dynamic_symbols(lib)
    assert any(line.split()[-1] == "InitializeInjection" and " T " in line for line in symbols.splitlines())
    # Everything else stays internal: only the entry point is exported from our code.
    exported = [line.split()[-1] for line in symbols.splitlines() if " T " in line]
    assert exported == ["InitializeInjection"]

    mtime = lib.stat().st_mtime_ns
    again = build_injection_library(cache)
    assert again == lib
    assert again.stat().st_mtime_ns == mtime  # reused, not rebuilt
    assert not [p for p in lib.parent.iterdir() if p.name.startswith(".build-")]  # temp dirs cleaned up


@pytest.mark.nvcc
def test_concurrent_builds_agree(tmp_path: Path) -> None:
    _cupti_or_skip()
    if shutil.which("g++") is None:
        pytest.skip("g++ is not installed")
    cache = tmp_path / "cache"
    with ThreadPoolExecutor(max_workers=3) as pool:
        libs = list(pool.map(lambda _: build_injection_library(cache), range(3)))
    assert len(set(libs)) == 1 and libs[0].is_file()
    assert [p.name for p in libs[0].parent.iterdir() if p.name.startswith(".build-")] == []


@pytest.mark.nvcc
@pytest.mark.parametrize("source_name", [cupti.SOURCE_NAME, "kl_capture_inject.cpp"])
def test_source_compiles_without_warnings(tmp_path: Path, source_name: str) -> None:
    paths = _cupti_or_skip()
    if shutil.which("g++") is None:
        pytest.skip("g++ is not installed")
    src = tmp_path / source_name
    src.write_bytes(cupti._bundled_source(source_name))
    cmd = cupti._compile_command("g++", src, tmp_path / "lib.so", paths)
    cmd.insert(1, "-Wextra")
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "warning" not in proc.stderr.lower(), proc.stderr


def test_build_failure_reports_compiler_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _fake_toolkit(tmp_path / "cuda")
    # A "compiler" that prints a version, then fails every build with a log.
    fake_cc = tmp_path / "fakecc"
    fake_cc.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = "--version" ]; then echo "fakecc 1.0"; exit 0; fi\n'
        'for i in $(seq 1 30); do echo "line $i" >&2; done\n'
        'echo "kl_cupti_inject.cpp:1: error: no cupti today" >&2\n'
        "exit 1\n"
    )
    fake_cc.chmod(0o755)
    with pytest.raises(CuptiUnavailable) as info:
        build_injection_library(tmp_path / "cache", cuda_home=root, compiler=str(fake_cc))
    message = str(info.value)
    assert "no cupti today" in message
    assert "line 30" in message and "line 5\n" not in message  # only the tail of the log


def test_build_without_compiler(tmp_path: Path) -> None:
    root = _fake_toolkit(tmp_path / "cuda")
    with pytest.raises(CuptiUnavailable, match="not found"):
        build_injection_library(tmp_path / "cache", cuda_home=root, compiler="no-such-compiler-kl")


# --------------------------------------------------------------------------- finding CUPTI


def _fake_toolkit(root: Path, *, layout: str = "plain") -> Path:
    if layout == "plain":
        (root / "include").mkdir(parents=True)
        (root / "include" / "cupti.h").write_text("/* fake */\n")
        (root / "lib").mkdir(parents=True)
        (root / "lib" / "libcupti.so").write_bytes(b"\x7fELF")
    elif layout == "extras":
        (root / "include").mkdir(parents=True)
        (root / "include" / "cuda.h").write_text("/* fake */\n")
        (root / "extras/CUPTI/include").mkdir(parents=True)
        (root / "extras/CUPTI/include/cupti.h").write_text("/* fake */\n")
        (root / "extras/CUPTI/lib64").mkdir(parents=True)
        (root / "extras/CUPTI/lib64/libcupti.so.12").write_bytes(b"\x7fELF")
    (root / "bin").mkdir(parents=True, exist_ok=True)
    nvcc = root / "bin" / "nvcc"
    nvcc.write_bytes(b"\x7fELF fake nvcc")
    nvcc.chmod(0o755)
    return root


def _isolate_search(monkeypatch: pytest.MonkeyPatch, path_dir: Path) -> None:
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    monkeypatch.setenv("PATH", f"{path_dir}{os.pathsep}/usr/bin{os.pathsep}/bin")


def test_find_cupti_follows_exec_wrapper_script(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _fake_toolkit(tmp_path / "fake-cuda-13.0")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    wrapper = bindir / "nvcc"
    wrapper.write_text(f'#!/bin/sh\nexec {root}/bin/nvcc "$@"\n')
    wrapper.chmod(0o755)
    _isolate_search(monkeypatch, bindir)

    paths = find_cupti()
    assert paths.root == root
    assert paths.include_dir == root / "include"
    assert paths.lib_dir == root / "lib"
    assert paths.lib_file == root / "lib" / "libcupti.so"
    assert paths.cuda_include_dir == root / "include"


def test_find_cupti_follows_symlink_to_wrapper(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _fake_toolkit(tmp_path / "toolkit")
    scripts = tmp_path / "scripts"
    scripts.mkdir()
    wrapper = scripts / "nvcc-wrapper"
    wrapper.write_text(f'#!/bin/bash\n# comment\nexport FOO=1\nexec "{root}/bin/nvcc" "$@"\n')
    wrapper.chmod(0o755)
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "nvcc").symlink_to(wrapper)
    _isolate_search(monkeypatch, bindir)
    assert find_cupti().root == root


def test_find_cupti_extras_layout_and_versioned_lib(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _fake_toolkit(tmp_path / "cuda", layout="extras")
    _isolate_search(monkeypatch, tmp_path / "empty")
    monkeypatch.setenv("CUDA_HOME", str(root))
    paths = find_cupti()
    assert paths.include_dir == root / "extras/CUPTI/include"
    assert paths.lib_dir == root / "extras/CUPTI/lib64"
    assert paths.lib_file.name == "libcupti.so.12"
    assert paths.cuda_include_dir == root / "include"
    assert "-l:libcupti.so.12" in cupti._link_flags(paths)


def test_find_cupti_explicit_root_is_strict(tmp_path: Path) -> None:
    empty = tmp_path / "not-a-toolkit"
    empty.mkdir()
    with pytest.raises(CuptiUnavailable) as info:
        find_cupti(empty)
    assert str(empty) in str(info.value)
    assert "CUDA_HOME" in str(info.value)  # says how to fix it


def test_injection_env(tmp_path: Path) -> None:
    env = injection_env(Path("lib.so"), Path("trace.jsonl"))
    assert set(env) == {"CUDA_INJECTION64_PATH", "KERNELLOOP_CUPTI_OUT"}
    assert all(Path(v).is_absolute() for v in env.values())
    assert env["CUDA_INJECTION64_PATH"].endswith("lib.so")
    # the pipe, named by the sandbox: the library preloaded, so it reads the name before the program's code runs
    assert set(injection_env(Path("lib.so"))) == {"CUDA_INJECTION64_PATH", "LD_PRELOAD"}


# --------------------------------------------------------------------------- reading traces


def _kernel(corr: int, start: int, end: int, name: str = "_Z4busyPfi") -> dict:
    return {
        "kind": "kernel", "name": name, "start": start, "end": end, "corr": corr, "stream": 13,
        "device": 0, "context": 1, "grid": [4, 1, 1], "block": [256, 1, 1], "dyn_smem": 0,
        "static_smem": 16, "regs": 32, "graph_node": 0,
    }  # fmt: skip


def _write_lines(path: Path, objs: list[dict], tail: str = "") -> None:
    with path.open("w") as f:
        for obj in objs:
            f.write(json.dumps(obj) + "\n")
        f.write(tail)


def test_read_trace_synthetic(tmp_path: Path) -> None:
    trace_file = tmp_path / "trace.jsonl"
    objs = [
        {"kind": "meta", "cupti_version": 130001, "compiled_api": 130001, "pid": 4242},
        {"kind": "api", "cbid": 211, "name": "cudaLaunchKernel", "start": 100, "end": 150, "corr": 7,
         "thread": 99, "ret": 0},
        {"kind": "api", "cbid": 214, "start": 10, "end": 20, "corr": 3},  # name may be absent
        {"kind": "event_record", "cbid": 135, "event": "0x5555aaaa", "stream": "0x0", "stream_id": 7,
         "t": 90, "corr": 6},
        {"kind": "event_record", "cbid": 135, "event": "0x5555bbbb", "stream": "0x0", "t": 160, "corr": 8},
        _kernel(7, 1000, 3000, name='_Z4weird"name\\x'),
        {"kind": "memcpy", "copy_kind": "HtoD", "bytes": 4096, "start": 50, "end": 60, "corr": 2,
         "stream": 7, "device": 0},
        {"kind": "memset", "bytes": 1024, "start": 61, "end": 62, "corr": 4, "stream": 7, "device": 0},
        {"kind": "elapsed", "cbid": 486, "start_event": "0x5555aaaa", "end_event": "0x5555bbbb",
         "ms": 0.002, "result": 0, "t": 4000, "corr": 9},
        {"kind": "elapsed", "cbid": 486, "start_event": "0x1", "end_event": "0x2", "ms": None,
         "result": 600, "t": 4100, "corr": 10},
        {"kind": "some_future_kind", "x": 1},
        {"kind": "dropped", "count": 3},
        {"kind": "dropped", "count": 2},
        {"kind": "error", "where": "cuptiActivityEnable(MEMSET)", "code": 1, "message": "CUPTI_ERROR_INVALID_PARAMETER"},
        {"kind": "kernel", "name": "missing fields"},  # invalid record: counted, not fatal
    ]  # fmt: skip
    # No "end" line, and the last line was cut off mid-write.
    _write_lines(trace_file, objs, tail='{"kind":"kernel","name":"_Z3cut","start":5,"en')

    trace = read_trace(trace_file)
    assert isinstance(trace, CuptiTrace)
    assert trace.complete is False
    assert trace.truncated is False
    assert trace.cupti_version == 130001
    assert trace.pids == [4242]
    assert trace.dropped == 5
    assert trace.errors == ["cuptiActivityEnable(MEMSET): CUPTI_ERROR_INVALID_PARAMETER (code 1)"]
    assert trace.unknown_lines == 1
    assert trace.bad_lines == 2  # the invalid kernel and the cut-off line

    assert len(trace.kernels) == 1
    k = trace.kernels[0]
    assert k.name == '_Z4weird"name\\x'
    assert k.duration_ns == 2000 and k.grid == (4, 1, 1) and k.block == (256, 1, 1) and k.regs == 32

    assert [a.name for a in trace.api] == ["cudaLaunchKernel", None]
    assert trace.api[0].base_name == "cudaLaunchKernel" and trace.api[0].thread == 99
    assert [e.stream_id for e in trace.event_records] == [7, None]
    assert trace.copies[0].copy_kind == "HtoD" and trace.copies[0].bytes == 4096
    assert trace.memsets[0].bytes == 1024
    assert trace.elapsed[0].ms == pytest.approx(0.002)
    assert trace.elapsed[1].ms is None and trace.elapsed[1].result == 600


def test_read_trace_complete_and_truncated(tmp_path: Path) -> None:
    trace_file = tmp_path / "trace.jsonl"
    _write_lines(
        trace_file,
        [
            {"kind": "meta", "cupti_version": 130001, "pid": 1},
            _kernel(1, 10, 20),
            {"kind": "truncated"},
            {"kind": "end"},
            {"kind": "meta", "cupti_version": 130001, "pid": 2},  # an injected child process
        ],
    )
    trace = read_trace(trace_file)
    assert trace.complete and trace.truncated
    assert trace.pids == [1, 2]
    assert len(trace.kernels) == 1 and trace.bad_lines == 0


def test_read_trace_byte_cap(tmp_path: Path) -> None:
    trace_file = tmp_path / "trace.jsonl"
    _write_lines(trace_file, [_kernel(i, i, i + 1) for i in range(100)] + [{"kind": "end"}])
    first_line = len(json.dumps(_kernel(0, 0, 1))) + 1
    trace = read_trace(trace_file, max_bytes=first_line * 10 + first_line // 2)
    assert trace.truncated and not trace.complete
    assert len(trace.kernels) == 10


def test_read_trace_non_utf8_name(tmp_path: Path) -> None:
    trace_file = tmp_path / "trace.jsonl"
    line = json.dumps(_kernel(1, 1, 2, name="NAME")).encode().replace(b"NAME", b"_Z3f\xff\xfe")
    trace_file.write_bytes(line + b"\n" + b'{"kind":"end"}\n')
    trace = read_trace(trace_file)
    assert trace.complete and len(trace.kernels) == 1
    assert trace.kernels[0].name is not None and trace.kernels[0].name.startswith("_Z3f")


def test_read_trace_missing_or_empty(tmp_path: Path) -> None:
    with pytest.raises(CuptiUnavailable, match="never ran"):
        read_trace(tmp_path / "nope.jsonl")
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    with pytest.raises(CuptiUnavailable, match="empty"):
        read_trace(empty)


# --------------------------------------------------------------------------- on a GPU

CUDA_SRC = r"""
#include <cstdio>
#include <cuda_runtime.h>
#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
  fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_)); return 1; } } while (0)
__global__ void kl_spin(float *out, long long cycles) {
  long long t0 = clock64();
  while (clock64() - t0 < cycles) {}
  if (threadIdx.x == 0) out[blockIdx.x] = (float)blockIdx.x;
}
int main() {
  float *d = nullptr; float h[64] = {0};
  cudaStream_t s; cudaEvent_t a, b;
  CK(cudaMalloc(&d, sizeof h));
  CK(cudaStreamCreate(&s));
  CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b));
  CK(cudaMemcpy(d, h, sizeof h, cudaMemcpyHostToDevice));
  CK(cudaMemset(d, 0, sizeof h));
  kl_spin<<<4, 64, 0, s>>>(d, 1000);  // warm-up
  CK(cudaEventRecord(a, s));
  for (int i = 0; i < 3; ++i) kl_spin<<<4, 64, 0, s>>>(d, 2000000);
  CK(cudaEventRecordWithFlags(b, s, 0));
  CK(cudaEventSynchronize(b));
  float ms = -1.f;
  CK(cudaEventElapsedTime(&ms, a, b));
  CK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
  CK(cudaEventRecord(a, 0));  // legacy default stream
  printf("KL_REPORTED_MS %.6f\n", ms);
  return 0;
}
"""


def _have_gpu() -> bool:
    if shutil.which("nvidia-smi") is None:
        return False
    try:
        proc = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return proc.returncode == 0 and "GPU" in proc.stdout


@pytest.mark.gpu
@pytest.mark.nvcc
def test_trace_of_a_real_program(tmp_path: Path) -> None:
    if not _have_gpu():
        pytest.skip("no NVIDIA GPU visible (nvidia-smi -L)")
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not on PATH")
    _cupti_or_skip()
    lib = build_injection_library(tmp_path / "cache")
    src = tmp_path / "prog.cu"
    src.write_text(CUDA_SRC)
    exe = tmp_path / "prog"
    subprocess.run(["nvcc", "-O2", "-o", str(exe), str(src)], check=True, capture_output=True, timeout=300)

    # Without the output variable the library stays out of the way.
    plain_env = {**os.environ, "CUDA_INJECTION64_PATH": str(lib)}
    plain_env.pop("KERNELLOOP_CUPTI_OUT", None)
    plain = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120, check=False, env=plain_env)
    assert plain.returncode == 0, plain.stderr

    out = tmp_path / "trace.jsonl"
    env = {**os.environ, **injection_env(lib, out)}
    proc = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120, check=False, env=env)
    assert proc.returncode == 0, proc.stderr
    reported = float(proc.stdout.split("KL_REPORTED_MS")[1].split()[0])
    check_real_trace(read_trace(out), reported, out)


def check_real_trace(trace: CuptiTrace, reported: float, out: Path) -> None:
    """What a trace of CUDA_SRC must show; `reported` is the time the program printed."""
    assert trace.complete, out.read_text()[-2000:]
    assert not trace.truncated and trace.dropped == 0 and trace.bad_lines == 0
    assert trace.errors == []
    spins = [k for k in trace.kernels if "kl_spin" in (k.name or "")]
    assert len(spins) == 4
    timed = spins[1:]
    assert all(k.grid == (4, 1, 1) and k.block == (64, 1, 1) for k in timed)
    gpu_ms = (max(k.end for k in timed) - min(k.start for k in timed)) / 1e6
    assert gpu_ms == pytest.approx(reported, rel=0.2)

    launches = {a.corr: a for a in trace.api if a.base_name == "cudaLaunchKernel"}
    assert all(k.corr in launches for k in spins)
    assert {c.copy_kind for c in trace.copies} >= {"HtoD", "DtoH"}
    assert len(trace.memsets) == 1

    assert len(trace.elapsed) == 1
    call = trace.elapsed[0]
    assert call.result == 0 and call.ms == pytest.approx(reported, rel=1e-4)
    records = {r.event: r for r in trace.event_records[:2]}
    assert set(records) == {call.start_event, call.end_event}
    start_rec, end_rec = records[call.start_event], records[call.end_event]
    assert start_rec.stream == end_rec.stream != "0x0"
    assert start_rec.stream_id == timed[0].stream == end_rec.stream_id
    assert start_rec.t <= timed[0].start and end_rec.t <= call.t
    assert len(trace.event_records) == 3 and trace.event_records[2].stream == "0x0"
