"""Red team round 127 (tests/fixtures/redteam/round127/): round 126's rule decided by spelling. A
device helper passed as a kernel by a `"__global__"` string in its head (its default argument
reading blockIdx.x unseen); the toolkit's own `__cudaGet_blockIdx()` macro; a special register
named across two string literals in inline assembly; and a candidate that tests for the C
library's fortified wrappers, which the reading builds had been made without. Now a kernel is a
free function whose specifiers (no literal, no parentheses) say __global__, any identifier holding
a built-in's name counts, inline assembly counts whole, and the gate's readings keep the machine's
own fortification setting (tests/test_fortified_builds.py)."""

from __future__ import annotations

import pytest

from kernelloop.optimizers.base import NoMoreCandidates
from kernelloop.optimizers.offline.thread_reads import thread_reads

from .conftest import FIXTURES
from .test_redteam_round109 import _first_proposal
from .test_redteam_round126 import refused_as_reading_thread_place

ROUND = FIXTURES / "redteam" / "round127"


@pytest.mark.parametrize("baseline", ["a_literal_global_in_head/baseline.cu",
                                      "a_literal_global_in_head/variant_constructor/baseline.cu",
                                      "b_library_macro_reads_builtin/baseline.cu",
                                      "b_library_macro_reads_builtin/variant_constructor/baseline.cu",
                                      "c_split_literal_asm_register/baseline.cu"])
def test_a_thread_read_spelled_past_the_rule_gets_no_rewrite(baseline):
    with pytest.raises(NoMoreCandidates) as caught:
        _first_proposal((ROUND / baseline).read_text())
    assert refused_as_reading_thread_place(str(caught.value)), str(caught.value)


KERNEL = "__global__ void k(float* y, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = 0; }"


@pytest.mark.parametrize("code, implicit", [
    ('__device__ int lim(int r, unsigned b = blockIdx.x + 0 * sizeof("__global__")) { return r; }', True),
    ("__device__ int lim(int r, unsigned b = __cudaGet_blockIdx().x) { return r; }", True),
    ('__device__ unsigned row() { unsigned v; asm("mov.u32 %0, %%cta" "id.x;" : "=r"(v)); return v; }\n'
     "struct R { unsigned v; __device__ R() : v(row()) {} };", True),
    ("__global__ __launch_bounds__(256) void other(float* y) { y[threadIdx.x] = 1; }", False),
    ("template <int B> __global__ void other(float* y) { y[blockIdx.x * B + threadIdx.x] = 1; }", False),
])
def test_spellings_of_a_thread_read_and_of_a_kernel(code, implicit):
    reads = thread_reads(f"{code}\n{KERNEL}\n")
    assert (reads.implicit is not None) is implicit, reads.implicit
