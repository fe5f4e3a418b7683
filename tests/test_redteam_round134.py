"""Red team round 134 (tests/fixtures/redteam/round134/): (a) a macro hid an accumulator's read from
the row and column tiers' checks (`c < UNTIL_ODD`, `if (STILL_EVEN)`, `used += ... + BONUS`): the
tiers planned from the text before expansion. Now every kernel and helper is read (and copied) with
the program's macros expanded, as the compiler reads it. (b) A macro named like a name the rewrite
writes itself (`#define blockDim (FixedBlock{})`) gave the rewrite's own code the program's meaning:
now a program that defines or declares a name CUDA or C++ fixes, which the rewrite relies on, gets
no rewrite that uses it. (c) A comparison of the program's class was typed bool (`odd ^= (v > kHalf)`
with the program's `operator>` and a free `operator^=`): now a comparison, `!`, `&&`, `||` and `,`
are the language's only where their operands are proven built-in numbers."""

from __future__ import annotations

import pytest

from kernelloop.optimizers.base import NoMoreCandidates

from .conftest import FIXTURES
from .test_redteam_round109 import _first_proposal

ROUND = FIXTURES / "redteam" / "round134"
BASELINES = ["a_macro_hides_accumulator_read/baseline.cu",
             "a_macro_hides_accumulator_read/variant_column_bound/baseline.cu",
             "a_macro_hides_accumulator_read/variant_column_update_value/baseline.cu",
             "a_macro_hides_accumulator_read/variant_if_condition/baseline.cu",
             "b_macro_named_like_cuda_builtin/baseline.cu",
             "b_macro_named_like_cuda_builtin/variant_column_tier/baseline.cu",
             "c_comparison_of_program_class_typed_bool/baseline.cu",
             "c_comparison_of_program_class_typed_bool/variant_capped_count/baseline.cu"]


@pytest.mark.parametrize("baseline", BASELINES)
def test_the_round_gets_no_tier_rewrite(baseline):
    try:
        proposal = _first_proposal((ROUND / baseline).read_text())
    except NoMoreCandidates:
        return
    assert "tier" not in proposal.approach, proposal.approach


def test_a_macro_in_the_bound_is_read_as_its_expansion():
    with pytest.raises(NoMoreCandidates) as caught:
        _first_proposal((ROUND / "a_macro_hides_accumulator_read" / "baseline.cu").read_text())
    assert "reads odd in the loop that accumulates it" in str(caught.value), str(caught.value)


def test_the_same_kernels_without_the_macros_still_get_their_rewrites():
    # the controls: each baseline with its macro replaced by a plain value the loop does not accumulate
    text = (ROUND / "a_macro_hides_accumulator_read" / "baseline.cu").read_text()
    start = text.index("#define UNTIL_ODD")
    plain = text[:start] + text[text.index("\n", start) + 1:]
    plain = plain.replace("UNTIL_ODD", "cols")
    assert "row tier" in _first_proposal(plain).approach
    text = (ROUND / "b_macro_named_like_cuda_builtin" / "baseline.cu").read_text()
    assert "row tier" in _first_proposal(text.replace("#define blockDim (FixedBlock{})", "")).approach
    with pytest.raises(NoMoreCandidates) as caught:  # with the macro: read as the compiler reads it
        _first_proposal(text)
    assert "row tier: kernel row_flags cannot be read with its macros expanded" in str(caught.value), str(caught.value)


def test_a_name_cuda_fixes_defined_or_declared_by_the_program_is_a_clash():
    from kernelloop.optimizers.offline.analysis import names_the_rewrite_adds
    part = "__global__ void k(float* y) { y[threadIdx.x] = 1.0f; }\n"
    rewrite = "__global__ void k(float* y) { y[blockIdx.x * blockDim.x + threadIdx.x] = fmaxf(1.0f, 0.0f); }\n"
    assert names_the_rewrite_adds(part, "#define blockDim (Fixed{})\n", "", rewrite) == ["blockDim"]
    assert names_the_rewrite_adds(part, "namespace q { constexpr dim3 blockDim{128}; }\n", "", rewrite) == ["blockDim"]
    assert names_the_rewrite_adds(part, "#define fmaxf(a, b) (a)\n", "", rewrite) == ["fmaxf"]
    # a local named like a function the rewrite never calls is no clash; one it calls is
    local = "__global__ void k(float* y) { float max = 0.0f; y[threadIdx.x] = max; }\n"
    assert names_the_rewrite_adds(local, "", "", local.replace("threadIdx.x", "blockIdx.x")) == []
    calls_max = local.replace("y[threadIdx.x] = max;", "y[threadIdx.x] = max(max, 1.0f);")
    assert names_the_rewrite_adds(local, "", "", calls_max) == ["max"]
    # the program's own macros in its copied launcher are its own (cudaCheck, a size)
    launcher = "#define N 1024\n#define cudaCheck(e) (e)\nvoid run(float* y) { k<<<N / 256, 256>>>(y); cudaCheck(cudaGetLastError()); }\n"
    assert names_the_rewrite_adds(launcher, "", "", launcher + launcher.split("\n")[2]) == []


def test_a_comparison_of_a_class_is_no_bool():
    from kernelloop.optimizers.offline.facts import collect_facts
    from kernelloop.optimizers.offline.launcher import read_editable
    from kernelloop.optimizers.offline.valuetype import ValueTypes

    text = """struct Bit { int b; };
__global__ void k(float* y, Bit w, float v, int n) {
  auto a = (v < 0.5f); auto b = (w < w); auto c = !(n > 2); auto d = !w; auto e = (v > 0.0f && n < 3);
  auto f = (w, n); auto g = (n, v); auto h = (w < w) && (n > 1);
  y[0] = v;
}"""
    part = read_editable(text, "", [])
    fn = part.functions["k"]
    types = ValueTypes(collect_facts(fn.sig, fn.body), declared=frozenset({"Bit"}))
    inits = {d.declarators[0].name: d.declarators[0].init for d in fn.body.body[:8]}
    got = {name: types.of(e) for name, e in inits.items()}
    assert got == {"a": "bool", "b": None, "c": "bool", "d": None, "e": "bool", "f": None, "g": "float", "h": None}
