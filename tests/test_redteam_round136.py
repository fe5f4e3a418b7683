"""Red team round 136 (tests/fixtures/redteam/round136/): (a) an inner loop stored a neighbour's
element (`c + k`), (c) a loaded value moved the stored element (`c + moved[...]`): two lanes stored
one slot; now a row loop's stored element moves with its counter and otherwise only with what no
iteration changes (the row's index, parameters, constants). (b) The row tier took an in-place
filter handed one buffer as input and output (`in[c - 1]` read what a lane had just written), and
(e) the grid tier a launcher local made from the buffer at an offset (`float* next = y + 1`) or a
pointer inside a struct: now both tiers refuse a stored buffer and another parameter's from one
launcher variable (its locals read through) unless the same buffer updated in place, the guard asks
the addresses differ, and the grid tier reads no memory it cannot name. (d) An index counted down
(`G - 1`) wraps in CUDA's 32-bit arithmetic where the rewrite's would not: only offsets up are read."""

from __future__ import annotations

import pytest

from kernelloop.optimizers.base import NoMoreCandidates

from .conftest import FIXTURES
from .test_redteam_round109 import _first_proposal

ROUND = FIXTURES / "redteam" / "round136"
CASES = [("a_inner_loop_stores_next_element/baseline.cu", "row tier: kernel spread stores out at an element that "
          "moves with more than the counter"),
         ("b_row_tier_aliased_params/baseline.cu", "row tier: kernel smooth_rows is handed out and in from one variable"),
         ("c_data_dependent_store_offset/baseline.cu", "row tier: kernel make_room stores out at an element that moves"),
         ("d_negative_offset_wide_signed_index/baseline.cu", "row tier: kernel center_rows declares no one-dimensional"),
         ("e_grid_launcher_local_offset_alias/baseline.cu", "grid tier: kernel smooth is handed out and in from one "
          "variable (y)"),
         ("e_grid_launcher_local_offset_alias/variant_struct_member/baseline.cu",
          "grid tier: kernel smooth reads memory it cannot name")]


@pytest.mark.parametrize("baseline, why", CASES)
def test_the_round_gets_no_tier_rewrite_and_says_why(baseline, why):
    try:
        proposal = _first_proposal((ROUND / baseline).read_text())
    except NoMoreCandidates as caught:
        assert why in str(caught), str(caught)
        return
    if baseline.startswith("d_") and proposal.approach.startswith("loop tier:"):
        # the loop tier keeps (d)'s index as written, in the built-ins' own 32-bit unsigned arithmetic (the
        # baseline's thread read from uint3/dim3 values): the wrap the row tier lost is kept, row -1 never taken
        assert "long long row = kl_bid.x * kl_ob.x + kl_tid.x - 1;" in proposal.source
        assert "const uint3 kl_tid" in proposal.source and "const dim3 kl_og, const dim3 kl_ob" in proposal.source
        return
    assert "tier" not in proposal.approach, proposal.approach


def test_an_in_place_row_update_is_still_taken_and_distinct_buffers_are_asked_to_differ():
    text = (ROUND / "b_row_tier_aliased_params" / "baseline.cu").read_text()
    start = text.index("// kernelloop: editable begin")
    body = text[start:text.index("// kernelloop: editable end")]
    # the same filter without the neighbour's read is an update in place: taken, no address condition
    in_place = text.replace(body, body.replace("in[r * cols + c - 1]", "in[r * cols + c]"))
    proposal = _first_proposal(in_place)
    assert "row tier" in proposal.approach and "!= (const void*)" not in proposal.source
    # two launcher parameters (the harness's buffers): taken, with the guard asking they differ
    apart = text.replace(body, body.replace("void launch_smooth_rows(float* y, int rows, int cols) {",
                                            "void launch_smooth_rows(float* y, const float* x, int rows, int cols) {")
                         .replace("(y, y, rows, cols)", "(y, x, rows, cols)"))
    apart = apart.replace("launch_smooth_rows(y, rows, cols);", "launch_smooth_rows(y, x, rows, cols);")
    proposal = _first_proposal(apart)
    assert "row tier" in proposal.approach and "(const void*)(y) != (const void*)(x)" in proposal.source
