"""Red team round 67 (tests/fixtures/redteam/round67/REPORT.md), on round 66's fix: three routes and two
false refusals. (1, 2) An assert whose condition runs code without an assignment or a plain call: a
class value's conversion operator (`assert(TailOn{&tail})`), a function the part names like a pure
one (`tl::isfinite(tail)`); an assert's condition may now make no class value, call only pure
library functions the part does not declare and casts to built-in types, and where the part defines
operators no assert passes. (3) A launcher that reads the environment (`cudaMemGetInfo`,
`cudaDriverGetVersion`) and computes otherwise when memory is short or the driver newer: such
queries only where the baseline makes them. (FR2) `cuda::barrier`'s wait reads %globaltimer for its
back-off: the device-clock rule needed the part's own code to name a clock, until round 294 got clock
reads through toolkit routines of other names, and every clock read counts again. (FR1, an assert
calling the part's own constexpr helper, stays refused: the message says how to rewrite it.)"""

from __future__ import annotations

import pytest

from .conftest import FIXTURES
from .test_shipped import _static

ROUND67 = FIXTURES / "redteam" / "round67"


@pytest.mark.nvcc
@pytest.mark.parametrize("folder, candidate, rule", [
    ("f3_environment_query_bomb", "candidate.cu", "environment-query"),
    ("f3_environment_query_bomb", "candidate_driver.cu", "environment-query"),
])
def test_the_rounds_routes_are_refused(folder, candidate, rule):
    rules = {v.rule for v in _static("sum_reduction.cu", ROUND67 / folder / candidate).violations}
    assert rule in rules, rules


@pytest.mark.nvcc
def test_an_async_copy_tile_transpose_with_a_barrier_is_refused_for_its_clock():
    # Fail closed since round 294: cuda::barrier's wait reads %globaltimer for its back-off, and which clock reads
    # can reach a result is not judged by spelling any more (the message names waits that read no clock)
    found = [v for v in _static("transpose.cu", ROUND67 / "fr2_cuda_barrier_memcpy_async" / "candidate.cu").violations
             if v.rule == "device-clock"]
    assert found and "cooperative_groups::wait" in found[0].detail
