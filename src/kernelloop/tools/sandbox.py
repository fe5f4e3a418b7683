"""Run untrusted programs (compilers on candidate source, candidate binaries) safely.

What a run gets: an environment scrubbed of secrets, a private temporary working
directory, no network (a fresh network namespace where the machine allows one), an
unprivileged user when kernelloop runs as root, resource limits (CPU time, memory,
file size, process count, open files), a wall-clock timeout that kills the whole
process group, and caps on captured stdout/stderr. A program may fail, hang, crash or
flood; `run_sandboxed` always returns a `RunResult`.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import functools
import os
import re
import resource
import selectors
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Literal

from pydantic import BaseModel, Field

_CLONE_NEWNET = 0x40000000
_CLONE_NEWUSER = 0x10000000
# Each run gets a uid of its own from this range (not "nobody", which daemons share),
# reserved with a lock file for the run's lifetime: after the run every process of that
# uid is killed, including any that left the process group with setsid, and concurrent
# runs never touch each other's processes.
SANDBOX_UID_COUNT = 4000
_UID_BASE_VARIABLE = "KERNELLOOP_SANDBOX_UID_BASE"


def sandbox_uid_base() -> int:
    """The first uid of the sandbox range (KERNELLOOP_SANDBOX_UID_BASE, default 61000); read when a
    run needs it, so a bad value is one line (ConfigError) where it is used, not an import crash."""
    from ..config import environment_value
    from ..errors import ConfigError

    text = environment_value(_UID_BASE_VARIABLE) or "61000"
    try:
        base = int(text)
    except ValueError:
        raise ConfigError(f"{_UID_BASE_VARIABLE}={text}: not a whole number (the first of "
                          f"{SANDBOX_UID_COUNT} unused uids, e.g. 61000)") from None
    if not 1000 <= base <= 2**31 - 1 - SANDBOX_UID_COUNT:
        raise ConfigError(f"{_UID_BASE_VARIABLE}={text}: use a uid from 1000 to {2**31 - 1 - SANDBOX_UID_COUNT} "
                          f"(the first of {SANDBOX_UID_COUNT} unused uids, e.g. 61000)")
    return base
_UID_LOCK_DIR = Path("/tmp/kernelloop-sandbox-uids")

# Variables a CUDA program or a compiler legitimately needs. Everything else is dropped.
PASS_THROUGH_ENV = (
    "PATH",
    "LANG",
    "LC_ALL",
    "TZ",
    "LD_LIBRARY_PATH",
    "CUDA_VISIBLE_DEVICES",
    "NVIDIA_VISIBLE_DEVICES",
    "CUDA_DEVICE_ORDER",
    "CUDA_MODULE_LOADING",
)
SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASS|CRED|AUTH|COOKIE|SESSION|PRIVATE", re.I)


class Limits(BaseModel):
    """Resource caps for one sandboxed run. Every cap is a named setting."""

    wall_timeout_s: float = Field(60.0, gt=0)
    cpu_seconds: int | None = Field(None, description="RLIMIT_CPU; default: wall timeout + 5 s")
    memory_bytes: int | None = Field(32 << 30, description="RLIMIT_DATA (address space limits break CUDA)")
    file_size_bytes: int = 64 << 20
    max_processes: int = 256  # threads count too; CUDA starts a few per process
    open_files: int = 1024
    stdout_cap_bytes: int = 8 << 20
    stderr_cap_bytes: int = 1 << 20


class IsolationReport(BaseModel):
    """What isolation a run actually had (not what was asked for)."""

    env_scrubbed: bool = True
    private_tmp: bool = True
    network: Literal["namespace", "shared"] = "shared"
    user: Literal["unprivileged", "same"] = "same"
    limits: list[str] = []
    notes: list[str] = []

    def summary(self) -> str:
        net = "no network (netns)" if self.network == "namespace" else "network NOT isolated"
        user = "own uid per run, swept after" if self.user == "unprivileged" else "same uid"
        return f"scrubbed env, private tmp, {net}, {user}, limits: {', '.join(self.limits)}"


class RunResult(BaseModel):
    argv: list[str]
    returncode: int | None
    signal: int | None = None
    timed_out: bool = False
    flooded: bool = False  # stdout, stderr or a pipe passed its cap: the run was killed
    stdout: str = ""
    stderr: str = ""
    stdout_bytes: int = 0
    stderr_bytes: int = 0
    pipe_bytes: dict[str, int] = {}  # per pipe named in run_sandboxed's `pipes`: bytes the program wrote
    wall_s: float = 0.0
    isolation: IsolationReport
    # what the program wrote to each pipe named in run_sandboxed's `pipes`, read while it ran
    pipes: dict[str, bytes] = Field(default_factory=dict, exclude=True, repr=False)

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out and not self.flooded

    def failure(self) -> str | None:
        """One line saying why the run did not succeed, or None."""
        if self.timed_out:
            return f"timed out after {self.wall_s:.1f} s (killed)"
        if self.flooded:
            written = self.stdout_bytes + self.stderr_bytes + sum(self.pipe_bytes.values())
            return f"output flood: {written} bytes before the cap (killed)"
        if self.signal is not None:
            return f"killed by signal {signal.Signals(self.signal).name}"
        if self.returncode not in (0, None):
            tail = self.stderr.strip().splitlines()[-1:] or [""]
            return f"exit code {self.returncode}" + (f": {tail[0][:200]}" if tail[0] else "")
        return None


def secret_values(environ: Mapping[str, str] | None = None) -> set[str]:
    env = os.environ if environ is None else environ
    return {v for k, v in env.items() if SECRET_NAME.search(k) and len(v) >= 6}


def scrubbed_env(extra: Mapping[str, str] | None = None, *, home: Path) -> dict[str, str]:
    """The environment a sandboxed program sees: a short allow-list, never a secret."""
    secrets = secret_values()
    env: dict[str, str] = {}
    for name in PASS_THROUGH_ENV:
        value = os.environ.get(name)
        if value is not None:
            env[name] = value
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    env.update({"HOME": str(home), "TMPDIR": str(home), "LC_ALL": "C"})
    for name, value in (extra or {}).items():
        if SECRET_NAME.search(name):
            raise ValueError(f"refusing to pass {name!r} to a sandboxed program")
        env[name] = value
    return {k: v for k, v in env.items() if not any(s in v for s in secrets)}


@functools.lru_cache(maxsize=1)
def available_isolation() -> tuple[int, bool]:
    """Probe once which unshare flags and whether a uid drop work here.

    Returns (unshare flags, drop_uid). Probing runs a real child, since what works
    depends on capabilities and the container runtime, not on what is asked.
    """
    flags = 0
    for candidate in ([_CLONE_NEWNET] if os.geteuid() == 0 else []) + [_CLONE_NEWUSER | _CLONE_NEWNET]:
        if _probe(functools.partial(_unshare_or_raise, candidate)):
            flags = candidate
            break
    drop = os.geteuid() == 0 and _probe(functools.partial(_drop_privileges, sandbox_uid_base()))
    return flags, drop


def _probe(preexec) -> bool:
    try:
        subprocess.run(["/bin/sh", "-c", "exit 0"], preexec_fn=preexec, timeout=10, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return True
    except (subprocess.SubprocessError, OSError):
        return False


def _unshare_or_raise(flags: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    uid, gid = os.getuid(), os.getgid()
    if libc.unshare(flags) != 0:
        raise OSError(ctypes.get_errno(), "unshare failed")
    if flags & _CLONE_NEWUSER:
        # Map our own ids into the new user namespace so file access is unchanged.
        Path("/proc/self/setgroups").write_text("deny")
        Path("/proc/self/uid_map").write_text(f"{uid} {uid} 1")
        Path("/proc/self/gid_map").write_text(f"{gid} {gid} 1")


def _drop_privileges(uid: int) -> None:
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)


def _reserve_uid() -> tuple[int, int]:
    """A sandbox uid no other live run holds: (uid, lock fd). Leftovers of a crashed run
    that held it are killed first."""
    import fcntl
    import random

    base = sandbox_uid_base()
    _UID_LOCK_DIR.mkdir(mode=0o700, exist_ok=True)
    for _ in range(200):
        uid = base + random.randrange(SANDBOX_UID_COUNT)
        fd = os.open(_UID_LOCK_DIR / f"{uid}.lock", os.O_CREAT | os.O_RDWR, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue
        kill_processes_of(uid)
        return uid, fd
    raise RuntimeError("no free sandbox uid (4000 runs at once?)")


def _processes_of(uid: int) -> list[int]:
    """The live processes whose real uid is UID (a setuid program's too: its effective uid is another)."""
    pids = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            status = _read_status(name)
            real_uid = int(_status_field(status, b"Uid").split()[0])
        except (OSError, ValueError, IndexError):
            continue
        if real_uid == uid and _alive(status):
            pids.append(int(name))
    return pids


def _alive(status: bytes) -> bool:
    """Whether a /proc/PID/status is of a process that still runs: not a zombie, or a zombie thread-group leader whose
    other threads still run (red team round 259: a main thread that called exit(2) beside a live thread shows state
    Z, and the process it leads outlived every sweep; SIGKILL to the leader's pid kills the whole group). A plain
    zombie is already dead (an init that does not reap leaves them)."""
    if not _status_field(status, b"State").strip().startswith(b"Z"):
        return True
    try:
        return int(_status_field(status, b"Threads").strip() or b"1") > 1
    except ValueError:
        return True  # unreadable: counted as alive, so it is killed


def _read_status(pid: str) -> bytes:
    """/proc/PID/status in one system call (this runs three times a run, over every process of the machine), as
    bytes: a process name that is no UTF-8 does not hide it."""
    fd = os.open(f"/proc/{pid}/status", os.O_RDONLY)
    try:
        return os.read(fd, 1 << 16)
    finally:
        os.close(fd)


def _status_field(status: bytes, key: bytes) -> bytes:
    """The value of a line of /proc/PID/status, empty without one (the kernel escapes any newline in the process
    name: no line is forged)."""
    start = status.find(b"\n" + key + b":")
    if start < 0:
        return b""
    start += len(key) + 2
    end = status.find(b"\n", start)
    return status[start:end if end >= 0 else len(status)]


def kill_processes_of(uid: int, rounds: int = 5) -> int:
    """Kill every process of a sandbox uid."""
    killed = 0
    for _ in range(rounds):
        pids = _processes_of(uid)
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.05)
    return killed


