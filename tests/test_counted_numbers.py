"""The row and column tiers combine accumulators with +, shuffles and comparisons, which mean what
they read only for built-in numbers: every rewrite asserts each accumulator's type to the compiler
(rowwarp.NUMBER_TYPE), so a class spelled like a number (`namespace tally { struct uint16_t }`,
whose += saturates) fails to build instead of being read as addition; and with that assertion a
count of any type spelling (`++cnt` on an int64_t) is read as `cnt += 1`. A launcher's check macro
that prints cudaGetErrorString is a check like any other (a query, no effect)."""

from __future__ import annotations

import pytest

from kernelloop.config import Settings
from kernelloop.optimizers.base import NoMoreCandidates
from kernelloop.program.split import candidate_editable_part, split_program
from kernelloop.tools.nvcc import find_toolchain
from kernelloop.verify.gate import static_gates

from .conftest import FIXTURES, shared_cache_dir
from .test_redteam_round109 import _first_proposal

FOLDER = FIXTURES / "counted_numbers"


def _static(name: str):
    program = (FOLDER / name).read_text()
    split = split_program(program, name)
    proposal = _first_proposal(program)
    editable, _ = candidate_editable_part(proposal.source, split)
    return proposal, static_gates(split, editable, arch="sm_90", settings=Settings(cache_dir=shared_cache_dir()),
                                  toolchain=find_toolchain())


@pytest.mark.nvcc
def test_a_class_accumulator_spelled_like_a_number_fails_to_build():
    # the program's own `uint16_t` is no library type to the readers (round 133): no rewrite at all
    with pytest.raises(NoMoreCandidates):
        _first_proposal((FOLDER / "class_accumulator.cu").read_text())
    # and were it read, the rewrite's assertion would not build (the compiler decides, not a spelling)
    from kernelloop.optimizers.offline.launcher import read_editable
    from kernelloop.optimizers.offline.rowwarp import plan_row_warp, pure_helpers, rewrite_kernel

    part = read_editable((FOLDER / "class_accumulator.cu").read_text().split("// kernelloop: editable begin")[1]
                         .split("// kernelloop: editable end")[0], "", [])
    fn = next(f for f in part.functions.values() if f.is_kernel)
    assert "static_assert(::kl_number<decltype(n)>::value" in rewrite_kernel(fn, plan_row_warp(
        fn, pure_helpers(list(part.functions.values()))))


@pytest.mark.nvcc
def test_a_checked_launcher_and_an_int64_count_get_a_rewrite_that_builds():
    proposal, result = _static("checked_group_count.cu")
    assert "column tier" in proposal.approach or "row tier" in proposal.approach, proposal.approach
    assert "static_assert(::kl_number<decltype(cnt)>::value" in proposal.source
    assert not result.violations, [v.describe() for v in result.violations]
    assert result.candidate is not None and result.candidate.ok, result.candidate.log[-2000:]


def test_a_count_that_is_no_accumulator_and_no_keyword_type_is_not_read():
    program = (FOLDER / "checked_group_count.cu").read_text().replace(
        "      acc += values[i];\n      ++cnt;", "      int64_t seen = 0;\n      ++seen;\n      acc += values[i] + seen;\n      ++cnt;")
    try:
        proposal = _first_proposal(program)
    except NoMoreCandidates as caught:
        assert "counts seen with ++ or --" in str(caught), str(caught)
        return
    assert "tier" not in proposal.approach, proposal.approach
