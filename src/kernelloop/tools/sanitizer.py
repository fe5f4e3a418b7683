"""compute-sanitizer: find it and read its memcheck summary."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from pydantic import BaseModel

MEMCHECK_EXIT_CODE = 86  # chosen so a sanitizer finding is told apart from the program's own failures
_SUMMARY = re.compile(r"ERROR SUMMARY:\s*(\d+)\s+error", re.I)


def find_compute_sanitizer(nvcc: Path | None = None) -> Path | None:
    found = shutil.which("compute-sanitizer")
    if found:
        return Path(found)
    roots = [Path("/usr/local/cuda")]
    if nvcc is not None:
        roots.insert(0, nvcc.resolve().parent.parent)
    for root in roots:
        for candidate in (root / "bin" / "compute-sanitizer", root / "compute-sanitizer" / "compute-sanitizer"):
            if candidate.is_file():
                return candidate
    return None


def memcheck_argv(sanitizer: Path, program: Path) -> list[str]:
    return [str(sanitizer), "--tool", "memcheck", "--error-exitcode", str(MEMCHECK_EXIT_CODE),
            "--print-limit", "10", "--leak-check", "no", str(program)]


class MemcheckResult(BaseModel):
    errors: int | None  # None: the summary line was missing
    excerpt: str


def read_memcheck(stdout: str, stderr: str) -> MemcheckResult:
    text = stdout + "\n" + stderr
    m = _SUMMARY.search(text)
    lines = [ln for ln in text.splitlines() if ln.startswith("=========") and "ERROR SUMMARY" not in ln]
    return MemcheckResult(errors=int(m.group(1)) if m else None, excerpt="\n".join(lines[:12]))
