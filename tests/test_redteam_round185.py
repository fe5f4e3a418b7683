"""Red team round 185 (tests/fixtures/redteam/round185/), on round 184's reader: a variable defined
with a value that differs between two builds, then declared again `.extern` at module scope. ptxas
keeps the definition's value; the reader kept only the last statement of a name, so the value was in
no digest (c1: both statements from inline assembly; c2: the definition plain C++).

Closed by class (tools/ptx_module.read_ptx): every module-scope statement of a variable's name is kept,
in order, and digested with the kernels that reach it (code_identity.device_fingerprints); and, the
class of rounds 182-185, a module-scope variable after a function's body (nvcc writes none there: only
inline assembly that closed its function does) marks the module unreadable."""

from __future__ import annotations

import pytest

from kernelloop.tools.code_identity import device_fingerprints
from kernelloop.tools.ptx_module import read_ptx
from kernelloop.verify.shipped import _neutral_ptx

from .conftest import FIXTURES

CASE = FIXTURES / "redteam" / "round185"


@pytest.mark.parametrize("case", ["c1", "c2"])
def test_the_two_builds_of_each_candidate_are_other_code(case):
    (a, _), (b, _) = (_neutral_ptx((CASE / case / f"{side}.ptx").read_text()) for side in ("a", "b"))
    kernels = {"_Z14row_sum_kernelPfPKfii"}
    assert device_fingerprints(a, kernels) != device_fingerprints(b, kernels)


def test_every_statement_of_a_variable_is_kept_in_order():
    assert read_ptx((CASE / "c1" / "minimal_redecl.ptx").read_text()).unreadable  # the .extern after a body
    head = ".version 8.8\n.target sm_90\n.address_size 64\n"
    module = read_ptx(head + ".global .align 4 .f32 kl_sign = 0fBF800000;\n.extern .global .align 4 .f32 kl_sign;\n"
                      ".visible .entry k(\n.param .u64 p\n)\n{\nret;\n}\n")
    lines = module.variables["kl_sign"].split("\n")
    assert not module.unreadable and len(lines) == 2 and "=" in lines[0] and lines[1].startswith(".extern")


def test_a_value_named_by_any_statement_of_a_variable_is_followed():
    head = ".version 8.8\n.target sm_90\n.address_size 64\n"
    kernel = ".visible .entry k(\n.param .u64 p\n)\n{\nld.global.u64 %rd1, [ptr];\nret;\n}\n"
    table = ".global .align 4 .b8 tab{}[4] = {{{}, 0, 0, 0}};\n"
    texts = [head + table.format(1, v) + table.format(2, 0) + ".global .align 8 .u64 ptr = generic(tab1);\n"
             ".extern .global .align 8 .u64 ptr;\n" + kernel for v in (1, 2)]
    assert device_fingerprints(texts[0], {"k"}) != device_fingerprints(texts[1], {"k"})


def test_a_variable_after_a_function_body_makes_the_module_unreadable():
    # nvcc writes every module-scope variable before the first body; inline assembly that closes its
    # function is the only way one comes after (rounds 182-185): whatever it is, the module is read whole
    head = ".version 8.8\n.target sm_90\n.address_size 64\n"
    kernel = ".visible .entry k(\n.param .u64 p\n)\n{\nret;\n}\n"
    variable = ".global .align 4 .f32 kl_sign = 0f3F800000;\n"
    assert not read_ptx(head + variable + kernel).unreadable
    assert read_ptx(head + kernel + variable).unreadable
    assert read_ptx(head + variable + kernel + ".extern .global .align 4 .f32 kl_sign;\n").unreadable
