"""Red team round 65 (tests/fixtures/redteam/round65/REPORT.md), on round 64's fix. (1) A route: the
condition reader expanded every call by the toolkit's meaning, so a part that redefined a header's
function-like macro (`#undef isascii`, `#define isascii(c) NDEBUG`) beside a toolkit call tested NDEBUG
unseen; the program's own macros are now read by their own bodies. (2) The host pass ran without -O3,
so `__OPTIMIZE__` could make a function host code only in the real build; it runs with the real
build's options, and host code may not read the time-stamp counter or draw random numbers by
instruction (`__builtin_ia32_rdtsc()`). (3) Three false refusals of toolkit feature and version tests.
(4) The call-count bomb (honest for the first 4096 calls of a process) is open: docs/verifier.md."""

from __future__ import annotations

import pytest

from kernelloop.verify.policy import scan_source

from .conftest import FIXTURES
from .test_shipped import _static

ROUND65 = FIXTURES / "redteam" / "round65"


def _build_context(code: str) -> list[str]:
    return [v.detail for v in scan_source(code) if v.rule == "build-context"]


@pytest.mark.nvcc
@pytest.mark.parametrize("code", [
    "#undef isascii\n#define isascii(c) NDEBUG\n#if isascii(0) || __CUDA_ARCH_HAS_FEATURE__(SM90_ALL)\n#endif\n",
    "#undef WEXITSTATUS\n#define WEXITSTATUS(s) defined(__USE_FAST_MATH__)\n"
    "#if WEXITSTATUS(0) || __CUDA_ARCH_HAS_FEATURE__(SM90_ALL)\n#endif\n",
    "#define KL_CAT(a, b) a##b\n#if KL_CAT(NDE, BUG) || __CUDA_ARCH_HAS_FEATURE__(SM90_ALL)\n#endif\n",
    "#define KL_FEATURE(x) __CUDA_ARCH_HAS_FEATURE__(x) || defined(NDEBUG)\n#if KL_FEATURE(SM90_ALL)\n#endif\n",
])
def test_the_programs_own_macros_are_read_by_their_own_bodies(code):
    assert _build_context(code), code


@pytest.mark.nvcc
@pytest.mark.parametrize("code", [
    "#define KL_SM90 __CUDA_ARCH_HAS_FEATURE__(SM90_ALL)\n#if KL_SM90\n#endif\n",
    "#define KL_HAS(x) __CUDA_ARCH_HAS_FEATURE__(x)\n#if KL_HAS(SM90_ALL)\n#endif\n",
    "#if defined(__CUDA_ARCH_HAS_FEATURE__)\n#endif\n",
    "#if defined(CCCL_VERSION) && CCCL_VERSION >= 2000000\n#endif\n",
])
def test_toolkit_feature_and_version_tests_pass(code):
    assert _build_context(code) == [], code


@pytest.mark.nvcc
@pytest.mark.parametrize("folder, candidate", [
    ("f1_toolkit_name_own_macro", "candidate.cu"),
    ("f3_host_asm_optimize", "candidate.cu"),
    ("f3_host_asm_optimize", "control_builtin_rdtsc.cu"),
])
def test_the_rounds_routes_are_refused(folder, candidate):
    assert _static("sum_reduction.cu", ROUND65 / folder / candidate).violations


@pytest.mark.nvcc
def test_reading_the_time_stamp_counter_in_host_code_is_refused_for_what_it_is():
    rules = {v.rule for v in _static("sum_reduction.cu", ROUND65 / "f3_host_asm_optimize" /
                                     "control_builtin_rdtsc.cu").violations}
    assert "host-instruction" in rules, rules


@pytest.mark.nvcc
@pytest.mark.parametrize("folder", ["fr1_own_macro_wraps_arch_feature", "fr2_ifdef_arch_has_feature_guard",
                                    "fr3_cccl_version_test"])
def test_the_rounds_honest_candidates_pass(folder):
    assert _static("sum_reduction.cu", ROUND65 / folder / "candidate.cu").violations == []
