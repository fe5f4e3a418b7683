"""compute-sanitizer: find it and read its memcheck summary."""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import BaseModel

from .toolkit import find_compute_sanitizer  # noqa: F401 - found where every tool is found

MEMCHECK_EXIT_CODE = 86  # chosen so a sanitizer finding is told apart from the program's own failures
_SUMMARY = re.compile(r"ERROR SUMMARY:\s*(\d+)\s+error", re.I)


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
