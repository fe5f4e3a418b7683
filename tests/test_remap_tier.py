"""The offline optimizer's remap tier (optimizers/offline/remap.py): a thread-per-element kernel
whose index split puts neighbouring threads a row apart (`c = idx / rows; r = idx % rows`) gets
the other split, only where that keeps its meaning.

Tier 1: which kernels it takes (early-return and wrapping guards, casts, any names) and which it
refuses, by class (a row-first split, shared memory, atomics, the index used again, other
built-ins, a bound that is not the product of the extents, two divisors, a piece assigned), and
how it slots into the proposal loop. Tier 2 (nvcc): the rewrite of the outside-style program
passes the verifier's static gates for sm_86 and sm_90.
"""

from __future__ import annotations

import pytest

from kernelloop.optimizers.base import FailedAttempt, NoMoreCandidates
from kernelloop.optimizers.offline.launcher import read_editable
from kernelloop.optimizers.offline.optimizer import OfflineOptimizer
from kernelloop.optimizers.offline.remap import plan_remap, remap_rewrites, rewrite_kernel
from kernelloop.optimizers.offline.rowwarp import NotARowKernel, pure_helpers
from kernelloop.program.init import generate
from kernelloop.program.split import candidate_editable_part, split_program

from .conftest import assert_passes_the_static_gates
from .outside_specs import OUTSIDE, SPECS

PROGRAM = "channel_affine_colfirst.cu"


def _kernel(text: str):
    part = read_editable(text, "", [])
    (fn,) = [f for f in part.functions.values() if f.is_kernel]
    return fn, pure_helpers(list(part.functions.values()))


def _rewritten(text: str) -> str:
    fn, helpers = _kernel(text)
    return rewrite_kernel(fn, plan_remap(fn, helpers))


EARLY_RETURN = """
__device__ float act(float v) { return v > 0.0f ? v : 0.01f * v; }
__global__ void scale_cols(float* out, const float* in, const float* w, int rows, int cols) {
  int tid = blockIdx.x * blockDim.x + threadIdx.x;
  if (tid >= rows * cols) return;
  int col = tid / rows;
  int row = tid % rows;
  out[row * cols + col] = act(in[row * cols + col] * w[col]);
}
"""

WRAPPED = """
__global__ void k(double* y, const double* x, long m, long n) {
  const long g = (long)blockIdx.x * blockDim.x + threadIdx.x;
  if (g < n * m) {
    const long j = (long)(g / m);
    const long i = (long)(g % m);
    y[i * n + j] = 2.0 * x[i * n + j];
  }
}
"""


def test_a_column_first_split_is_swapped_and_nothing_else_changes():
    out = _rewritten(EARLY_RETURN)
    assert "int col = (tid % (cols));" in out and "int row = (tid / (cols));" in out
    assert "if (tid >= rows * cols) return;" in out and "out[row * cols + col] = act(in[row * cols + col] * w[col]);" in out
    wrapped = _rewritten(WRAPPED)
    # the bound's other factor, whichever side of the product it is on, with the piece's own cast
    assert "const long j = (long)(g % (n));" in wrapped and "const long i = (long)(g / (n));" in wrapped


@pytest.mark.parametrize("text, why", [
    (EARLY_RETURN.replace("int col = tid / rows;\n  int row = tid % rows;", "int row = tid / cols;\n  int col = tid % cols;")
     .replace("tid >= rows * cols", "tid >= cols * rows"), "already gives neighbouring threads neighbouring elements"),
    (EARLY_RETURN.replace("out[row * cols + col] =", "__shared__ float s[32]; s[0] = 1.0f; out[row * cols + col] ="),
     "shared memory"),
    (EARLY_RETURN.replace("out[row * cols + col] =", "atomicAdd(out, 1.0f); out[row * cols + col] ="), "calls atomicAdd"),
    (EARLY_RETURN.replace("out[row * cols + col] =", "out[tid] = 0.0f; out[row * cols + col] ="),
     "uses its thread index tid 1 more time"),
    (EARLY_RETURN.replace("out[row * cols + col] =", "if (threadIdx.x == 0) w = 0; out[row * cols + col] ="),
     "uses threadIdx besides its thread index"),
    (EARLY_RETURN.replace("tid >= rows * cols", "tid >= rows * cols + 1"), "not a product of two extents"),
    (EARLY_RETURN.replace("tid >= rows * cols", "tid >= cols * cols"), "not rows times an extent"),
    (EARLY_RETURN.replace("if (tid >= rows * cols) return;\n", ""), "has no guard"),
    (EARLY_RETURN.replace("int row = tid % rows;", "int row = tid % cols;"), "takes the remainder by another"),
    (EARLY_RETURN.replace("int row = tid % rows;", "int row = tid % rows; row += 1;"), "assigns row after"),
    (EARLY_RETURN.replace("int col = tid / rows;", "int col = tid / rows / 2;"), "quotient and a remainder"),
])
def test_kernels_the_remap_tier_refuses(text, why):
    fn, helpers = _kernel(text)
    with pytest.raises(NotARowKernel, match=why):
        plan_remap(fn, helpers)


