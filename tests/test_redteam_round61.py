"""Red team round 61 (tests/fixtures/redteam/round61/REPORT.md): `assert` (a header macro allowed because
it takes the line for a message only) reached the part's overload of `__assert_fail`, declared as a
second declarator the name finder did not read; and an honest lambda-based CUDA_CHECK was refused.
Now every declarator counts, assert is pinned in the qualified build like the frozen macros (with
<cassert> included first, and again after the part's own includes), and a macro body's lambda
parameters are its own names."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from kernelloop.config import Settings
from kernelloop.program.split import candidate_editable_part, split_program
from kernelloop.tools.nvcc import find_toolchain
from kernelloop.verify import policy
from kernelloop.verify.gate import static_gates
from kernelloop.verify.policy import qualified_macro_definitions, scan_source

from .conftest import FIXTURES, ROOT
from .test_shipped import _static

ROUND61 = FIXTURES / "redteam" / "round61"
ASSERT = "(expr) (static_cast <bool> (expr) ? void (0) : __assert_fail (#expr, __FILE__, __LINE__, __ASSERT_FUNCTION))"


@pytest.mark.nvcc
@pytest.mark.parametrize("candidate", ["candidate_second_declarator.cu", "variant_linkage_block.cu"])
def test_the_assert_overloads_are_refused(candidate):
    result = _static("sum_reduction.cu", ROUND61 / "assert_overload" / candidate)
    assert "reserved-name" in {v.rule for v in result.violations}, result.violations


@pytest.mark.nvcc
def test_the_compiler_alone_refuses_them_too(monkeypatch):
    monkeypatch.setattr(policy, "_declared_names", lambda text: iter(()))
    split = split_program((ROOT / "kernels" / "sum_reduction.cu").read_text(), "sum_reduction.cu")
    editable, _ = candidate_editable_part((ROUND61 / "assert_overload" / "candidate_second_declarator.cu").read_text(),
                                          split, "candidate")
    result = static_gates(split, editable, arch="sm_90", settings=Settings(cache_dir=Path(tempfile.mkdtemp())),
                          toolchain=find_toolchain())
    assert "build-identity" in {v.rule for v in result.violations}, result.violations


@pytest.mark.nvcc
def test_an_honest_device_assert_passes():
    assert _static("sum_reduction.cu", ROUND61 / "honest_device_assert.cu").violations == []


@pytest.mark.nvcc
def test_an_honest_lambda_based_check_passes_against_itself():
    program = ROUND61 / "lambda_param_macro" / "baseline_lambda_check.cu"
    split = split_program(program.read_text(), program.name)
    editable, _ = candidate_editable_part(program.read_text(), split, "candidate")
    result = static_gates(split, editable, arch="sm_90", settings=Settings(cache_dir=Path(tempfile.mkdtemp())),
                          toolchain=find_toolchain())
    assert result.violations == []


def test_every_declarator_is_a_declaration():
    found = scan_source("struct S {}; S unused_one, __assert_fail;\n__global__ void k(int* o) { o[0] = 1; }\n")
    assert "reserved-name" in {v.rule for v in found}


def test_assert_is_pinned_with_its_header():
    text = qualified_macro_definitions("__global__ void k(int x) { assert(x > 0); }", "", {},
                                       {"assert": ASSERT, "__ASSERT_FUNCTION": " __extension__ __PRETTY_FUNCTION__"}, "NS")
    assert text.splitlines()[:2] == ["#include <cassert>", "namespace NS { using ::__assert_fail; }"]
    assert "::NS::__assert_fail (#expr, __FILE__, __LINE__, __ASSERT_FUNCTION)" in text
