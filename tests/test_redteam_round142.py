"""Red team round 142 (tests/fixtures/redteam/round142/): a C++17 nested namespace opener
(`namespace compat::detail {`) inside an inline chain hid the program's `max(short, int)` from the
scope reading of rounds 138 and 141, and the row tier's `::max` chose it. The class (judging what
the global namespace holds from the program's blocks) is closed, not patched: a `::name` the
rewrite adds now clashes with the program's declaration of that name wherever it stands."""

from __future__ import annotations

from kernelloop.optimizers.offline.analysis import names_the_rewrite_adds

from .conftest import FIXTURES
from .test_redteam_round109 import _first_proposal

ROUND = FIXTURES / "redteam" / "round142"


def test_the_round_gets_no_row_tier_rewrite_and_says_why():
    from kernelloop.optimizers.base import NoMoreCandidates

    try:
        proposal = _first_proposal((ROUND / "a_qualified_call_nested_namespace_definition" / "baseline.cu").read_text())
    except NoMoreCandidates as caught:
        assert "its code calls max, which the program declares itself" in str(caught), str(caught)
        return
    assert "row tier" not in proposal.approach, proposal.approach


def test_a_qualified_call_clashes_with_a_declaration_in_any_namespace():
    editable = "namespace deep { namespace er { __device__ int max(short a, int b) { return a < b ? a : b; } } }"
    rewrite = editable + "\n__global__ void q(short* m) { m[0] = ::max(m[0], 1); }"
    assert names_the_rewrite_adds(editable, "", "", rewrite) == ["max"]
    # the part's own `::max` calls, copied, keep their meaning
    assert names_the_rewrite_adds(rewrite, "", "", rewrite) == []
