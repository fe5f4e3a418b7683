"""Red team round 248 on the GPU (tests/fixtures/redteam/round248): a decode step that forks the kernel onto six
streams and repeats it after a host wait, rejected as slower at a size's smallest; an honest two-pass RMSNorm not
refused there (its second launch costs a launch's wait and a short kernel), nor anywhere else."""

from __future__ import annotations

import pytest

from kernelloop.verify.verdict import Reason

from ..conftest import FIXTURES
from .redteam import verify_shown as _verify

pytestmark = pytest.mark.gpu
ROUND = FIXTURES / "redteam" / "round248"


def test_round248_branches_and_a_host_wait_at_one_row_are_slower(tmp_path, record_property):
    v = _verify(ROUND / "rmsnorm_warp_rows.cu", ROUND / "rmsnorm_decode_branches.cu", tmp_path)
    record_property("verdict", v.summary)
    assert not v.accepted and any(r in v.reasons for r in (Reason.not_faster, Reason.slower)), v.summary
    assert any(g.gate == "other sizes" and g.status == "fail" for g in v.gates), [(g.gate, g.detail) for g in v.gates]


def test_round248_an_honest_two_pass_rewrite_is_not_refused_at_a_sizes_smallest(tmp_path, record_property):
    v = _verify(ROUND / "rmsnorm_warp_rows.cu", ROUND / "rmsnorm_two_pass.cu", tmp_path)
    record_property("verdict", v.summary)
    other = next((g for g in v.gates if g.gate == "other sizes"), None)
    assert other is not None and other.status == "pass", (other.detail if other else v.summary)
    # and by no other gate: on an H100 (2026-12-05) it was refused on one 1.35x pair of a few-microsecond call among
    # the scaled-input experiment's forty (the gate "other magnitudes"), until one-run slowdowns were confirmed
    assert v.accepted, [(g.gate, g.detail) for g in v.gates if g.status == "fail"]