def _program() -> str:
    return generate((OUTSIDE / PROGRAM).read_text(), SPECS[PROGRAM], PROGRAM).program


def test_the_outside_style_program_gets_one_rewrite_that_keeps_its_launcher():
    split = split_program(_program(), PROGRAM)
    part = read_editable(split.editable, split.harness, split.exported)
    rewrites, refused = remap_rewrites(part, split.harness, split.preamble)
    assert len(rewrites) == 1, refused
    (r,) = rewrites
    assert r.label == "remap tier: channel_affine split row-first" and r.launcher == "channel_affine_forward"
    assert "const unsigned int ch = (i % (channels));" in r.source and "const unsigned int p = (i / (channels));" in r.source
    assert "channel_affine<<<grid, block>>>(x, gamma, beta, y, pixels, channels);" in r.source
    assert "CHECK_LAUNCH();" in r.source


def test_the_remap_tier_is_proposed_once_then_the_optimizer_runs_out():
    from .test_offline_optimizer import request_for
    text = _program()
    opt = OfflineOptimizer()
    p = opt.propose(request_for(text, "channel_affine", iteration=1))
    assert p.approach == "remap tier: channel_affine split row-first"
    assert any("column-first" in n for n in p.notes), p.notes
    failed = [FailedAttempt(iteration=1, approach=p.approach, kind="not_faster", reason="slower", source=p.source)]
    with pytest.raises(NoMoreCandidates, match="generic tiers' 1 rewrite"):
        opt.propose(request_for(text, "channel_affine", iteration=2, failed_attempts=failed))


@pytest.mark.nvcc
def test_the_remap_rewrite_passes_the_static_gates():
    text = _program()
    split = split_program(text, PROGRAM)
    part = read_editable(split.editable, split.harness, split.exported)
    (rewrite,), _ = remap_rewrites(part, split.harness, split.preamble)
    editable, _ = candidate_editable_part(rewrite.source, split)
    assert_passes_the_static_gates(split, editable)


def test_a_launch_not_shown_to_cover_the_guard_is_refused():
    # red team round 80: the guard is the whole tensor, the launch covers the first `active` channels: the
    # swap would update other elements. Only grid * block == bound or a ceiling division of it is taken.
    from .conftest import FIXTURES
    text = (FIXTURES / "redteam" / "round80" / "remap_partial_launch" / "baseline.cu").read_text()
    split = split_program(text, "baseline.cu")
    part = read_editable(split.editable, split.harness, split.exported)
    rewrites, refused = remap_rewrites(part, split.harness, split.preamble)
    assert rewrites == [] and any("not shown to cover its guard's pixels * channels threads" in r for r in refused), refused
    exact = _program().replace("channel_affine<<<grid, block>>>", "channel_affine<<<pixels, channels>>>")
    split = split_program(exact, PROGRAM)
    part = read_editable(split.editable, split.harness, split.exported)
    assert len(remap_rewrites(part, split.harness, split.preamble)[0]) == 1  # grid * block is the bound itself


def test_a_kernel_launched_twice_is_not_changed_in_place():
    # the remap tier rewrites the kernel itself: a second launch (another branch of a dispatch) would run
    # the swapped kernel under a launch nobody checked
    twice = _program().replace("channel_affine<<<grid, block>>>(x, gamma, beta, y, pixels, channels);",
                               "if (pixels > 0) channel_affine<<<grid, block>>>(x, gamma, beta, y, pixels, channels); "
                               "else channel_affine<<<grid, block>>>(x, gamma, beta, y, pixels, channels);")
    assert twice != _program()
    split = split_program(twice, PROGRAM)
    part = read_editable(split.editable, split.harness, split.exported)
    rewrites, refused = remap_rewrites(part, split.harness, split.preamble)
    assert rewrites == [] and any("launched more than once (the remap tier changes the kernel in place)" in r
                                  for r in refused), refused
