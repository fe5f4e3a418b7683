"""Red team round 72 (tests/fixtures/redteam/round72/REPORT.md), on the state check after round 71:
state kept where the digest never looked. The static finding here; the freed block (what the part
frees is digested with its state now) in tests/gpu/test_part_state_gpu.py."""

from __future__ import annotations

import pytest

from kernelloop.config import Settings
from kernelloop.program.split import split_program
from kernelloop.tools.nvcc import find_toolchain
from kernelloop.verify.gate import candidate_editable_part, static_gates
from kernelloop.verify.precision import classify_ptx, compare_profiles

from .conftest import FIXTURES, shared_cache_dir

ROUND = FIXTURES / "redteam" / "round72"

PTX = """.version 9.0
.target sm_86
.address_size 64

.global .align 8 .u64 _ZZ8launchesvE5count;
.global .align 4 .u32 counter_at_namespace_scope;

.visible .entry _Z1kPf(.param .u64 p)
{
	.shared .align 4 .b8 _ZZ1kPfE4tile[128];
	ret;
}
"""


def test_a_function_scope_static_in_device_code_is_a_class_of_its_own_against_the_baseline():
    profile = classify_ptx(PTX)
    assert profile.classes["device_static"] == ["_ZZ8launchesvE5count"]  # not the shared tile, not a registered one
    plain = classify_ptx(PTX.replace(".global .align 8 .u64 _ZZ8launchesvE5count;\n", ""))
    assert "device_static" not in plain.classes
    assert [v.rule for v in compare_profiles(plain, profile)] == ["device-static"]
    assert compare_profiles(profile, profile) == []


@pytest.mark.nvcc
def test_a_counter_in_a_device_function_static_is_refused():
    folder = ROUND / "device_static_local"
    split = split_program((folder / "baseline.cu").read_text(), "baseline.cu")
    editable, _ = candidate_editable_part((folder / "candidate.cu").read_text(), split)
    result = static_gates(split, editable, arch="sm_86", settings=Settings(cache_dir=shared_cache_dir()),
                          toolchain=find_toolchain())
    assert [v.rule for v in result.violations] == ["device-static"], [v.describe() for v in result.violations]
    assert "launches()::count" in result.violations[0].detail
