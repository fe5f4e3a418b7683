"""The offline optimizer's column tier (optimizers/offline/colsplit.py): a thread-per-item kernel
that reduces a long loop read coalesced gets several threads per item, the last to finish
combining their partial results, only where that keeps its meaning.

Tier 1: which kernels it takes and which it refuses, by class (more than one loop, a loop that
stores, reads strided across threads, stores before the loop, a short fixed loop, launch bounds
too small for a split, the row tier's refusals), and how it slots into the proposal loop.
Tier 2 (nvcc): the rewrites of the outside-style column programs pass the verifier's static
gates for sm_86 and sm_90.
"""

from __future__ import annotations

import dataclasses
import re

import pytest

from kernelloop.optimizers.base import FailedAttempt, NoMoreCandidates
from kernelloop.optimizers.offline.colsplit import (
    SPLITS,
    column_split_rewrites,
    plan_column_split,
    rewrite_kernel,
    split_limit,
)
from kernelloop.optimizers.offline.launcher import read_editable
from kernelloop.optimizers.offline.optimizer import OfflineOptimizer
from kernelloop.optimizers.offline.rowwarp import NotARowKernel, pure_helpers
from kernelloop.program.init import generate
from kernelloop.program.split import candidate_editable_part, split_program

from .outside_specs import OUTSIDE, SPECS

from .conftest import assert_passes_the_static_gates

COLUMN_PROGRAMS = ["bias_backward.cu", "matvec_transposed.cu"]


def _program(name: str) -> str:
    return generate((OUTSIDE / name).read_text(), SPECS[name], name).program


def _kernel(text: str):
    part = read_editable(text, "", [])
    (fn,) = [f for f in part.functions.values() if f.is_kernel]
    return fn, pure_helpers(list(part.functions.values()))


def _plan(text: str):
    fn, helpers = _kernel(text)
    return plan_column_split(fn, helpers)


COLUMN_SUM = """
__global__ void column_sums(float* out, const float* in, int rows, int cols) {
  int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  float s = 0.0f;
  for (int r = 0; r < rows; r++) s += in[(size_t)r * cols + c];
  out[c] = s / rows;
}
"""


def test_the_outside_style_column_programs_get_a_rewrite_per_split():
    for name in COLUMN_PROGRAMS:
        split = split_program(_program(name), name)
        part = read_editable(split.editable, split.harness, split.exported)
        rewrites, refused = column_split_rewrites(part, split.harness, split.preamble)
        assert [r.label.split(":")[1].split()[0] for r in rewrites] == [str(s) for s in SPLITS], (name, refused)
        for r, s in zip(rewrites, SPLITS):
            # the baseline's kernel stays, for where its launch is not legal; the rewrite beside it
            assert "_kl_rewritten(" in r.source
            r = dataclasses.replace(r, source=r.source[r.source.index("_kl_rewritten("):])
            assert f"dim3(32, {s})" in r.source and f"atomicAdd(&kl_arrived[threadIdx.x], 1u) != {s - 1}u" in r.source
            # the partials are published before the count and read after it, both fenced
            publish = r.source.index("kl_part_")
            fences = [m.start() for m in re.finditer(r"__threadfence_block\(\)", r.source)]
            count = r.source.index("atomicAdd(&kl_arrived")
            assert len(fences) == 2 and publish < fences[0] < count < fences[1]
            # the barrier comes before any of the kernel's own statements (early returns follow it)
            assert r.source.index("__syncthreads()") < r.source.index("blockIdx.x * blockDim.x + threadIdx.x")
            # the per-item store is made once: by the thread that combined
            assert re.search(r"if \(kl_owner\) \{ (dbias\[col\] \+= sum|y\[j\] = alpha \* acc);", r.source), r.source


def test_the_rewrite_keeps_the_accumulators_start_and_combines_in_a_fixed_order():
    fn, helpers = _kernel(COLUMN_SUM.replace("float s = 0.0f;", "float s = 1.0f;"))
    text = rewrite_kernel(fn, plan_column_split(fn, helpers), 8)
    assert "const float kl_s_before = s; s = 0;" in text
    assert "for (int r = (0) + threadIdx.y; r < rows; r += 8)" in text
    assert ("float kl_total = kl_part_s[0][threadIdx.x]; for (int kl_s = 1; kl_s < 8; ++kl_s) "
            "kl_total += kl_part_s[kl_s][threadIdx.x]; s = kl_s_before + kl_total;") in text


