"""A constant the compiler puts in a merged pool is compared on the bytes both builds' entries
hold (kept-aside set 11's row max: a launcher filling its output with `-INFINITY` was refused at
build identity, its -inf alone in a 4-byte pool in the verifier's unit and padded into an 8-byte
entry beside the harness's constants in the one-file build). The instructions are compared byte
for byte, so both builds read the same width, and neither entry is shorter than that width."""

from __future__ import annotations

import pytest

from kernelloop.program.init import InitSpec, generate
from kernelloop.tools.code_identity import HostCode


def _code(*entries: str, between: str = "4889c7") -> HostCode:
    return HostCode(between + "|" + ";".join(f"12:2:.rodata.:cst[{e}]" for e in entries))


def test_entries_of_two_widths_holding_one_value_are_the_same_code():
    assert _code("000080ff") == _code("000080ff00000000")
    assert _code("0100000001000000") == _code("01000000010000000100000001000000")  # dim3's 1, 1 broadcast


def test_entries_differing_in_the_bytes_both_hold_are_other_code():
    assert _code("000080ff") != _code("0000807f00000000")  # -inf vs +inf
    assert _code("000080ff", "00000000") != _code("000080ff")  # one more constant read
    assert _code("") != _code("000080ff")  # an entry out of its section's data matches nothing but itself
    assert _code("") == _code("")


def test_the_code_between_entries_is_compared_whole():
    assert _code("000080ff", between="4889c7") != _code("000080ff", between="4889c6")
    assert HostCode("f=ab|1:2:x+0") != HostCode("f=ab|1:2:y+0")


def test_host_code_is_never_equal_to_a_digest_string():
    assert _code("00") != "00"


SOURCE = r'''
#include <math.h>
#include <cuda_runtime.h>

__global__ void fill_value(float* out, int n, float value) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = value;
}

__global__ void column_max_atomic(const float* x, float* out, int rows, int cols) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= rows * cols) return;
  float v = x[i];
  int* slot = (int*)&out[i % cols];
  // IEEE floats order as signed ints when positive, reversed as unsigned when negative
  if (v >= 0.0f) atomicMax(slot, __float_as_int(v));
  else atomicMin((unsigned int*)slot, __float_as_uint(v));
}

void column_max(const float* x, float* out, int rows, int cols) {
  fill_value<<<(cols + 127) / 128, 128>>>(out, cols, -INFINITY);
  column_max_atomic<<<(rows * cols + 255) / 256, 256>>>(x, out, rows, cols);
}
'''


@pytest.mark.nvcc
def test_a_launcher_filling_with_minus_infinity_passes_against_itself():
    from kernelloop.config import Settings
    from kernelloop.program.split import split_program
    from kernelloop.tools.nvcc import find_toolchain
    from kernelloop.verify.gate import static_gates

    from .conftest import shared_cache_dir

    spec = InitSpec(launcher="column_max", values={"rows": ["4096", "301"], "cols": ["1024", "77"]},
                    counts={"x": "rows * cols", "out": "cols"}, roles={"out": "output"})
    program = generate(SOURCE, spec, "column_max.cu").program
    split = split_program(program, "column_max.cu")
    result = static_gates(split, split.editable, arch="sm_90", settings=Settings(cache_dir=shared_cache_dir()),
                          toolchain=find_toolchain())
    assert not result.violations, [v.describe() for v in result.violations]
    assert result.candidate is not None and result.candidate.ok
