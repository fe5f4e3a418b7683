"""Measure a CUDA program's GPU work from outside it, with a CUPTI injection library.

A program under test reports its own kernel time (cudaEventRecord /
cudaEventElapsedTime). To check that report, kernelloop injects
``libkl_cupti_inject.so`` (built from ``kernelloop/native/kl_cupti_inject.cpp``)
through ``CUDA_INJECTION64_PATH``; the CUDA driver loads it at ``cuInit`` and it
writes a JSON-lines trace of what really ran to the pipe named by ``$KERNELLOOP_CUPTI_FD``
(``fd:dev:inode``; the verifier's, read while the program runs: `parse_trace(..., sealed=True)`)
or to the file ``$KERNELLOOP_CUPTI_OUT`` (the profiler's).

Typical use::

    lib = build_injection_library(cache_dir)
    env = {**os.environ, **injection_env(lib, trace_path)}
    subprocess.run([program], env=env)
    trace = read_trace(trace_path)

or, with the sandbox draining the pipe (`run_sandboxed(..., pipes=(FD_ENV,))`)::

    result = run_sandboxed(argv, env=injection_env(lib), pipes=(FD_ENV,), ...)
    trace = parse_trace(result.pipes[FD_ENV], sealed=True)

The trace's line kinds (timestamps are CUPTI nanoseconds, one clock domain):

* ``start`` (pipe mode, first, written when the library is loaded): ``pid``, ``early`` (1: before libcuda
  was loaded, i.e. preloaded), ``nonce`` (repeated by ``end``)
* ``meta``: ``cupti_version``, ``compiled_api``, ``pid``, ``kernel_struct``, ``memcpy_struct``
* ``api``: ``cbid``, ``name`` (ABI suffix dropped, may be absent), ``start``, ``end``, ``corr``,
  ``thread``, ``ret``
* ``kernel``: ``name`` (mangled), ``start``, ``end``, ``corr``, ``stream``, ``device``,
  ``context``, ``grid``, ``block``, ``dyn_smem``, ``static_smem``, ``regs``, ``graph_node``
* ``memcpy``: ``copy_kind`` (HtoD|DtoH|DtoD|HtoH|PtoP|other), ``bytes``, ``start``, ``end``,
  ``corr``, ``stream``, ``device``
* ``memset``: ``bytes``, ``start``, ``end``, ``corr``, ``stream``, ``device``
* ``event_record``: ``cbid``, ``event``, ``stream`` (handles as "0x.."), ``stream_id``
  (CUPTI's stream id, comparable with a kernel's ``stream``; may be absent), ``t``, ``corr``
* ``elapsed``: ``cbid``, ``start_event``, ``end_event``, ``ms`` (null unless the call
  succeeded), ``result``, ``t``, ``corr``
* ``dropped`` (``count``), ``error`` (``where``, ``code``, ``message``), ``truncated``, ``end``
  (``bytes``: how many the tracer wrote before it; ``nonce``: the start line's)
"""

from __future__ import annotations

import hashlib
import importlib.resources
import json
import os
import platform
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from kernelloop.errors import EnvironmentProblem
from kernelloop.tools.toolkit import toolkit_roots

__all__ = [
    "ApiRecord",
    "CopyRecord",
    "CuptiPaths",
    "CuptiTrace",
    "CuptiUnavailable",
    "ElapsedCall",
    "EventRecordCall",
    "KernelRecord",
    "MemsetRecord",
    "LIBRARY_NAME",
    "OUT_ENV",
    "FD_ENV",
    "INJECTION_ENV",
    "build_injection_library",
    "find_cupti",
    "injection_env",
    "parse_trace",
    "read_trace",
]

LIBRARY_NAME = "libkl_cupti_inject.so"
SOURCE_NAME = "kl_cupti_inject.cpp"
SOURCE_PACKAGE = "kernelloop.native"
OUT_ENV = "KERNELLOOP_CUPTI_OUT"
FD_ENV = "KERNELLOOP_CUPTI_FD"
PRELOAD_ENV = "LD_PRELOAD"
INJECTION_ENV = "CUDA_INJECTION64_PATH"

_MIB = 1024 * 1024


class CuptiUnavailable(EnvironmentProblem):
    """CUPTI tracing cannot be done here: headers, library, compiler or trace is missing."""


# --------------------------------------------------------------------------- locating CUPTI


class CuptiPaths(BaseModel):
    """Where CUPTI and the CUDA headers it needs live."""

    model_config = ConfigDict(frozen=True)

    root: Path
    include_dir: Path  # holds cupti.h
    lib_dir: Path  # holds libcupti.so*
    cuda_include_dir: Path  # holds cuda.h / cuda_runtime_api.h (when the toolkit has them)
    lib_file: Path  # the libcupti file to link against


