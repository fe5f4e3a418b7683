"""Red team round 66 (tests/fixtures/redteam/round66/REPORT.md), on round 65's fix: four routes and a
false refusal. (1, 2) A condition's own macro misread: an object-like macro whose body begins with
a parenthesis (`#define KL_SEL (NDEBUG) +`) read as function-like, and two definitions of one name
read as one; each definition is now read on its own, function-like only with `(` right after the
name, expanded only where one definition is in force. (3) `assert((tail = 1) != 0)`: a release
build drops the assignment; an assert's condition may not change state or call anything but casts
and pure functions. (4) A device date bomb (`cuda::std::chrono::system_clock::now()` reads
%globaltimer): device code may read the GPU's clocks only where its baseline does. (FR1) cub and
cuda::std headers' read-only inline variables (GNU unique symbols in .rodata) were refused."""

from __future__ import annotations

import pytest

from kernelloop.verify.policy import scan_source
from kernelloop.verify.precision import classify_ptx, classify_sass, compare_profiles

from .conftest import FIXTURES
from .test_shipped import _static

ROUND66 = FIXTURES / "redteam" / "round66"


@pytest.mark.nvcc
@pytest.mark.parametrize("folder, candidate, rule", [
    ("f1_object_like_paren_body", "candidate.cu", "build-context"),
    ("f3_redefined_function_to_object", "candidate.cu", "build-context"),
    ("f4_device_date_bomb", "candidate.cu", "device-clock"),
])
def test_the_rounds_routes_are_refused(folder, candidate, rule):
    rules = {v.rule for v in _static("sum_reduction.cu", ROUND66 / folder / candidate).violations}
    assert rule in rules, rules


@pytest.mark.nvcc
def test_cub_block_reduce_passes():
    assert _static("sum_reduction.cu", ROUND66 / "fr1_cub_block_reduce" / "candidate.cu").violations == []


@pytest.mark.parametrize("code, refused", [
    ("#define KL_SEL (NDEBUG) +\n#if KL_SEL(0)\n#endif\n", True),
    ("#define KL_SEL(x) 0\n#undef KL_SEL\n#define KL_SEL 0 ||\n#if KL_SEL(NDEBUG)\n#endif\n", True),
    ("#define KL_ON(x) (x)\n#if KL_ON(1)\n#endif\n", False),
    ("#define KL_WIDE 1\n#if KL_WIDE\n#endif\n", False),
])
def test_each_definition_is_read_on_its_own(code, refused):
    assert bool([v for v in scan_source(code) if v.rule == "build-context"]) == refused


def test_a_clock_the_baseline_does_not_read_is_refused_in_either_reading():
    plain = classify_ptx("mov.u32 %r1, %tid.x;\nadd.s32 %r2, %r1, 1;\n")
    dated = classify_ptx("mov.u64 %rd1, %globaltimer;\nadd.s32 %r2, %r1, 1;\n")
    timed = classify_sass("        /*0050*/                   CS2R R2, SR_CLOCKLO ;\n")
    assert [v.rule for v in compare_profiles(plain, dated)] == ["device-clock"]
    assert compare_profiles(dated, dated) == []  # a baseline that reads it lets its copy read it
    assert "SR_CLOCKLO" in timed.classes["clock"]
