"""Record what a running CUDA program's kernel launches really are (for `kernelloop init --capture`).

The program runs once with ``libkl_capture_inject.so`` (built from
``kernelloop/native/kl_capture_inject.cpp``) injected through ``CUDA_INJECTION64_PATH``. The
library writes one JSON line per launch (kernel, grid, block, dynamic shared memory, each
argument's bytes, the allocation each pointer argument points into, a sample of the memory it
points at on the kernel's first launch) and one per kernel execution (its GPU time). This
module runs the program, reads the lines and groups the launches by kernel and by launch
shape, hottest first. It never interprets the kernel's source: `capture_init.py` does.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path

from pydantic import BaseModel, Field

from ..errors import EnvironmentProblem, InputError
from .cupti import INJECTION_ENV, build_injection_library

CAPTURE_SOURCE = "kl_capture_inject.cpp"
CAPTURE_LIBRARY = "libkl_capture_inject.so"
CAPTURE_OUT_ENV = "KERNELLOOP_CAPTURE_OUT"


class CaptureLimits(BaseModel):
    """The caps of one capture (settings `init.capture_*`)."""

    timeout_s: float = Field(300.0, gt=0)
    max_launches: int = Field(20000, ge=1)
    sample_bytes: int = Field(16384, ge=0)
    max_trace_bytes: int = Field(256 << 20, ge=1)


class CapturedPointer(BaseModel):
    base: int  # the allocation's start (0 when the driver did not know it)
    size: int  # the allocation's size in bytes
    memory: str  # device | managed | host | other


class CapturedArg(BaseModel):
    type: str | None  # from the demangled signature (None: extern "C" kernel)
    size: int | None  # bytes (None: the library could not tell)
    raw: bytes | None
    pointer: CapturedPointer | None
    sample: bytes | None  # memory at the pointer before the kernel's first launch

    @property
    def address(self) -> int | None:
        if self.raw is None or len(self.raw) != 8:
            return None
        return int.from_bytes(self.raw, "little")

    @property
    def offset(self) -> int | None:
        """Bytes from the allocation's start to where this pointer points."""
        address = self.address
        if self.pointer is None or address is None or self.pointer.base == 0:
            return None
        return address - self.pointer.base


class CapturedLaunch(BaseModel):
    corr: int
    api: str
    name: str  # mangled
    signature: str | None  # demangled
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    smem: int
    args: list[CapturedArg]
    gpu_ns: int | None = None

    def shape_key(self) -> tuple:
        """Launches with the same key do the same work on buffers of the same sizes."""
        parts: list[object] = [self.grid, self.block, self.smem]
        for a in self.args:
            if a.pointer is not None:
                parts.append(("ptr", a.pointer.size, a.offset, a.pointer.memory))
            else:
                parts.append(("val", a.raw))
        return tuple(parts)


class LaunchShape(BaseModel):
    """Every launch of one kernel with one shape (see CapturedLaunch.shape_key)."""

    example: CapturedLaunch
    launches: int
    gpu_ns: int


class CapturedKernel(BaseModel):
    name: str
    signature: str | None
    launches: int
    gpu_ns: int
    shapes: list[LaunchShape]  # most GPU time first
    samples: list[bytes | None]  # per argument, from the kernel's first launch

    @property
    def base_name(self) -> str:
        """The kernel's name without namespace, template arguments or parameters."""
        text = self.signature or self.name
        head = text.split("(", 1)[0] if self.signature else text
        depth, cut = 0, len(head)
        for i, ch in enumerate(head):
            if ch == "<":
                if depth == 0:
                    cut = min(cut, i)
                depth += 1
            elif ch == ">":
                depth -= 1
        head = head[:cut].strip()
        return head.split()[-1].split("::")[-1] if head else text

    @property
    def template_args(self) -> str | None:
        """The template arguments of the launched instance ("32" for `void k<32>(float*)`)."""
        if not self.signature:
            return None
        head = self.signature.split("(", 1)[0]
        start = head.find("<")
        if start < 0 or not head.rstrip().endswith(">"):
            return None
        return head[start + 1:head.rstrip().rfind(">")].strip() or None


class Capture(BaseModel):
    kernels: list[CapturedKernel]  # most GPU time first
    complete: bool  # the program ended normally (the library wrote its last line)
    truncated: bool  # more launches than the cap: later ones were not recorded
    errors: list[str]
    exit_code: int | None = None
    output_tail: str = ""


def _arg(entry: dict) -> CapturedArg:
    pointer = entry.get("pointer")
    return CapturedArg(
        type=entry.get("type"),
        size=entry.get("size"),
        raw=bytes.fromhex(entry["hex"]) if entry.get("hex") else None,
        pointer=None if pointer is None else CapturedPointer(base=int(pointer["base"], 16), size=pointer["size"],
                                                             memory=pointer["memory"]),
        sample=bytes.fromhex(entry["sample"]) if entry.get("sample") else None,
    )


