"""Red team round 78 (tests/fixtures/redteam/round78/REPORT.md), on the state check after round 77:
writable device memory the state check did not read. The static finding here (a `.global` an asm
statement declares inside a function); the harness's own memory as a guard zone, and what the
part frees digested with its state, in tests/gpu/test_part_state_gpu.py."""

from __future__ import annotations

import pytest

from kernelloop.config import Settings
from kernelloop.program.split import split_program
from kernelloop.tools.nvcc import find_toolchain
from kernelloop.verify.gate import candidate_editable_part, static_gates
from kernelloop.verify.precision import classify_ptx, compare_profiles, scoped_globals, strip_ptx_comments

from .conftest import FIXTURES, ROOT, shared_cache_dir

ROUND = FIXTURES / "redteam" / "round78"

PTX = """.version 9.0
.target sm_86
.address_size 64

.global .align 4 .u32 registered_at_namespace_scope;
.global .align 4 .b8 table[8] = {1, 2, 3, 4, 5, 6, 7, 8};

.visible .entry _Z1kPy(.param .u64 p)
{
	.reg .b64 %rd<4>;
	.shared .align 8 .b8 _ZZ1kPyE4tile[64];
	.local .align 8 .b8 __local_depot0[32];
	.pragma "nounroll; { .global .u64 in_a_string;";
	// begin inline asm
	{ .reg .pred p; .global .align 8 .u64 calls; ld.volatile.global.u64 %rd1, [calls]; }
	// end inline asm
	{ .global .u32 initialised[2] = {7, 9}; }
	ld.global.u64 %rd2, [registered_at_namespace_scope];
	st.global.u64 [%rd2], %rd1;
	ret;
}
"""


def test_a_global_declared_inside_a_function_body_is_found_wherever_it_sits():
    # inside an asm's braces, with or without an initialiser; not the module's own variables, not
    # shared or local memory, not text inside a string, not ld/st's state-space qualifiers
    assert scoped_globals(strip_ptx_comments(PTX)) == {"calls", "initialised"}
    profile = classify_ptx(PTX)
    assert profile.classes["device_static"] == ["calls", "initialised"]
    plain = classify_ptx(PTX.replace(".global .align 8 .u64 calls;", "").replace(
        "{ .global .u32 initialised[2] = {7, 9}; }", ""))
    assert "device_static" not in plain.classes
    violations = compare_profiles(plain, profile)
    assert [v.rule for v in violations] == ["device-static"] and "asm statement" in violations[0].detail


@pytest.mark.nvcc
@pytest.mark.parametrize("arch", ["sm_86", "sm_90"])
def test_a_counter_in_a_global_an_asm_statement_declares_is_refused(arch):
    split = split_program((ROOT / "kernels" / "sum_reduction.cu").read_text(), "sum_reduction.cu")
    candidate = (ROUND / "ptx_scoped_global" / "candidate.cu").read_text()
    editable, _ = candidate_editable_part(candidate, split)
    result = static_gates(split, editable, arch=arch, settings=Settings(cache_dir=shared_cache_dir()),
                          toolchain=find_toolchain())
    assert [v.rule for v in result.violations] == ["device-static"], [v.describe() for v in result.violations]
    assert "kl78_calls" in result.violations[0].detail
