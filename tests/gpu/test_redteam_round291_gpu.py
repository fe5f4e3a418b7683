"""Red team round 291 on the GPU (tests/fixtures/redteam/round291): a baseline's frozen code rewrote the records
file after the run, so a wrong candidate matched. The records now go through a pipe the verifier reads while the
program runs: the file forger finds nothing to rewrite (the wrong candidate is judged on what the header wrote),
and a forger appending to the pipe after the run voids the baseline's records."""

from __future__ import annotations

import pytest

from kernelloop.errors import InputError

from ..conftest import FIXTURES
from .redteam import verify_shown as _verify

pytestmark = pytest.mark.gpu
ROUND = FIXTURES / "redteam" / "round291"


@pytest.mark.parametrize("baseline", ["v_forge_after_run.cu", "v_forge_static_dtor.cu"])
def test_round291_a_file_forger_leaves_a_wrong_candidate_judged_on_the_headers_records(baseline, tmp_path):
    # H200, 2026-12-07: rejected at correctness, where the packed layout misaligns its float4 loads ("misaligned
    # address"); before the pipe, the forged records matched (argued, round 291)
    v = _verify(ROUND / baseline, ROUND / "cand" / "c_approx_sum.cu", tmp_path)
    assert not v.accepted and v.gate("correctness").status == "fail", v.summary


def test_round291_records_appended_to_the_pipe_after_the_run_void_the_baseline(tmp_path):
    base = ROUND / "v_forge_pipe_after_run.cu"
    with pytest.raises(InputError, match=r"the baseline fails to run: its records: .*other code"):
        _verify(base, base, tmp_path)
