"""Red team round 167 (tests/fixtures/redteam/round167/): round 166's first fix rewrote every header's
`__builtin_expect(e, v)` as `((e) ? (v) : (v))` to drop assertions' failure paths, which changed what
the builtin returns everywhere in headers. A part read it through libstdc++'s string move-assignment
(`if (__builtin_expect(&__str != this, true))`, a self-move with a character-traits type of its own):
a constant 1 in every real build and 0 in both builds the assertion comparison made, by which it
multiplied its comparator's count; the two builds compiled alike and a real debug build halved the row.

Fixed by class: only the assertion macros change (shim headers found first on the include path
include the real `cuda/std/__cccl/assert.h` and `bits/c++config.h` and redefine `_CCCL_ASSERT_IMPL_*`
and `__glibcxx_assert_impl` right after them); no value a header computes differs between the builds
compared and the real ones. The reviewer's unordered_map probe (refused already) is refused too."""

from __future__ import annotations

import pytest

from .conftest import FIXTURES
from .test_redteam_round166 import _debug_differences, refused_as_a_debug_build_difference

PARTS = FIXTURES / "redteam" / "round167" / "parts"


@pytest.mark.nvcc
def test_a_headers_hint_read_by_the_part_no_longer_tells_the_builds_apart():
    refused_as_a_debug_build_difference(PARTS / "neutral_string_cand.cu")


@pytest.mark.nvcc
@pytest.mark.parametrize("part, switches", [
    ("neutral_string_glibcxx_part.cu", ("_GLIBCXX_ASSERTIONS",)),
    ("failed_hashtable_probe_part.cu", ("DEBUG",)),
])
def test_the_other_forms_are_refused(part, switches):
    found, differing = _debug_differences(PARTS / part)
    assert found == switches and differing, (found, differing)