def test_a_float_max_accumulator_combines_as_fmaxf_does():
    # red team round 109: `s < p` kept the NaN seed of a slice that saw no row, where the loop's
    # fmaxf passed over it; fmaxf agrees with both loop forms (a comparison keeps a NaN seed in
    # every slice, and fmaxf of NaNs is NaN)
    text = COLUMN_SUM.replace("float s = 0.0f;", "float s = -INFINITY;").replace(
        "s += in[(size_t)r * cols + c];", "{ float v = in[(size_t)r * cols + c]; if (v > s) s = v; }")
    fn, helpers = _kernel(text)
    out = rewrite_kernel(fn, plan_column_split(fn, helpers), 32)
    assert ("s = ::fmaxf((typename ::kl_lib<decltype(s)>::type)(s), (typename ::kl_lib<decltype(kl_p)>::type)(kl_p));"
            in out and "kl_s_before" not in out), out


@pytest.mark.parametrize("text, why", [
    # two loops: a column variance needs the mean in every thread of the item
    (COLUMN_SUM.replace("out[c] = s / rows;", "float m = s / rows; float v = 0.0f;\n"
                        "  for (int r = 0; r < rows; r++) { float d = in[(size_t)r * cols + c] - m; v += d * d; }\n"
                        "  out[c] = v;"), "has 2 loop(s), not exactly one loop that only reduces"),
    # a loop that stores (a map) is not a reduction
    (COLUMN_SUM.replace("s += in[(size_t)r * cols + c];", "out[(size_t)r + c] = in[(size_t)r * cols + c] * 2.0f;"),
     "not exactly one loop that only reduces"),
    # reads strided across threads: the row tier's case
    (COLUMN_SUM.replace("in[(size_t)r * cols + c]", "in[(size_t)c * rows + r]"), "the row tier's case"),
    # a store before the loop would race with the thread that combines
    (COLUMN_SUM.replace("float s = 0.0f;", "out[c] = 0.0f; float s = 0.0f;"), "stores before its loop"),
    # a short fixed loop (a 5-tap filter): nothing to share
    (COLUMN_SUM.replace("r < rows", "r < 5"), "too short to share"),
    # a prefix dependence
    (COLUMN_SUM.replace("s += in[(size_t)r * cols + c];", "s += s * in[(size_t)r * cols + c];"),
     "reads an accumulator"),
    # other built-ins, atomics, barriers: the same refusals as the row tier
    (COLUMN_SUM.replace("out[c] = s / rows;", "out[c] = s / gridDim.x;"), "uses gridDim"),
    (COLUMN_SUM.replace("out[c] = s / rows;", "atomicAdd(out, s);"), "calls atomicAdd"),
])
def test_kernels_the_column_tier_refuses(text, why):
    with pytest.raises(NotARowKernel, match=re.escape(why)):
        _plan(text)


def test_an_argmax_is_left_to_the_row_tier():
    text = COLUMN_SUM.replace("float s = 0.0f;\n  for (int r = 0; r < rows; r++) s += in[(size_t)r * cols + c];\n  out[c] = s / rows;",
                              "float s = -1e30f; int at = 0;\n  for (int r = 0; r < rows; r++) "
                              "if (in[(size_t)r * cols + c] > s) { s = in[(size_t)r * cols + c]; at = r; }\n"
                              "  out[c] = s + at;")
    assert "at = r" in text
    with pytest.raises(NotARowKernel, match="argmax"):
        _plan(text)


def test_a_reference_accumulator_is_not_read_as_a_scalar():
    # Red team round 40: `float& acc = dbias[col]` was read as a copy, and the split made every
    # thread of an item update one element unsynchronised. A reference is refused by the front end.
    text = COLUMN_SUM.replace("float s = 0.0f;", "float& s = out[c];").replace("out[c] = s / rows;", "")
    part = read_editable(text, "", [])
    assert "column_sums" not in part.functions
    assert any("a reference variable is not supported" in p for p in part.problems), part.problems


