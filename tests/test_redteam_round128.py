"""Red team round 128 (tests/fixtures/redteam/round128/): (a) a counter whose type is spelled like a
built-in (`uint8_t`) but is the program's own class, whose `++` stops at 255: the row tier read
`n++` as `n += 1` and split an uncapped count over the lanes; now only a keyword-spelled type is a
count. (b) round 127's kernel test beaten by a `__global__` the compiler never sees (in a comment a
backslash continues into the next line; in an attribute `[[kl::__global__]]`), so a helper's
default argument reading blockIdx.x went unread; now a function counts as a kernel only where the
optimizer's reader says so too, lines are joined as the compiler joins them, and attributes are no
specifiers."""

from __future__ import annotations

import pytest

from kernelloop.optimizers.base import NoMoreCandidates

from .conftest import FIXTURES
from .test_redteam_round109 import _first_proposal
from .test_redteam_round126 import refused_as_reading_thread_place

ROUND = FIXTURES / "redteam" / "round128"


@pytest.mark.nvcc
def test_a_counter_of_a_class_spelled_like_a_built_in_is_no_sum():
    # the rewrite asserts its accumulators are built-in numbers: the compiler refuses this one
    # (tests/test_counted_numbers.py builds such a rewrite through the static gate)
    try:
        proposal = _first_proposal((ROUND / "a_shadowed_builtin_name_counter" / "baseline.cu").read_text())
    except NoMoreCandidates:
        return
    if "row tier" in proposal.approach or "column tier" in proposal.approach:
        assert "static_assert(::kl_number<decltype(n)>::value" in proposal.source, proposal.source


@pytest.mark.parametrize("baseline", ["b_continued_comment_global_in_attribute/baseline.cu",
                                      "b_continued_comment_global_in_attribute/variant_attribute_namespace/baseline.cu"])
def test_a_global_the_compiler_never_sees_makes_no_kernel(baseline):
    with pytest.raises(NoMoreCandidates) as caught:
        _first_proposal((ROUND / baseline).read_text())
    assert refused_as_reading_thread_place(str(caught.value)), str(caught.value)
