"""The offline optimizer's block tier (optimizers/offline/packing.py): a kernel launched on blocks of
a few threads runs the same threads packed into blocks of 256, each reading its old coordinates.

Tier 1: which launches and kernels it takes (one-thread blocks indexed by blockIdx.x, half-warp
blocks from a macro through a dim3 local, gridDim.x in a grid-stride loop) and which it refuses, by
class (a block not a constant, already large, two-dimensional; shared memory, barriers, warp
intrinsics, __launch_bounds__, a built-in read through a macro or a helper); what the rewrite
reads in place of each built-in, and the launch's run-time guard. Tier 2 (nvcc): the fixtures'
rewrites pass the verifier's static gates for sm_90 and build for sm_86. The GPU run that
accepts them: tests/gpu/test_offline_heldout_gpu.py -k block_tier.
"""

from __future__ import annotations

import re

import pytest

from kernelloop.optimizers.offline.analysis import analyze
from kernelloop.optimizers.offline.packing import PACKED_BLOCK, packing_rewrites
from kernelloop.program.split import split_program

from .conftest import FIXTURES, assert_passes_the_static_gates

PROGRAMS = sorted((FIXTURES / "block_tier").glob("*.cu"))
HARNESS = """
// kernelloop: editable end
#include <kernelloop_harness.cuh>
int main() {
  kl::Harness h;
  const int n = h.size<int>({1 << 20, 999983});
  const float* x = h.input<float>("x", n, kl::Uniform<float>{-1.0f, 1.0f});
  float* y = h.output<float>("y", n);
  h.run([&] { launch(y, x, n); }, {.warmup = 2, .calls = 20});
  return 0;
}
"""


def _program(kernel: str, launch: str, preamble: str = "") -> str:
    return (f"#include <cstdio>\n{preamble}\n// kernelloop: editable begin\n{kernel}\n"
            f"void launch(float* y, const float* x, int n) {{\n  {launch}\n}}\n{HARNESS}")


def _rewrites(text: str):
    split = split_program(text, "program.cu")
    analysis = analyze(split.editable, split.harness, split.exported, split.preamble)
    return split, packing_rewrites(analysis.part_as_written or analysis.part, split.harness, split.preamble)


SCALE = """__global__ void scale(float* y, const float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = 2.0f * x[i];
}"""


@pytest.mark.parametrize("launch, block", [
    ("scale<<<n, 1>>>(y, x, n);", 1),
    ("dim3 block(16); scale<<<(n + 15) / 16, block>>>(y, x, n);", 16),
    ("const int threads = WARP; scale<<<(n + WARP - 1) / WARP, threads>>>(y, x, n);", 32),
])
def test_launches_on_blocks_of_a_few_threads_are_packed(launch, block):
    split, (rewrites, refused) = _rewrites(_program(SCALE, launch, "#define WARP 32"))
    assert refused == [] and len(rewrites) == 1
    source = rewrites[0].source
    packed = source[source.index("scale_kl_rewritten"):]
    body = packed[packed.index("{"):packed.index("\n}")]
    # the body reads the old coordinates: block = t / B, thread = t % B, blockDim.x = B
    assert f"kl_bx = (unsigned int)(kl_t / {block}ULL)" in body and f"kl_tx = (unsigned int)(kl_t % {block}ULL)" in body
    assert "kl_bdx = " + f"{block}u" in body and "if (kl_t >= kl_threads) return;" in body
    assert "int i = kl_bx * kl_bdx + kl_tx;" in body
    # launched on blocks of 256 only where the block is B x 1 x 1 at run time; the old launch elsewhere
    assert f"dim3({PACKED_BLOCK})" in source and f"kl_block.x == {block}u && kl_block.y == 1u && kl_block.z == 1u" \
        in source and "(y, x, n, kl_grid.x, kl_threads);" in source
    assert re.search(r"else \{ scale<<<kl_grid, kl_block, kl_shmem>>>\(y, x, n\); \}", source)


@pytest.mark.parametrize("kernel, launch, why", [
    (SCALE, "scale<<<(n + 255) / 256, 256>>>(y, x, n);", "blocks of 256 threads already"),
    (SCALE, "scale<<<(n + 63) / 64, 64>>>(y, x, n);", "blocks of 64 threads already"),
    (SCALE, "int threads = n > 4 ? 8 : 4; scale<<<n, threads>>>(y, x, n);", "that is not a constant"),
    (SCALE, "scale<<<n, dim3(4, 4)>>>(y, x, n);", "blocks of 4 x 4 x 1 threads"),
    (SCALE, "scale<<<8, 16>>>(y, x, n);", "nothing to pack"),
    (SCALE.replace("int i =", "__shared__ float s[1]; s[0] = 1.0f;\n  int i ="), "scale<<<n, 1>>>(y, x, n);",
     "uses __shared__"),
    (SCALE.replace("if (i < n)", "__syncthreads();\n  if (i < n)"), "scale<<<n, 1>>>(y, x, n);", "uses __syncthreads"),
    (SCALE.replace("2.0f * x[i]", "__shfl_sync(0xffffffffu, x[i], 0)"), "scale<<<n, 1>>>(y, x, n);", "__shfl_sync"),
    (SCALE.replace("__global__ void", "__global__ void __launch_bounds__(32)"), "scale<<<n, 1>>>(y, x, n);",
     "__launch_bounds__"),
    (SCALE.replace("blockIdx.x * blockDim.x + threadIdx.x", "GLOBAL_ID"), "scale<<<n, 1>>>(y, x, n);",
     "reads where its thread runs"),
    ("__device__ int me() { return blockIdx.x; }\n" + SCALE.replace("blockIdx.x * blockDim.x + threadIdx.x", "me()"),
     "scale<<<n, 1>>>(y, x, n);", "names me, which reads where its thread runs"),
])
def test_what_depends_on_its_block_or_is_not_small_is_refused(kernel, launch, why):
    _, (rewrites, refused) = _rewrites(_program(kernel, launch,
                                                "#define GLOBAL_ID (blockIdx.x * blockDim.x + threadIdx.x)"))
    assert rewrites == [] and any(why in r for r in refused), refused


@pytest.mark.nvcc
@pytest.mark.parametrize("path", PROGRAMS, ids=[p.name for p in PROGRAMS])
def test_the_fixtures_rewrites_pass_the_static_gates(path):
    split, (rewrites, refused) = _rewrites(path.read_text())
    assert refused == [] and len(rewrites) == 1
    assert_passes_the_static_gates(split, rewrites[0].source)
