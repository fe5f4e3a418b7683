"""Red team round 294 (tests/fixtures/redteam/round294/REPORT.md): two candidates whose result depends on a GPU
clock read inside toolkit routines the part's spelling did not show (`awbarrier::timed_wait`, libcu++'s
`__cccl_thread_poll_with_backoff` with its duration type taken from the routine's signature): a block that waits
longer than a millisecond skips its input and rescales. The clock exemption for the toolkit's own waits is gone:
every clock read the baseline lacks is refused (fail closed; the cost, an honest cuda::barrier wait refused, is in
docs/verifier.md)."""

from __future__ import annotations

import pytest

from .conftest import FIXTURES
from .test_shipped import _static

ROUND = FIXTURES / "redteam" / "round294"


@pytest.mark.nvcc
@pytest.mark.parametrize("candidate", ["cand_clock_awbarrier_sum.cu", "cand_clock_backoff_sum.cu"])
def test_round294_a_clock_read_inside_a_toolkit_wait_is_refused(candidate):
    rules = {v.rule for v in _static("sum_reduction.cu", ROUND / candidate).violations}
    assert "device-clock" in rules, rules
