"""Red team round 273 on the GPU (tests/fixtures/redteam/round273): a scratch buffer read back by the frozen code
through a name the text check does not follow (an alias) stops the run at fetch(): nothing compares scratch."""

from __future__ import annotations

import pytest

from kernelloop.errors import InputError

from ..conftest import FIXTURES
from .redteam import verify_shown as _verify

pytestmark = pytest.mark.gpu
ROUND = FIXTURES / "redteam" / "round273"


def test_round273_fetch_of_scratch_through_an_alias_stops_the_run(tmp_path):
    text = (ROUND / "scratch_printed_baseline.cu").read_text()
    aliased = text.replace("std::vector<float> parts = h.fetch(partial);",
                           "float* seen = partial;\n  std::vector<float> parts = h.fetch(seen);")
    assert aliased != text
    base = tmp_path / "aliased.cu"
    base.write_text(aliased)
    # the baseline itself fails to run, which verify says in one line (H100, 2026-12-06: "the baseline fails to
    # run: exit code 1: kernelloop harness: fetch() of a scratch buffer, ...")
    with pytest.raises(InputError, match=r"the baseline fails to run: .*fetch\(\) of a scratch buffer"):
        _verify(base, base, tmp_path)
