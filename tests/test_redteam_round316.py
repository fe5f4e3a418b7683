"""Red team round 316 (the verifier's `device-static` rule for written module memory, and the shared
reading tools.ptx_writes).

Closed by class: (1) the rule judged only statics and strings, so a candidate kept a call counter in
libdevice's own Payne-Hanek table (`__cudart_i2opi_f`, unregistered, in every module with a
non-fast `sinf`): every written module variable is judged now, and where the object is read, those
its registration names are left to the state check; (2) a baseline that hands its strings to a
non-inlined `report(const char*, int)` counted as writing them (a call's argument was an escape), so
a candidate's own string used as a counter passed as "the baseline writes it too": an address
handed to a function the module defines is followed there, scoped to the block that declares the
call's parameters. False refusal fixed: a binary search over a constant table (`first - knots`, the
distance of two addresses in one object, is no address). Open (docs/verifier.md): a registered
neighbour's address stepped out of bounds onto a static (`b3_neighbour_*`): the reading follows
names, not bounds; closing it needs the state check to read the unregistered objects too.
"""

from __future__ import annotations

import pytest

from kernelloop.verify.precision import compare_profiles

from .conftest import FIXTURES
from .redteam_statics import ptx_profile

pytestmark = pytest.mark.nvcc

ROUND = FIXTURES / "redteam" / "round316"


def _profile(name: str, tmp_path):
    return ptx_profile(ROUND / f"{name}.cu", tmp_path)


@pytest.mark.parametrize("stem", ["b1_libdevice_table", "b2_reported_strings"])
def test_a_candidate_writing_memory_the_baseline_only_reads_is_refused(stem, tmp_path):
    base, cand = _profile(f"{stem}_base", tmp_path), _profile(f"{stem}_cand", tmp_path)
    assert "device_static_written" not in base.classes  # the baseline only reads its table and strings
    found = [v for v in compare_profiles(base, cand) if v.rule == "device-static"]
    assert found and "which the baseline only reads" in found[0].detail


def test_a_binary_search_over_a_constant_table_is_no_write(tmp_path):
    base, cand = _profile("fr1_knots_base", tmp_path), _profile("fr1_knots_binary_search", tmp_path)
    assert "device_static_written" not in cand.classes
    assert not [v for v in compare_profiles(base, cand) if v.rule == "device-static"]
