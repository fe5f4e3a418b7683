"""The GPUs users rent: every offline template, instantiated for every suite kernel, and every
exemplar compiles for sm_80, sm_86 (an A10), sm_89 and sm_90: the editable unit the verifier
compiles (the baseline's preamble and the candidate), with the verifier's flags for that target.
Only Hopper GPUs are lent here, so this is what keeps the other targets honest (issue 11)."""

from __future__ import annotations

import subprocess

import pytest

from kernelloop.optimizers.offline import OfflineOptimizer
from kernelloop.program.split import candidate_editable_part, split_program
from kernelloop.tools.nvcc import arch_flags, find_toolchain
from kernelloop.tools.resources import gpu_limits

from .conftest import ROOT, shared_cache_dir
from .test_offline_optimizer import request_for

ARCHES = ["sm_80", "sm_86", "sm_89", "sm_90"]
SUITE = sorted((ROOT / "kernels").glob("*.cu"))
EXEMPLARS = sorted((ROOT / "src" / "kernelloop" / "exemplars").glob("*.cu"))
BASELINE_OF = {"matmul": "naive_matmul", "reduction": "sum_reduction", "softmax": "row_softmax",
               "stencil": "stencil2d", "transpose": "transpose", "histogram": "histogram"}


@pytest.fixture(scope="module")
def optimizer(tmp_path_factory):
    return OfflineOptimizer(cache_dir=shared_cache_dir())


def _builds(program: str, editable: str, arch: str, work) -> None:
    unit = work / f"editable_{arch}.cu"
    unit.write_text(split_program(program).editable_unit(editable))
    run = subprocess.run([str(find_toolchain().nvcc), "-O3", "-std=c++17", *arch_flags(arch), "-c", str(unit),
                          "-o", str(unit.with_suffix(".o"))], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, (run.stdout + run.stderr)[-2000:]


@pytest.mark.nvcc
@pytest.mark.parametrize("arch", ARCHES)
@pytest.mark.parametrize("path", SUITE, ids=[p.stem for p in SUITE])
def test_each_template_builds_for_each_target(path, arch, optimizer, tmp_path):
    gpu_limits(arch)  # the occupancy model knows the target's own limits
    text = path.read_text()
    candidates = optimizer.candidates(request_for(text, path.stem, arch=arch))
    assert candidates, path.name
    # per template, its largest tile (the most shared memory): the configuration a smaller
    # target's limits would break first; the others differ only in template arguments
    largest = {}
    for cand in candidates:
        kept = largest.setdefault(cand.config.template, cand)
        if cand.config.smem_bytes > kept.config.smem_bytes:
            largest[cand.config.template] = cand
    for cand in largest.values():
        _builds(text, cand.source, arch, tmp_path)


@pytest.mark.nvcc
@pytest.mark.parametrize("arch", ["sm_80", "sm_86", "sm_89"])
@pytest.mark.parametrize("path", EXEMPLARS, ids=[p.stem for p in EXEMPLARS])
def test_each_exemplar_builds_for_each_target(path, arch, tmp_path):
    family = next(f for f in BASELINE_OF if path.stem.startswith(f))
    baseline = (ROOT / "kernels" / f"{BASELINE_OF[family]}.cu").read_text()
    editable, _ = candidate_editable_part(path.read_text(), split_program(baseline))
    _builds(baseline, editable, arch, tmp_path)
