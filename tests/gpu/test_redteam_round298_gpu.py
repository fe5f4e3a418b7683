"""Red team round 298 on the GPU (tests/fixtures/redteam/round298): a baseline whose frozen input generator holds
the output's address and writes the exact sum there while the input is filled, so a candidate that never writes
the output matched. The header now fills every input, then stresses them, then poisons the outputs (a generator's
writes there are overwritten), and in the calls that keep the last outputs it copies outputs and scratch aside
before the fills and back after them (round 299). Written 2026-12-07, not yet run (no device time left)."""

from __future__ import annotations

import pytest

from ..conftest import FIXTURES
from .redteam import verify_shown as _verify

pytestmark = pytest.mark.gpu
ROUND = FIXTURES / "redteam" / "round298"


def test_round298_an_output_written_by_an_input_generator_is_not_the_candidates(tmp_path):
    v = _verify(ROUND / "v_generator_writes_output.cu", ROUND / "c_never_writes.cu", tmp_path)
    assert not v.accepted and v.gate("correctness").status == "fail", v.summary
