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
from ..toolkit_roots import nvcc_root, real_nvcc, toolkit_roots  # noqa: F401 - one search, re-exported

NSIGHT_COMPUTE_ROOT = Path("/opt/nvidia/nsight-compute")  # standalone Nsight Compute installs: <root>/<version>/ncu

def _version_key(path: Path) -> tuple[int, ...]:
    """Sort key: the numbers in a path, so nsight-compute-2025.3.1 sorts after 2025.2.0."""
    return tuple(int(n) for n in re.findall(r"\d+", str(path)))


def _executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def _newest_first(paths) -> list[Path]:
    return sorted(paths, key=_version_key, reverse=True)


def nsight_compute_dirs(nvcc: Path | None = None) -> list[Path]:
    """Folders that may hold Nsight Compute (its `ncu`, its `extras/python`), most preferred first: the
    folder of the `ncu` on PATH and the nsight-compute-<version> folders beside it (a CUDA toolkit's
    bin/ncu is a small script next to them), then each toolkit root's bin/ and nsight-compute*/,
    then standalone installs under /opt/nvidia/nsight-compute/<version>/. Only folders that exist."""
    dirs: list[Path] = []
    on_path = shutil.which("ncu")
    if on_path:
        here = Path(on_path).resolve().parent
        dirs += [here, *_newest_first(here.parent.glob("nsight-compute*"))]
    for _, root in toolkit_roots(nvcc):
        dirs += [root / "bin", *_newest_first(root.glob("nsight-compute*"))]
    if NSIGHT_COMPUTE_ROOT.is_dir():
        dirs += _newest_first(NSIGHT_COMPUTE_ROOT.glob("*"))
    unique: list[Path] = []
    for folder in dirs:
        if folder not in unique and folder.is_dir():
            unique.append(folder)
    return unique


def find_ncu(nvcc: Path | None = None) -> Path | None:
    """Nsight Compute's `ncu`: on PATH, else the first of nsight_compute_dirs that holds one. None when
    absent."""
    found = shutil.which("ncu")
    if found:
        return Path(found)
    for folder in nsight_compute_dirs(nvcc):
        if _executable(folder / "ncu"):
            return folder / "ncu"
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
