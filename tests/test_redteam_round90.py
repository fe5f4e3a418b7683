"""Red team round 90 (tests/fixtures/redteam/round90/): floats that reached integer accumulators
and arrays unseen because the narrowing rule read types from spelling (`*(x + c)`, `__ldg`, a
member, a file-scope constant, a macro, a helper's result). Types are now proven (valuetype), and
an integer, 16-bit or unknown place takes only a value proven integral or of its own type. CPU only."""

from __future__ import annotations

import pytest

from kernelloop.optimizers.offline.analysis import without_narrowing, without_shadowed
from kernelloop.optimizers.offline.launcher import read_editable
from kernelloop.optimizers.offline.sizes import integral_constants

from .conftest import FIXTURES
from .test_redteam_round85 import _proposals

ROUND = FIXTURES / "redteam" / "round90"
SNIPPETS = ROUND / "tools" / "snippets"


def _read(text: str, preamble: str = "") -> tuple[list[str], list[str]]:
    """(functions the rewrites may read, why the others are not read) of an editable part."""
    part = without_narrowing(without_shadowed(read_editable(text, "", []), text, preamble), text, preamble)
    return sorted(part.functions), part.problems


@pytest.mark.parametrize("path", ["deref_int_sum/baseline.cu", "deref_matmul_intacc/baseline.cu",
                                  "deref_reduction_int_smem/baseline.cu", "int_input_float_addend/baseline.cu"])
def test_a_float_reaching_an_integer_place_by_any_route_gets_no_float_rewrite(path):
    assert _proposals(ROUND / path) == []


@pytest.mark.parametrize("snippet", sorted(p.name for p in SNIPPETS.glob("*.cu") if p.name != "r_double_to_float.cu"))
def test_every_route_of_a_float_into_an_integer_is_seen(snippet):
    text = (SNIPPETS / snippet).read_text()
    kept, problems = _read(text)
    assert "k" not in kept and any(p.startswith("k: ") for p in problems), (kept, problems)


KERNEL = """
#define TILE 16
#define HALF 0.5f
static const int kRows = 4;
__device__ int lane_of(int i) {{ return i & 31; }}
__global__ void k(const {elem}* __restrict__ x, {acc}* y, int n) {{
    {acc} s = 0;
    for (int c = threadIdx.x; c < n; c += blockDim.x) s += {addend};
    y[blockIdx.x] = s;
}}
void launch(const {elem}* x, {acc}* y, int n) {{ k<<<n, 256>>>(x, y, n); }}
"""


@pytest.mark.parametrize("elem, acc, addend", [
    ("float", "float", "x[c] * HALF"),  # a float place takes anything
    ("int", "int", "*(x + c) * TILE"),  # integers, through a dereference and a proven macro
    ("int", "long long", "__ldg(x + c) + kRows + lane_of(c)"),  # a load, a const int, an int helper
    ("unsigned char", "unsigned int", "(unsigned)x[c] << 1"),
    ("float", "float", "::fmaxf(x[c], 0.0f)"),
])
def test_values_proven_to_fit_are_still_read(elem, acc, addend):
    kept, problems = _read(KERNEL.format(elem=elem, acc=acc, addend=addend))
    assert "k" in kept, problems


@pytest.mark.parametrize("elem, acc, addend", [
    ("int", "int", "x[c] * HALF"),  # a float macro
    ("int", "int", "x[c] / SCALE"),  # a macro the program never defines: unknown
    ("float", "int", "(x + c)[0]"),
    ("float", "__half", "x[c]"),
    ("int", "int", "x[c] * (float)1"),
])
def test_values_not_proven_to_fit_keep_the_kernel_from_the_rewrites(elem, acc, addend):
    kept, problems = _read(KERNEL.format(elem=elem, acc=acc, addend=addend))
    assert "k" not in kept and any(p.startswith("k: ") for p in problems), (kept, problems)


def test_a_template_accumulator_of_its_own_type_is_read():
    text = """
template <typename scalar_t>
__global__ void k(const scalar_t* x, scalar_t* y, int n) {
    scalar_t s = 0;
    scalar_t m = -INFINITY;
    for (int c = threadIdx.x; c < n; c += blockDim.x) { s += x[c] * x[c]; m = max(m, x[c]); }
    y[blockIdx.x] = s + m;
}
template <typename scalar_t> void launch(const scalar_t* x, scalar_t* y, int n) { k<scalar_t><<<n, 256>>>(x, y, n); }
"""
    kept, problems = _read(text)
    assert "k" in kept, problems
    kept, problems = _read(text.replace("s += x[c] * x[c]", "s += x[c] * 0.5f"))
    assert "k" not in kept, problems  # scalar_t = int would truncate each step


def test_a_constant_is_integral_only_when_every_definition_says_so():
    assert {"TILE", "ROWS", "K"} <= integral_constants("#define TILE 16\n#define ROWS (TILE * 4)\nconst int K = 3;")
    proven = integral_constants("#define A (float)3\n#define B 2.0f\n#define C 3\nnamespace q { const float C = 1; }"
                                "\n#if X\n#define D 1\n#else\n#define D 1.5\n#endif")
    assert not {"A", "B", "C", "D"} & proven


def test_an_alias_given_two_meanings_is_not_resolved():
    text = """
namespace a { using acc_t = float; }
namespace b { using acc_t = int; }
__global__ void k(const float* x, b::acc_t* y, int n) { b::acc_t s = 0; for (int c = 0; c < n; ++c) s += x[c]; y[0] = s; }
void launch(const float* x, int* y, int n) { k<<<1, 1>>>(x, y, n); }
"""
    kept, problems = _read(text)
    assert "k" not in kept, problems
