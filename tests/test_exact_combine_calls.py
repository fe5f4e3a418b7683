"""The library calls a row-tier combine adds take their operands as the library overload's own types
(`rowwarp._exact`: int below int's width), so no overload or template of the program can be a better
match than the library's (red team rounds 138, 141-146 each hid a program `max(short, int)` from the
name checks, which stay as a second line). Compiled with the real nvcc: the program's overloads are
in scope, and the PTX must hold the library's max, not the program's min."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from kernelloop.optimizers.offline.rowwarp import NUMBER_TYPE, _shuffle_combine

_PROGRAM = """
template <class A, class B> __device__ A max(A a, B b) { return a < b ? a : (A)b; }   // a min, by its own name
inline namespace compat { __device__ int max(short a, int b) { return a < b ? (int)a : b; } }
__device__ int __shfl_xor_sync(unsigned mask, short v, int lane, int width = 32) { return -v; }
"""


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_the_combine_calls_the_library_whatever_the_program_declares(tmp_path):
    kernel = ("__global__ void k(short* out, const short* in) {\n  short best = in[threadIdx.x];\n  "
              + _shuffle_combine("best", "max", "short") + "\n  out[threadIdx.x] = best;\n}\n")
    source = tmp_path / "combine.cu"
    source.write_text(NUMBER_TYPE + "\n" + _PROGRAM + kernel)
    ptx = tmp_path / "combine.ptx"
    done = subprocess.run(["nvcc", "-arch=sm_90", "-ptx", str(source), "-o", str(ptx)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    text = ptx.read_text()
    assert "max.s32" in text and "min.s32" not in text and "neg" not in text, text
