"""Red team round 68 (tests/fixtures/redteam/round68/REPORT.md), on round 67's fix: four routes and two
false refusals, after three rounds in a row got past a syntax reading of asserts. Asserts are now
decided by the compiler: the part built with every assert's condition evaluated and discarded
(`((void)(e))`) must compile to the same code as the part built as a release build drops it
(`-DNDEBUG`); a condition without side effects leaves nothing once optimised. A clock spelled in
pieces in inline assembly (`"%%glob" "altimer"`): inline assembly makes the device-clock reading
count as the part's own. More environment queries (the GPU count, stream capture, pointer kinds,
limits): only where the baseline makes them."""

from __future__ import annotations

import pytest

from .conftest import FIXTURES
from .test_shipped import _static

ROUND68 = FIXTURES / "redteam" / "round68"
ROUND67 = FIXTURES / "redteam" / "round67"
ROUND66 = FIXTURES / "redteam" / "round66"


@pytest.mark.nvcc
@pytest.mark.parametrize("path, rule", [
    (ROUND68 / "f1_clock_split_literal" / "candidate.cu", "device-clock"),
    (ROUND68 / "f1_clock_split_literal" / "candidate_clock_hi.cu", "device-clock"),
    (ROUND68 / "f2_assert_cstyle_cast_ctor" / "candidate.cu", "assert-side-effect"),
    (ROUND68 / "f4_assert_parameter_named_pure" / "candidate.cu", "assert-side-effect"),
    (ROUND68 / "f3_environment_query_other_names" / "candidate_capture.cu", "environment-query"),
    (ROUND68 / "f3_environment_query_other_names" / "candidate_device_count.cu", "environment-query"),
    # the earlier rounds' asserts, now refused by the compiler's view
    (ROUND66 / "f5_assert_side_effect" / "candidate.cu", "assert-side-effect"),
    (ROUND67 / "f1_assert_conversion_operator" / "candidate.cu", "assert-side-effect"),
    (ROUND67 / "f2_assert_allowlisted_name" / "candidate.cu", "assert-side-effect"),
])
def test_the_rounds_routes_are_refused(path, rule):
    rules = {v.rule for v in _static("sum_reduction.cu", path).violations}
    assert rule in rules, rules


@pytest.mark.nvcc
@pytest.mark.parametrize("path", [
    ROUND68 / "fr1_assert_common_forms" / "candidate_control.cu",
    ROUND68 / "fr1_assert_common_forms" / "candidate_operator_helper.cu",
    ROUND68 / "fr1_assert_common_forms" / "candidate_std_uintptr.cu",
])
def test_honest_asserts_pass(path):
    assert _static("sum_reduction.cu", path).violations == []
