"""Red team round 73 (tests/fixtures/redteam/round73/REPORT.md): special registers that count
launches or tell a graph launch from a direct one (refused: device-register), and integer
spellings init refused. The stale shared-memory counter is open (docs/verifier.md)."""

from __future__ import annotations

import pytest

from kernelloop.config import Settings
from kernelloop.program.init import InitSpec, generate
from kernelloop.program.split import split_program
from kernelloop.tools.nvcc import find_toolchain
from kernelloop.verify.gate import candidate_editable_part, static_gates
from kernelloop.verify.precision import compare_profiles, classify_ptx, special_registers

from .conftest import FIXTURES, shared_cache_dir

ROUND = FIXTURES / "redteam" / "round73"

PTX = """.version 9.0
.target sm_90
.address_size 64
.visible .entry _Z1kPf(.param .u64 p)
{
	.reg .pred 	%p<3>;
	.reg .b32 	%r<9>;
	.reg .b64 	%rd<4>;
	.reg .b64 	%SP;
	mov.u32 	%r1, %tid.x;
	mov.u32 	%r2, %ctaid.y;
	mov.u32 	%r3, %laneid;
	mov.u32 	%r4, %dynamic_smem_size;
	mov.u64 	%rd1, %clock64;
	mov.u64 	%rd2, %gridid;
	mov.u32 	%r5, %envreg3;
	ret;
}
"""


def test_special_registers_other_than_launch_geometry_are_a_class_against_the_baseline():
    assert special_registers(PTX) == {"gridid", "envreg3"}  # declared registers, geometry and clocks are not
    with_it, without = classify_ptx(PTX), classify_ptx(PTX.replace("%gridid", "%tid.y").replace("%envreg3", "%tid.z"))
    assert [v.rule for v in compare_profiles(without, with_it)] == ["device-register"]
    assert compare_profiles(with_it, with_it) == []


@pytest.mark.nvcc
@pytest.mark.parametrize("folder, register", [("gridid_launch_counter", "%gridid"),
                                              ("graph_exec_sreg", "%current_graph_exec")])
def test_a_launch_count_or_a_graph_handle_read_in_device_code_is_refused(folder, register):
    split = split_program((ROUND / folder / "baseline.cu").read_text(), "baseline.cu")
    editable, _ = candidate_editable_part((ROUND / folder / "candidate.cu").read_text(), split)
    result = static_gates(split, editable, arch="sm_86", settings=Settings(cache_dir=shared_cache_dir()),
                          toolchain=find_toolchain())
    assert [v.rule for v in result.violations] == ["device-register"], [v.describe() for v in result.violations]
    assert register in result.violations[0].detail


def test_init_takes_the_std_and_keyword_order_spellings_it_refused():
    text = (ROUND / "fr_init_std_size_t" / "honest.cu").read_text()
    result = generate(text, InitSpec(values={"n": ["1048576", "1000003"], "a": ["1.5"]}), "honest.cu")
    assert "kl::Harness h;" in result.program
