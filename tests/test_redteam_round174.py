"""Red team round 174 (tests/fixtures/redteam/round174/), on round 173's fix: the toolkit's fp8, fp6 and
fp4 headers read "no conversions" switches of their own, like the six half and bfloat16 switches, in
no list: a launcher asked `std::is_constructible<float, __nv_fp8_e4m3>` and shifted the column count in
a -D__CUDA_NO_FP8_CONVERSIONS__ build.

Closed by class (shipped._NARROW_SWITCHES, policy.BUILD_SWITCHES): every such switch is in the build
compared with every switch at once, and the part may not name one. Which switches those are is not a
list kept by hand: the test below finds every `__CUDA_NO_*__` switch the toolkit's headers read.

Open (docs/verifier.md, Known limits): the round's second find, `nvcc --default-stream per-thread`,
which changes what the runtime calls do, not the code compared (per_thread_default_stream/)."""

from __future__ import annotations

import re

import pytest

from kernelloop.config import Settings, VerifySettings
from kernelloop.tools.nvcc import find_toolchain
from kernelloop.tools.toolkit import real_nvcc
from kernelloop.verify import policy
from kernelloop.verify.shipped import other_builds
from kernelloop.verify.static_check import check_static_files

from .conftest import FIXTURES, shared_cache_dir
from .test_redteam_round166 import BASE

CASE = FIXTURES / "redteam" / "round174"


@pytest.mark.nvcc
def test_a_part_asking_whether_fp8_converts_is_compared_in_a_build_without_its_conversions():
    check = check_static_files(BASE, CASE / "fp8_no_conversions" / "cand.cu",
                               Settings(cache_dir=shared_cache_dir(), verify=VerifySettings(arch="sm_90")))
    assert not check.ok, check.summary


@pytest.mark.nvcc
def test_every_no_switch_the_toolkit_reads_is_compared_and_reserved():
    include = real_nvcc(find_toolchain().nvcc).parent.parent / "include"
    read = {m for header in include.rglob("*.h*") if header.is_file()
            for m in re.findall(r"\b__CUDA_NO_[A-Z0-9_]+__", header.read_text(errors="replace"))}
    assert read, "no switch found: the scan no longer reads the toolkit"
    every_at_once = max((set(b.flags) for b in other_builds(())), key=len)
    assert not read - set(policy.BUILD_SWITCHES), sorted(read - set(policy.BUILD_SWITCHES))
    assert not {f"-D{name}" for name in read} - every_at_once, sorted({f"-D{name}" for name in read} - every_at_once)
