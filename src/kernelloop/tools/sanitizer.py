"""compute-sanitizer: find it and read its memcheck summary."""

from __future__ import annotations

import functools
import re
import subprocess
from pathlib import Path

from pydantic import BaseModel

from .toolkit import find_compute_sanitizer  # noqa: F401 - found where every tool is found

MEMCHECK_EXIT_CODE = 86  # chosen so a sanitizer finding is told apart from the program's own failures
_SUMMARY = re.compile(r"ERROR SUMMARY:\s*(\d+)\s+error", re.I)


# compute-sanitizer --padding after every allocation of the verifier's bounds runs: a read just past one
# buffer then lands in no other
BOUNDS_PADDING_BYTES = 1 << 20


def memcheck_argv(sanitizer: Path, program: Path, *, padding: int = 0, api_errors: bool = True) -> list[str]:
    """compute-sanitizer memcheck on PROGRAM; `padding` bytes after every allocation (where this
    compute-sanitizer has --padding), so a read just past one allocation cannot land in the next.
    `api_errors` False: a CUDA call that returns an error is no finding (a program that handles it)."""
    pad = ["--padding", str(padding)] if padding and supports_option(sanitizer, "--padding") else []
    pad += ["--report-api-errors", "no"] if not api_errors and supports_option(sanitizer, "--report-api-errors") else []
    # an access to a stream-ordered allocation before its cudaMallocAsync or after its cudaFreeAsync
    # in stream order (red team round 80: a kernel on another stream writing a block after its free)
    races = (["--track-stream-ordered-races", "all"]
             if supports_option(sanitizer, "--track-stream-ordered-races") else [])
    return [str(sanitizer), "--tool", "memcheck", "--error-exitcode", str(MEMCHECK_EXIT_CODE),
            "--print-limit", "10", "--leak-check", "no", *pad, *races, str(program)]


@functools.lru_cache(maxsize=16)
def supports_option(sanitizer: Path, option: str) -> bool:
    """Whether this compute-sanitizer takes OPTION (its --help says so)."""
    try:
        run = subprocess.run([str(sanitizer), "--help"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return option in run.stdout + run.stderr


class MemcheckResult(BaseModel):
    errors: int | None  # None: the summary line was missing
    excerpt: str


def read_memcheck(stdout: str, stderr: str) -> MemcheckResult:
    text = stdout + "\n" + stderr
    m = _SUMMARY.search(text)
    lines = [ln for ln in text.splitlines() if ln.startswith("=========") and "ERROR SUMMARY" not in ln]
    return MemcheckResult(errors=int(m.group(1)) if m else None, excerpt="\n".join(lines[:12]))


_GLOBAL_ACCESS = re.compile(r"^=+\s+Invalid __global__ (?:read|write|atomic)", re.M)


def global_access_errors(stdout: str, stderr: str) -> int:
    """How many invalid accesses to global memory (a read or write past an allocation) memcheck printed
    (up to its print limit): not its API errors, nor shared or local memory's."""
    return len(_GLOBAL_ACCESS.findall(stdout + "\n" + stderr))
