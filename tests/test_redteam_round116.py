"""Red team round 116 (tests/fixtures/redteam/round116/): (a) a float local or parameter was read
as holding the integer it was given (`const float x = col; if (x < cols)`), but a float holds
integers exactly only to 2^24; (b) a one-line helper read into a launch lost its declared types
(an `unsigned short` result or parameter read as the int it was computed from); (c) the families'
guards checked that the template's launch is legal, never that the baseline's was (the shipped
transpose and stencil from 524281 rows or columns: the baseline's launch is refused and writes
nothing, the template wrote everything). Fixed by class: floating values are no integer
polynomial and keep only floating values; a helper's types convert what goes in and comes out;
every rewrite (a family's template, the row, column and axis tiers) runs only where the
baseline's own launch and the rewrite's are legal (launch_guard)."""

from __future__ import annotations

import re

import pytest

from kernelloop.optimizers.offline.launch_guard import baseline_launch, guarded, legal_launch

from .conftest import FIXTURES, ROOT
from .test_redteam_round107 import _verdict
from .test_redteam_round109 import _first_proposal

ROUND = FIXTURES / "redteam" / "round116"
_TRANSPOSE = (ROOT / "kernels" / "transpose.cu").read_text()


def _family(text: str, launcher: str) -> str | None:
    verdict = _verdict(text, launcher)
    return None if verdict.match is None else verdict.match.family


def test_a_float_coordinate_in_a_guard_gets_no_template():
    assert _family((ROUND / "a_float_guard" / "baseline.cu").read_text(), "launch_transpose") != "transpose"


@pytest.mark.parametrize("old, new", [
    # the same class by other spellings: a half, a double local, a cast to float in the guard, a
    # float computed from the coordinate
    ("int col = blockIdx.x * blockDim.x + threadIdx.x;",
     "int col = blockIdx.x * blockDim.x + threadIdx.x; const double x = col;"),
    ("if (row < rows && col < cols)", "if (row < rows && (float)col < cols)"),
    ("if (row < rows && col < cols)", "if (row < rows && col < (float)cols)"),
    ("if (row < rows && col < cols)", "if (row < rows && col * 1.0f < cols)"),
])
def test_a_comparison_made_in_floating_point_gets_no_template(old, new):
    assert old in _TRANSPOSE
    text = _TRANSPOSE.replace(old, new)
    if "double x" in new:
        text = text.replace("if (row < rows && col < cols)", "if (row < rows && x < cols)")
    assert _family(text, "launch_transpose") != "transpose"


def test_a_float_parameter_given_an_integer_is_converted():
    # the kernel's bound is a float parameter the launcher hands `cols`: not the int it was
    text = _TRANSPOSE.replace("int rows, int cols) {", "int rows, float cols) {", 1)
    assert text != _TRANSPOSE
    assert _family(text, "launch_transpose") != "transpose"


def test_a_float_local_of_floats_is_still_read():
    # what a float local holds when it is given a float (a load): kept, so the bundled kernels read
    softmax = (ROOT / "kernels" / "row_softmax.cu").read_text()
    assert _family(softmax, "launch_softmax") == "softmax"


@pytest.mark.parametrize("folder", ["b_helper_return_narrow", "b_helper_return_narrow/variant_param"])
def test_a_helpers_declared_types_convert_its_arguments_and_result(folder):
    text = (ROUND / folder / "baseline.cu").read_text()
    assert _family(text, "launch_softmax") != "softmax"


def test_a_helper_of_int_types_is_still_read_through():
    softmax = (ROOT / "kernels" / "row_softmax.cu").read_text()
    helper = "static int blocks_for(int n, int per) { return (n + per - 1) / per; }\n"
    old = "int grid = (rows + block - 1) / block;"
    assert old in softmax
    text = softmax.replace("void launch_softmax(", helper + "void launch_softmax(", 1)
    assert _family(text.replace(old, "int grid = blocks_for(rows, block);"), "launch_softmax") == "softmax"
    # and an `unsigned short` result is not
    narrow = text.replace("static int blocks_for", "static unsigned short blocks_for")
    assert _family(narrow.replace(old, "int grid = blocks_for(rows, block);"), "launch_softmax") != "softmax"


