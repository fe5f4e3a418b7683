"""Red team round 69 (tests/fixtures/redteam/round69/REPORT.md), on round 68's fix: one route. The
assert comparison redefines `assert` after the part's last #include; `#pragma push_macro("assert")`
before an include and `pop_macro` after it put `<cassert>`'s own back, so both comparison builds
evaluated the condition. Saving and restoring macros is refused (it would undo every definition the
verifier places after the part's includes, the frozen macros' pinned names too)."""

from __future__ import annotations

import pytest

from kernelloop.verify.policy import scan_source

from .conftest import FIXTURES
from .test_shipped import _static

ROUND69 = FIXTURES / "redteam" / "round69"


@pytest.mark.parametrize("code", [
    '#pragma push_macro("assert")\n#include <climits>\n#pragma pop_macro("assert")\n',
    '_Pragma("push_macro(\\"CUDA_CHECK\\")")\n',
])
def test_saving_and_restoring_a_macro_is_refused(code):
    assert "macro" in {v.rule for v in scan_source(code)}


@pytest.mark.nvcc
def test_the_rounds_route_is_refused():
    assert _static("sum_reduction.cu", ROUND69 / "f1_assert_push_pop_macro" / "candidate.cu").violations
