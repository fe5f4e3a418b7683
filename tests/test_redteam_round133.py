"""Red team round 133 (tests/fixtures/redteam/round133/): (a) the value a row adds was of a class the
program named like a library integer type (`tally::uint_least32_t`), with a free `operator+=` that
stops at 1000 (and a free `operator^=` that rotates): the accumulator was a plain `unsigned`, so the
rewrite's assertion held, while the combine added without the cap. Now a library type's name the
program declares itself is no library type to the readers. (b) A loop whose bound reads its own
accumulator (an early exit: `c < (odd == 0u ? cols : 0)`, a budget): each lane stopped on its own
partial. Now a loop's start and bound are read like its body: neither may read an accumulator of
the loop, nor the bound an array the loop writes."""

from __future__ import annotations

import pytest

from kernelloop.optimizers.base import NoMoreCandidates

from .conftest import FIXTURES
from .test_redteam_round109 import _first_proposal

ROUND = FIXTURES / "redteam" / "round133"


@pytest.mark.parametrize("baseline", ["a_adl_operator_on_value_class/baseline.cu",
                                      "a_adl_operator_on_value_class/variant_xor_checksum/baseline.cu",
                                      "b_loop_bound_reads_accumulator/baseline.cu",
                                      "b_loop_bound_reads_accumulator/variant_budget_sum/baseline.cu"])
def test_the_round_gets_no_tier_rewrite(baseline):
    try:
        proposal = _first_proposal((ROUND / baseline).read_text())
    except NoMoreCandidates:
        return
    assert "row tier" not in proposal.approach and "column tier" not in proposal.approach, proposal.approach


def test_a_bound_reading_the_accumulator_is_named():
    with pytest.raises(NoMoreCandidates) as caught:
        _first_proposal((ROUND / "b_loop_bound_reads_accumulator" / "baseline.cu").read_text())
    assert "reads odd in the loop that accumulates it" in str(caught.value), str(caught.value)


def test_a_bound_reading_an_array_the_loop_writes_is_refused():
    from kernelloop.optimizers.offline.launcher import read_editable
    from kernelloop.optimizers.offline.rowwarp import NotARowKernel, plan_row_warp, pure_helpers

    text = """
__global__ void k(float* out, int* lim, const float* in, int rows, int cols) {
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  for (int c = 0; c < lim[r]; c++) { out[r * cols + c] = in[r * cols + c]; lim[r * cols + c] = 0; }
}
"""
    part = read_editable(text, "", [])
    (fn,) = [f for f in part.functions.values() if f.is_kernel]
    with pytest.raises(NotARowKernel):
        plan_row_warp(fn, pure_helpers(list(part.functions.values())))


def test_a_library_type_name_the_program_declares_is_no_library_type():
    from kernelloop.optimizers.offline.valuetype import ValueTypes
    from kernelloop.optimizers.offline.launcher import read_editable
    from kernelloop.optimizers.offline.facts import collect_facts

    part = read_editable("__global__ void k(float* y) { y[0] = 1; }", "", [])
    (fn,) = part.functions.values()
    facts = collect_facts(fn.sig, fn.body)
    assert ValueTypes(facts).canon("uint_least32_t") is not None
    assert ValueTypes(facts, declared=frozenset({"uint_least32_t"})).canon("uint_least32_t") is None
    assert ValueTypes(facts, declared=frozenset({"uint_least32_t"})).canon("unsigned int") is not None
