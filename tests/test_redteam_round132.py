"""Red team round 132 (tests/fixtures/redteam/round132/): (a) a program that declared `kl_number`
and specialised it true for its own class (or defined it as a macro) made the row tier's assertion
that every accumulator is a built-in number hold for a class whose += counts calls; now a rewrite
whose own names (its traits, their parameters, its kl_ locals) the program names anywhere, or
defines as a macro, is not proposed. (b) A baseline that needs two relations between its sizes at
once was judged only at draws that kept a chance relation too; now the redraws try every relation
but one before all of them."""

from __future__ import annotations

import pytest

from kernelloop.optimizers.base import NoMoreCandidates
from kernelloop.optimizers.offline.analysis import names_the_rewrite_adds
from kernelloop.verify.size_draws import ALL_BUT, ALL_RELATIONS, relation_order

from .conftest import FIXTURES
from .test_redteam_round109 import _first_proposal

ROUND = FIXTURES / "redteam" / "round132"


@pytest.mark.parametrize("baseline", ["a_user_specialized_kl_number/baseline.cu",
                                      "a_user_specialized_kl_number/variant_macro/baseline.cu"])
def test_a_program_naming_the_rewrites_own_trait_gets_no_tier_rewrite(baseline):
    try:
        proposal = _first_proposal((ROUND / baseline).read_text())
    except NoMoreCandidates:  # (round 133's rule, a library type's name the program declares, now comes first)
        return
    assert "row tier" not in proposal.approach and "column tier" not in proposal.approach, proposal.approach


@pytest.mark.parametrize("program, clash", [
    ("template <class T> struct kl_number;\n__global__ void k() {}", "kl_number"),
    ("#define kl_lane 0\n__global__ void k() {}", "kl_lane"),
    ("#define KlT int\n__global__ void k() {}", "KlT"),
])
def test_the_rewrites_own_names_named_by_the_program_clash(program, clash):
    rewrite = program + "\nstatic_assert(::kl_number<int>::value, \"\"); int kl_lane = 0;"
    assert clash in names_the_rewrite_adds(program, "", "", rewrite)


def test_a_program_without_them_has_no_clash():
    program = "__global__ void k(float* y) { y[0] = 1; }"
    rewrite = "template <class KlT> struct kl_number {};\n__global__ void k(float* y) { int kl_lane = 0; y[kl_lane] = 1; }"
    assert names_the_rewrite_adds(program, "", "", rewrite) == []


def test_every_relation_but_one_is_tried_before_all():
    order = relation_order(4)
    assert order.index(ALL_BUT + 1) < order.index(ALL_RELATIONS)
    assert [m for m in order if m > ALL_BUT and m != ALL_RELATIONS] == [ALL_BUT + k for k in range(1, 5)]
