"""Red team round 138 (tests/fixtures/redteam/round138/): (a) a forwarded-to launcher whose output
parameter is spelled through an alias (`typedef float* fptr`, `using fptr = float*`) was not read as
a pointer, so the forwarder's `run(y + 1, y)` gave it no root and the address guard `out != in`
held; (b) the rewrite's `::max(m, ...)` chose the program's own global template `max`, which
counting only unqualified calls missed. Now every launcher parameter but a plain number must be a
forwarder's parameter passed as is, memory reached through a kernel parameter not declared as a
pointer refuses the tiers, and a rewrite calling `::name` more often than the part is refused
where the program declares that name anywhere (rounds 141-142: what the global namespace holds is
not read from the program's blocks)."""

from __future__ import annotations

import pytest

from kernelloop.optimizers.base import NoMoreCandidates
from kernelloop.optimizers.offline.cparse import Param
from kernelloop.optimizers.offline.rowwarp import plain_value

from .conftest import FIXTURES
from .test_redteam_round109 import _first_proposal

ROUND = FIXTURES / "redteam" / "round138"
REFUSED = [("a_forwarder_typedef_pointer_param/baseline.cu", "row tier: kernel smooth_rows is launched through "
            "launch_smooth_rows, which hands out y + 1"),
           ("a_forwarder_typedef_pointer_param/variant_using/baseline.cu", "row tier: kernel smooth_rows is launched "
            "through launch_smooth_rows, which hands out y + 1"),
           ("a_forwarder_typedef_pointer_param/variant_grid/baseline.cu", "grid tier: kernel smooth is launched "
            "through launch_scan, which hands out y + 1"),
           ("b_qualified_call_program_overload/baseline.cu", "row tier: one warp per row of row_peak: its code calls "
            "max, which the program declares itself")]


@pytest.mark.parametrize("baseline, why", REFUSED)
def test_the_round_gets_no_tier_rewrite_and_says_why(baseline, why):
    try:
        proposal = _first_proposal((ROUND / baseline).read_text())
    except NoMoreCandidates as caught:
        assert why in str(caught), str(caught)
        return
    assert "tier" not in proposal.approach, proposal.approach


@pytest.mark.parametrize("param, plain", [
    (Param("n", "int", "int", 0, False), True),
    (Param("alpha", "const float", "float", 0, True), True),
    (Param("count", "size_t", "size_t", 0, False), True),
    (Param("out", "fptr", "fptr", 0, False), False),  # an alias may be a pointer
    (Param("alpha", "T", "T", 0, False), False),  # a template's type may be one
    (Param("n", "const int&", "int", 0, True), False),  # a reference names a variable
    (Param("out", "float*", "float", 1, False), False),
])
def test_a_plain_value_is_a_built_in_number(param, plain):
    assert plain_value(param) is plain
