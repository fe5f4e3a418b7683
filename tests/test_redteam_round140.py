"""Red team round 140 (tests/fixtures/redteam/round140/): a type alias spelled out where it is used
(39e1014) named a variable (`using wide_t = decltype(w);`) that a nested block declared again, so
`sizeof(wide_t)` became the float's size. Now an alias is spelled out only where its type holds no
expression and no name the body declares or aliases."""

from __future__ import annotations

import pytest

from kernelloop.optimizers.base import NoMoreCandidates

from .conftest import FIXTURES
from .test_kernel_aliases import _read
from .test_redteam_round109 import _first_proposal

ROUND = FIXTURES / "redteam" / "round140"


def test_the_round_gets_no_tier_rewrite_and_says_why():
    with pytest.raises(NoMoreCandidates, match=r"declares names inside device code \(using wide_t = decltype\(w\);\) "
                                               r"naming decltype"):
        _first_proposal((ROUND / "a_alias_decltype_rebound" / "baseline.cu").read_text())


@pytest.mark.parametrize("body, rebound", [
    ("{ const double w = 1.0; using wide_t = decltype(w); y[0] = sizeof(wide_t); }", "decltype"),
    ("{ using elem_t = decltype(x[0] + 1.0f); elem_t v = x[0]; y[0] = v; }", "decltype"),
    ("{ using a = float; using b = a; b v = x[0]; y[0] = v; }", "a"),  # `a` would name an outer a
    ("{ typedef Acc<float>::type acc_t; if (n) { int Acc = 0; y[0] = Acc; } acc_t v = x[0]; y[1] = v; }", "Acc"),
])
def test_an_alias_whose_type_may_mean_another_thing_where_used_is_refused(body, rebound):
    read = _read(body)
    assert isinstance(read, str) and f"naming {rebound}, which may mean another thing" in read, read
