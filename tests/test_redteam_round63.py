"""Red team round 63 (tests/fixtures/redteam/round63/REPORT.md): no route; one false refusal. A kernel
attribute tree-sitter does not know (`__maxnreg__(64)`, `__cluster_dims__(2, 1, 1)`, in either place)
was read as a declaration of a reserved name. The toolkit's own macros (nvcc -E -dD of an empty unit,
so a newer toolkit's attributes too) are no names the part declares."""

from __future__ import annotations

import pytest

from kernelloop.verify.policy import scan_source

from .conftest import FIXTURES
from .test_shipped import _static

ROUND63 = FIXTURES / "redteam" / "round63" / "declared_names"


@pytest.mark.nvcc
@pytest.mark.parametrize("program", ["sum_reduction_maxnreg.cu", "sum_reduction_maxnreg_first.cu",
                                     "control_launch_bounds.cu"])
def test_kernel_attributes_pass(program):
    assert _static("sum_reduction.cu", ROUND63 / program).violations == []


@pytest.mark.nvcc
@pytest.mark.parametrize("code", [
    "__global__ void __maxnreg__(64) k(float* o) { o[0] = 1; }",
    "__maxnreg__(64) __global__ void k(float* o) { o[0] = 1; }",
    "__global__ void __cluster_dims__(2, 1, 1) k(float* o) { o[0] = 1; }",
    "__cluster_dims__(2, 1, 1) __global__ void k(float* o) { o[0] = 1; }",
    "__global__ void __launch_bounds__(256) k(float* o) { o[0] = 1; }",
])
def test_the_toolkits_attributes_are_no_declarations(code):
    assert [v for v in scan_source(code + "\n") if v.rule == "reserved-name"] == []


@pytest.mark.nvcc
def test_a_reserved_name_of_the_parts_own_is_still_refused():
    assert "reserved-name" in {v.rule for v in scan_source("int __my_probe__ = 1, __nv_probe;\n")}
