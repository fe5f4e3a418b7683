"""Red team round 124 (tests/fixtures/redteam/round124/): round 123's class by a name that is not a
function definition. The kernel's `row_limit(rows)` reached a `__device__` functor variable (or a
function pointer) of that name in its namespace, whose call reads `blockIdx.x`; the only function
definition named `row_limit` was a pure one in another namespace, which the tiers read, and the
axis tier swapped the kernel. Now a function whose name the editable part also declares as anything
else (a variable, a type, a member, a parameter, a local, a prototype) is not read."""

from __future__ import annotations

import pytest

from kernelloop.optimizers.base import NoMoreCandidates
from kernelloop.optimizers.offline.analysis import without_shadowed
from kernelloop.optimizers.offline.launcher import read_editable

from .conftest import FIXTURES
from .test_redteam_round109 import _first_proposal
from .test_redteam_round126 import refused_as_reading_thread_place

ROUND = FIXTURES / "redteam" / "round124" / "a_functor_variable_shadows_helper"


@pytest.mark.parametrize("baseline", ["baseline.cu", "variant_function_pointer/baseline.cu"])
def test_a_helper_named_like_a_variable_gets_no_rewrite(baseline):
    with pytest.raises(NoMoreCandidates) as caught:
        _first_proposal((ROUND / baseline).read_text())
    assert "axis tier: kernel rank1_update_kernel calls row_limit" in str(caught.value) or refused_as_reading_thread_place(str(caught.value))


KERNEL = "__global__ void k(float* y, int n) { int i = threadIdx.x; if (i < row_limit(n)) y[i] = 0; }"
HELPER = "__device__ int row_limit(int rows) { return rows; }"


@pytest.mark.parametrize("other, read", [
    ("struct RowLimit { __device__ int operator()(int r) const { return r - blockIdx.x; } };\n"
     "namespace a { __device__ RowLimit row_limit; }", False),              # a functor variable
    ("__device__ int (*row_limit_ptr)(int) = nullptr;", True),              # another name: no clash
    ("namespace b { __device__ int (*row_limit)(int) = nullptr; }", False),  # a function pointer
    ("namespace c { __device__ RowLimit row_limit(kRows); }", False),       # reads as a prototype
    ("__device__ int other(int row_limit) { return row_limit; }", False),   # a parameter
    ("template void helper_t<float>(float);", True),                        # an explicit instantiation
])
def test_a_function_whose_name_means_something_else_too_is_not_read(other, read):
    editable = "\n".join([HELPER, other, KERNEL])
    part = without_shadowed(read_editable(editable, "", []), editable, "")
    assert ("row_limit" in part.functions) is read
