"""A `continue` in an item loop (skip the target class, skip a NaN, skip a negative entry) ends one
iteration: the row and column tiers, whose loops keep their step in the header, split such loops
like any other; a `break` (which ends the loop) still leaves the kernel unread."""

from __future__ import annotations

import pytest

from kernelloop.optimizers.base import NoMoreCandidates

from .conftest import FIXTURES
from .test_redteam_round109 import _first_proposal

LOOPS = FIXTURES / "continue_loops"


@pytest.mark.parametrize("program, approach, kept", [
    ("hinge_rows_kl.cu", "row tier: one warp per row of hinge_rows_kernel",
     "for (int v = (0) + kl_lane; v < V; v += 32) {\n    if (v == t) continue;"),
    ("relu_rows_kl.cu", "row tier: one warp per row of relu_rows_kernel", "if (x != x) continue;"),
    ("col_possum_kl.cu", "column tier: 32 threads per item of col_possum",
     "for (int r = (0) + threadIdx.y; r < R; r += 32) {\n    float v = x[r * C + c];\n    if (v < 0.0f) continue;"),
])
def test_a_loop_that_skips_iterations_is_split(program, approach, kept):
    proposal = _first_proposal((LOOPS / program).read_text())
    assert proposal.approach == approach
    assert kept in proposal.source, proposal.source


def test_a_loop_that_ends_early_is_not():
    text = (LOOPS / "hinge_rows_kl.cu").read_text().replace("if (d <= 0.0f) continue;", "if (d <= 0.0f) break;")
    try:
        proposal = _first_proposal(text)
    except NoMoreCandidates as caught:
        assert "row tier: kernel hinge_rows_kernel" in str(caught)
        return
    assert "tier" not in proposal.approach, proposal.approach
