"""Which NVIDIA GPUs this machine can see, via nvidia-smi (no CUDA context needed)."""

from __future__ import annotations

import shutil
import subprocess

from pydantic import BaseModel


class GpuInfo(BaseModel):
    index: int
    name: str
    compute_capability: str  # "9.0"
    driver_version: str
    memory_mib: int | None = None
    uuid: str = ""  # the GPU's own id (GPU-…): one physical GPU, whatever index a process sees it at

    @property
    def arch(self) -> str:
        """nvcc's name for the GPU's architecture, e.g. sm_90."""
        return "sm_" + self.compute_capability.replace(".", "")


def detect_gpus(timeout_s: float = 15.0) -> list[GpuInfo]:
    """Visible GPUs (respects CUDA_VISIBLE_DEVICES only as far as nvidia-smi does)."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return []
    try:
        out = subprocess.run(
            [smi, "--query-gpu=index,name,compute_cap,driver_version,memory.total,uuid",
             "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=timeout_s, check=True,
        ).stdout
    except (subprocess.SubprocessError, OSError):
        return []
    gpus = []
    for line in out.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 4:
            continue
        try:
            gpus.append(GpuInfo(index=int(parts[0]), name=parts[1], compute_capability=parts[2],
                                driver_version=parts[3],
                                memory_mib=int(parts[4]) if len(parts) > 4 and parts[4].isdigit() else None,
                                uuid=parts[5] if len(parts) > 5 and parts[5].startswith("GPU-") else ""))
        except ValueError:
            continue
    return gpus
