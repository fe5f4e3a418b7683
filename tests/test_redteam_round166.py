"""Red team round 166 (tests/fixtures/redteam/round166/): the part passes a comparator with a side
effect to a header function whose own assertion calls it in a debug build (`cuda::std::clamp(lo, lo,
hi, [&](int a, int b) { ++probes; return a < b; })`: under -DDEBUG, -D_DEBUG or CCCL's assertion
switches the header's `_CCCL_ASSERT(!comp(hi, lo))` calls it a third time; <algorithm>'s std::clamp
does the same under -D_GLIBCXX_ASSERTIONS), and the launch's column count follows the count.

Closed by class (shipped.header_assertion_differences): the part is compared, built alone, in each
debug build whose headers evaluate assertions against the build without them, with CCCL's and
libstdc++'s assertion macros keeping their condition and losing the failure path in both (round
167 showed why only the macros may change). An honest comparator leaves no code; one with a side
effect leaves it. The variants (variants/, ours): the same in device code, a count folded away by
the part's own `__builtin_expect`, two counts that cancel where both switches are set (each switch
is compared alone too), and two honest parts."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelloop.config import Settings, VerifySettings
from kernelloop.program.split import split_program
from kernelloop.tools.nvcc import find_toolchain
from kernelloop.verify.shipped import header_assertion_differences, one_file_reaches
from kernelloop.verify.static_check import check_static_files

from .conftest import FIXTURES, shared_cache_dir

CASE = FIXTURES / "redteam" / "round166"
BASE = FIXTURES / "redteam" / "round164" / "policy" / "base_kl.cu"


def _debug_differences(part: Path):
    text = part.read_text()
    split = split_program(BASE.read_text(), BASE.name)
    return header_assertion_differences(split, text, arch="sm_90", cache_dir=shared_cache_dir(),
                                        toolchain=find_toolchain(), one_file=one_file_reaches(text))


def refused_as_a_debug_build_difference(candidate: Path) -> None:
    """CANDIDATE (a full program on round 164's base) fails the static gates at the debug-build comparison."""
    check = check_static_files(BASE, candidate, Settings(cache_dir=shared_cache_dir(), verify=VerifySettings(arch="sm_90")))
    assert not check.ok, check.summary
    assert any(v.rule == "assert-side-effect" and "debug build" in v.detail for v in check.violations), check.violations


@pytest.mark.nvcc
def test_a_comparator_a_header_assertion_calls_in_a_debug_build_is_refused():
    refused_as_a_debug_build_difference(CASE / "parts" / "clamp_probe_cand.cu")


@pytest.mark.nvcc
@pytest.mark.parametrize("part, switches", [
    ("parts/glibcxx_clamp_part.cu", ("_GLIBCXX_ASSERTIONS",)),
    ("variants/device_clamp_probe_part.cu", ("DEBUG",)),
    ("variants/own_hint_folds_count_part.cu", ("DEBUG",)),
    ("variants/counts_cancel_in_pairs_part.cu", ("DEBUG",)),
])
def test_each_debug_build_is_compared_alone_and_the_parts_own_hints_keep_their_meaning(part, switches):
    found, differing = _debug_differences(CASE / part)
    assert found == switches and differing, (found, differing)


@pytest.mark.nvcc
@pytest.mark.parametrize("part", ["variants/honest_std_clamp_part.cu", "variants/honest_device_clamp_part.cu"])
def test_comparators_without_side_effects_are_no_difference(part):
    assert _debug_differences(CASE / part) == ((), [])
