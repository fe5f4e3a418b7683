"""Red team round 139 (tests/fixtures/redteam/round139/): (a) a forwarder handed the launcher an
address as a number (`(size_t)(y + 1)`, read back as `float*`), which round 138's "plain number"
let through with no root; (b) a launcher reached from the harness by two paths, only the first
of which was checked; (c) two parameters of different element sizes (`double* out`, `const float*
in`) at one index were taken as one element updated in place. Now a forwarder's number must be
computed from its own numbers and constants, a launcher named by any other code of the part (or
by the harness besides its forwarder) refuses the tiers, and in place asks one element type."""

from __future__ import annotations

import pytest

from kernelloop.optimizers.base import NoMoreCandidates

from .conftest import FIXTURES
from .test_redteam_round109 import _first_proposal

ROUND = FIXTURES / "redteam" / "round139"
_HANDS = "which hands out ({}(y + 1) (not one of its own parameters)"
REFUSED = [("a_forwarder_integer_address/baseline.cu",
            "row tier: kernel smooth_rows is launched through launch_smooth_rows, " + _HANDS.format("size_t)")),
           ("a_forwarder_integer_address/variant_long/baseline.cu",
            "row tier: kernel smooth_rows is launched through launch_smooth_rows, " + _HANDS.format("long)")),
           ("a_forwarder_integer_address/variant_grid/baseline.cu",
            "grid tier: kernel smooth is launched through launch_scan, " + _HANDS.format("size_t)")),
           *[(f"b_launcher_reached_twice/{v}baseline.cu", "row tier: kernel smooth_rows is launched through "
              "run_smooth_rows, which other code of the part names too")
             for v in ("", "variant_two_statement_caller/")],
           ("c_in_place_different_element_sizes/baseline.cu", "row tier: kernel widen_rows is handed out and in from "
            "one variable (y)")]


@pytest.mark.parametrize("baseline, why", REFUSED)
def test_the_round_gets_no_tier_rewrite_and_says_why(baseline, why):
    try:
        proposal = _first_proposal((ROUND / baseline).read_text())
    except NoMoreCandidates as caught:
        assert why in str(caught), str(caught)
        return
    assert "tier" not in proposal.approach, proposal.approach
