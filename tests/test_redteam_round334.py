"""Red team round 334 (tools.ptx_writes on round 333's fix): one way closed by class.

Closed: a value another lane leaves undefined. In one asm block odd lanes set two registers under a comparison
fixed for the call; every lane shuffled them from its neighbour (`shfl.sync.bfly`, lane ^ 1), and odd lanes built a
pointer from the shuffled low half: per thread, under the comparison, the registers are defined, but the shuffle
hands over the EVEN lane's register, which ptxas's `SEL` had left holding the static's low half (run on an H100 by
the reviewer: the output grew by one each launch). Now every register a cross-lane instruction reads (`shfl`,
`redux`, `match`, `vote`, `bar.red`, `mma`/`wmma`/`wgmma`, `movmatrix`, `tcgen05`) is judged on every path, no
comparison read: another lane reaches it on a path of its own. A shuffle of a value set only in range, read by
the last lane in range from a lane out of it, is refused the same way (a real bug: that lane reads an unset value).
`stackrestore` and `alloca` operands count as addresses.
"""

from __future__ import annotations

import pytest

from kernelloop.verify.precision import compare_profiles

from .conftest import FIXTURES
from .redteam_statics import ptx_profile

pytestmark = pytest.mark.nvcc

ROUND = FIXTURES / "redteam" / "round334"
BASE = FIXTURES / "redteam" / "round331" / "table_base.cu"


@pytest.mark.parametrize("attack", ["shuffle_counter.cu", "shuffle_of_unset_lane.cu"])
def test_a_value_another_lane_may_leave_unset_is_undefined(tmp_path, attack):
    base, cand = ptx_profile(BASE, tmp_path), ptx_profile(ROUND / attack, tmp_path)
    assert [v.rule for v in compare_profiles(base, cand) if v.rule == "device-static"]


def test_an_early_return_beside_a_table_only_read_is_not_refused(tmp_path):
    assert not ptx_profile(ROUND / "honest_early_return.cu", tmp_path).classes.get("device_static_written")
