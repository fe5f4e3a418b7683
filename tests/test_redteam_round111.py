"""Red team round 111 (tests/fixtures/redteam/round111/), the same class as rounds 108-110: a
reading right only at the sizes the harness runs. (a) The row tier stepped a `short` loop counter
by 32 past its bound (it wrapped at 32737 columns); (b) the histogram family read `i < n && i < (1
<< 29)` as `i < n`, and (b2) a grid capped at 2^21 blocks as reaching every byte."""

from __future__ import annotations

import pytest

from .conftest import FIXTURES, ROOT
from .test_redteam_round107 import _verdict
from .test_redteam_round109 import _first_proposal

ROUND = FIXTURES / "redteam" / "round111"
HISTOGRAM = (ROOT / "kernels" / "histogram.cu").read_text()


@pytest.mark.parametrize("folder", ["b_histogram_atomic_condition", "b2_histogram_capped_grid"])
def test_a_histogram_that_counts_part_of_its_bytes_is_no_histogram(folder):
    verdict = _verdict((ROUND / folder / "baseline.cu").read_text(), "launch_histogram")
    assert verdict.match is None
    reasons = " ".join(m.reason for m in verdict.mismatches if m.family == "histogram")
    assert "a condition selects" in reasons or "reach every element" in reasons, reasons


def test_the_bundled_histogram_is_still_one():
    verdict = _verdict(HISTOGRAM, "launch_histogram")
    assert verdict.match is not None and verdict.match.family == "histogram", verdict.mismatches


def test_a_short_loop_counter_gets_no_row_rewrite():
    text = (ROUND / "a_rowwarp_short_counter" / "baseline.cu").read_text()
    try:
        proposal = _first_proposal(text)
    except Exception as e:  # no template fits
        assert "narrower than int" in str(e), str(e)
        return
    assert "row tier" not in proposal.approach and "column tier" not in proposal.approach, proposal.approach
