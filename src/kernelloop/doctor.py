"""What kernelloop needs on this machine, checked and explained one line at a time."""

from __future__ import annotations

import shutil
import sys
from typing import Literal

from pydantic import BaseModel

from .errors import KernelloopError


class Check(BaseModel):
    name: str
    status: Literal["ok", "warn", "fail"]
    detail: str
    fix: str = ""
    required: bool = True  # needed for `verify`


def run_checks() -> list[Check]:
    from .tools.cupti import find_cupti
    from .tools.gpu import detect_gpus
    from .tools.nvcc import find_toolchain
    from .tools.sandbox import Limits, describe_isolation
    from .tools.sanitizer import find_compute_sanitizer

    checks: list[Check] = []
    py = sys.version_info
    checks.append(Check(name="python", status="ok" if py >= (3, 11) else "fail",
                        detail=f"{py.major}.{py.minor}.{py.micro}", fix="kernelloop needs Python 3.11 or newer"))
    nvcc_path = None
    try:
        tc = find_toolchain()
        nvcc_path = tc.nvcc
        checks.append(Check(name="nvcc", status="ok", detail=f"{tc.nvcc} (CUDA {tc.version})"))
    except KernelloopError as exc:
        checks.append(Check(name="nvcc", status="fail", detail="not found", fix=str(exc)))
    gpus = detect_gpus()
    if gpus:
        g = gpus[0]
        more = f" (+{len(gpus) - 1} more)" if len(gpus) > 1 else ""
        checks.append(Check(name="gpu", status="ok", detail=f"{g.name}, {g.arch}, driver {g.driver_version}{more}"))
    else:
        checks.append(Check(name="gpu", status="fail", detail="no NVIDIA GPU visible (nvidia-smi found none)",
                            fix="verify and optimize run kernels: use a machine with an NVIDIA GPU and driver"))
    try:
        paths = find_cupti()
        checks.append(Check(name="cupti", status="ok", detail=f"{paths.lib_file}"))
    except KernelloopError as exc:
        checks.append(Check(name="cupti", status="fail", detail="not found", fix=str(exc)))
    sanitizer = find_compute_sanitizer(nvcc_path)
    checks.append(Check(name="compute-sanitizer", status="ok" if sanitizer else "warn", required=False,
                        detail=str(sanitizer) if sanitizer else "not found",
                        fix="install the CUDA toolkit's compute-sanitizer; without it the memcheck gate is skipped"))
    ncu = shutil.which("ncu")
    checks.append(Check(name="ncu", status="ok" if ncu else "warn", required=False,
                        detail=ncu or "not found", fix="install Nsight Compute (needed by `profile`)"))
    iso = describe_isolation(Limits())
    checks.append(Check(name="sandbox", status="ok" if iso.network == "namespace" else "warn", required=False,
                        detail=iso.summary(), fix="; ".join(iso.notes)))
    return checks
