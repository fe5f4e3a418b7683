"""Red team round 196 (tests/fixtures/redteam/round196/): a launcher kept a call count in the MXCSR's
sticky flags and control bits, written with `__builtin_ia32_ldmxcsr()`, and acted otherwise after more
calls than a verifier process makes; the state check digests memory only. The host-code scan now refuses
every instruction that writes the process's control state (one list with init's scan), and the harness
pins the floating-point environment before every call and checks its control bits after it."""

from __future__ import annotations

import pytest

from kernelloop.program.split import candidate_editable_part, split_program
from kernelloop.tools.nvcc import find_toolchain
from kernelloop.tools.state_refs import CONTROL_INSTRUCTION
from kernelloop.verify.gate import static_gates

from .conftest import FIXTURES, ROOT, shared_cache_dir

BASE = FIXTURES / "redteam" / "round164" / "policy" / "base_kl.cu"
CASE = FIXTURES / "redteam" / "round196"
HARNESS = ROOT / "src" / "kernelloop" / "harness" / "kernelloop_harness.cuh"


@pytest.mark.parametrize("mnemonic", ["ldmxcsr", "vldmxcsr", "fldcw", "fldenv", "fnstenv", "fstenv", "fnsave",
                                      "fninit", "fnclex", "frstor", "fxrstor", "fxrstor64", "xrstors64",
                                      "wrgsbase", "wrfsbase", "wrpkru", "syscall"])
def test_every_instruction_that_writes_the_processs_control_state_is_listed(mnemonic):
    assert CONTROL_INSTRUCTION.match(mnemonic)


@pytest.mark.parametrize("mnemonic", ["stmxcsr", "fnstcw", "fnstsw", "cvttss2si", "mulss", "fxsave", "mov"])
def test_reading_it_or_computing_is_not(mnemonic):
    assert not CONTROL_INSTRUCTION.match(mnemonic)


@pytest.mark.nvcc
def test_a_launcher_that_counts_its_calls_in_the_mxcsr_is_refused():
    from kernelloop.config import Settings
    split = split_program(BASE.read_text(), BASE.name)
    editable, _ = candidate_editable_part((CASE / "mxcsr_bomb" / "cand.cu").read_text(), split, "candidate")
    v = static_gates(split, editable, arch="sm_90", settings=Settings(cache_dir=shared_cache_dir()),
                     toolchain=find_toolchain())
    found = [x for x in v.violations if x.rule == "host-instruction"]
    assert any(": ldmxcsr: changes the process's control state" in x.detail for x in found), v.violations


def test_the_harness_starts_every_call_from_the_programs_floating_point_environment():
    text = HARNESS.read_text()
    scrub = text[text.index("static void scrub_before_launch()"):]
    assert scrub.index("pin_float_environment();") < scrub.index("unsigned char dead[")
    # after every launch (warm-up, timed, repeat): the control bits as the program started
    assert text.count("unlock();\n      check_float_environment();") == 2
    assert text.count("unlock();\n    check_float_environment();") == 1
