"""Where CUDA toolkits are on this machine: one search, used by every layer that reads the toolkit (the program
splitter's system headers, the tools' nvcc, ncu, CUPTI and compute-sanitizer).

Toolkit roots, in order: $CUDA_HOME, $CUDA_PATH, the toolkit of the real nvcc (the one given,
else the one on PATH; symlinks and ``exec`` wrapper scripts followed), /usr/local/cuda.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

__all__ = ["DEFAULT_ROOT", "nvcc_root", "real_nvcc", "toolkit_roots"]

DEFAULT_ROOT = Path("/usr/local/cuda")

_EXEC_RE = re.compile(r"""^\s*exec\s+(?:-\S+\s+)*(?P<q>["']?)(?P<path>[^\s"']+)(?P=q)""", re.MULTILINE)


def _script_target(path: Path) -> Path | None:
    """The program a wrapper script `exec`s (``exec /usr/local/cuda/bin/nvcc "$@"``), if any."""
    try:
        with path.open("rb") as f:
            head = f.read(64 * 1024)
    except OSError:
        return None
    if not head.startswith(b"#!"):
        return None
    text = head.decode("utf-8", errors="replace")
    for m in _EXEC_RE.finditer(text):
        target = m.group("path")
        if "$" in target:  # a variable we cannot expand
            continue
        if "/" not in target:
            found = shutil.which(target)
            if found is None:
                continue
            candidate = Path(found)
        else:
            candidate = Path(target)
            if not candidate.is_absolute():
                candidate = path.parent / candidate
        if candidate.exists():
            return candidate
    return None


def real_nvcc(nvcc: Path) -> Path:
    """Follow symlinks and `exec` wrapper scripts to the real nvcc binary."""
    current = Path(nvcc)
    seen: set[Path] = set()
    for _ in range(8):
        try:
            current = current.resolve()
        except OSError:
            break
        if current in seen:
            break
        seen.add(current)
        target = _script_target(current)
        if target is None:
            break
        current = target
    return current


def nvcc_root(nvcc: Path | None = None) -> Path | None:
    """<root> of <root>/bin/nvcc, for the given nvcc or the one on PATH."""
    if nvcc is None:
        found = shutil.which("nvcc")
        if found is None:
            return None
        nvcc = Path(found)
    return real_nvcc(nvcc).parent.parent


def toolkit_roots(nvcc: Path | None = None) -> list[tuple[str, Path]]:
    """(where it came from, root) of every CUDA toolkit to search, most specific first, no repeats."""
    roots: list[tuple[str, Path]] = []
    for var in ("CUDA_HOME", "CUDA_PATH"):
        value = os.environ.get(var, "").strip()
        if value:
            roots.append((f"${var}", Path(value)))
    root = nvcc_root(nvcc)
    if root is not None:
        roots.append(("nvcc" if nvcc is not None else "nvcc on PATH", root))
    roots.append(("default", DEFAULT_ROOT))
    unique: list[tuple[str, Path]] = []
    seen: set[Path] = set()
    for label, path in roots:
        try:
            key = path.resolve()
        except OSError:
            key = path
        if key not in seen:
            seen.add(key)
            unique.append((label, path))
    return unique
