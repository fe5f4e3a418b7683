"""Red team round 141 (tests/fixtures/redteam/round141/): (a) a second caller of the launcher written
through a macro of the frozen preamble (`#define SMOOTH_RUNNER run_smooth_rows`) was not seen, the
part's items being read before macros; (b) a namespace opened `inline` in the preamble and reopened
without the word held a `max` the rewrite's `::max` chose. Now a launcher a preamble macro names
(or any program macro that pastes names) refuses the tiers, and (round 142) a `::name` the rewrite
adds clashes with the program's declaration of that name wherever it stands."""

from __future__ import annotations

import pytest

from kernelloop.optimizers.base import NoMoreCandidates

from .conftest import FIXTURES
from .test_redteam_round109 import _first_proposal

ROUND = FIXTURES / "redteam" / "round141"
REFUSED = [("a_launcher_named_by_preamble_macro/baseline.cu", "row tier: kernel smooth_rows is launched through "
            "run_smooth_rows, which a macro of the program may name"),
           ("b_qualified_call_reopened_inline_namespace/baseline.cu", "row tier: one warp per row of row_max: its "
            "code calls max, which the program declares itself")]


@pytest.mark.parametrize("baseline, why", REFUSED)
def test_the_round_gets_no_tier_rewrite_and_says_why(baseline, why):
    try:
        proposal = _first_proposal((ROUND / baseline).read_text())
    except NoMoreCandidates as caught:
        assert why in str(caught), str(caught)
        return
    assert "tier" not in proposal.approach, proposal.approach


def test_a_launcher_made_by_pasting_is_refused():
    text = (ROUND / "a_launcher_named_by_preamble_macro" / "baseline.cu").read_text()
    text = text.replace("#define SMOOTH_RUNNER run_smooth_rows", "#define SMOOTH_RUNNER(k) run_##k")
    text = text.replace("SMOOTH_RUNNER(y + 1", "SMOOTH_RUNNER(smooth_rows)(y + 1")
    try:
        proposal = _first_proposal(text)
    except NoMoreCandidates:
        return  # (a pasted name may be any name the frozen part declares: nothing is read at all)
    assert "row tier" not in proposal.approach, proposal.approach
