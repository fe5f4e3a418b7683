"""Red team round 170 (tests/fixtures/redteam/round170/), on round 166's fix: whether a part could reach a
header's assertion was decided by reading the namespaces it names (`x::`, `using namespace x`), and
two parts reached one naming none that reading saw: `::cuda::std::clamp(...)` (a qualifier from the
global namespace, in the launcher and in a kernel) and an unqualified `clamp(one, one, one, cmp)` that
argument-dependent lookup finds in std on the `std::initializer_list<int>` that `auto one = {0}` is.
Each comparator counted its calls and the launch's column count followed the count in -DDEBUG,
CCCL_ENABLE_ASSERTIONS or _GLIBCXX_ASSERTIONS builds only.

Closed by class (shipped.header_assertions_reached): the compiler decides. The part is built once in
the debug build with every assertion switch, under headers whose assertion macros call a secret
function template whose body fails a static_assert: a part that makes a header instantiate code
holding an assertion (to run it, or to evaluate it as a constant) does not build there, and the debug
builds are compared. No spelling of a call changes what the compiler instantiates."""

from __future__ import annotations

import pytest

from kernelloop.program.split import split_program
from kernelloop.tools.nvcc import find_toolchain
from kernelloop.verify.shipped import header_assertions_reached, one_file_reaches

from .conftest import FIXTURES, shared_cache_dir
from .test_redteam_round166 import BASE, refused_as_a_debug_build_difference

CASE = FIXTURES / "redteam" / "round170"


def _reached(part: str) -> bool:
    split = split_program(BASE.read_text(), BASE.name)
    return header_assertions_reached(split, part, arch="sm_90", cache_dir=shared_cache_dir(),
                                     toolchain=find_toolchain(), one_file=one_file_reaches(part))


@pytest.mark.nvcc
@pytest.mark.parametrize("find", ["rooted_qualifier", "rooted_qualifier_device", "adl_no_namespace"])
def test_a_header_assertion_reached_without_naming_its_namespace_is_compared(find):
    refused_as_a_debug_build_difference(CASE / find / "cand_whole.cu")


_KERNEL = """__global__ void row_sum_kernel(float *out, const float *x, int N, int C, int ld)
{
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= N) return;
    float s = 0.0f;
    for (int c = 0; c < C; c++) s += x[(size_t)r * ld + c];
    out[r] = s;
}
"""
_LAUNCHER = """void run_row_sum(float *d_out, const float *d_x, int N, int C)
{
    int blocks = (N + BLOCK - 1) / BLOCK;
    %s
    row_sum_kernel<<<blocks, BLOCK>>>(d_out, d_x, N, C, C);
    cudaDeviceSynchronize();
}
"""


@pytest.mark.nvcc
@pytest.mark.parametrize("includes, statement, reached", [
    # no header assertion in the part's code, whatever namespaces it names
    ("#include <algorithm>\n", "blocks = std::max(blocks, 1);", False),
    ("", "namespace kl_rows { int f(int b) { return b; } }", False),
    # in a constant evaluation only, where whether an assertion fails decides what is a constant
    # (round 168): reached as much
    ("#include <algorithm>\n", "constexpr int most = std::clamp(1 << 20, 1, 1 << 21); "
                               "blocks = blocks < most ? blocks : most;", True),
    # one, however the call is spelled
    ("#include <algorithm>\n", "blocks = ::std::clamp(blocks, 1, 1 << 20);", True),
    ("#include <algorithm>\n", "using ::std::clamp; blocks = clamp(blocks, 1, 1 << 20);", True),
    ("#include <algorithm>\n", "auto one = {0}; (void)clamp(one, one, one, [](decltype(one) a, decltype(one) b) "
                               "{ return a.size() < b.size(); });", True),
])
def test_the_compiler_says_whether_a_header_assertion_is_reached(includes, statement, reached):
    if statement.startswith("namespace"):
        part = f"{includes}{statement}\n{_KERNEL}{_LAUNCHER % 'blocks = kl_rows::f(blocks);'}"
    else:
        part = f"{includes}{_KERNEL}{_LAUNCHER % statement}"
    assert _reached(part) is reached