@pytest.mark.parametrize("path, launcher", [("kernels/transpose.cu", "launch_transpose"),
                                            ("kernels/stencil2d.cu", "launch_stencil"),
                                            ("kernels/naive_matmul.cu", "launch_matmul")])
def test_a_family_template_runs_only_where_the_baselines_launch_is_legal(path, launcher):
    source = _first_proposal((ROOT / path).read_text()).source
    # the baseline's legality: the first runtime query (after the arithmetic conditions: launch_guard)
    guard = re.search(r"if \(.*?\(kl_kernel_takes\(\(const void\*\)(\w+), (.*?)\) \{ ", source)
    assert guard is not None, source
    for axis, limit in (("x", "2147483647u"), ("y", "65535u"), ("z", "65535u")):
        assert f"(kl_grid).{axis} <= {limit}" in guard.group(2)
    # the block's threads and the dynamic shared memory, against the kernel's attributes (launch_guard)
    assert guard.group(2).startswith("(unsigned long long)(kl_block).x * (kl_block).y * (kl_block).z, "
                                     "(unsigned long long)(kl_shmem)) && ")
    assert source.count("static __noinline__ bool kl_kernel_takes(") == 1
    assert "<= (unsigned long long)kl_attributes.maxThreadsPerBlock" in source
    assert "<= (unsigned long long)kl_attributes.maxDynamicSharedSizeBytes" in source
    # the baseline's launch, with its configuration evaluated once, where it is not
    assert re.search(rf"else \{{ {guard.group(1)}<<<kl_grid, kl_block, kl_shmem>>>\(", source)


def test_the_guard_evaluates_the_configuration_once_and_keeps_the_stream():
    base = baseline_launch("k<float><<<grid_of(n), 256, bytes, stream>>>(a, n);")
    assert base.kernel == "k<float>"
    assert base.declarations == ("const dim3 kl_grid = dim3(grid_of(n)); const dim3 kl_block = dim3(256); "
                                 "const size_t kl_shmem = (size_t)(bytes);")
    assert base.statement == "k<float><<<kl_grid, kl_block, kl_shmem, stream>>>(a, n);"
    text = guarded(base, "run();", ["n > 0"])
    assert text.count("grid_of(n)") == 1
    assert text.index("const dim3 kl_grid") < text.index("if (")
    assert "<= 64u)) { run(); } else { k<float><<<kl_grid, kl_block, kl_shmem, stream>>>(a, n); } }" in text
    # the arithmetic condition before the runtime query: the fallback costs no runtime call
    assert text.index("if ((n > 0) && (kl_kernel_takes(") >= 0
    assert text.count("kl_kernel_takes(") == 1
    new = legal_launch("k2", "dim3(4)", "dim3(64)", "kl_shmem")
    assert guarded(base, "run();", [new]).count("kl_kernel_takes(") == 2


def test_the_row_tier_keeps_the_baselines_kernel_for_its_fallback():
    # the row tier's rewrite sits beside the baseline's kernel; its launch runs only where both are legal
    source = (ROUND / "b_helper_return_narrow" / "baseline.cu").read_text()
    proposal = _first_proposal(source).source
    assert "naive_softmax_kernel_kl_rewritten<<<" in proposal
    assert "__global__ void naive_softmax_kernel(" in proposal  # the baseline's, kept
    assert "kl_kernel_takes((const void*)naive_softmax_kernel_kl_rewritten, " in proposal
    assert "<= 2147483647LL" in proposal  # the rewrite's grid fits a launch
    assert re.search(r"else \{ naive_softmax_kernel<<<kl_grid, kl_block, kl_shmem>>>\(", proposal)
