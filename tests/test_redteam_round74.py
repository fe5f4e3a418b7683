"""Red team round 74 (tests/fixtures/redteam/round74/REPORT.md): the special-register reading dodged
by a declaration and by a comment opened inside a string, a counter in the block's reserved shared
memory (its offsets are no launch geometry: refused), and the scrub's single byte as the verifier's
sign (a keyed stream now; the run is in tests/gpu/test_part_state_gpu.py)."""

from __future__ import annotations

import pytest

from kernelloop.config import Settings
from kernelloop.program.split import split_program
from kernelloop.tools.nvcc import find_toolchain
from kernelloop.verify.gate import candidate_editable_part, static_gates
from kernelloop.verify.precision import special_registers, strip_ptx_comments

from .conftest import FIXTURES, shared_cache_dir

ROUND = FIXTURES / "redteam" / "round74"


def test_a_declared_range_names_its_registers_exactly_and_never_a_special_one():
    assert special_registers(".reg .b64 %gridid<1>;\nmov.u64 %gridid0, %gridid;") == {"gridid"}
    assert special_registers(".reg .b64 %gridid;\nmov.u64 %gridid, %gridid;") == {"gridid"}
    assert special_registers(".reg .b32 %r<3>;\nmov.u32 %r2, %r1;") == set()
    assert special_registers("mov.u32 %r1, %tid.x;\nmov.u32 %r2, %pm3;\nmov.u32 %r3, %envreg7;") == {"pm3", "envreg7"}


def test_comments_are_stripped_around_strings_not_inside_them():
    text = '.pragma "/*";\nmov.u64 %rd1, %gridid;\n.pragma "*/"; // gone\n/* gone */ add.s32 %r1, %r2, %r3;'
    stripped = strip_ptx_comments(text)
    assert "%gridid" in stripped and "gone" not in stripped and "add.s32" in stripped


@pytest.mark.nvcc
@pytest.mark.parametrize("folder, register", [("sreg_declared_prefix", "%gridid"), ("ptx_string_comment", "%gridid"),
                                              ("reserved_smem_counter", "%reserved_smem_offset_end")])
def test_the_rounds_special_register_routes_are_refused(folder, register):
    split = split_program((ROUND / folder / "baseline.cu").read_text(), "baseline.cu")
    editable, _ = candidate_editable_part((ROUND / folder / "candidate.cu").read_text(), split)
    result = static_gates(split, editable, arch="sm_86", settings=Settings(cache_dir=shared_cache_dir()),
                          toolchain=find_toolchain())
    rules = [v.rule for v in result.violations]
    assert "device-register" in rules, [v.describe() for v in result.violations]
    assert register in next(v.detail for v in result.violations if v.rule == "device-register")
