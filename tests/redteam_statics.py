"""What the red-team tests of device statics (rounds 316 on: tools.ptx_writes, init's guard, the verifier's
`device-static` rule) share: a fixture's PTX as the verifier classifies it, and init's guard on a fixture program
whose launcher is `scale(float* y, const float* x, int n)`."""

from __future__ import annotations

import subprocess
from pathlib import Path

from kernelloop.init_state import refuse_state_set_by_dropped_code
from kernelloop.program.init import InitSpec, generate
from kernelloop.tools.nvcc import find_toolchain, ptxas_report, ptxas_saves_registers
from kernelloop.tools.sandbox import Limits
from kernelloop.verify.precision import classify_ptx

from .conftest import shared_cache_dir

SCALE_SPEC = InitSpec(values={"n": ["4096", "3001"]}, roles={"y": "output", "x": "input"}, launcher="scale")


def ptx_profile(source: Path, tmp_path: Path):
    """SOURCE built to PTX for sm_90 as the verifier reads it (precision.classify_ptx, with ptxas's report of
    whether it stores registers in local memory itself)."""
    out = tmp_path / f"{source.stem}.ptx"
    toolchain = find_toolchain()
    subprocess.run([str(toolchain.nvcc), "-O3", "-std=c++17", "-ptx", "-arch=sm_90", "-o", str(out),
                    str(source)], check=True, capture_output=True, timeout=300)
    ptx = out.read_text()
    report = ptxas_report(ptx, arch="sm_90", toolchain=toolchain, limits=Limits(wall_timeout_s=300))
    return classify_ptx(ptx, register_saves=ptxas_saves_registers(report))


def init_guard(source: Path, spec: InitSpec = SCALE_SPEC) -> None:
    """init's guard on SOURCE's generated program (raises InputError where it refuses)."""
    text = source.read_text()
    result = generate(text, spec, source.name)
    refuse_state_set_by_dropped_code(text, result, arch="sm_90", cache_dir=shared_cache_dir(), generated=result.program)
