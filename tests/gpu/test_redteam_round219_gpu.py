"""Red team round 219 on the GPU (tests/fixtures/redteam/round219): a rewrite fast only at the timed
size and 1.33x slower at every other one, and one right only on init's guessed integer range [0, 16),
both rejected; the honest full-grid rewrite accepted."""

from __future__ import annotations

import pytest

from kernelloop.config import Settings, VerifySettings
from kernelloop.verify.gate import verify_files
from kernelloop.verify.verdict import Reason

from ..conftest import FIXTURES

pytestmark = pytest.mark.gpu
CASE = FIXTURES / "redteam" / "round219"


def _verify(candidate: str, tmp_path):
    return verify_files(CASE / "base.cu", CASE / candidate,
                        Settings(cache_dir=tmp_path / "cache", verify=VerifySettings(memcheck="off")))


def test_round219_slower_at_every_other_size_is_rejected(tmp_path, record_property):
    v = _verify("size_keyed_slow.cu", tmp_path)
    record_property("verdict", v.summary)
    print(f"\n{v.reasons} {v.summary}\n{v.durations}\n{v.gate('other sizes').detail}")
    assert not v.accepted and Reason.not_faster in v.reasons, v.summary
    assert v.gate("other sizes").status == "fail"


def test_round219_right_only_on_the_guessed_range_is_rejected(tmp_path, record_property):
    v = _verify("low_nibble.cu", tmp_path)
    record_property("verdict", v.summary)
    print(f"\n{v.reasons} {v.summary}\n{v.durations}\n{v.gate('correctness').detail}")
    assert not v.accepted and Reason.correctness in v.reasons, v.summary
    assert "drawn from every" in v.gate("correctness").detail


def test_round219_honest_full_grid_is_accepted(tmp_path, record_property):
    v = _verify("honest_full_grid.cu", tmp_path)
    record_property("verdict", v.summary)
    wider = v.gate("wider values")
    print(f"\n{v.summary}\n{v.durations}\n{v.gate('correctness').detail}\n{v.gate('other sizes').detail}\n"
          f"{wider.detail if wider else 'no wider values gate'}")
    assert v.accepted, v.summary
    assert wider is not None and wider.status == "pass"  # round 234: its speed on wide words is judged too
    assert "guessed-range integer inputs drawn wide" in v.gate("correctness").detail
