"""Red team rounds 196-197 (tests/fixtures/redteam/round196/, round197/): a launcher kept a call count in the MXCSR's
sticky flags and control bits, written with `__builtin_ia32_ldmxcsr()`, and acted otherwise after more
calls than a verifier process makes; the state check digests memory only. Round 197 kept it in a popped
x87 register read back with fxsave. The host-code scan now refuses every instruction that writes the
process's control state or dumps its registers (one list with init's scan), and the harness checks the
control bits and the empty x87 stack after every call; it resets nothing before one (a reset would hide
what a caller's process keeps from call to call)."""

from __future__ import annotations

import pytest

from kernelloop.program.split import candidate_editable_part, split_program
from kernelloop.tools.nvcc import find_toolchain
from kernelloop.tools.state_refs import PROCESSOR_STATE_INSTRUCTION
from kernelloop.verify.gate import static_gates

from .conftest import FIXTURES, ROOT, shared_cache_dir

BASE = FIXTURES / "redteam" / "round164" / "policy" / "base_kl.cu"
CASE = FIXTURES / "redteam" / "round196"
HARNESS = ROOT / "src" / "kernelloop" / "harness" / "kernelloop_harness.cuh"


@pytest.mark.parametrize("mnemonic", ["ldmxcsr", "vldmxcsr", "fldcw", "fldenv", "fnstenv", "fstenv", "fnsave",
                                      "fninit", "fnclex", "frstor", "fxrstor", "fxrstor64", "xrstors64",
                                      "wrgsbase", "wrfsbase", "wrpkru", "syscall",
                                      # round 197: the registers' saved images (a count kept in a popped x87 register)
                                      "fxsave", "fxsave64", "xsave", "xsaveopt", "xsavec", "xsaves64"])
def test_every_instruction_that_writes_the_processs_control_state_is_listed(mnemonic):
    assert PROCESSOR_STATE_INSTRUCTION.match(mnemonic)


@pytest.mark.parametrize("mnemonic", ["stmxcsr", "fnstcw", "fnstsw", "cvttss2si", "mulss", "fld", "fstp", "mov"])
def test_reading_it_or_computing_is_not(mnemonic):
    assert not PROCESSOR_STATE_INSTRUCTION.match(mnemonic)


@pytest.mark.nvcc
@pytest.mark.parametrize("case, instruction", [("round196/mxcsr_bomb", "ldmxcsr"), ("round197/x87_bomb", "fxsave")])
def test_a_launcher_that_counts_its_calls_in_processor_registers_is_refused(case, instruction):
    from kernelloop.config import Settings
    split = split_program(BASE.read_text(), BASE.name)
    editable, _ = candidate_editable_part((CASE.parent / case / "cand.cu").read_text(), split, "candidate")
    v = static_gates(split, editable, arch="sm_90", settings=Settings(cache_dir=shared_cache_dir()),
                     toolchain=find_toolchain())
    found = [x for x in v.violations if x.rule == "host-instruction"]
    # refused at its first processor-state instruction: the write, or (round 208) the read that comes first
    assert any(f": {instruction}: changes or dumps processor state" in x.detail
               or "reads processor state that outlives a call" in x.detail for x in found), v.violations


def test_the_harness_checks_the_floating_point_environment_after_every_call_and_resets_nothing():
    text = HARNESS.read_text()
    # after every launch (warm-up, timed, repeat): the control bits as the program started, the x87 stack empty
    assert text.count("unlock();\n      check_float_environment();") == 2
    assert text.count("unlock();\n    check_float_environment();") == 1
    # nothing reset before a call: a caller's process keeps what a call leaves (the sticky flags among it),
    # so a counter kept there that fires within the verifier's calls must show in them
    for reset in ("ldmxcsr", "fninit", "fnclex", "fldcw"):
        assert reset not in text, reset