def _child_setup(limits: Limits, unshare_flags: int, drop_uid: int | None) -> None:
    """Runs in the child between fork and exec (async-signal-safe enough for CPython)."""
    cpu = limits.cpu_seconds or int(limits.wall_timeout_s) + 5
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_size_bytes, limits.file_size_bytes))
    resource.setrlimit(resource.RLIMIT_NOFILE, (limits.open_files, limits.open_files))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if limits.memory_bytes:
        resource.setrlimit(resource.RLIMIT_DATA, (limits.memory_bytes, limits.memory_bytes))
    if unshare_flags:
        _unshare_or_raise(unshare_flags)
    if drop_uid is not None:
        _drop_privileges(drop_uid)
    # After the uid drop NPROC counts the sandbox's own processes and threads.
    resource.setrlimit(resource.RLIMIT_NPROC, (limits.max_processes, limits.max_processes))


def describe_isolation(limits: Limits) -> IsolationReport:
    flags, drop = available_isolation()
    report = IsolationReport(
        network="namespace" if flags & _CLONE_NEWNET else "shared",
        user="unprivileged" if drop else "same",
        limits=[
            f"wall {limits.wall_timeout_s:g}s",
            f"cpu {limits.cpu_seconds or int(limits.wall_timeout_s) + 5}s",
            f"data {limits.memory_bytes >> 20} MiB" if limits.memory_bytes else "data unlimited",
            f"fsize {limits.file_size_bytes >> 20} MiB",
            f"nproc {limits.max_processes}",
            f"stdout {limits.stdout_cap_bytes >> 20} MiB",
        ],
    )
    if not flags:
        report.notes.append("no network namespace available (needs root or unprivileged user namespaces)")
    if os.geteuid() == 0 and not drop:
        report.notes.append("running as root and could not drop to an unprivileged uid")
    if os.geteuid() != 0:
        report.notes.append("not root: no uid drop, so the process limit counts all of this user's processes and "
                            "a process that leaves the group (setsid) is not swept")
    return report


