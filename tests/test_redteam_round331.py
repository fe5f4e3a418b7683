"""Red team round 331 (tools.ptx_writes on round 330's fix): one class left OPEN, one false refusal recorded.

OPEN: local memory ptxas writes itself (callee-saved registers a recursive callee saves in its frame, spills) is a
park no PTX statement shows. A kernel kept an address into its static live across a call to a recursive helper,
whose frame took the registers; a later leaf read that slot back from an asm `.local` at a negative offset and the
kernel wrote through it. The reading counts local memory only where the PTX parks an address there. The class is
round 73's (local memory read before it is written, here another function's stale frame); closing it needs a
must-analysis of the local bytes each function writes before it reads them. Recorded as a strict xfail.

False refusal recorded: a double set under a condition and used under the same condition (round 330's
`honest_corr` with a `double`): the 64-bit register is undefined on a path the branches' correlation rules out, and
8-byte values count (`--keep-state` is the way out; only modules with device statics are judged).
"""

from __future__ import annotations

import pytest

from kernelloop.verify.precision import compare_profiles

from .conftest import FIXTURES
from .redteam_statics import ptx_profile

pytestmark = pytest.mark.nvcc

ROUND = FIXTURES / "redteam" / "round331"


@pytest.mark.xfail(strict=True, reason="open: local memory ptxas writes (a callee's saved registers) read back")
def test_a_counter_kept_through_a_callees_saved_registers_is_refused(tmp_path):
    base, cand = ptx_profile(ROUND / "table_base.cu", tmp_path), ptx_profile(ROUND / "spill_counter.cu", tmp_path)
    assert [v.rule for v in compare_profiles(base, cand) if v.rule == "device-static"]


def test_a_double_set_and_used_under_one_condition_is_still_refused(tmp_path):
    # the recorded over-approximation: if this starts passing, the docs' residual list must change with it
    profile = ptx_profile(ROUND / "honest_double_corr.cu", tmp_path)
    assert profile.classes.get("device_static_written")
