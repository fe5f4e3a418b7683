"""The row tier with loops inside the item loop (optimizers/offline/rowwarp.py, ItemPlanner.
inner_loop): a window of taps, a sum over a batch, computed whole for each element by the lane
that takes the element. Tier 1: which inner loops it takes and which it refuses, by class (an
accumulator of the item loop updated inside, a counter declared outside or assigned in the body,
a store that moves with the inner counter, an early return, a bound reading an accumulator).
Tier 2 (nvcc): the outside-style program's rewrite passes the static gates for sm_86 and sm_90."""

from __future__ import annotations

import pytest

from kernelloop.optimizers.offline.launcher import read_editable
from kernelloop.optimizers.offline.rowwarp import NotARowKernel, plan_row_warp, pure_helpers, row_warp_rewrites
from kernelloop.program.init import generate
from kernelloop.program.split import candidate_editable_part, split_program

from .conftest import assert_passes_the_static_gates
from .outside_specs import OUTSIDE, SPECS

PROGRAM = "window_sum_rows.cu"


def _plan(text: str):
    part = read_editable(text, "", [])
    (fn,) = [f for f in part.functions.values() if f.is_kernel]
    return plan_row_warp(fn, pure_helpers(list(part.functions.values())))


BATCH_SUM = """
__global__ void batch_sum(float* grad, const float* dy, int B, int T, int C) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t < T) {
    float* g = grad + t * C;
    for (int c = 0; c < C; c++) {
      float s = 0.0f;
      for (int b = 0; b < B; b++) {
        s += dy[(b * T + t) * C + c];
      }
      g[c] += s;
    }
  }
}
"""

ROW_NORM = """
__global__ void row_energy(const float* x, const float* w, float* e, int rows, int cols, int k) {
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  float total = 0.0f;
  for (int c = 0; c < cols; c++) {
    float v = 0.0f;
    for (int j = 0; j < k; ++j) v += w[j] * x[r * cols + c];
    total += v * v;
  }
  e[r] = total;
}
"""


def test_inner_loops_the_row_tier_takes():
    plan = _plan(BATCH_SUM)  # a map: each lane sums the batch for its own elements
    assert [lp.kind for lp in plan.loops] == ["map"]
    plan = _plan(ROW_NORM)  # a reduction whose value comes from an inner loop of the element's own
    assert [(lp.kind, sorted(lp.accumulators.values())) for lp in plan.loops] == [("reduce", ["sum"])]


@pytest.mark.parametrize("text, why", [
    (ROW_NORM.replace("for (int j = 0; j < k; ++j) v += w[j] * x[r * cols + c];",
                      "for (int j = 0; j < k; ++j) total += w[j] * x[r * cols + c];"),
     "updates total, declared outside its item loop's body, in a loop nested in that loop"),
    (ROW_NORM.replace("float total = 0.0f;", "float total = 0.0f; int j = 0;").replace("for (int j = 0;", "for (j = 0;"),
     "inner loop whose counter is not declared in its header"),
    (ROW_NORM.replace("for (int j = 0; j < k; ++j) v += w[j] * x[r * cols + c];",
                      "for (int j = 0; j < k; ++j) { v += w[j] * x[r * cols + c]; j += 1; }"),
     "inner loop whose counter is assigned in its body|updates j"),
    (ROW_NORM.replace("for (int j = 0; j < k; ++j)", "for (int j = 0; j < k; ++c)"),
     "does not step its own counter|loop whose counter is assigned in its body"),
    (ROW_NORM.replace("j < k;", "j < (total > 1.0f ? 0 : k);"), "reads total in the loop that accumulates it"),
    (ROW_NORM.replace("v += w[j] * x[r * cols + c];", "{ if (v > 9.0f) return; v += w[j] * x[r * cols + c]; }"),
     "other than declarations, assignments, ifs and assertions"),
    (BATCH_SUM.replace("s += dy[(b * T + t) * C + c];", "s += dy[(b * T + t) * C + c]; g[c + b] = s;"),
     "at two different elements|does not move one-to-one"),
    (BATCH_SUM.replace("s += dy[(b * T + t) * C + c];", "s += dy[(b * T + t) * C + c]; g[c] = g[c + 1];"),
     "at two different elements"),
])
def test_inner_loops_the_row_tier_refuses(text, why):
    with pytest.raises(NotARowKernel, match=why):
        _plan(text)


def _program() -> str:
    return generate((OUTSIDE / PROGRAM).read_text(), SPECS[PROGRAM], PROGRAM).program


def test_the_inner_loop_stays_whole_in_each_lane():
    split = split_program(_program(), PROGRAM)
    part = read_editable(split.editable, split.harness, split.exported)
    (rewrite,), refused = row_warp_rewrites(part, split.harness, split.preamble)
    assert "for (int x = (0) + kl_lane; x < width; x += 32)" in rewrite.source
    assert "for (int t = - 3 ; t <=  3 ; t++) {" in rewrite.source  # the window, read with HALF expanded
    assert "out[row * width + x] = acc / norm;" in rewrite.source


@pytest.mark.nvcc
def test_the_inner_loop_rewrite_passes_the_static_gates():
    split = split_program(_program(), PROGRAM)
    part = read_editable(split.editable, split.harness, split.exported)
    (rewrite,), _ = row_warp_rewrites(part, split.harness, split.preamble)
    editable, _ = candidate_editable_part(rewrite.source, split)
    assert_passes_the_static_gates(split, editable)
