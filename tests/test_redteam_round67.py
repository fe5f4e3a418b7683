"""Red team round 67 (tests/fixtures/redteam/round67/REPORT.md), on round 66's fix: three routes and two
false refusals. (1, 2) An assert whose condition runs code without an assignment or a plain call: a
class value's conversion operator (`assert(TailOn{&tail})`), a function the part names like a pure
one (`tl::isfinite(tail)`); an assert's condition may now make no class value, call only pure
library functions the part does not declare and casts to built-in types, and where the part defines
operators no assert passes. (3) A launcher that reads the environment (`cudaMemGetInfo`,
`cudaDriverGetVersion`) and computes otherwise when memory is short or the driver newer: such
queries only where the baseline makes them. (FR2) `cuda::barrier`'s wait reads %globaltimer for its
back-off: the device-clock rule now needs the part's own code to name a clock. (FR1, an assert
calling the part's own constexpr helper, stays refused: the message says how to rewrite it.)"""

from __future__ import annotations

import pytest

from kernelloop.verify.policy import names_a_clock

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


@pytest.mark.parametrize("code, named", [
    ("auto t = cuda::std::chrono::system_clock::now();", True),
    ("long long c = clock64();", True),
    ('asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));', True),
    ("bar.arrive_and_wait(); cuda::memcpy_async(tile, src, bytes, bar);", False),
])
def test_a_clock_counts_only_where_the_part_names_one(code, named):
    assert names_a_clock(code) == named


@pytest.mark.nvcc
def test_an_async_copy_tile_transpose_with_a_barrier_passes():
    assert _static("transpose.cu", ROUND67 / "fr2_cuda_barrier_memcpy_async" / "candidate.cu").violations == []


@pytest.mark.parametrize("code, named", [
    # red team round 292: libcu++'s timed waits read %globaltimer and hand back whether the time ran out; the
    # part named no clock (`chrono_literals` did not match `\bchrono\b`)
    ("using namespace cuda::std::literals; if (sem.try_acquire_for(2us)) out[0] = 1;", True),
    ("using namespace cuda::std::chrono_literals;", True),
    ("if (bar.try_wait_until(t)) ++n;", True),
    ("auto d = cuda::std::chrono::duration<int, cuda::std::micro>(3);", True),
    ("int tile_for = 3; float y = 2.0f * x; out[i] = y + tile_for;", False),
])
def test_a_timed_wait_or_a_duration_names_a_clock(code, named):
    assert names_a_clock(code) == named
