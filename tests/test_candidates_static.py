"""Every bundled program builds under the contract, and every candidate fixture meets its
expected fate in the gates decided before anything runs (policy and compile), with real nvcc.

What only a GPU can decide (correctness, memcheck, timing audit, speedup) is checked by
tests/gpu/test_verify_gpu.py with the same manifests.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernelloop.config import Settings
from kernelloop.program.split import candidate_editable_part, split_program
from kernelloop.tools.nvcc import find_toolchain
from kernelloop.verify.gate import static_gates

from .conftest import FIXTURES, ROOT

SUITE = {
    "matmul": "naive_matmul.cu",
    "row_softmax": "row_softmax.cu",
    "sum_reduction": "sum_reduction.cu",
    "transpose": "transpose.cu",
    "stencil2d": "stencil2d.cu",
    "histogram": "histogram.cu",
}
STATIC_REASONS = {"policy", "compile"}


def cases():
    for family, baseline in SUITE.items():
        folder = FIXTURES / "candidates" / family
        for name, entry in json.loads((folder / "manifest.json").read_text()).items():
            # entries are paths relative to the folder: the positives live in exemplars/
            yield pytest.param(baseline, (folder / name).resolve(), entry["expect"], id=f"{family}/{Path(name).name}")


@pytest.fixture(scope="module")
def settings(tmp_path_factory):
    return Settings(cache_dir=tmp_path_factory.mktemp("cache"))


def test_every_manifest_entry_has_a_file_and_every_file_an_entry():
    for family in SUITE:
        folder = FIXTURES / "candidates" / family
        listed = {(folder / name).resolve() for name in json.loads((folder / "manifest.json").read_text())}
        assert all(p.is_file() for p in listed)
        assert {p.resolve() for p in folder.glob("*.cu")} <= listed


@pytest.mark.nvcc
@pytest.mark.parametrize("baseline, candidate, expect", list(cases()))
def test_static_gates(baseline: str, candidate: Path, expect: str, settings):
    split = split_program((ROOT / "kernels" / baseline).read_text(), baseline)
    editable, _ = candidate_editable_part(candidate.read_text(), split, candidate.name)
    result = static_gates(split, editable, arch="sm_90", settings=settings, toolchain=find_toolchain())
    assert result.baseline.ok
    if expect == "policy":
        assert result.violations, "a policy candidate got past the policy gate"
    elif expect == "compile":
        assert result.candidate is not None and not result.candidate.ok and not result.violations
    else:
        assert result.candidate.ok, result.candidate.log
        assert not result.violations, [v.describe() for v in result.violations]


@pytest.mark.nvcc
def test_interposing_a_library_function_is_caught_and_contained(settings):
    split = split_program((ROOT / "kernels" / "naive_matmul.cu").read_text())
    editable, _ = candidate_editable_part((FIXTURES / "candidates/matmul/interpose_elapsed.cu").read_text(), split)
    result = static_gates(split, editable, arch="sm_90", settings=settings, toolchain=find_toolchain())
    assert result.candidate.ok  # it links only because containment made its definition local
    assert any(v.rule == "interposition" and "cudaEventElapsedTime" in v.detail for v in result.violations)
    assert "cudaEventElapsedTime" not in result.candidate.kept_global


SHARED_TEMPLATE_PROGRAM = """#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>
template <class T> __attribute__((noinline)) T kl_twice(T x) { return x + x; }  // COMDAT in both units
// kernelloop: editable begin
__global__ void k(float* out) { out[threadIdx.x] = threadIdx.x; }
void launch(float* out) { k<<<1, 32>>>(out); volatile float in = 1.0f; volatile float f = kl_twice((float)in); (void)f; }
// kernelloop: editable end
int main() {
  float* d; cudaMalloc(&d, 128); launch(d);
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b); cudaEventRecord(a); launch(d); cudaEventRecord(b);
  cudaEventSynchronize(b); float ms; cudaEventElapsedTime(&ms, a, b);
  volatile float two = 2.0f; printf("%f\\n", kl_twice((float)two)); fprintf(stderr, "KERNEL_MS: %f\\n", ms); return 0;
}
"""


@pytest.mark.nvcc
def test_a_template_instantiated_in_both_units_still_links(settings):
    split = split_program(SHARED_TEMPLATE_PROGRAM)
    cand = split.editable.replace("out[threadIdx.x] = threadIdx.x;", "out[threadIdx.x] = 2 * threadIdx.x;")
    result = static_gates(split, cand, arch="sm_90", settings=settings, toolchain=find_toolchain())
    assert result.candidate.ok, result.candidate.log
    assert not result.violations


@pytest.mark.nvcc
def test_a_weak_definition_of_a_library_function_the_harness_imports_is_interposition(settings):
    split = split_program((ROOT / "kernels" / "naive_matmul.cu").read_text())
    editable, _ = candidate_editable_part((ROOT / "exemplars" / "matmul_smem_tiling.cu").read_text(), split)
    # the harness's std::vector imports std::__throw_length_error from libstdc++
    evil = editable + '\nnamespace std { __attribute__((weak)) void __throw_length_error(const char*) { for (;;) {} } }\n'
    result = static_gates(split, evil, arch="sm_90", settings=settings, toolchain=find_toolchain())
    assert any(v.rule == "interposition" and "__throw_length_error" in v.detail for v in result.violations)