def _target_dirs() -> list[str]:
    machine = platform.machine().lower()
    if machine in ("aarch64", "arm64"):
        return ["targets/sbsa-linux", "targets/aarch64-linux"]
    return ["targets/x86_64-linux"]


def _include_candidates(root: Path) -> list[Path]:
    return [root / "include", root / "extras/CUPTI/include", *(root / t / "include" for t in _target_dirs())]


def _lib_candidates(root: Path) -> list[Path]:
    return [
        root / "lib64",
        root / "lib",
        root / "extras/CUPTI/lib64",
        *(root / t / "lib" for t in _target_dirs()),
    ]


def _cupti_lib_file(lib_dir: Path) -> Path | None:
    plain = lib_dir / "libcupti.so"
    if plain.is_file():
        return plain
    try:
        versioned = sorted(p for p in lib_dir.glob("libcupti.so.*") if p.is_file())
    except OSError:
        return None
    return versioned[0] if versioned else None


def _paths_in_root(root: Path) -> CuptiPaths | None:
    include = next((d for d in _include_candidates(root) if (d / "cupti.h").is_file()), None)
    if include is None:
        return None
    lib_dir, lib_file = None, None
    for d in _lib_candidates(root):
        found = _cupti_lib_file(d)
        if found is not None:
            lib_dir, lib_file = d, found
            break
    if lib_dir is None or lib_file is None:
        return None
    cuda_candidates = [root / "include", *(root / t / "include" for t in _target_dirs()), include]
    cuda_include = next((d for d in cuda_candidates if (d / "cuda.h").is_file()), None)
    if cuda_include is None:
        cuda_include = next((d for d in cuda_candidates if d.is_dir()), include)
    return CuptiPaths(
        root=root, include_dir=include, lib_dir=lib_dir, cuda_include_dir=cuda_include, lib_file=lib_file
    )


def _candidate_roots() -> list[tuple[str, Path]]:
    return toolkit_roots()


def find_cupti(cuda_home: Path | None = None) -> CuptiPaths:
    """Locate cupti.h and libcupti.

    With `cuda_home`, only that toolkit is searched. Otherwise, in order: $CUDA_HOME,
    $CUDA_PATH, the toolkit of the real nvcc on PATH (symlinks and ``exec`` wrapper
    scripts followed), /usr/local/cuda. Each root is searched in include/,
    extras/CUPTI/include, targets/<arch>/include (cupti.h) and lib64/, lib/,
    extras/CUPTI/lib64, targets/<arch>/lib (libcupti.so*).
    """
    # toolkit_roots lists each toolkit once, most specific first
    candidates = [("cuda_home", Path(cuda_home))] if cuda_home is not None else _candidate_roots()
    tried: list[str] = []
    for label, root in candidates:
        tried.append(f"{root} ({label})")
        if not root.is_dir():
            continue
        found = _paths_in_root(root)
        if found is not None:
            return found
    raise CuptiUnavailable(
        "CUPTI not found: no cupti.h with a libcupti.so* beside it under "
        + ", ".join(tried)
        + ". Install the CUDA toolkit's CUPTI component (cuda-cupti-dev / cuda-cupti), "
        "or point CUDA_HOME at a toolkit that has include/cupti.h (or extras/CUPTI/include) "
        "and lib64/libcupti.so (or extras/CUPTI/lib64)."
    )


# --------------------------------------------------------------------------- building


def _bundled_source(source_name: str) -> bytes:
    try:
        return importlib.resources.files(SOURCE_PACKAGE).joinpath(source_name).read_bytes()
    except (FileNotFoundError, ModuleNotFoundError, OSError) as err:
        raise CuptiUnavailable(
            f"the bundled {source_name} is missing from package {SOURCE_PACKAGE} ({err}); reinstall kernelloop"
        ) from err


