"""Where the CUDA toolkit and NVIDIA's tools live on this machine: one search, used by every command.

`kernelloop doctor`, `profile`, `verify` (compute-sanitizer, CUPTI) and the report reader all
ask here, so they never disagree about whether a tool is installed.

Toolkit roots, in order: $CUDA_HOME, $CUDA_PATH, the toolkit of the real nvcc (the one given,
else the one on PATH; symlinks and ``exec`` wrapper scripts followed), /usr/local/cuda.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path

from ..errors import EnvironmentProblem

DEFAULT_ROOT = Path("/usr/local/cuda")
NSIGHT_COMPUTE_ROOT = Path("/opt/nvidia/nsight-compute")  # standalone Nsight Compute installs: <root>/<version>/ncu

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


def _version_key(path: Path) -> tuple[int, ...]:
    """Sort key: the numbers in a path, so nsight-compute-2025.3.1 sorts after 2025.2.0."""
    return tuple(int(n) for n in re.findall(r"\d+", str(path)))


def _executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def find_ncu(nvcc: Path | None = None) -> Path | None:
    """Nsight Compute's `ncu`: on PATH, else in a toolkit root (bin/ncu, nsight-compute*/ncu),
    else a standalone install under /opt/nvidia/nsight-compute/<version>/. None when absent."""
    found = shutil.which("ncu")
    if found:
        return Path(found)
    for _, root in toolkit_roots(nvcc):
        candidates = [root / "bin" / "ncu",
                      *sorted(root.glob("nsight-compute*/ncu"), key=_version_key, reverse=True)]
        for candidate in candidates:
            if _executable(candidate):
                return candidate
    if NSIGHT_COMPUTE_ROOT.is_dir():
        for candidate in sorted(NSIGHT_COMPUTE_ROOT.glob("*/ncu"), key=_version_key, reverse=True):
            if _executable(candidate):
                return candidate
    return None


def require_ncu(nvcc: Path | None = None) -> Path:
    """find_ncu, or one line saying what to install."""
    ncu = find_ncu(nvcc)
    if ncu is None:
        raise EnvironmentProblem("ncu (Nsight Compute) not found: not on PATH, not in the CUDA toolkit "
                                 "($CUDA_HOME, beside nvcc, /usr/local/cuda), not in /opt/nvidia/nsight-compute; "
                                 "install Nsight Compute, then run `kernelloop doctor`")
    return ncu


def find_compute_sanitizer(nvcc: Path | None = None) -> Path | None:
    """compute-sanitizer: on PATH, else in a toolkit root (bin/, compute-sanitizer/)."""
    found = shutil.which("compute-sanitizer")
    if found:
        return Path(found)
    for _, root in toolkit_roots(nvcc):
        for candidate in (root / "bin" / "compute-sanitizer", root / "compute-sanitizer" / "compute-sanitizer"):
            if candidate.is_file():
                return candidate
    return None


def wheel_bin_folders() -> list[Path]:
    """bin/ folders of NVIDIA's pip wheels on sys.path (nvidia-cuda-cuobjdump, nvidia-cuda-nvdisasm, ...)."""
    found: list[Path] = []
    for entry in sys.path:
        root = Path(entry or ".") / "nvidia"
        if root.is_dir():
            found += [p for p in (*root.glob("cu*/bin"), *root.glob("cuda_*/bin")) if p.is_dir()]
    return found


def find_toolkit_program(name: str, nvcc: Path | None = None) -> Path | None:
    """A toolkit program that must match the nvcc in use (cuobjdump, nvdisasm read what it built):
    beside that nvcc first, then on PATH, then in the other toolkit roots, then in NVIDIA's wheels."""
    own = nvcc_root(nvcc)
    folders = [own / "bin"] if own is not None else []
    folders += [Path(p) for p in os.environ.get("PATH", "").split(os.pathsep) if p]
    folders += [root / "bin" for _, root in toolkit_roots(nvcc)] + wheel_bin_folders()
    for folder in folders:
        if _executable(folder / name):
            return folder / name
    return None
