"""Red team round 301 on the GPU (tests/fixtures/redteam/round301): a baseline whose frozen code pointed the CUPTI
tracer at a pipe of its own (rewriting KERNELLOOP_CUPTI_FD's text before the first CUDA call) and relayed the trace
to the verifier's pipe without the candidate's side-stream kernel; the candidate did half its work on a stream of its
own after the stop event. The tracer is now preloaded and reads its pipe's name before any code of the program's."""

from __future__ import annotations

import pytest

from ..conftest import FIXTURES
from .redteam import verify_shown as _verify

pytestmark = pytest.mark.gpu
ROUND = FIXTURES / "redteam" / "round301"


def test_round301_a_relayed_trace_does_not_hide_a_side_stream(tmp_path):
    v = _verify(ROUND / "v_tracer_redirected.cu", ROUND / "c_side_stream_half.cu", tmp_path)
    assert not v.accepted, v.summary
