"""Red team round 331 (tools.ptx_writes on round 330's fix), closed by class; its false refusal fixed.

Closed: local memory ptxas writes itself (callee-saved registers a recursive callee saves in its frame, spills)
is a park no PTX statement shows. A kernel kept an address into its static live across a call to a recursive
helper, whose frame took the registers; a later leaf read that slot back from an asm `.local` at a negative
offset and the kernel wrote through it. The class is round 73's (local memory read before it is written, here
another function's stale frame). The fix reads ptxas's own report: where it stores registers in local memory (spill
stores) and any function reads local memory, every variable a body names counts as written; an in-bounds read of
a slot not yet written (the same stale frame) is the same class. Honest modules keep their tables: a run-time
indexed local array with no register saves, a call ptxas saves registers for with no local read.

False refusal recorded here, fixed in round 332: a double set under a condition and used under the same condition
(round 330's `honest_corr` with a `double`): the 64-bit register is undefined only on a path the branches'
correlation rules out.
"""

from __future__ import annotations

import pytest

from kernelloop.tools.nvcc import ptxas_saves_registers
from kernelloop.verify.precision import compare_profiles

from .conftest import FIXTURES
from .redteam_statics import ptx_profile

pytestmark = pytest.mark.nvcc

ROUND = FIXTURES / "redteam" / "round331"



@pytest.mark.parametrize("attack", ["spill_counter.cu", "inbounds_counter.cu"])
def test_a_counter_kept_through_a_callees_saved_registers_is_refused(tmp_path, attack):
    base, cand = ptx_profile(ROUND / "table_base.cu", tmp_path), ptx_profile(ROUND / attack, tmp_path)
    assert [v.rule for v in compare_profiles(base, cand) if v.rule == "device-static"]


@pytest.mark.parametrize("honest", ["honest_table_local_array.cu", "honest_table_spilling_call.cu"])
def test_a_table_only_read_stays_unwritten_where_ptxas_saves_nothing_or_nothing_reads_local_memory(tmp_path, honest):
    assert not ptx_profile(ROUND / honest, tmp_path).classes.get("device_static_written")


def test_ptxas_report_read_for_register_saves():
    report = ("ptxas info    : Function properties for _Z5heavyii\n"
              "    144 bytes stack frame, 144 bytes spill stores, 144 bytes spill loads\n"
              "ptxas info    : Function properties for _Z4peekv\n"
              "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n")
    assert ptxas_saves_registers(report)
    assert not ptxas_saves_registers(report.replace("144 bytes spill stores", "0 bytes spill stores"))
    assert ptxas_saves_registers("")  # no report: fail closed


def test_a_double_set_and_used_under_one_condition_is_not_refused(tmp_path):
    # round 331's recorded false refusal, fixed in round 332: the branch around the definition and the one around the
    # use test one comparison of values fixed for the call, so no path reads the double undefined
    profile = ptx_profile(ROUND / "honest_double_corr.cu", tmp_path)
    assert not profile.classes.get("device_static_written")
