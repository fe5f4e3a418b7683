"""Red team round 125 (tests/fixtures/redteam/round125/): round 124's class past its fix. The
declaration kinds the parser lists miss a template parameter (`typename row_limit = RowLimit`), a
parameter with a default (`RowFn row_limit = RowFn{}`) and a lambda capture, so a kernel's
`row_limit(rows)` built an object reading `blockIdx.x` while the tiers read a pure helper of that
name. Now a device helper whose name the part spells anywhere other than as a plain call or its
definition (`name(`, `name<...>(`, nothing qualifying it) is not read."""

from __future__ import annotations

import pytest

from kernelloop.optimizers.base import NoMoreCandidates
from kernelloop.optimizers.offline.analysis import without_shadowed
from kernelloop.optimizers.offline.launcher import read_editable

from .conftest import FIXTURES
from .test_redteam_round109 import _first_proposal
from .test_redteam_round126 import refused_as_reading_thread_place

ROUND = FIXTURES / "redteam" / "round125" / "a_template_parameter_shadows_helper"


@pytest.mark.parametrize("baseline", ["baseline.cu", "variant_default_parameter/baseline.cu"])
def test_a_helper_named_like_a_parameter_gets_no_rewrite(baseline):
    with pytest.raises(NoMoreCandidates) as caught:
        _first_proposal((ROUND / baseline).read_text())
    assert "axis tier: kernel rank1_update_kernel calls row_limit" in str(caught.value) or refused_as_reading_thread_place(str(caught.value))


HELPER = "__device__ int row_limit(int rows) { return rows; }"


@pytest.mark.parametrize("kernel, read", [
    ("__global__ void k(float* y, int n) { if (threadIdx.x < row_limit(n)) y[0] = 0; }", True),
    ("template <typename T> __global__ void k(T* y, int n) { if (threadIdx.x < row_limit<T>(n)) y[0] = 0; }", True),
    ("template <typename T, typename row_limit = R> __global__ void k(T* y, int n) "
     "{ if (threadIdx.x < row_limit(n)) y[0] = 0; }", False),
    ("__global__ void k(float* y, int n, R row_limit = R{}) { if (threadIdx.x < row_limit(n)) y[0] = 0; }", False),
    ("__global__ void k(float* y, int n) { auto f = [row_limit = R{}](int m) { return row_limit(m); }; "
     "if (threadIdx.x < f(n)) y[0] = 0; }", False),
    ("__global__ void k(float* y, int n) { if (threadIdx.x < other::row_limit(n)) y[0] = 0; }", False),
    ('__global__ void k(float* y, int n) { printf("row_limit %d", n); if (threadIdx.x < row_limit(n)) y[0] = 0; }',
     True),
])
def test_a_helper_spelled_other_than_as_a_call_is_not_read(kernel, read):
    editable = f"struct R {{ __device__ int operator()(int) const; }};\n{HELPER}\n{kernel}\n"
    part = without_shadowed(read_editable(editable, "", []), editable, "")
    assert ("row_limit" in part.functions) is read
