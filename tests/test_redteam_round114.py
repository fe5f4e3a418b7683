"""Red team round 114 (tests/fixtures/redteam/round114/), on the new axis tier: the renaming
reached only built-ins written in the kernel's own text, so (a) a macro naming a macro that reads
blockIdx.x and (c) a device function calling one that does kept the old axis in the swapped copy,
and (d) a warp shuffle in a helper escaped the warp check; (b) the swapped launch ran where the
baseline's own launch was not legal (68750 blocks along y). Fixed by reading the kernel with the
program's macros expanded, allowing only calls to math, loads, atomics, barriers and pure helpers,
and taking the swapped launch only where both launches are legal."""

from __future__ import annotations

import pytest

from .conftest import FIXTURES
from .test_axis_tier import TONEMAP, TONEMAP_SPEC, _program, _proposal, _refusal
from .test_redteam_round109 import _first_proposal
from .test_redteam_round126 import refused_as_reading_thread_place

ROUND = FIXTURES / "redteam" / "round114"


@pytest.mark.parametrize("folder, words", [
    ("a_nested_macro", "uses a macro that reads or drops a thread's coordinates"),
    ("c_device_chain", "calls block_past"),
    ("d_warp_helper", "calls pair_mean"),
])
def test_a_coordinate_or_warp_read_outside_the_kernels_text_is_refused(folder, words):
    try:
        proposal = _first_proposal((ROUND / folder / "baseline.cu").read_text())
    except Exception as exc:  # no template fits
        assert f"axis tier: kernel tonemap_kernel {words}" in str(exc) or refused_as_reading_thread_place(str(exc)), str(exc)
        return
    assert "axis tier" not in proposal.approach, proposal.approach


def test_the_swapped_launch_runs_only_where_the_baselines_is_legal_too():
    source = _first_proposal((ROUND / "b_grid_y_limit" / "baseline.cu").read_text()).source
    # the baseline's launch legal (its grid along y within 65535: the case of the finding) ...
    assert "(kl_grid).y >= 1u && (kl_grid).y <= 65535u" in source
    assert "kl_kernel_takes((const void*)" in source
    # ... and the swapped one too (its y is the baseline's x)
    assert "(dim3(kl_grid.y, kl_grid.x, kl_grid.z)).y >= 1u && (dim3(kl_grid.y, kl_grid.x, kl_grid.z)).y <= 65535u" in source


_BODY = "  float l = hdr[y * width + x] * exposure * gain[x];"


@pytest.mark.parametrize("prelude, replacement, words", [
    # cooperative groups through an alias: the group's spelling, not the namespace's
    ("#include <cooperative_groups.h>\nnamespace cg = cooperative_groups;",
     "  float l = hdr[y * width + x] * exposure * gain[x] + 0.0f * cg::this_thread_block().thread_rank();",
     "this_thread_block"),
    # a function the program does not define (a header's): its body is not read
    ("__device__ float scale_of(int col);", "  float l = hdr[y * width + x] * exposure * scale_of(x);", "calls scale_of"),
    # a macro that reads a built-in twice over another macro
    ("#define COL_BLOCK blockIdx.y\n#define FIRST_COL (COL_BLOCK * blockDim.y)",
     "  float l = hdr[y * width + x] * exposure * gain[x] * (FIRST_COL >= 0 ? 1.0f : 0.0f);",
     "uses a macro that reads or drops a thread's coordinates"),
])
def test_other_spellings_of_the_class_are_refused(prelude, replacement, words):
    text = TONEMAP.replace("#include <cstdio>", "#include <cstdio>\n" + prelude).replace(_BODY, replacement)
    assert replacement in text
    reason = _refusal(_program(text, TONEMAP_SPEC, "image_tonemap_rows.cu"))
    assert words in reason or "could not be read" in reason, reason


def test_a_pure_helper_and_math_are_still_taken():
    text = TONEMAP.replace("__global__ void tonemap_kernel",
                           "__device__ float reinhard(float l) { return l / (1.0f + l); }\n\n__global__ void tonemap_kernel") \
        .replace("  ldr[y * width + x] = l / (1.0f + l);", "  ldr[y * width + x] = fminf(reinhard(l), 1.0f);")
    proposal = _proposal(_program(text, TONEMAP_SPEC, "image_tonemap_rows.cu"))
    assert proposal.approach.startswith("axis tier:"), proposal.approach
