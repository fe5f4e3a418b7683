"""A thread index numbered from a small constant (`j = blockIdx.x * blockDim.x + threadIdx.x + 1`,
Fortran's first column, in scientific code that keeps 1-based loops): the row and column tiers
read it as the item index plus its offset, and their rewrites keep the offset, both in the index
they compute and in the guard for items the baseline never had. The remap tier, whose bijection
needs an index from 0, refuses it."""

from __future__ import annotations

import pytest

from kernelloop.optimizers.offline.colsplit import plan_column_split, rewrite_kernel as column_rewrite
from kernelloop.optimizers.offline.launcher import read_editable
from kernelloop.optimizers.offline.remap import plan_remap
from kernelloop.optimizers.offline.rowwarp import NotARowKernel, plan_row_warp, pure_helpers, rewrite_kernel

COLUMN_MAJOR_SUM = """
#define A_(i, j) a[((i) - 1) + ((j) - 1) * lda]
__global__ void colsum(int m, int n, const double* a, int lda, double* s) {
  int j = blockIdx.x * blockDim.x + threadIdx.x + 1;
  if (j > n) return;
  double t = 0.0;
  for (int i = 1; i <= m; ++i) t += a[(i - 1) + (j - 1) * lda];
  s[j - 1] = t;
}
"""

ROW_MAJOR_SUM = """
__global__ void colsum_rows(int m, int n, const double* a, double* s) {
  int j = blockIdx.x * blockDim.x + threadIdx.x + 1;
  if (j > n) return;
  double t = 0.0;
  for (int i = 0; i < m; ++i) t += a[i * n + (j - 1)];
  s[j - 1] = t;
}
"""


def _kernel(text: str):
    part = read_editable(text, "", [])
    (fn,) = [f for f in part.functions.values() if f.is_kernel]
    return fn, pure_helpers(list(part.functions.values()))


def test_the_row_tier_keeps_the_offset():
    fn, helpers = _kernel(COLUMN_MAJOR_SUM)
    plan = plan_row_warp(fn, helpers)
    assert plan.index_offset == 1
    text = rewrite_kernel(fn, plan)
    assert "int j = (int)(((unsigned long long)blockIdx.x * blockDim.x + threadIdx.x) / 32 + 1LL);" in text
    assert "if ((long long)j - 1LL >= kl_items) return;" in text


def test_the_column_tier_keeps_the_offset():
    fn, helpers = _kernel(ROW_MAJOR_SUM)
    plan = plan_column_split(fn, helpers)
    assert plan.index_offset == 1
    text = column_rewrite(fn, plan, 8)
    assert "int j = blockIdx.x * blockDim.x + threadIdx.x + 1;" in text
    assert "if ((long long)j - 1LL >= kl_items) return;" in text


@pytest.mark.parametrize("init, taken", [("+ 1", True), ("- 1", False), ("+ 64", True), ("+ 65", False),
                                         ("+ n", False), ("* 2", False)])
def test_only_a_small_constant_offset_is_read(init, taken):
    text = COLUMN_MAJOR_SUM.replace("threadIdx.x + 1;", f"threadIdx.x {init};")
    fn, helpers = _kernel(text)
    if taken:
        plan_row_warp(fn, helpers)
    else:
        with pytest.raises(NotARowKernel, match="declares no one-dimensional thread index"):
            plan_row_warp(fn, helpers)


def test_the_remap_tier_wants_an_index_from_zero():
    text = """
__global__ void k(float* out, const float* in, int rows, int cols) {
  int tid = blockIdx.x * blockDim.x + threadIdx.x + 1;
  if (tid >= rows * cols) return;
  int col = tid / rows;
  int row = tid % rows;
  out[row * cols + col] = in[row * cols + col];
}
"""
    fn, helpers = _kernel(text)
    with pytest.raises(NotARowKernel, match="declares no one-dimensional thread index"):
        plan_remap(fn, helpers)