def _compiler_identity(compiler: str, timeout_s: float) -> tuple[str, str]:
    """(resolved compiler path, first line of `--version`)."""
    exe = shutil.which(compiler)
    if exe is None:
        raise CuptiUnavailable(
            f"C++ compiler {compiler!r} not found on PATH; install g++ (e.g. apt-get install g++) "
            "or pass compiler= the path of one"
        )
    try:
        proc = subprocess.run(
            [exe, "--version"], capture_output=True, text=True, timeout=min(timeout_s, 30), check=False
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        raise CuptiUnavailable(f"C++ compiler {exe} does not run: {err}") from err
    first = (proc.stdout or proc.stderr).strip().splitlines()
    return exe, first[0] if first else ""


def _link_flags(paths: CuptiPaths) -> list[str]:
    name = paths.lib_file.name
    lib = "-lcupti" if name == "libcupti.so" else f"-l:{name}"
    return [f"-L{paths.lib_dir}", lib, f"-Wl,-rpath,{paths.lib_dir}", "-ldl", "-lpthread"]


def _compile_command(compiler: str, source: Path, out: Path, paths: CuptiPaths) -> list[str]:
    includes: list[str] = []
    for d in (paths.cuda_include_dir, paths.include_dir):
        flag = f"-I{d}"
        if flag not in includes:
            includes.append(flag)
    return [
        compiler,
        "-std=c++17",
        "-O2",
        "-Wall",
        "-shared",
        "-fPIC",
        str(source),
        *includes,
        *_link_flags(paths),
        "-o",
        str(out),
    ]


def build_injection_library(
    cache_dir: Path,
    *,
    cuda_home: Path | None = None,
    compiler: str = "g++",
    timeout_s: float = 120,
    source_name: str = SOURCE_NAME,
    library_name: str = LIBRARY_NAME,
) -> Path:
    """Compile a bundled injection library (the audit's by default), or reuse a cached build.

    The result is ``cache_dir/<sha256>/<library_name>``, where the hash covers
    the source, the CUPTI paths and the compiler's identity. The build writes to a
    temporary file and renames it into place, so concurrent builds are safe.
    """
    paths = find_cupti(cuda_home)
    source = _bundled_source(source_name)
    exe, version = _compiler_identity(compiler, timeout_s)
    digest = hashlib.sha256()
    digest.update(source)
    digest.update(b"\0")
    digest.update(json.dumps(paths.model_dump(mode="json"), sort_keys=True).encode())
    digest.update(b"\0")
    digest.update(f"{exe}\0{version}\0{platform.machine()}\0".encode())
    digest.update(" ".join(_compile_command(exe, Path("SRC"), Path("OUT"), paths)).encode())
    target_dir = Path(cache_dir) / digest.hexdigest()
    target = target_dir / library_name
    if target.is_file() and target.stat().st_size > 0:
        return target

    try:
        target_dir.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise CuptiUnavailable(f"cannot create the CUPTI build cache {target_dir}: {err}") from err
    with tempfile.TemporaryDirectory(prefix=".build-", dir=target_dir) as tmp:
        tmp_dir = Path(tmp)
        src = tmp_dir / source_name
        src.write_bytes(source)
        tmp_out = tmp_dir / library_name
        cmd = _compile_command(exe, src, tmp_out, paths)
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=False)
        except subprocess.TimeoutExpired as err:
            raise CuptiUnavailable(f"building the CUPTI injection library took over {timeout_s:g} s") from err
        except OSError as err:
            raise CuptiUnavailable(f"cannot run {exe}: {err}") from err
        log = (proc.stdout or "") + (proc.stderr or "")
        if proc.returncode != 0 or not tmp_out.is_file():
            tail = "\n".join(log.strip().splitlines()[-20:])
            raise CuptiUnavailable(
                f"building the CUPTI injection library failed (exit {proc.returncode}): "
                f"{' '.join(cmd)}\n{tail}"
            )
        (tmp_dir / "build.log").write_text(" ".join(cmd) + "\n" + log)
        os.replace(tmp_dir / "build.log", target_dir / "build.log")
        os.replace(tmp_out, target)
    return target


def injection_env(lib: Path, out_file: Path | None = None) -> dict[str, str]:
    """The environment variables that make a CUDA program load `lib` and trace to `out_file`
    (without one, to the pipe the sandbox names in `FD_ENV`, the library preloaded so that it reads the
    pipe's name before any code of the program's runs).

    Paths are made absolute: the program may change its working directory. The trace
    file is opened for appending, so `out_file` should be a fresh path for each run.
    """
    env = {INJECTION_ENV: str(Path(lib).absolute())}
    if out_file is not None:
        env[OUT_ENV] = str(Path(out_file).absolute())
    else:
        env[PRELOAD_ENV] = str(Path(lib).absolute())
    return env


# --------------------------------------------------------------------------- the trace


