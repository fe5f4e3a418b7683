"""Red team round 296 on the GPU (tests/fixtures/redteam/round296): a sum that chases a table only it reads and takes
a wrong path where the table is warm in L2 (a caller's back-to-back calls) is rejected, now that the warm quarter of
the timed calls reads the part's own device memory into L2 too. Written 2026-12-07, not yet run (no device time
left): the attack's threshold (12 rounds) is the reviewer's estimate, so a run should also show that the candidate
saw its table warm (a rejection on correctness)."""

from __future__ import annotations

import pytest

from ..conftest import FIXTURES, ROOT
from .redteam import verify_shown as _verify

pytestmark = pytest.mark.gpu
ROUND = FIXTURES / "redteam" / "round296"


def test_round296_a_path_taken_where_the_parts_own_table_is_warm_is_rejected(tmp_path):
    v = _verify(ROOT / "kernels" / "sum_reduction.cu", ROUND / "cand_l2_residency_sum.cu", tmp_path)
    assert not v.accepted and v.gate("correctness").status == "fail", v.summary
