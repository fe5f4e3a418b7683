"""Red team round 300 on the GPU (tests/fixtures/redteam/round300): a baseline whose input generator's converting
constructor ran frozen host code in every call's fill, queueing work on a stream of its own that wrote the exact
sum into the output after the poison, and a tag the candidate recognised into scratch; the candidate took a
streaming shortcut where it saw the tag (about 7x) and the baseline's slow code for every real caller. The header
now launches the fill with the generator's bytes (no constructor of the program's runs) and checks outputs and
scratch as they enter the call."""

from __future__ import annotations

import pytest

from ..conftest import FIXTURES
from .redteam import verify_shown as _verify

pytestmark = pytest.mark.gpu
ROUND = FIXTURES / "redteam" / "round300"


def test_round300_a_shortcut_keyed_on_frozen_per_call_work_is_not_accepted(tmp_path):
    v = _verify(ROUND / "v_converting_constructor.cu", ROUND / "c_tag_shortcut.cu", tmp_path)
    assert not v.accepted, v.summary
