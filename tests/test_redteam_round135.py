"""Red team round 135 (tests/fixtures/redteam/round135/), on the grid tier: (a) the launcher handed
one buffer as both the stored array and an input read at another iteration's element (a running
sum on one thread); (b) a copy of the stride (or the start) brought the grid into the loop's body;
(c) the rewritten launch evaluated its size argument three times (`n--`, a host helper); (d) a
local array declared before the loop carried values between iterations. Now: a stored buffer and
another parameter's come from one variable only as an update in place, and the guard asks that
the two addresses differ when the launch runs; every name computed from the thread's coordinates,
directly or through another, is read only in the loop's header; the launch's arguments may only
compute values; a local array stored in the loop is declared inside it, and no local is static."""

from __future__ import annotations

import pytest

from kernelloop.optimizers.base import NoMoreCandidates

from .conftest import FIXTURES
from .test_redteam_round109 import _first_proposal

ROUND = FIXTURES / "redteam" / "round135"
CASES = [("a_aliased_params_carry/baseline.cu", "is handed out and in from one variable"),
         ("b_copy_of_stride_reads_grid/baseline.cu", "reads the loop's start or stride inside the loop"),
         ("b_copy_of_stride_reads_grid/variant_copy_of_start/baseline.cu", "reads the loop's start or stride"),
         ("c_launch_argument_evaluated_three_times/baseline.cu", "does more than compute a value (n--)"),
         ("c_launch_argument_evaluated_three_times/variant_host_call_argument/baseline.cu",
          "does more than compute a value (take(&left))"),
         ("d_local_array_outside_loop_carries/baseline.cu", "neither a parameter's array nor an array declared")]


@pytest.mark.parametrize("baseline, why", CASES)
def test_the_round_gets_no_grid_rewrite_and_says_why(baseline, why):
    try:
        proposal = _first_proposal((ROUND / baseline).read_text())
    except NoMoreCandidates as caught:
        assert why in str(caught), str(caught)
        return
    assert "grid tier" not in proposal.approach, proposal.approach