@contextmanager
def private_workdir(base: Path | None = None) -> Iterator[Path]:
    """A fresh directory only the sandboxed program (and we) can use; removed after.

    When runs drop privileges, the directory is owned by a uid reserved for it alone;
    programs run in it run as that uid, and everything of that uid dies with the block."""
    path = Path(tempfile.mkdtemp(prefix="kl-run-", dir=base))
    _, drop = available_isolation()
    uid, lock = _reserve_uid() if drop else (None, None)
    try:
        if uid is not None:
            os.chown(path, uid, uid)
        os.chmod(path, 0o700)
        yield path
    finally:
        if uid is not None:
            kill_processes_of(uid)
        shutil.rmtree(path, ignore_errors=True)
        if lock is not None:
            os.close(lock)


def _run_uid(workdir: Path) -> int | None:
    _, drop = available_isolation()
    return workdir.stat().st_uid if drop else None


def stage_file(src: Path, workdir: Path, name: str | None = None) -> Path:
    """Copy a file into a workdir so the (possibly unprivileged) program can use it."""
    dst = workdir / (name or src.name)
    shutil.copy2(src, dst)
    uid = _run_uid(workdir)
    if uid is not None:
        os.chown(dst, uid, uid)
    return dst


def run_sandboxed(
    argv: Sequence[str],
    *,
    workdir: Path,
    limits: Limits | None = None,
    env: Mapping[str, str] | None = None,
    drop_privileges: bool = True,
    pass_fds: Sequence[int] = (),
    pipes: Sequence[str] = (),
) -> RunResult:
    """Run `argv` in `workdir` under the sandbox; never raises for the program's misbehaviour.

    `drop_privileges=False` keeps the caller's uid (Nsight Compute needs it for the
    performance counters); everything else still applies. `pass_fds` stay open in the
    program (the verifier's stream pipe); every other descriptor is closed. For each variable in
    `pipes`, the program gets the write end of a pipe, named "fd:dev:inode" in that variable, and what
    it writes there is read while it runs (`RunResult.pipes[variable]`, capped at
    `limits.file_size_bytes` like a file): nothing it runs later can change bytes already written, as
    it could a file's."""
    limits = limits or Limits()
    flags, _ = available_isolation()
    uid = _run_uid(workdir) if drop_privileges else None
    isolation = describe_isolation(limits)
    env = dict(env or {})
    pipe_ends: dict[str, tuple[int, int]] = {}  # variable -> (read end, write end)
    for name in dict.fromkeys(pipes):
        read_end, write_end = os.pipe()
        with contextlib.suppress(OSError):  # a wider pipe: fewer wake-ups for a large dump
            fcntl.fcntl(write_end, fcntl.F_SETPIPE_SZ, 1 << 20)
        info = os.fstat(write_end)
        env[name] = f"{write_end}:{info.st_dev}:{info.st_ino}"
        pass_fds = (*pass_fds, write_end)
        pipe_ends[name] = (read_end, write_end)
    full_env = scrubbed_env(env, home=workdir)
    start = time.monotonic()
    try:
        proc = subprocess.Popen(
            list(argv),
            cwd=workdir,
            env=full_env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            preexec_fn=functools.partial(_child_setup, limits, flags, uid),
            close_fds=True,
            pass_fds=tuple(pass_fds),
        )
    except (OSError, subprocess.SubprocessError) as exc:
        for read_end, _ in pipe_ends.values():
            os.close(read_end)
        return RunResult(argv=list(argv), returncode=127, stderr=f"could not start: {exc}", isolation=isolation)
    finally:
        for _, write_end in pipe_ends.values():
            os.close(write_end)  # the program's copy is its only one: the pipe ends when it does

    out, err = bytearray(), bytearray()
    buffers = {"out": out, "err": err, **{name: bytearray() for name in pipe_ends}}
    counts = dict.fromkeys(buffers, 0)
    caps = {"out": limits.stdout_cap_bytes, "err": limits.stderr_cap_bytes,
            **dict.fromkeys(pipe_ends, limits.file_size_bytes)}
    timed_out = flooded = False
    sel = selectors.DefaultSelector()
    assert proc.stdout is not None and proc.stderr is not None
    sel.register(proc.stdout, selectors.EVENT_READ, "out")
    sel.register(proc.stderr, selectors.EVENT_READ, "err")
    open_streams = 2
    for name, (read_end, _) in pipe_ends.items():
        sel.register(read_end, selectors.EVENT_READ, name)
        open_streams += 1
    deadline = start + limits.wall_timeout_s
    drain_until: float | None = None  # once the program exits, its pipes get a short grace
    while open_streams:
        now = time.monotonic()
        if now >= deadline:
            timed_out = True
            break
        if drain_until is None and proc.poll() is not None:
            drain_until = now + 0.5  # a child it left behind may hold the pipes open forever
        if drain_until is not None and now >= drain_until:
            break
        wait = min(deadline, drain_until or deadline) - now
        for key, _ in sel.select(timeout=min(wait, 0.1 if drain_until is None else wait)):
            chunk = os.read(key.fd, 1 << 20)
            if not chunk:
                sel.unregister(key.fileobj)
                open_streams -= 1
                continue
            name = key.data
            counts[name] += len(chunk)
            room = caps[name] - len(buffers[name])
            if room > 0:
                buffers[name].extend(chunk[:room])
            if counts[name] > caps[name]:
                flooded = True
        if flooded:
            break
    if timed_out or flooded:
        _kill_group(proc.pid)
    try:
        proc.wait(timeout=max(0.1, deadline - time.monotonic()) if not (timed_out or flooded) else 10)
    except subprocess.TimeoutExpired:
        timed_out = True
        _kill_group(proc.pid)
        proc.wait(timeout=10)
    _kill_group(proc.pid)  # reap anything the program left running in its group
    if uid is not None:
        kill_processes_of(uid)  # and anything that left the group
    sel.close()
    proc.stdout.close()
    proc.stderr.close()
    for read_end, _ in pipe_ends.values():
        os.close(read_end)
    rc = proc.returncode
    return RunResult(
        argv=list(argv),
        returncode=rc,
        signal=-rc if rc is not None and rc < 0 else None,
        timed_out=timed_out,
        flooded=flooded,
        stdout=out.decode("utf-8", "replace"),
        stderr=err.decode("utf-8", "replace"),
        stdout_bytes=counts["out"],
        stderr_bytes=counts["err"],
        pipe_bytes={name: counts[name] for name in pipe_ends},
        wall_s=time.monotonic() - start,
        isolation=isolation,
        pipes={name: bytes(buffers[name]) for name in pipe_ends},
    )


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
