"""The axis tier (optimizers/offline/axes.py): a kernel of 2-D or 3-D blocks whose x thread axis
walks its arrays' slow index gets a copy with x and the fast axis swapped, launched with the
grid's and block's axes swapped where that launch is legal, the baseline's launch otherwise. Taken
only where the renaming keeps the kernel's meaning."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import pytest

from kernelloop.optimizers.base import NoMoreCandidates
from kernelloop.optimizers.offline.optimizer import OfflineOptimizer
from kernelloop.program.init import InitSpec, generate
from kernelloop.program.scanner import strip_comments

from .conftest import FIXTURES
from .test_offline_optimizer import request_for

AXES = FIXTURES / "axes"
TONEMAP = (AXES / "image_tonemap_rows.cu").read_text()
VOLUME = (AXES / "volume_threshold_zslow.cu").read_text()
TONEMAP_SPEC = InitSpec(values={"height": ["4096", "1001"], "width": ["4096", "777"], "exposure": ["1.5", "0.7"]},
                        counts={"hdr": "height * width", "ldr": "height * width", "gain": "width"})
RANK1 = (AXES / "rank1_update_template.cu").read_text()
RANK1_SPEC = InitSpec(template_args="float", values={"rows": ["8192", "1001"], "cols": ["8192", "777"],
                                                     "alpha": ["0.5", "-1.5"]},
                      counts={"a": "rows * cols", "u": "rows", "v": "cols"}, roles={"a": "inout"})
VOLUME_SPEC = InitSpec(values={"depth": ["256", "37"], "height": ["256", "41"], "width": ["256", "53"],
                               "lo": ["0.1", "0.2"], "hi": ["0.9", "0.8"]},
                       counts={"in": "depth * height * width", "out": "depth * height * width"})


def _program(text: str, spec: InitSpec, name: str) -> str:
    return generate(text, spec, name).program


def _proposal(program: str):
    opt = OfflineOptimizer(cache_dir=Path(tempfile.mkdtemp(prefix="kl-axes-")))
    return opt.propose(request_for(program, "baseline"))


def _refusal(program: str) -> str:
    try:
        proposal = _proposal(program)
    except NoMoreCandidates as exc:
        return str(exc)
    assert "axis tier" not in proposal.approach, proposal.approach
    return ""


@pytest.mark.parametrize("text, spec, name, axis", [
    (TONEMAP, TONEMAP_SPEC, "image_tonemap_rows.cu", "y"),
    (VOLUME, VOLUME_SPEC, "volume_threshold_zslow.cu", "z"),
])
def test_the_x_axis_on_the_slow_index_is_swapped_with_the_fast_one(text, spec, name, axis):
    proposal = _proposal(_program(text, spec, name))
    assert proposal.approach.startswith("axis tier:") and f"x and {axis} thread axes swapped" in proposal.approach
    kernel = re.search(r"__global__ void (\w+)_kl_rewritten\(.*?\n}\n", proposal.source, re.S)
    assert kernel, proposal.source
    original = re.search(rf"__global__ void {kernel.group(1)}\(.*?\n}}\n", proposal.source, re.S).group(0)
    swapped = {"x": axis, axis: "x"}
    expected = re.sub(r"\b(threadIdx|blockIdx|blockDim|gridDim)\.([xyz])\b",
                      lambda m: f"{m.group(1)}.{swapped.get(m.group(2), m.group(2))}", original)

    def code(t: str) -> list[str]:  # the copy is written without the comments
        return [line.rstrip() for line in strip_comments(t).splitlines()]

    assert code(kernel.group(0)) == code(expected.replace(f"{kernel.group(1)}(", f"{kernel.group(1)}_kl_rewritten(", 1))
    # the swapped launch where it is legal, the baseline's otherwise, the configuration read once
    name = kernel.group(1)
    grid = f"dim3(kl_grid.{axis}, kl_grid.y, kl_grid.x)" if axis == "z" else "dim3(kl_grid.y, kl_grid.x, kl_grid.z)"
    assert f"{name}_kl_rewritten<<<{grid}, " in proposal.source
    # both launches checked against the device's limits and the kernels' own
    assert f"kl_kernel_takes((const void*){name}, " in proposal.source
    assert f"kl_kernel_takes((const void*){name}_kl_rewritten, " in proposal.source
    assert f"({grid}).x <= 2147483647u && ({grid}).y <= 65535u" not in proposal.source  # per axis, below
    assert f"({grid}).{axis} >= 1u && ({grid}).{axis} <= 65535u" in proposal.source
    assert f"else {{ {name}<<<kl_grid, kl_block, kl_shmem>>>" in proposal.source


_SHUFFLE = TONEMAP.replace("  ldr[y * width + x] = l / (1.0f + l);",
                           "  l += 0.0f * __shfl_xor_sync(0xffffffffu, l, 1);\n  ldr[y * width + x] = l / (1.0f + l);")
_MACRO = TONEMAP.replace("#include <cstdio>", "#include <cstdio>\n#define ROW (blockIdx.x * blockDim.x + threadIdx.x)") \
    .replace("int y = blockIdx.x * blockDim.x + threadIdx.x;", "int y = ROW;")
_HELPER = TONEMAP.replace("__global__ void tonemap_kernel", "__device__ int row_of() { return blockIdx.x * blockDim.x + "
                          "threadIdx.x; }\n\n__global__ void tonemap_kernel") \
    .replace("int y = blockIdx.x * blockDim.x + threadIdx.x;", "int y = row_of();")
_COALESCED = TONEMAP.replace("int y = blockIdx.x * blockDim.x + threadIdx.x;   // row",
                             "int y = blockIdx.y * blockDim.y + threadIdx.y;   // row") \
    .replace("int x = blockIdx.y * blockDim.y + threadIdx.y;   // column",
             "int x = blockIdx.x * blockDim.x + threadIdx.x;   // column") \
    .replace("dim3 grid((height + block.x - 1) / block.x, (width + block.y - 1) / block.y);",
             "dim3 grid((width + block.x - 1) / block.x, (height + block.y - 1) / block.y);")
_FLAT_BLOCK = TONEMAP.replace("dim3 block(16, 16);", "dim3 block(256, 1);")
_ALIAS = TONEMAP.replace("  int y = blockIdx.x * blockDim.x + threadIdx.x;   // row",
                         "  const uint3 t = threadIdx;\n  int y = blockIdx.x * blockDim.x + t.x;   // row")


@pytest.mark.parametrize("text, words", [
    (_SHUFFLE, "axis tier: kernel tonemap_kernel uses __shfl_xor_sync"),
    (_MACRO, "ROW"),  # the analysis does not read the kernel at all: no tier rewrites it
    (_HELPER, "calls or names row_of, which reads where its thread runs"),
    (_COALESCED, "axis tier: kernel tonemap_kernel already gives neighbouring threads"),
    (_FLAT_BLOCK, "axis tier: kernel tonemap_kernel is launched with one thread along y"),
], ids=["warp-shuffle", "macro-reads-builtin", "helper-reads-builtin", "already-coalesced", "one-thread-along-y"])
def test_a_kernel_whose_meaning_or_gain_the_swap_cannot_keep_is_refused(text, words):
    reason = _refusal(_program(text, TONEMAP_SPEC, "image_tonemap_rows.cu"))
    assert words in reason, reason


@pytest.mark.nvcc
@pytest.mark.parametrize("text, spec, name", [(TONEMAP, TONEMAP_SPEC, "image_tonemap_rows.cu"),
                                              (VOLUME, VOLUME_SPEC, "volume_threshold_zslow.cu"),
                                              (RANK1, RANK1_SPEC, "rank1_update_template.cu")])
def test_the_axis_candidate_passes_the_static_gates(text, spec, name):
    from kernelloop.config import Settings
    from kernelloop.program.split import candidate_editable_part, split_program
    from kernelloop.tools.nvcc import find_toolchain
    from kernelloop.verify.gate import static_gates

    from .conftest import shared_cache_dir

    program = _program(text, spec, name)
    split = split_program(program, name)
    editable, _ = candidate_editable_part(_proposal(program).source, split)
    result = static_gates(split, editable, arch="sm_86", settings=Settings(cache_dir=shared_cache_dir()),
                          toolchain=find_toolchain())
    assert not result.violations, [v.describe() for v in result.violations]
    assert result.candidate is not None and result.candidate.ok, result.candidate.log[-2000:]


def test_a_built_in_read_whole_is_refused_by_the_tier_itself():
    # the analysis refuses this kernel already (a uint3 local); the tier does not rely on that
    from kernelloop.optimizers.offline.axes import meaning_may_change
    from kernelloop.optimizers.offline.launcher import read_editable
    from kernelloop.optimizers.offline.rowwarp import launch_sites
    from kernelloop.program.split import split_program

    split = split_program(_program(_ALIAS, TONEMAP_SPEC, "image_tonemap_rows.cu"), "image_tonemap_rows.cu")
    (site,) = launch_sites(read_editable(split.editable, split.harness, split.exported), split.harness, split.preamble)
    assert "reads a built-in other than through its .x" in meaning_may_change(site, split.preamble)


def test_a_template_launcher_gets_the_swap_for_the_instantiation_the_verifier_runs():
    # a template kernel behind a template launcher; u[i] moves along x alone (one address per warp
    # once swapped), which is no transpose's strided read
    proposal = _proposal(_program(RANK1, RANK1_SPEC, "rank1_update_template.cu"))
    assert proposal.approach == "axis tier: rank1_update_kernel with its x and y thread axes swapped"
    assert "if constexpr (::kl_same_type<T, float>::value)" in proposal.source
    assert "rank1_update_kernel_kl_rewritten<T><<<dim3(kl_grid.y, kl_grid.x, kl_grid.z), " in proposal.source
    assert "} else { rank1_update_kernel<T><<<grid, block, 0, stream>>>" in proposal.source


def test_a_load_moving_along_both_axes_still_refuses_the_swap():
    transposing = RANK1.replace("alpha * u[i] * v[j]", "alpha * u[j * rows + i] * v[j]") \
        .replace("const T* __restrict__ u,", "const T* __restrict__ u,")
    spec = RANK1_SPEC.model_copy(update={"counts": {"a": "rows * cols", "u": "rows * cols", "v": "cols"}})
    reason = _refusal(_program(transposing, spec, "rank1_update_template.cu"))
    assert "axis tier: kernel rank1_update_kernel already gives neighbouring threads" in reason, reason
