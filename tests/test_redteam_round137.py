"""Red team round 137 (tests/fixtures/redteam/round137/): (a) a launcher pointer held where the
launcher's locals are not read through (`next = y; next += 1;`, a global, a struct's field, an array
element) passed the round 136 check, leaving only an address guard that `y + 1 != y` satisfies; (d)
a forwarder handed the launcher `y + 1` and `y`; (b) the row tier's "in place" took two parameters
each accessed at *an* element the loop stores; (c) a read before a row loop of an element the loop
stores raced with the lane that stores it. Now a buffer is named only by a parameter of the
launcher (through its locals) or of its forwarder, passed on as is; in place means one element, the
same for every access; and each split map loop starts with every lane at __syncwarp()."""

from __future__ import annotations

import pytest

from kernelloop.optimizers.base import NoMoreCandidates

from .conftest import FIXTURES
from .test_redteam_round109 import _first_proposal

ROUND = FIXTURES / "redteam" / "round137"
REFUSED = [("a_launcher_local_moved_after_declaration/baseline.cu", "row tier: kernel smooth_rows is handed out "
            "through next, which is not a parameter of its launcher"),
           *[(f"a_launcher_local_moved_after_declaration/variant_{v}/baseline.cu", "grid tier: kernel smooth is handed "
              f"out through {'g_next' if v == 'grid_global' else 'next'}, which is not a parameter")
             for v in ("grid_g_array", "grid_g_inc", "grid_g_struct", "grid_g_twice", "grid_global")],
           ("b_row_in_place_union_of_elements/baseline.cu", "row tier: kernel spread_rows is handed cur and spill from "
            "one variable (y)"),
           ("d_forwarding_launcher_makes_overlap/baseline.cu", "row tier: kernel smooth_rows is launched through "
            "launch_smooth_rows, which hands out y + 1"),
           ("d_forwarding_launcher_makes_overlap/variant_grid/baseline.cu", "grid tier: kernel smooth is launched "
            "through launch_scan, which hands out y + 1")]


@pytest.mark.parametrize("baseline, why", REFUSED)
def test_the_round_gets_no_tier_rewrite_and_says_why(baseline, why):
    try:
        proposal = _first_proposal((ROUND / baseline).read_text())
    except NoMoreCandidates as caught:
        assert why in str(caught), str(caught)
        return
    assert "tier" not in proposal.approach, proposal.approach


def test_a_read_before_a_map_loop_is_done_by_every_lane_before_any_store():
    proposal = _first_proposal((ROUND / "c_prologue_reads_stored_element" / "baseline.cu").read_text())
    assert "row tier" in proposal.approach
    assert "{ ::__syncwarp(); for (int c = (0) + kl_lane;" in proposal.source, proposal.source