def test_a_rewrite_never_runs_items_the_baseline_did_not_have():
    # Red team round 40: a kernel with no guard launched with exactly N threads (<<<1, OC>>>) got
    # extra items when the launch was rounded up to whole blocks; the rewrite passes the baseline's
    # thread count and returns for items at or past it.
    text = COLUMN_SUM.replace("  if (c >= cols) return;\n", "") + (
        "\nvoid launch(float* out, const float* in, int rows, int cols) {\n"
        "  column_sums<<<1, cols>>>(out, in, rows, cols);\n}\n")
    part = read_editable(text, "launch(0, 0, 0, 0);", ["void launch(float* out, const float* in, int rows, int cols)"])
    rewrites, refused = column_split_rewrites(part, "launch(0, 0, 0, 0);")
    assert rewrites, refused
    for r in rewrites:
        assert "int cols, long long kl_items)" in r.source
        assert "if ((long long)c >= kl_items) return;" in r.source
        assert "const dim3 kl_grid = dim3(1); const dim3 kl_block = dim3(cols);" in r.source
        assert "(out, in, rows, cols, ((long long)kl_grid.x * kl_block.x));" in r.source


def test_a_launch_with_dim3_grid_and_block_is_rewritten_to_code_that_counts_them():
    # Red team round 41: `dim3 grid(...), threads(256);` was cast to long long, which does not compile
    text = COLUMN_SUM + ("\nvoid launch(float* out, const float* in, int rows, int cols) {\n"
                         "  dim3 grid((cols + 255) / 256), threads(256);\n"
                         "  column_sums<<<grid, threads>>>(out, in, rows, cols);\n}\n")
    part = read_editable(text, "launch(0, 0, 0, 0);", ["void launch(float* out, const float* in, int rows, int cols)"])
    rewrites, refused = column_split_rewrites(part, "launch(0, 0, 0, 0);")
    assert rewrites, refused
    assert "const dim3 kl_grid = dim3(grid); const dim3 kl_block = dim3(threads);" in rewrites[0].source
    assert "((long long)kl_grid.x * kl_block.x)" in rewrites[0].source


def test_launch_bounds_limit_the_split():
    fn, _ = _kernel(COLUMN_SUM.replace("__global__ void", "__global__ void __launch_bounds__(256)"))
    assert split_limit(fn) == 8
    fn, _ = _kernel(COLUMN_SUM)
    assert split_limit(fn) == 32
    part = read_editable(COLUMN_SUM.replace("__global__ void", "__global__ void __launch_bounds__(128)")
                         + "\nvoid launch(float* out, const float* in, int rows, int cols) {\n"
                           "  column_sums<<<(cols + 127) / 128, 128>>>(out, in, rows, cols);\n}\n", "launch(0, 0, 0, 0);",
                         ["void launch(float* out, const float* in, int rows, int cols)"])
    rewrites, refused = column_split_rewrites(part, "launch(0, 0, 0, 0);")
    assert rewrites == [] and any("__launch_bounds__ below a block of 32 x 8" in r for r in refused), refused


def test_the_column_tier_is_proposed_split_by_split_then_the_optimizer_runs_out():
    from .test_offline_optimizer import request_for
    text = _program("bias_backward.cu")
    opt = OfflineOptimizer()
    failed: list[FailedAttempt] = []
    for iteration, split in enumerate(SPLITS, start=1):
        p = opt.propose(request_for(text, "bias", iteration=iteration, failed_attempts=list(failed)))
        assert p.approach == f"column tier: {split} threads per item of bias_backward_kernel"
        assert any("the last to finish combines" in n for n in p.notes), p.notes
        failed.append(FailedAttempt(iteration=iteration, approach=p.approach, kind="not_faster", reason="slower",
                                    source=p.source))
    with pytest.raises(NoMoreCandidates, match=f"generic tiers' {len(SPLITS)} rewrite"):
        opt.propose(request_for(text, "bias", iteration=len(SPLITS) + 1, failed_attempts=failed))


@pytest.mark.nvcc
@pytest.mark.parametrize("name", COLUMN_PROGRAMS)
def test_the_column_rewrites_pass_the_static_gates(name, tmp_path):
    text = _program(name)
    split = split_program(text, name)
    part = read_editable(split.editable, split.harness, split.exported)
    rewrites, _ = column_split_rewrites(part, split.harness, split.preamble)
    for rewrite in rewrites:
        editable, _ = candidate_editable_part(rewrite.source, split)
        assert_passes_the_static_gates(split, editable)
