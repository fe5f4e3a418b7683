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


@pytest.mark.nvcc
def test_an_assert_reached_through_the_programs_own_macro_is_compared_too():
    # Found reviewing the change: the comparison ran only where the part itself names assert; a
    # preamble macro wrapping it (`CHECK_IDX(i, n)`) carried a side effect the release build drops.
    from kernelloop.config import Settings
    from kernelloop.program.split import candidate_editable_part, split_program
    from kernelloop.tools.nvcc import find_toolchain
    from kernelloop.verify.gate import static_gates
    from .conftest import shared_cache_dir
    folder = ROUND69 / "review_preamble_macro"
    split = split_program((folder / "baseline_check_idx.cu").read_text(), "baseline_check_idx.cu")
    editable, _ = candidate_editable_part((folder / "candidate.cu").read_text(), split, "candidate")
    result = static_gates(split, editable, arch="sm_90", settings=Settings(cache_dir=shared_cache_dir()),
                          toolchain=find_toolchain())
    assert "assert-side-effect" in {v.rule for v in result.violations}, result.violations
