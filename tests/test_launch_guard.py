"""The launch guard asks each kernel's attributes once per device (optimizers/offline/launch_guard.py).

cudaFuncGetAttributes on every launcher call cost a few microseconds of host time: a GEMM rewrite
4.24x faster at the timed size was 1.07-1.25x slower at 258x621x1, where it runs the baseline's launch
anyway. Every rewrite that guards a launch defines `kl_kernel_takes` once, at namespace scope before
its launchers, and calls it in place of cudaFuncGetAttributes; one without a guard defines nothing.
Tier 1: the text. Tier 2: the helper's cache, run on the host against a stand-in runtime (g++), and
the rewrites built by nvcc (and through the verifier's static gates)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from kernelloop.optimizers.offline.analysis import names_the_rewrite_adds
from kernelloop.optimizers.offline.launch_guard import ATTRIBUTE_SLOTS, attributes_helper, baseline_launch, guarded, \
    legal_launch
from kernelloop.optimizers.offline.launcher import read_editable
from kernelloop.optimizers.offline.optimizer import OfflineOptimizer
from kernelloop.optimizers.offline.remap import remap_rewrites
from kernelloop.optimizers.offline.rowwarp import row_warp_rewrites
from kernelloop.program.init import generate
from kernelloop.program.split import candidate_editable_part, split_program

from .conftest import FIXTURES, ROOT
from .outside_specs import OUTSIDE, SPECS
from .test_offline_optimizer import request_for

def _outside(name: str) -> str:
    return generate((OUTSIDE / name).read_text(), SPECS[name], name).program


def _launcher(source: str, name: str) -> str:
    return source[source.index(f"void {name}("):]


def _checked_once(source: str, launcher: str, prefix: str = "kl_") -> None:
    helper = f"static __noinline__ bool {prefix}kernel_takes("
    assert source.count(helper) == 1, source
    assert source.index(helper) < source.index(f"void {launcher}(")
    body = _launcher(source, launcher)
    assert f"{prefix}kernel_takes((const void*)" in body
    assert "cudaFuncGetAttributes" not in body and "cudaFuncAttributes" not in body
    # the one call of the runtime, inside the helper
    assert source.count("cudaFuncGetAttributes(&") == 1


def test_a_template_rewrite_defines_the_helper_once_before_its_launcher():
    source = OfflineOptimizer().propose(request_for((ROOT / "kernels" / "naive_matmul.cu").read_text())).source
    _checked_once(source, "launch_matmul")
    assert "kl_kernel_takes((const void*)naive_matmul_kernel, " in _launcher(source, "launch_matmul")


def test_a_baseline_with_kl_names_gets_the_helper_under_the_candidates_prefix():
    text = (ROOT / "kernels" / "naive_matmul.cu").read_text().replace("naive_matmul_kernel", "kl_sgemm_blocked")
    source = OfflineOptimizer().propose(request_for(text)).source
    _checked_once(source, "launch_matmul", prefix="kl0_")
    assert "kl_kernel_takes" not in source


def test_a_tier_rewrite_of_every_launch_defines_the_helper_once():
    name = "l2norm_rows_dispatch.cu"
    split = split_program(_outside(name), name)
    part = read_editable(split.editable, split.harness, split.exported)
    rewrites, _ = row_warp_rewrites(part, split.harness)
    assert rewrites[0].label.endswith("(all 2 launches)")
    for r in rewrites:
        _checked_once(r.source, "l2norm_rows")
    # each launch checks the baseline's kernel and the rewritten one
    assert _launcher(rewrites[0].source, "l2norm_rows").count("kl_kernel_takes(") == 4


def test_a_rewrite_without_a_guard_defines_no_helper():
    name = "channel_affine_colfirst.cu"
    split = split_program(_outside(name), name)
    part = read_editable(split.editable, split.harness, split.exported)
    (r,), _ = remap_rewrites(part, split.harness, split.preamble)
    assert "kernel_takes" not in r.source


def test_a_program_naming_the_helper_gets_no_tier_rewrite():
    # the tiers write kl_ names whatever the program names: a program that names the helper is refused
    name = "l2norm_rows_dispatch.cu"
    split = split_program(_outside(name), name)
    part = read_editable(split.editable, split.harness, split.exported)
    rewrites, _ = row_warp_rewrites(part, split.harness)
    assert names_the_rewrite_adds(split.editable, split.preamble, split.harness, rewrites[0].source) == []
    named = split.editable + "\nstatic int kl_kernel_takes = 0;\n"
    assert "kl_kernel_takes" in names_the_rewrite_adds(named, split.preamble, split.harness, rewrites[0].source)


def test_the_guard_still_checks_the_baseline_and_the_rewrite():
    base = baseline_launch("ns::k<float, 4><<<grid_of(n), 256, bytes, stream>>>(a, n);")
    new = legal_launch("k_kl_rewritten<float, 4>", "dim3(8)", "dim3(128)", base.shmem)
    text = guarded(base, "run();", [new])
    assert text.count("grid_of(n)") == 1 and text.count("kl_kernel_takes(") == 2
    assert "kl_kernel_takes((const void*)ns::k<float, 4>, (unsigned long long)(kl_block).x * (kl_block).y * " \
           "(kl_block).z, (unsigned long long)(kl_shmem))" in text
    assert "kl_kernel_takes((const void*)k_kl_rewritten<float, 4>, (unsigned long long)(dim3(128)).x" in text
    assert "(kl_grid).y >= 1u && (kl_grid).y <= 65535u" in text and "(dim3(128)).z >= 1u && (dim3(128)).z <= 64u" in text
    assert text.endswith("{ run(); } else { ns::k<float, 4><<<kl_grid, kl_block, kl_shmem, stream>>>(a, n); } }")
    helper = attributes_helper("kl3_")
    assert helper.count("static const void* kl3_kernel") == ATTRIBUTE_SLOTS and "kl_" not in helper.replace("kl3_", "")


# -- tier 2 ------------------------------------------------------------------------------------------

# A stand-in for the runtime: counts the queries, answers per kernel and device, can be told to fail.
_FAKE_RUNTIME = r"""
#include <cstdio>
#include <cstddef>
#define __noinline__ __attribute__((noinline))
enum cudaError_t { cudaSuccess = 0, cudaErrorInvalidDeviceFunction = 98 };
struct cudaFuncAttributes { int maxThreadsPerBlock; int maxDynamicSharedSizeBytes; };
static int g_device = 0, g_queries = 0, g_fail = 0, g_dynamic = 48 * 1024;
cudaError_t cudaGetDevice(int* d) { *d = g_device; return cudaSuccess; }
cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* a, const void* k) {
  ++g_queries;
  if (g_fail) return cudaErrorInvalidDeviceFunction;
  a->maxThreadsPerBlock = (int)(reinterpret_cast<size_t>(k) % 1000) + 100 * g_device;
  a->maxDynamicSharedSizeBytes = g_dynamic;
  return cudaSuccess;
}
"""

_CACHE_CHECKS = r"""
#define CHECK(c) do { if (!(c)) { std::printf("failed at line %d: %s\n", __LINE__, #c); return 1; } } while (0)
static const void* kernel(int i) { return reinterpret_cast<const void*>((size_t)(1000 * (i + 1) + 512)); }
int main() {
  // a kernel of 512 threads at most on device 0: asked once, however often launched
  CHECK(kl_kernel_takes(kernel(0), 512, 0) && g_queries == 1);
  CHECK(!kl_kernel_takes(kernel(0), 513, 0) && g_queries == 1);
  CHECK(kl_kernel_takes(kernel(0), 256, 0) && g_queries == 1);
  // another device: asked again, its own answer (612 threads)
  g_device = 1;
  CHECK(kl_kernel_takes(kernel(0), 612, 0) && g_queries == 2);
  g_device = 0;
  CHECK(!kl_kernel_takes(kernel(0), 612, 0) && g_queries == 2);
  // dynamic shared memory: asked every time (cudaFuncSetAttribute may have moved the limit)
  CHECK(kl_kernel_takes(kernel(0), 512, 1024) && g_queries == 3);
  g_dynamic = 512;
  CHECK(!kl_kernel_takes(kernel(0), 512, 1024) && g_queries == 4);
  CHECK(kl_kernel_takes(kernel(0), 512, 0) && g_queries == 4);
  // a failed query is no answer to keep: refused, and asked again next time
  g_fail = 1;
  CHECK(!kl_kernel_takes(kernel(1), 1, 0) && g_queries == 5);
  CHECK(!kl_kernel_takes(kernel(1), 1, 0) && g_queries == 6);
  g_fail = 0;
  CHECK(kl_kernel_takes(kernel(1), 512, 0) && g_queries == 7);
  CHECK(kl_kernel_takes(kernel(1), 512, 0) && g_queries == 7);
  // every slot taken (devices 0 and 1 of kernel 0, kernel 1 and SLOTS - 3 more): the rest asked every time
  for (int i = 2; i < KL_SLOTS - 1; ++i) CHECK(kl_kernel_takes(kernel(i), 512, 0));
  const int asked = g_queries;
  CHECK(kl_kernel_takes(kernel(KL_SLOTS), 512, 0) && g_queries == asked + 1);
  CHECK(!kl_kernel_takes(kernel(KL_SLOTS), 513, 0) && g_queries == asked + 2);
  for (int i = 2; i < KL_SLOTS - 1; ++i) CHECK(kl_kernel_takes(kernel(i), 512, 0));
  CHECK(g_queries == asked + 2);
  std::printf("ok\n");
  return 0;
}
"""


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")
def test_the_helper_asks_once_per_kernel_and_device(tmp_path):
    source = tmp_path / "cache.cpp"
    source.write_text(f"{_FAKE_RUNTIME}\n#define KL_SLOTS {ATTRIBUTE_SLOTS}\n{attributes_helper()}\n{_CACHE_CHECKS}")
    subprocess.run(["g++", "-std=c++17", "-O2", "-Wall", "-Werror", "-o", str(tmp_path / "cache"), str(source)],
                   check=True, capture_output=True, text=True)
    run = subprocess.run([str(tmp_path / "cache")], capture_output=True, text=True)
    assert run.returncode == 0 and run.stdout == "ok\n", run.stdout + run.stderr


_SPELLINGS = r"""
__global__ void plain(float* y) { y[threadIdx.x] = 1.0f; }
template <class T, int N> __global__ void tk(T* y) { y[threadIdx.x] = (T)N; }
namespace ns {
__global__ void inner(float* y) { y[threadIdx.x] = 2.0f; }
template <class T> __global__ void tinner(T* y) { y[threadIdx.x] = (T)3; }
}
"""


@pytest.mark.nvcc
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_the_guard_compiles_for_every_spelling_of_a_kernel(tmp_path):
    launches = ["plain<<<n, 32>>>(y);", "tk<float, 4><<<dim3(n), dim3(32), 0, s>>>(y);",
                "ns::inner<<<n, 32, bytes>>>(y);", "ns::tinner<double><<<n, 32>>>(d);"]
    bodies = []
    for launch in launches:
        base = baseline_launch(launch)
        bodies.append(guarded(base, f"{base.statement}", [legal_launch(base.kernel, "dim3(1)", "dim3(64)", base.shmem)]))
    unit = (f"{_SPELLINGS}\n{attributes_helper()}\n"
            f"void launch(float* y, double* d, int n, size_t bytes, cudaStream_t s) {{\n  "
            + "\n  ".join(bodies) + "\n}\n")
    (tmp_path / "spellings.cu").write_text(unit)
    build = subprocess.run(["nvcc", "-std=c++17", "-c", "spellings.cu", "-o", "spellings.o"], cwd=tmp_path,
                           capture_output=True, text=True)
    assert build.returncode == 0, build.stderr[-3000:]


def _compiles(tmp_path: Path, split, source: str) -> None:
    """The rewritten editable part as the verifier compiles it on its own (preamble + part), by nvcc."""
    editable, _ = candidate_editable_part(source, split)
    (tmp_path / "part.cu").write_text(split.editable_unit(editable, "part.cu"))
    build = subprocess.run(["nvcc", "-std=c++17", "-c", "part.cu", "-o", "part.o"], cwd=tmp_path,
                           capture_output=True, text=True)
    assert build.returncode == 0, build.stderr[-3000:]


@pytest.mark.nvcc
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_a_rewritten_program_compiles(tmp_path):
    """A template's rewrite (the GEMM whose small sizes the cache is for) and a tier's rewrite of two
    launches. The verifier's static gates (policy, object and program scans) pass both too: the helper's
    static locals are the part's own globals, read and written at fixed addresses
    (test_offline_optimizer's first proposals, test_row_tier's dispatch)."""
    path = FIXTURES / "heldout" / "gemm_rect.cu"
    split = split_program(path.read_text(), path.name)
    _compiles(tmp_path, split, OfflineOptimizer().propose(request_for(path.read_text(), path.stem)).source)
    name = "l2norm_rows_dispatch.cu"
    split = split_program(_outside(name), name)
    rewrites, _ = row_warp_rewrites(read_editable(split.editable, split.harness, split.exported), split.harness)
    _compiles(tmp_path, split, rewrites[0].source)
