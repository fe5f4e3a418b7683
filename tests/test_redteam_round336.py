"""Red team round 336 (tools.ptx_writes on round 335's fix, 25 minutes): one way closed by class.

Closed: `setp.lt.f16x2 p|q, a, b` sets p from the low halves and q from the high halves, two comparisons, both false
where both halves are not below; the reading took q as the opposite of p (as for one number), so a value set under
p and read under !q read as defined. ptxas (`HSETP2.LT.AND P1, P0`, then `SEL`s) left the undefined pointer in the
registers tab's address had been read through (its top half shown in the SASS; the reviewer did not get the low
half there too). Now a pair type's two predicates are each their own comparison. The candidate is refused by
`reduced_precision` too, but a baseline computing in halves would not refuse it.
"""

from __future__ import annotations

import pytest

from kernelloop.verify.precision import compare_profiles

from .conftest import FIXTURES
from .redteam_statics import ptx_profile

pytestmark = pytest.mark.nvcc

BASE = FIXTURES / "redteam" / "round331" / "table_base.cu"


def test_the_two_predicates_of_a_half_pair_comparison_are_no_opposites(tmp_path):
    base = ptx_profile(BASE, tmp_path)
    cand = ptx_profile(FIXTURES / "redteam" / "round336" / "half_pair_counter.cu", tmp_path)
    assert [v.rule for v in compare_profiles(base, cand) if v.rule == "device-static"]
