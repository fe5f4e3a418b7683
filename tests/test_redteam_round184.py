"""Red team round 184 (tests/fixtures/redteam/round184/), on round 183's fail-closed reader: inline
assembly wrote complete module-scope statements that ptxas reads and the reader dropped without a
trace: `.alias` (c1), a variable written `.global.f32` (c2), a second declarator (c3). The launched
kernel reads what each names, so two builds that compute differently digested alike.

Closed by class (tools/ptx_module.read_ptx): a module-scope statement is readable only as nvcc
writes it (a function's declaration or header with its performance directives, one variable with
at most one value); any other statement marks the module unreadable, and every kernel is then
digested with the whole text. A string ends at the next quote, as ptxas reads it."""

from __future__ import annotations

import pytest

from kernelloop.tools.code_identity import device_fingerprints
from kernelloop.tools.ptx_module import read_ptx
from kernelloop.verify.shipped import _neutral_ptx

from .conftest import FIXTURES

CASE = FIXTURES / "redteam" / "round184"
HEAD = ".version 8.8\n.target sm_90\n.address_size 64\n"
KERNEL = ".visible .entry k(\n.param .u64 p\n)\n{\nret;\n}\n"


@pytest.mark.parametrize("case", ["c1", "c2", "c3"])
def test_the_two_builds_of_each_candidate_are_other_code(case):
    (a, _), (b, _) = (_neutral_ptx((CASE / case / f"{side}.ptx").read_text()) for side in ("a", "b"))
    assert read_ptx(a).unreadable and read_ptx(b).unreadable
    kernels = {"_Z14row_sum_kernelPfPKfii"}
    assert device_fingerprints(a, kernels) != device_fingerprints(b, kernels)


@pytest.mark.parametrize("statement", [
    ".alias kl_sg, kl_pos;",
    ".global.f32 kl_sign = 0f3F800000;",
    ".visible.global .f32 kl_sign = 0f3F800000;",
    ".common .global .f32 kl_sign = 0f3F800000;",
    ".global .f32 kl_one = 0f3F800000, kl_sign = 0fBF800000;",
    '.pragma "nounroll";',
    ".func kl_f() .alias kl_g, kl_h;",
    ".visible.func kl_f();",
])
def test_a_module_scope_statement_nvcc_never_writes_makes_the_module_unreadable(statement):
    assert read_ptx(HEAD + statement + "\n" + KERNEL).unreadable
    assert read_ptx(HEAD + KERNEL + statement + "\n").unreadable


def test_a_string_ends_at_the_next_quote_as_ptxas_reads_it():
    # `.pragma "a\"; ret; }`: ptxas's string ends after the backslash, and the `}` closes the function
    module = read_ptx(HEAD + '.visible .entry k()\n{\n.pragma "a\\"; ret; }\n.visible .entry k2()\n{\nret;\n}\n')
    assert module.functions["k2"].body == ["ret;"] and not module.unreadable


@pytest.mark.parametrize("statement", [
    ".extern .func (.param .b32 func_retval0) vprintf\n(\n.param .b64 vprintf_param_0,\n.param .b64 vprintf_param_1\n)\n;",
    ".extern .func __assertfail\n(\n.param .b64 __assertfail_param_0\n)\n;",
    ".global .align 4 .u32 dv = 3;",
    ".global .attribute(.managed) .align 4 .u32 mv;",
    ".const .align 4 .b8 cf[16] = {0, 0, 128, 63, 0, 0, 0, 64, 0, 0, 64, 64, 0, 0, 128, 64};",
    ".global .align 8 .u64 msg = generic($str);",
    ".extern .shared .align 16 .b8 dyn[];",
    ".visible .entry k2(\n.param .u64 p\n)\n.maxntid 128, 1, 1\n.minnctapersm 1\n.maxclusterrank 4\n{\nret;\n}",
    ".visible .entry k3(\n.param .u64 p\n)\n.explicitcluster\n.reqnctapercluster 2, 1, 1\n{\nret;\n}",
])
def test_what_nvcc_writes_is_readable(statement):
    assert not read_ptx(HEAD + statement + "\n" + KERNEL).unreadable