def read_capture(path: Path, *, max_bytes: int = 256 << 20) -> Capture:
    """Group the launches a capture file records by kernel and shape, hottest first."""
    if not path.is_file() or path.stat().st_size == 0:
        raise EnvironmentProblem(f"the capture library wrote nothing to {path}: the program made no CUDA call, "
                                 "or the driver did not load the injection library")
    if path.stat().st_size > max_bytes:
        raise EnvironmentProblem(f"the capture {path} is over {max_bytes >> 20} MiB; lower init.capture_max_launches")
    launches: dict[int, CapturedLaunch] = {}
    times: dict[int, int] = {}
    errors: list[str] = []
    complete = truncated = False
    for line in path.read_text(errors="replace").splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line cut by a crash
        kind = rec.get("kind")
        if kind == "launch":
            launches[rec["corr"]] = CapturedLaunch(
                corr=rec["corr"], api=rec["api"], name=rec["name"], signature=rec.get("signature"),
                grid=tuple(rec["grid"]), block=tuple(rec["block"]), smem=rec["smem"],
                args=[_arg(a) for a in rec["args"]])
        elif kind == "kernel":
            times[rec["corr"]] = times.get(rec["corr"], 0) + max(0, rec["end"] - rec["start"])
        elif kind == "error":
            errors.append(f"{rec.get('where')}: {rec.get('message')}")
        elif kind == "truncated":
            truncated = True
        elif kind == "end":
            complete = True
    by_kernel: dict[str, list[CapturedLaunch]] = {}
    for launch in launches.values():
        launch.gpu_ns = times.get(launch.corr)
        by_kernel.setdefault(launch.name, []).append(launch)
    kernels: list[CapturedKernel] = []
    for name, group in by_kernel.items():
        group.sort(key=lambda item: item.corr)
        shapes: dict[tuple, LaunchShape] = {}
        for launch in group:
            key = launch.shape_key()
            shape = shapes.get(key)
            if shape is None:
                shapes[key] = LaunchShape(example=launch, launches=1, gpu_ns=launch.gpu_ns or 0)
            else:
                shape.launches += 1
                shape.gpu_ns += launch.gpu_ns or 0
        first = group[0]
        kernels.append(CapturedKernel(
            name=name, signature=first.signature, launches=len(group),
            gpu_ns=sum(s.gpu_ns for s in shapes.values()),
            shapes=sorted(shapes.values(), key=lambda s: (-s.gpu_ns, -s.launches)),
            samples=[a.sample for a in first.args]))
    kernels.sort(key=lambda k: (-k.gpu_ns, -k.launches))
    return Capture(kernels=kernels, complete=complete, truncated=truncated, errors=errors)


def capture_launches(command: list[str], *, cwd: Path, cache_dir: Path,
                     limits: CaptureLimits | None = None, keep: Path | None = None) -> Capture:
    """Run the user's own program once with the capture library injected, and read what it launched.

    The program is the user's (not a candidate): it runs in `cwd` with the user's environment."""
    limits = limits or CaptureLimits()
    library = build_injection_library(cache_dir, source_name=CAPTURE_SOURCE, library_name=CAPTURE_LIBRARY)
    with tempfile.TemporaryDirectory(prefix="kl-capture-") as tmp:
        out = Path(tmp) / "capture.jsonl"
        env = {**os.environ, INJECTION_ENV: str(library.absolute()), CAPTURE_OUT_ENV: str(out),
               "KERNELLOOP_CAPTURE_MAX_LAUNCHES": str(limits.max_launches),
               "KERNELLOOP_CAPTURE_SAMPLE_BYTES": str(limits.sample_bytes)}
        try:
            proc = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, errors="replace",
                                  timeout=limits.timeout_s, check=False)
        except FileNotFoundError as err:
            raise InputError(f"cannot run {command[0]}: no such program") from err
        except PermissionError as err:
            raise InputError(f"cannot run {command[0]}: not executable") from err
        except subprocess.TimeoutExpired as err:
            raise InputError(f"{' '.join(command)} ran over {limits.timeout_s:g} s under capture; give a shorter run "
                             "(fewer iterations) or raise init.capture_timeout_s") from err
        if keep is not None and out.is_file():
            keep.parent.mkdir(parents=True, exist_ok=True)
            keep.write_bytes(out.read_bytes())
        capture = read_capture(out, max_bytes=limits.max_trace_bytes)
    tail = (proc.stdout + proc.stderr).strip()[-2000:]
    return capture.model_copy(update={"exit_code": proc.returncode, "output_tail": tail})
