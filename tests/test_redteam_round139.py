"""Red team round 139 (tests/fixtures/redteam/round139/): (a) a forwarder handed the launcher an
address as a number (`(size_t)(y + 1)`, read back as `float*`), which round 138's "plain number"
let through with no root; (b) a launcher reached from the harness by two paths, only the first
of which was checked; (c) two parameters of different element sizes (`double* out`, `const float*
in`) at one index were taken as one element updated in place. Now a forwarder's number must be
computed from its own numbers and constants, a launcher named by any other code of the part (or
by the harness besides its forwarder) refuses the tiers, and in place asks one element type."""

from __future__ import annotations

import pytest

from kernelloop.errors import InputError
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
    except InputError as caught:  # (c)'s frozen conversion: since round 275 no program at all (round 279: its
        # launcher's parameter of a frozen type with a conversion is refused first)
        assert "of a frozen type that is not plain" in str(caught), str(caught)
        return
    except NoMoreCandidates as caught:
        assert why in str(caught), str(caught)
        return
    assert "tier" not in proposal.approach, proposal.approach


_FORWARDED = """
__global__ void scale_rows(float* out, const float* in, int rows, int cols) {
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  for (int c = 0; c < cols; ++c) out[r * cols + c] = 2.0f * in[r * cols + c];
}
template <typename T>
void run_scale_rows(T* out, const T* in, int rows, int cols) {
  scale_rows<<<(rows + 127) / 128, 128>>>(out, in, rows, cols);
}
DECLARATION
void launch_scale_rows(float* out, const float* in, int rows, int cols) { run_scale_rows<float>(out, in, rows, cols); }
"""


@pytest.mark.parametrize("declaration, refused", [
    ("template void run_scale_rows<float>(float*, const float*, int, int);", False),  # an explicit instantiation
    ("template <typename T> void run_scale_rows(T*, const T*, int, int);", False),  # a declaration
    ("static auto kl_keep = &run_scale_rows<float>;", True),  # its address, callable from anywhere
    ("inline void again(float* y, int r, int c) { run_scale_rows<float>(y + 1, y, r, c); }", True),
])
def test_a_declaration_of_the_launcher_is_no_second_caller(declaration, refused):
    from kernelloop.optimizers.offline.launcher import read_editable
    from kernelloop.optimizers.offline.rowwarp import NotARowKernel, _forwarded_arguments

    part = read_editable(_FORWARDED.replace("DECLARATION", declaration), "launch_scale_rows(out, in, rows, cols);",
                         ["void launch_scale_rows(float* out, const float* in, int rows, int cols)"])
    (lau,) = part.launchers
    if refused:
        with pytest.raises(NotARowKernel, match="which other code of the part names too"):
            _forwarded_arguments(lau, part)
    else:
        assert _forwarded_arguments(lau, part) == {"out": {"out"}, "in": {"in"}, "rows": {"rows"}, "cols": {"cols"}}