class _Record(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class ApiRecord(_Record):
    """One CUDA runtime API call (CUPTI_ACTIVITY_KIND_RUNTIME)."""

    cbid: int
    name: str | None = None
    start: int
    end: int
    corr: int
    thread: int | None = None
    ret: int | None = None

    @property
    def base_name(self) -> str | None:
        """`name` without a per-thread-stream suffix: cudaLaunchKernel_ptsz -> cudaLaunchKernel."""
        if self.name is None:
            return None
        return re.sub(r"_(ptsz|ptds)$", "", re.sub(r"_v\d+$", "", self.name))

    @property
    def duration_ns(self) -> int:
        return self.end - self.start


class KernelRecord(_Record):
    """One kernel execution on the GPU (CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)."""

    name: str | None = None
    start: int
    end: int
    corr: int
    stream: int
    device: int
    context: int | None = None
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    dyn_smem: int = 0
    static_smem: int = 0
    regs: int = 0
    graph_node: int = 0

    @property
    def duration_ns(self) -> int:
        return self.end - self.start


class CopyRecord(_Record):
    """One memcpy (CUPTI_ACTIVITY_KIND_MEMCPY)."""

    copy_kind: str
    bytes: int
    start: int
    end: int
    corr: int
    stream: int
    device: int | None = None

    @property
    def duration_ns(self) -> int:
        return self.end - self.start


class MemsetRecord(_Record):
    """One memset (CUPTI_ACTIVITY_KIND_MEMSET)."""

    bytes: int
    start: int
    end: int
    corr: int
    stream: int
    device: int | None = None

    @property
    def duration_ns(self) -> int:
        return self.end - self.start


class EventRecordCall(_Record):
    """A cudaEventRecord* call, seen on entry; `t` is the CUPTI timestamp of the call."""

    cbid: int | None = None
    event: str
    stream: str
    stream_id: int | None = None
    t: int
    corr: int


class ElapsedCall(_Record):
    """A cudaEventElapsedTime call, seen on exit: what the program was told."""

    cbid: int | None = None
    start_event: str
    end_event: str
    ms: float | None = None
    result: int
    t: int
    corr: int


class CuptiTrace(BaseModel):
    """Everything one traced run wrote."""

    kernels: list[KernelRecord] = []
    api: list[ApiRecord] = []
    copies: list[CopyRecord] = []
    memsets: list[MemsetRecord] = []
    event_records: list[EventRecordCall] = []
    elapsed: list[ElapsedCall] = []
    complete: bool = False  # saw {"kind":"end"}: the program exited through exit()
    dropped: int = 0  # records CUPTI lost for want of buffer space
    errors: list[str] = []
    truncated: bool = False  # the library hit its line cap, or read_trace its byte cap
    cupti_version: int | None = None
    pids: list[int] = []  # one per process that loaded the library (children too)
    early: bool | None = None  # the start line's: the library read its settings before libcuda was loaded
    bad_lines: int = 0  # lines that were not valid JSON records (e.g. a cut-off last line)
    unknown_lines: int = 0  # valid JSON of a kind this reader does not know


_RECORD_KINDS: dict[str, tuple[type[_Record], str]] = {
    "kernel": (KernelRecord, "kernels"),
    "api": (ApiRecord, "api"),
    "memcpy": (CopyRecord, "copies"),
    "memset": (MemsetRecord, "memsets"),
    "event_record": (EventRecordCall, "event_records"),
    "elapsed": (ElapsedCall, "elapsed"),
}


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def read_trace(path: Path, *, max_bytes: int = 512 * _MIB) -> CuptiTrace:
    """Parse a trace file written by the injection library (`parse_trace`, unsealed).

    Raises CuptiUnavailable when the file is missing or empty: the library never loaded (no CUDA
    call, or the injection failed).
    """
    path = Path(path)
    try:
        with path.open("rb") as f:
            data = f.read(max_bytes + 1)
    except FileNotFoundError as err:
        raise CuptiUnavailable(
            f"no CUPTI trace at {path}: the injection library never ran (the program made no CUDA "
            f"call, or the driver did not load {INJECTION_ENV})"
        ) from err
    except OSError as err:
        raise CuptiUnavailable(f"cannot read the CUPTI trace {path}: {err}") from err
    return parse_trace(data, max_bytes=max_bytes, where=f"the CUPTI trace {path}")


_START_LINE = re.compile(rb'\{"kind":"start","pid":\d+,"early":([01]),"nonce":"([0-9a-f]{32})"\}\n')


def _check_sealed(data: bytes, ends: list[int]) -> None:
    """Raise unless DATA is the tracer's whole stream: its start line first (written when the library was loaded,
    before any code of the program's: "early" 1), one end record (ENDS: the offset of each), the last bytes,
    written as the tracer writes it, stating its offset (the tracer's count of what it wrote) and the start line's
    nonce (an end written by anything else cannot know it)."""
    start = _START_LINE.match(data)
    if start is None:
        raise CuptiUnavailable("the CUPTI trace's pipe does not begin with the tracer's start line: the program wrote "
                               "to the tracer's pipe first, or the tracer was not loaded before the program's code")
    if start.group(1) != b"1":
        # loaded by the driver at the first CUDA call instead: the program's code ran before the tracer read which
        # pipe is the verifier's, and could have named another (red team round 301)
        raise CuptiUnavailable("the CUPTI tracer read its settings after the program's own code had started (it was "
                               "not preloaded): its trace cannot be told from one the program redirected")
    if not ends:
        return  # no end: the trace is incomplete, which the audit reports as such
    offset = ends[-1]
    last_line = data.rstrip(b"\n").rfind(b"\n") + 1
    expected = b'{"kind":"end","bytes":%d,"nonce":"%s"}\n' % (offset, start.group(2))
    problem = ("holds more than one end record" if len(ends) > 1 else
               "holds bytes after its end record" if offset != last_line or not data.endswith(b"\n") else
               "holds bytes the tracer did not write (its end record is not the tracer's count of them, or not "
               "the tracer's own)" if data[offset:] != expected else None)
    if problem:
        raise CuptiUnavailable(f"the CUPTI trace's pipe {problem}: the program wrote to the tracer's pipe")


def parse_trace(data: bytes, *, sealed: bool = False, max_bytes: int = 512 * _MIB,
                where: str = "the CUPTI trace") -> CuptiTrace:
    """Parse the bytes of a trace the injection library wrote.

    Tolerates a cut-off last line, garbage lines and unknown kinds (counted in `bad_lines` /
    `unknown_lines`). Reads at most `max_bytes`; past that the rest is ignored and `truncated` is
    set. `sealed` (the pipe the verifier drains while the program runs): the bytes must be exactly
    the tracer's, its end record last and stating the bytes before it, else CuptiUnavailable: the
    program wrote to the pipe itself. Raises CuptiUnavailable when DATA is empty: the library never
    loaded (no CUDA call, or the injection failed).
    """
    if not data:
        raise CuptiUnavailable(
            f"{where} is empty: the injection library never ran (the program made no CUDA "
            f"call, or the driver did not load {INJECTION_ENV})"
        )
    truncated = len(data) > max_bytes
    if truncated:
        data = data[:max_bytes]

    lists: dict[str, list[Any]] = {attr: [] for _, attr in _RECORD_KINDS.values()}
    errors: list[str] = []
    pids: list[int] = []
    complete = False
    dropped = bad = unknown = 0
    cupti_version: int | None = None
    early: bool | None = None

    ends: list[int] = []  # each end record's offset
    offset = 0
    for raw in data.split(b"\n"):
        at, offset = offset, offset + len(raw) + 1
        text = raw.decode("utf-8", errors="replace").strip()
        if not text:
            continue
        try:
            obj = json.loads(text)
        except ValueError:
            bad += 1
            continue
        if not isinstance(obj, dict):
            bad += 1
            continue
        kind = obj.get("kind")
        if kind in _RECORD_KINDS:
            model, attr = _RECORD_KINDS[kind]
            try:
                lists[attr].append(model.model_validate(obj))
            except ValidationError:
                bad += 1
        elif kind == "start":
            if early is None:
                early = obj.get("early") == 1
        elif kind == "end":
            complete = True
            ends.append(at)
        elif kind == "truncated":
            truncated = True
        elif kind == "dropped":
            count = _int_or_none(obj.get("count"))
            if count is None:
                bad += 1
            else:
                dropped += count
        elif kind == "error":
            where_ = obj.get("where", "?")
            message = obj.get("message", "")
            errors.append(f"{where_}: {message} (code {obj.get('code')})")
        elif kind == "meta":
            version = _int_or_none(obj.get("cupti_version"))
            if version is not None and cupti_version is None:
                cupti_version = version
            pid = _int_or_none(obj.get("pid"))
            if pid is not None:
                pids.append(pid)

        else:
            unknown += 1
    if sealed and not truncated:
        _check_sealed(data, ends)

    return CuptiTrace(
        kernels=lists["kernels"],
        api=lists["api"],
        copies=lists["copies"],
        memsets=lists["memsets"],
        event_records=lists["event_records"],
        elapsed=lists["elapsed"],
        complete=complete,
        dropped=dropped,
        errors=errors,
        truncated=truncated,
        cupti_version=cupti_version,
        pids=pids,
        early=early,
        bad_lines=bad,
        unknown_lines=unknown,
    )
