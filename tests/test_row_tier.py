"""The offline optimizer's generic row tier (optimizers/offline/rowwarp.py): a kernel that gives
each thread one row is rewritten to give each warp one row, only where that keeps its meaning.

Tier 1: which kernels it takes and which it refuses, by class (a sequential dependence, an
element read at another index, cross-thread built-ins, barriers, shared memory, atomics, rows
already read coalesced, ...), and how it slots into the proposal loop. Tier 2 (nvcc): the
rewrites of the outside-style row programs pass the verifier's static gates.
"""

from __future__ import annotations

import re

import pytest

from kernelloop.config import Settings
from kernelloop.optimizers.base import FailedAttempt, NoMoreCandidates
from kernelloop.optimizers.offline.launcher import read_editable, read_launcher
from kernelloop.optimizers.offline.optimizer import OfflineOptimizer
from kernelloop.optimizers.offline.rowwarp import (
    NUMBER_TYPE,
    NotARowKernel,
    plan_row_warp,
    pure_helpers,
    rewrite_kernel,
    row_warp_rewrites,
    verified_instantiation,
)
from kernelloop.program.init import generate
from kernelloop.program.split import candidate_editable_part, split_program
from kernelloop.tools.nvcc import find_toolchain
from kernelloop.verify.gate import static_gates

from .outside_specs import OUTSIDE, SPECS

from .conftest import FIXTURES, assert_passes_the_static_gates, shared_cache_dir

ROW_PROGRAMS = ["layernorm_rows_llmc.cu", "rmsnorm_rows.cu", "row_sumsq_ext.cu", "row_dot_pairs_ext.cu",
                "row_absmax_scale_ns.cu"]


def _program(name: str) -> str:
    return generate((OUTSIDE / name).read_text(), SPECS[name], name).program


def _plan(kernel_text: str):
    part = read_editable(kernel_text, "", [])
    (fn,) = [f for f in part.functions.values() if f.is_kernel]
    return fn, plan_row_warp(fn, pure_helpers(list(part.functions.values())))


SOFTMAX_ROWS = """
__global__ void softmax_rows(float* out, const float* inp, int N, int C) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N) {
        const float* inp_row = inp + i * C;
        float* out_row = out + i * C;
        float maxval = -INFINITY;
        for (int j = 0; j < C; j++) {
            if (inp_row[j] > maxval) {
                maxval = inp_row[j];
            }
        }
        double sum = 0.0;
        for (int j = 0; j < C; j++) {
            out_row[j] = expf(inp_row[j] - maxval);
            sum += out_row[j];
        }
        for (int j = 0; j < C; j++) {
            out_row[j] /= (float)sum;
        }
    }
}
"""


_OTHER_KERNEL = {"row_absmax_scale_ns.cu": "scale_rows_kernel"}


def test_the_outside_style_row_programs_get_a_rewrite():
    for name in ROW_PROGRAMS:
        split = split_program(_program(name), name)
        part = read_editable(split.editable, split.harness, split.exported)
        rewrites, refused = row_warp_rewrites(part, split.harness)
        # a launcher's other kernel (not one thread per row) is refused, and only that one
        other = _OTHER_KERNEL.get(name)
        assert len(rewrites) == 1 and all(other and f"kernel {other} " in r for r in refused), (name, refused)
        (r,) = rewrites
        assert "kl_lane" in r.source and "__shfl_xor_sync" in r.source and "__syncwarp();" in r.source
        # the launch keeps the baseline's rows: G blocks of B threads become G*B warps
        # (the baseline's configuration evaluated once into kl_grid and kl_block: launch_guard)
        assert re.search(r"_kl_rewritten(<\w+>)?<<<\(unsigned int\)\(\(\(\(long long\)kl_grid\.x \* kl_block\.x\) \+ 7\) / 8\), "
                         r"256, kl_shmem(, stream)?>>>", r.source), r.source
        # everything else in the editable part is kept verbatim
        assert split.editable.count("cudaCheck(cudaGetLastError());") == r.source.count("cudaCheck(cudaGetLastError());")


def test_a_loop_that_stores_and_sums_what_it_stored_is_split_and_a_max_by_comparison_is_a_max():
    fn, plan = _plan(SOFTMAX_ROWS)
    kinds = [(lp.kind, sorted(lp.accumulators.values())) for lp in plan.loops]
    assert kinds == [("reduce", ["max"]), ("map", ["sum"]), ("map", [])]
    text = rewrite_kernel(fn, plan)
    exact = "(typename ::kl_lib<decltype(maxval)>::type)(maxval)"
    assert f"maxval = ::fmaxf({exact}, ::__shfl_xor_sync(0xffffffffu, {exact}, kl_offset));" in text
    assert "const double kl_sum_before = sum; sum = 0;" in text
    assert "sum = kl_sum_before + sum;" in text  # the value before the loop is kept, whatever it was


ROW_SUMSQ_CHECKED = """
__global__ void row_sumsq(float* out, const float* x, int rows, int cols) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    assert(cols > 0);
    float acc = 0.0f;
    for (int c = 0; c < cols; c++) {
        assert(x[r * cols + c] == x[r * cols + c]);
        acc += x[r * cols + c] * x[r * cols + c];
    }
    assert(acc >= 0.0f);
    out[r] = acc;
}
"""


def test_device_assertions_stay_where_each_lane_checks_what_the_thread_checked():
    # the row's checks by every lane alike (after the butterfly every lane holds the whole sum),
    # each element's by the lane that takes it
    fn, plan = _plan(ROW_SUMSQ_CHECKED)
    text = rewrite_kernel(fn, plan)
    assert [line.strip() for line in text.splitlines() if "assert(" in line and "static_assert" not in line] == [
        "assert(cols > 0);", "assert(x[r * cols + c] == x[r * cols + c]);", "assert(acc >= 0.0f);"]
    # a check of the sum inside the loop that makes it would see one lane's partial
    with pytest.raises(NotARowKernel, match="reads acc in the loop that accumulates it"):
        _plan(ROW_SUMSQ_CHECKED.replace("assert(x[r * cols + c] == x[r * cols + c]);", "assert(acc < 1e30f);"))
    # a helper that asserts is no pure helper: a pure one may be evaluated where the kernel did not call it
    helper = "__device__ float checked(float v) { assert(v == v); return v; }\n"
    with pytest.raises(NotARowKernel, match="calls checked"):
        _plan(helper + ROW_SUMSQ_CHECKED.replace("acc += x[r * cols + c] * x[r * cols + c];",
                                                 "acc += checked(x[r * cols + c]);"))


def test_an_embedding_gather_checked_by_a_device_assert_gets_a_row_rewrite():
    name = "gather_rows_assert_ext.cu"
    split = split_program(_program(name), name)
    part = read_editable(split.editable, split.harness, split.exported)
    (rewrite,), refused = row_warp_rewrites(part, split.harness, split.preamble)
    assert rewrite.label == "row tier: one warp per row of gather_rows_kernel", refused
    assert "assert(id >= 0 && id < table_rows)" in rewrite.source.replace(" ;", ";")


def test_renaming_every_identifier_changes_nothing():
    renamed = SOFTMAX_ROWS
    for old, new in [("softmax_rows", "k7"), ("inp_row", "q"), ("out_row", "w"), ("maxval", "hi"), ("sum", "tot"),
                     ("inp", "src"), ("out", "dst"), ("N", "rows"), ("C", "width")]:
        renamed = re.sub(rf"\b{old}\b", new, renamed)
    _, a = _plan(SOFTMAX_ROWS)
    _, b = _plan(renamed)
    assert [(lp.kind, sorted(lp.accumulators.values())) for lp in a.loops] == \
        [(lp.kind, sorted(lp.accumulators.values())) for lp in b.loops]


# Taken: the shapes real row kernels come in (our own code, in the styles of llm.c and others).
TAKEN = {
    # a value of one element clamped in place (`if (g > hi) g = hi;`): a local of the iteration, no max
    # or min across the row; the row's own maximum beside it still is one
    "clamp_of_an_iteration_local": """
__global__ void gain_clip(const float* __restrict__ in, float* __restrict__ out, float* peak, int rows, int cols,
                          float gain) {
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  float top = 0.0f;
  for (int c = 0; c < cols; ++c) {
    float g = in[(size_t)r * cols + c] * gain;
    if (g > 1.0f) g = 1.0f;
    if (g < -1.0f) g = -1.0f;
    if (g > top) top = g;
    out[(size_t)r * cols + c] = g;
  }
  peak[r] = top;
}""",
    "integer_clamp_of_an_iteration_local": """
__global__ void posterize(const unsigned short* src, unsigned short* dst, int lines, int pitch, int shift) {
  int line = blockIdx.x * blockDim.x + threadIdx.x;
  if (line < lines) {
    for (int x = 0; x < pitch; x++) {
      int q = (src[line * pitch + x] >> shift) << shift;
      if (q < 64) { q = 64; }
      if (65000 < q) q = 65000;
      dst[line * pitch + x] = (unsigned short)q;
    }
  }
}""",
    # an index split into coordinates (b, t) with / and %, a gather through a loaded index
    "coordinates_and_gather": """
__global__ void embed(float* out, const int* tok, const float* table, const float* pos, int B, int T, int C) {
  int idx = blockIdx.x * blockDim.x + threadIdx.x;
  if (idx < B * T) {
    int b = idx / T, t = idx % T;
    int id = tok[b * T + t];
    float* o = out + (b * T + t) * C;
    for (int i = 0; i < C; i++) o[i] = table[id * C + i] + pos[t * C + i];
  }
}""",
    # a side-effect-free device helper, __ldg, a ternary store, size_t offsets
    "helper_ldg_ternary": """
__device__ __forceinline__ float gelu_tanh(float x) {
  const float k = 0.7978845608f;
  return 0.5f * x * (1.0f + tanhf(k * (x + 0.044715f * x * x * x)));
}
__global__ void __launch_bounds__(128) row_gelu_scale(float* __restrict__ y, const float* __restrict__ x,
                                                     const float* __restrict__ s, int rows, int cols) {
  const unsigned int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  const float sc = __ldg(&s[r]);
  for (int c = 0; c < cols; ++c) {
    const float v = __ldg(&x[(size_t)r * cols + c]);
    y[(size_t)r * cols + c] = v > 0.0f ? gelu_tanh(v) * sc : 0.0f;
  }
}""",
    # greedy decoding: the first index of each row's maximum (a value and where), logits behind a row pointer
    "argmax_first_index": """
__global__ void greedy_tokens(const float* logits, int* token, float* score, int rows, int vocab) {
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  const float* p = logits + (size_t)r * vocab;
  float best = -INFINITY;
  int best_at = 0;
  for (int v = 0; v < vocab; ++v) {
    const float x = p[v];
    if (best < x) { best_at = v; best = x; }
  }
  token[r] = best_at;
  score[r] = best;
}""",
    # a template over the element type, a 64-bit counter converted to the 32-bit index it records
    "argmax_converted_index": """
template <typename T>
__global__ void top1(const T* __restrict__ x, int* __restrict__ at_out, long long rows, long long n) {
  const long long r = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  T best = x[r * n];
  int at = 0;
  for (long long j = 1; j < n; ++j) {
    const T v = x[r * n + j];
    if (v > best) { best = v; at = static_cast<int>(j); }
  }
  at_out[r] = at;
}""",
    # the nearest centroid: an argmin of a distance computed in the loop, double
    "argmin_nearest": """
__global__ void nearest(const double* d2, long long* which, int n, int k) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  double low = d2[i * k];
  long long at = 0;
  for (long long j = 1; j < k; j++) {
    double v = d2[i * k + j] * 0.5;
    if (v < low) { low = v; at = j; }
  }
  which[i] = at;
}""",
    # a function template, a row whose length depends on the row (causal), an early store-and-return
    "template_causal": """
template <typename T>
__global__ void causal_dot(T* out, const T* q, const T* k, int rows, int d) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= rows * rows) return;
  int a = i / rows, b = i % rows;
  if (b > a) { out[i] = T(0); return; }
  T acc = T(0);
  for (int j = 0; j < d; j++) acc += q[a * d + j] * k[b * d + j];
  out[i] = acc;
}""",
}


@pytest.mark.parametrize("name", sorted(TAKEN))
def test_real_row_kernel_shapes_are_taken(name):
    fn, plan = _plan(TAKEN[name])
    text = rewrite_kernel(fn, plan)
    assert "kl_lane" in text and "(kl_lane == 0)" in text or plan.loops[0].kind == "map"
    if name == "helper_ldg_ternary":
        assert plan.block == 128  # __launch_bounds__ caps the block
    if name.startswith("arg"):
        # the lanes' pairs meet by value, a tie to the smaller index: the first the sequential loop saw
        better = ">" if name.startswith("argmax") else "<"
        assert f"if (kl_other {better} " in text and "kl_other_at < " in text, text


@pytest.mark.nvcc
@pytest.mark.parametrize("name", sorted(TAKEN))
def test_the_rewrites_of_real_row_kernel_shapes_compile_without_spills(name, tmp_path):
    from kernelloop.optimizers.offline.probe import ResourceProbe
    fn, plan = _plan(TAKEN[name])
    text = TAKEN[name].replace(fn.item.text, rewrite_kernel(fn, plan))
    if name == "template_causal":
        # the rewrite takes one more parameter: the baseline's thread count (kl_items)
        text += "\ntemplate __global__ void causal_dot<float>(float*, const float*, const float*, int, int, long long);\n"
    result = ResourceProbe(tmp_path).check("#include <cuda_runtime.h>\n" + NUMBER_TYPE + "\n" + text, "sm_86")
    assert result is not None and result.ok, result.error if result else "no nvcc"
    assert not any(k.spills for k in result.kernels)


# Each refusal is a class: what the rewrite would change if it were taken.
ROW_BASE = """
__device__ float counter_cell[1];
__device__ float bump(float v) { counter_cell[0] += 1.0f; return v; }
__global__ void k(float* out, float* stat, const float* in, int rows, int cols) {
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  float acc = 0.0f;
  for (int c = 0; c < cols; c++) acc += in[r * cols + c];
  for (int c = 0; c < cols; c++) out[r * cols + c] = in[r * cols + c] / acc;
  stat[r] = acc;
}
"""
REFUSED = [
    # a sequential dependence: the loop stores what it accumulates (a running sum)
    ("for (int c = 0; c < cols; c++) out[r * cols + c] = in[r * cols + c] / acc;",
     "float run = 0.0f; for (int c = 0; c < cols; c++) { run += in[r * cols + c]; out[r * cols + c] = run; }",
     "reads run in the loop that accumulates it"),
    # an element of the stored array read at another index (a recurrence through memory)
    ("out[r * cols + c] = in[r * cols + c] / acc;", "out[r * cols + c] = out[r * cols + c - 1] + in[r * cols + c];",
     "two different elements"),
    # two iterations store the same element
    ("out[r * cols + c] = in[r * cols + c] / acc;", "out[r * cols + c / 2] = in[r * cols + c];",
     "one-to-one"),
    # a scalar carried across iterations that is no sum, max or min
    ("acc += in[r * cols + c];", "acc = acc * 0.5f + in[r * cols + c];", "not a sum, max or min"),
    ("acc += in[r * cols + c];", "acc += in[r * cols + c] * acc;", "from a value that reads an accumulator"),
    # leaving the loop early
    ("acc += in[r * cols + c];", "{ if (in[r * cols + c] < 0.0f) break; acc += in[r * cols + c]; }", "other than"),
    # nested loops
    ("acc += in[r * cols + c];", "for (int d = 0; d < 4; d++) acc += in[r * cols + c] * d;", "in a loop nested in that loop"),
    # other uses of the thread mapping, cross-thread operations
    ("stat[r] = acc;", "stat[r] = acc + threadIdx.x;", "uses threadIdx besides"),
    ("stat[r] = acc;", "stat[r] = acc * gridDim.x;", "uses gridDim besides"),
    ("stat[r] = acc;", "__syncthreads(); stat[r] = acc;", "calls __syncthreads"),
    ("stat[r] = acc;", "atomicAdd(stat, acc);", "calls atomicAdd"),
    ("stat[r] = acc;", "stat[r] = __shfl_down_sync(0xffffffff, acc, 1);", "calls __shfl_down_sync"),
    ("float acc = 0.0f;", "__shared__ float tile[32]; float acc = 0.0f;", "shared memory"),
    ("stat[r] = acc;", "printf(\"%f\", acc); stat[r] = acc;", "calls printf"),
    # a row index that is not the global x index
    ("int r = blockIdx.x * blockDim.x + threadIdx.x;", "int r = blockIdx.x;", "declares no one-dimensional"),
    ("int r = blockIdx.x * blockDim.x + threadIdx.x;", "int r = blockIdx.y * blockDim.y + threadIdx.y;",
     "declares no one-dimensional"),
    # a helper with a side effect is not a math function
    ("stat[r] = acc;", "stat[r] = bump(acc);", "calls bump"),
    # rows already read coalesced (column-major storage: thread r reads element c * rows + r)
    ("acc += in[r * cols + c];", "acc += in[c * rows + r];", None),
    # a counter the body changes, a bound that moves
    ("acc += in[r * cols + c];", "{ acc += in[r * cols + c]; c += 1; }", "counter is assigned"),
    ("acc += in[r * cols + c];", "{ acc += in[r * cols + c]; c++; }", "counter is assigned"),
    # an argmax whose ties go to the last index (>=), or that records something other than the counter
    ("for (int c = 0; c < cols; c++) acc += in[r * cols + c];",
     "int at = 0; for (int c = 0; c < cols; c++) if (in[r * cols + c] >= acc) { acc = in[r * cols + c]; at = c; }",
     "not a sum, max or min"),
    ("for (int c = 0; c < cols; c++) acc += in[r * cols + c];",
     "int at = 0; for (int c = 0; c < cols; c++) if (in[r * cols + c] > acc) { acc = in[r * cols + c]; at = c + 1; }",
     "not a sum, max or min"),
    ("for (int c = 0; c < cols; c++) acc += in[r * cols + c];",
     "int at = 0; for (int c = 0; c < cols; c++) { if (in[r * cols + c] > acc) { acc = in[r * cols + c]; at = c; } "
     "stat[r * cols + c] = at; }", "reads at in the loop"),
    # a while loop
    ("for (int c = 0; c < cols; c++) acc += in[r * cols + c];",
     "int c = 0; while (c < cols) { acc += in[r * cols + c]; c++; }", "while statement"),
]


@pytest.mark.parametrize("old, new, why", REFUSED, ids=[n[:40] for _, n, _ in REFUSED])
def test_kernels_whose_meaning_the_rewrite_would_change_are_refused(old, new, why):
    assert old in ROW_BASE
    _plan(ROW_BASE)  # the base kernel is taken
    text = ROW_BASE.replace(old, new)
    if why is None:  # column-major rows: the reduction is the only loop
        text = text.replace("  for (int c = 0; c < cols; c++) out[r * cols + c] = in[r * cols + c] / acc;\n", "")
        why = "already reads and writes its rows coalesced"
    with pytest.raises(NotARowKernel, match=re.escape(why)):
        _plan(text)


@pytest.mark.parametrize("accumulate", [
    # red team round 40: a field of a local flag, set in the row loop, stayed one lane's partial
    "int2 seen = {0, 0};\n        for (int j = 0; j < C; j++) { if (isnan(inp_row[j])) seen.x = 1; else sum += inp_row[j]; }",
    # a float2 accumulator: the same class
    "float2 acc2 = {0.f, 0.f};\n        for (int j = 0; j < C; j++) { acc2.x += inp_row[j]; acc2.y += inp_row[j] * inp_row[j]; }",
])
def test_a_field_of_a_local_assigned_in_a_row_loop_is_refused(accumulate):
    text = SOFTMAX_ROWS.replace("double sum = 0.0;", "double sum = 0.0;\n        " + accumulate)
    with pytest.raises(NotARowKernel, match="in a loop \\(only scalars and array elements are read\\)"):
        _plan(text)


def test_a_helper_with_side_effects_through_a_reference_or_a_global_is_not_pure():
    # Red team round 42: `finite_or_flag(float v, int& bad)` set a flag no rewrite saw; the row
    # tier took it as pure, and the flag stayed one lane's.
    from .conftest import FIXTURES
    text = (FIXTURES / "redteam" / "round42" / "row_flag_through_reference.cu").read_text()
    part = read_editable(text, "", [])
    helpers = pure_helpers(list(part.functions.values()))
    assert "finite_or_flag" not in helpers
    global_writer = ("__device__ int g_seen;\n__device__ float note(float v) { g_seen = 1; return v; }\n"
                     "__device__ float clean(float v, const float& s) { return v * s; }\n")
    part = read_editable(global_writer, "", [])
    assert pure_helpers(list(part.functions.values())) == frozenset({"clean"})


@pytest.mark.parametrize("helper", [
    # round 43: the reference behind an alias, a template argument, or a member of a struct parameter
    "using flag_t = int&;\n__device__ float checked(flag_t bad, float v) { if (fabsf(v) > 1e6f) { bad = 1; return 0.f; } return v; }",
    "template <class T> __device__ float checked(T bad, float v) { if (fabsf(v) > 1e6f) { bad = 1; return 0.f; } return v; }",
    "struct Flag { int& r; };\n__device__ float checked(Flag g, float v) { if (fabsf(v) > 1e6f) { g.r = 1; return 0.f; } return v; }",
    "__device__ float checked(int& bad, float v) { if (fabsf(v) > 1e6f) { bad++; return 0.f; } return v; }",
])
def test_a_helper_that_assigns_to_a_parameter_however_spelled_is_not_pure(helper):
    part = read_editable(helper, "", [])
    assert "checked" in part.functions, part.problems
    assert "checked" not in pure_helpers(list(part.functions.values()))


def test_an_accumulated_value_that_reads_a_later_accumulator_is_refused():
    # Red team round 42: `s += m > 0.5f ? x : 0; if (x > m) m = x;` read m before m was known to
    # be an accumulator; each slice would see its own running max.
    text = SOFTMAX_ROWS.replace("double sum = 0.0;", "double sum = 0.0;\n        float s2 = 0.f, m2 = -1.f;\n"
                                "        for (int j = 0; j < C; j++) { s2 += m2 > 0.5f ? inp_row[j] : 0.f; "
                                "if (inp_row[j] > m2) m2 = inp_row[j]; }")
    with pytest.raises(NotARowKernel, match="accumulates a value that reads m2, an accumulator of the same loop"):
        _plan(text)


def test_the_row_rewrite_guards_rows_the_baseline_never_had():
    name = "rmsnorm_rows.cu"
    split = split_program(_program(name), name)
    part = read_editable(split.editable, split.harness, split.exported)
    (rewrite,), _ = row_warp_rewrites(part, split.harness)
    assert "float eps, long long kl_items)" in rewrite.source
    assert "if ((long long)row >= kl_items) return;" in rewrite.source
    assert "const dim3 kl_grid = dim3((rows + threads - 1) / threads); const dim3 kl_block = dim3(threads);" \
        in rewrite.source
    assert "1e-6f, ((long long)kl_grid.x * kl_block.x));" in rewrite.source


def test_a_kernel_that_someone_else_launches_too_is_left_alone():
    split = split_program(_program("rmsnorm_rows.cu"), "rmsnorm_rows.cu")
    part = read_editable(split.editable, split.harness + "\n// rmsnorm_rows<<<1, 32>>>", split.exported)
    rewrites, _ = row_warp_rewrites(part, split.harness + "\nvoid other() { rmsnorm_rows<<<1, 32>>>(0, 0, 0, 0, 0, 0, 0.f); }")
    assert rewrites == []


def test_the_negative_control_gets_no_proposal_and_says_why():
    text = _program("row_running_sum.cu")
    split = split_program(text, "row_running_sum.cu")
    from .test_offline_optimizer import request_for
    with pytest.raises(NoMoreCandidates, match="row tier: kernel row_running_sum reads acc in the loop"):
        OfflineOptimizer().propose(request_for(text, "row_running_sum"))
    assert split.editable


def test_the_row_tier_is_proposed_once_then_the_optimizer_runs_out():
    from .test_offline_optimizer import request_for
    text = _program("layernorm_rows_llmc.cu")
    opt = OfflineOptimizer()
    p = opt.propose(request_for(text, "layernorm"))
    assert p.approach == "row tier: one warp per row of layernorm_forward_kernel1"
    assert any("row loop(s) (reduce (sum), reduce (sum), map)" in n for n in p.notes), p.notes
    failed = FailedAttempt(iteration=1, approach=p.approach, kind="correctness", reason="rejected", source=p.source)
    with pytest.raises(NoMoreCandidates, match="generic tiers' 1 rewrite"):
        opt.propose(request_for(text, "layernorm", iteration=2, failed_attempts=[failed]))


@pytest.mark.nvcc
@pytest.mark.parametrize("name", [*ROW_PROGRAMS, "gather_rows_assert_ext.cu"])
def test_the_row_rewrites_pass_the_static_gates(name, tmp_path):
    text = _program(name)
    split = split_program(text, name)
    part = read_editable(split.editable, split.harness, split.exported)
    (rewrite,), _ = row_warp_rewrites(part, split.harness, split.preamble)
    editable, _ = candidate_editable_part(rewrite.source, split)
    assert_passes_the_static_gates(split, editable)


def test_a_wrapper_of_a_template_launcher_is_read_through_to_the_template():
    # init's wrapper calls `rowstats::row_sumsq_cuda<float>(...)`: the launcher read is the template
    # (its `(void)numel;` does nothing), so the tier rewrites the template kernel for every type
    split = split_program(_program("row_sumsq_ext.cu"), "row_sumsq_ext.cu")
    part = read_editable(split.editable, split.harness, split.exported)
    (launcher,) = part.launchers
    assert launcher.fn.name == "row_sumsq_cuda" and launcher.problem is None, launcher.problem
    (rewrite,), _ = row_warp_rewrites(part, split.harness)
    assert "template void row_sumsq_cuda<double>" in rewrite.source  # the double instantiation kept
    # only the instantiation the verifier runs (float, from the wrapper) changes: the rewritten kernel is
    # a template of its own, launched under `if constexpr`; double keeps the original kernel and launch
    assert re.search(r"if constexpr \(::kl_same_type<scalar_t, float>::value\) \{ \{ const dim3 kl_grid = .*"
                     r"row_sumsq_kernel_kl_rewritten<scalar_t><<<", rewrite.source)
    assert "} else { row_sumsq_kernel<scalar_t><<<blocks, kThreads, 0, stream>>>(x, out, rows, cols); }" in rewrite.source
    original = split.editable[split.editable.index("template <typename scalar_t>\n__global__"):]
    original = original[:original.index("\n}\n") + 3]
    assert original in rewrite.source  # the original kernel, verbatim


def test_a_template_launcher_the_harness_does_not_reach_through_a_wrapper_is_not_rewritten():
    text = """
template <typename T>
__global__ void sumsq(const T* x, T* out, int rows, int cols) {
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  T acc = 0;
  for (int c = 0; c < cols; ++c) acc += x[r * cols + c] * x[r * cols + c];
  out[r] = acc;
}
template <typename T>
void go(const T* x, T* out, int rows, int cols) { sumsq<T><<<(rows + 255) / 256, 256>>>(x, out, rows, cols); }
template void go<float>(const float*, float*, int, int);
"""
    # the harness calls it with its type deduced: which instantiation runs is not written anywhere the tiers read
    harness = "go(x, out, rows, cols);"
    part = read_editable(text, harness, ["template <typename T> void go(const T*, T*, int, int)"])
    rewrites, refused = row_warp_rewrites(part, harness)
    assert not rewrites and any("not reach through a wrapper" in r for r in refused), refused


def test_a_discarded_value_is_no_work_but_a_discarded_call_is():
    from kernelloop.optimizers.offline.launcher import read_launcher
    base = """void go(float* y, const float* x, int n, int unused) {
  %s
  k<<<(n + 255) / 256, 256>>>(y, x, n);
}
__global__ void k(float* y, const float* x, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = x[i]; }
"""
    for stmt, problem in [("(void)unused;", None), ("(void)(unused);", None),
                          ("(void)side(unused);", "does more than launch one kernel (statement calling side)"),
                          ("(void)(unused + 1);", "computes something besides the launch"),
                          # not a parameter: a macro may stand behind it (red team round 83)
                          ("(void)SYNC_AND_CHECK;", "computes something besides the launch")]:
        part = read_editable(base % stmt, "", [])
        assert read_launcher(part.functions["go"]).problem == problem, stmt


@pytest.mark.parametrize("folder", ["template_condition_scope", "template_condition_scope/variant_namespace_alias"])
def test_a_template_argument_the_launchers_scope_may_read_differently_is_not_pasted_into_it(folder):
    # red team round 84: the wrapper (file scope) calls `row_sumsq_cuda<scalar_t>`, and inside the
    # launcher `scalar_t` is its own template parameter (the condition held for every type) or the
    # namespace's own alias of double (the condition picked the instantiation nobody verified)
    text = (FIXTURES / "redteam" / "round84" / folder / "baseline.cu").read_text()
    split = split_program(text, "baseline.cu")
    part = read_editable(split.editable, split.harness, split.exported)
    rewrites, refused = row_warp_rewrites(part, split.harness)
    assert not rewrites and any("'scalar_t' is a name the launcher's scope may read differently" in r
                                for r in refused), refused


@pytest.mark.parametrize("args, allowed", [
    ("float", True), ("unsigned long long", True), ("const double", True), ("::int64_t", True),
    ("float, 128", True), ("float, 0x80u", True), ("double, true", True),
    ("scalar_t", False), ("std::int64_t", False), ("float, kThreads", False), ("float, 2 * 64", False),
    ("__half", False), ("float4", False),
])
def test_only_template_arguments_no_scope_can_redefine_name_the_verified_instantiation(args, allowed):
    text = """
template <typename T, int N>
__global__ void k(const T* x, T* out, int n) { int i = blockIdx.x * N + threadIdx.x; if (i < n) out[i] = x[i]; }
template <typename T, int N = 128>
void go(const T* x, T* out, int n) { k<T, N><<<(n + N - 1) / N, N>>>(x, out, n); }
"""
    part = read_editable(text, "", [])
    (launcher,) = [read_launcher(f) for f in part.functions.values() if f.name == "go"]
    launcher.template_args = args if "," in args else args + ", 128"
    if allowed:
        assert verified_instantiation(launcher)
    else:
        with pytest.raises(NotARowKernel, match="scope may read differently"):
            verified_instantiation(launcher)


def test_a_launcher_that_names_things_with_using_is_read_and_keeps_them_a_kernel_that_does_is_not():
    split = split_program(_program("row_absmax_scale_ns.cu"), "row_absmax_scale_ns.cu")
    part = read_editable(split.editable, split.harness, split.exported)
    (launcher,) = part.launchers  # through init's wrapper into quant::absmax_quantize
    assert launcher.fn.name == "absmax_quantize" and not part.problems, part.problems
    (rewrite,), _ = row_warp_rewrites(part, split.harness)
    assert "using namespace detail;" in rewrite.source and "typedef unsigned int grid_t;" in rewrite.source
    # in device code a using-directive may give `fmaxf` another meaning: that kernel is not read
    device = """
namespace mine { __device__ float fmaxf(float a, float b) { return a; } }
__global__ void k(const float* x, float* out, int rows, int cols) {
  using namespace mine;
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  float m = 0.0f;
  for (int c = 0; c < cols; ++c) m = fmaxf(m, x[r * cols + c]);
  out[r] = m;
}
"""
    part = read_editable(device, "", [])
    assert "k" not in part.functions and any("declares names inside device code (using namespace mine;)" in p
                                             for p in part.problems), part.problems


def test_a_wrapper_whose_launcher_cannot_be_read_says_why():
    text = """
namespace g {
__global__ void k(float* x, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] = 0; }
void go(float* x, int n) { try { k<<<(n + 255) / 256, 256>>>(x, n); } catch (...) {} }
}
void launch_go(float* x, int n) { g::go(x, n); }
"""
    part = read_editable(text, "launch_go(x, n);", ["void launch_go(float* x, int n)"])
    (launcher,) = part.launchers
    assert launcher.problem is not None and "could not be read (unsupported statement try statement)" in \
        launcher.problem, launcher.problem


def test_a_chunk_sized_by_a_preamble_macro_is_read_as_a_number():
    # each thread walks CHUNK consecutive elements; CHUNK is the frozen preamble's macro. Its locals
    # (`int start = t * CHUNK`) must be read through the number, or the tier sees no stride across
    # threads and refuses (a regression from round 113's conversions, on kept-aside set 10's GELU)
    preamble = "#define CHUNK 16\n"
    text = ("__global__ void scale_chunks(float* y, const float* x, float a, int n) {\n"
            "  int t = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "  int start = t * CHUNK;\n"
            "  for (int i = 0; i < CHUNK; i++) {\n"
            "    int k = start + i;\n"
            "    if (k < n) y[k] = a * x[k];\n"
            "  }\n"
            "}\n"
            "void launch(float* y, const float* x, float a, int n) {\n"
            "  int threads = 256;\n"
            "  int blocks = ((n + CHUNK - 1) / CHUNK + threads - 1) / threads;\n"
            "  scale_chunks<<<blocks, threads>>>(y, x, a, n);\n"
            "}\n")
    harness = "launch(0, 0, 1.f, 0);"
    part = read_editable(text, harness, ["void launch(float* y, const float* x, float a, int n)"])
    rewrites, refused = row_warp_rewrites(part, harness, preamble)
    assert [r.kernel for r in rewrites] == ["scale_chunks"], refused
    # without the macro's value the stride is unknown: refused, never guessed
    rewrites, refused = row_warp_rewrites(part, harness, "")
    assert rewrites == [] and ("coalesced" in refused[0] or "moves with more than the counter" in refused[0]), refused


@pytest.mark.parametrize("count_type, step", [
    ("int", "n++;"), ("int", "++n;"), ("unsigned int", "n--;"), ("long long", "++n;"),
    ("Tally", "n++;"),  # a class's ++ may be any function: the rewrite's assertion leaves it to the compiler
])
def test_a_count_stepped_by_increment_is_a_sum(count_type, step):
    """`n++` as a statement is `n += 1` for a built-in arithmetic scalar (kept-aside set 13's zero
    crossings counted with `count++` and got no attempt); every accumulator's type is asserted to
    the compiler in the rewrite, so a class's `++` never builds as a sum."""
    text = ROW_BASE.replace("stat[r] = acc;", "stat[r] = acc + (float)n;").replace(
        "  for (int c = 0; c < cols; c++) acc += in[r * cols + c];",
        f"  {count_type} n = 0;\n  for (int c = 0; c < cols; c++) {{ acc += in[r * cols + c]; "
        f"if (in[r * cols + c] > 0.0f) {{ {step} }} }}")
    if count_type == "Tally":
        text = "struct Tally { int v; __device__ Tally(int x) : v(x) {} __device__ Tally operator++(int) { return *this; } " \
               "__device__ operator float() const { return (float)v; } };\n" + text
    fn, plan = _plan(text)
    assert "static_assert(::kl_number<decltype(n)>::value" in rewrite_kernel(fn, plan)


@pytest.mark.nvcc
def test_a_kernel_launched_in_both_branches_of_a_dispatch_is_rewritten_at_both(tmp_path):
    """A launcher that picks the block by the batch size launches one kernel in each branch: the
    first rewrite takes both launches (whichever runs, the rewritten kernel does), then each alone;
    the remap tier, which changes a kernel in place, takes none."""
    name = "l2norm_rows_dispatch.cu"
    split = split_program(_program(name), name)
    part = read_editable(split.editable, split.harness, split.exported)
    rewrites, _ = row_warp_rewrites(part, split.harness)
    assert [r.label.endswith("(all 2 launches)") for r in rewrites] == [True, False, False]
    body = rewrites[0].source[rewrites[0].source.index("void l2norm_rows("):]
    assert body.count("l2norm_rows_kernel_kl_rewritten<<<") == 2 and body.count("l2norm_rows_kernel<<<") == 2
    editable, _ = candidate_editable_part(rewrites[0].source, split)
    result = static_gates(split, editable, arch="sm_90", settings=Settings(cache_dir=shared_cache_dir()),
                          toolchain=find_toolchain())
    assert not result.violations, [v.describe() for v in result.violations]
    assert result.candidate is not None and result.candidate.ok


def test_a_loop_bound_with_the_neighbours_offset_is_a_row_loop():
    # `for (c = 0; c + 1 < cols; ++c)`: a condition that holds for a prefix of the counter's values,
    # kept as written in the rewrite (each lane steps by 32 from its own start)
    from .test_offline_optimizer import request_for
    name = "row_variation_ext.cu"
    text = generate((OUTSIDE / name).read_text(), SPECS[name], name).program
    p = OfflineOptimizer().propose(request_for(text, "row_variation_kernel", iteration=1))
    assert p.approach == "row tier: one warp per row of row_variation_kernel"
    assert "for (int64_t c = (0) + kl_lane; (c + 1) < cols; c += 32)" in p.source


@pytest.mark.nvcc
def test_the_row_rewrite_of_a_loop_with_an_offset_bound_passes_the_static_gates():
    name = "row_variation_ext.cu"
    split = split_program(generate((OUTSIDE / name).read_text(), SPECS[name], name).program, name)
    (rewrite,), refused = row_warp_rewrites(read_editable(split.editable, split.harness, split.exported),
                                            split.harness, split.preamble)
    editable, _ = candidate_editable_part(rewrite.source, split)
    assert_passes_the_static_gates(split, editable)


def test_a_loop_counter_declared_at_the_top_is_a_row_loop_when_nothing_else_names_it():
    # C89 and Fortran-ported code declare counters first (`int i; ... for (i = 0; i < m; i++)`): the
    # rewrite assigns it in the header as the baseline did; a counter read after the loop is refused
    # (each lane would leave another value there)
    from .test_offline_optimizer import request_for
    name = "colnorms_c89_ext.cu"
    text = generate((OUTSIDE / name).read_text(), SPECS[name], name).program
    p = OfflineOptimizer().propose(request_for(text, "dnrm2_cols_kernel", iteration=1))
    assert p.approach == "row tier: one warp per row of dnrm2_cols_kernel"
    assert "for (i = (0) + kl_lane; i < m; i += 32)" in p.source
    read_after = text.replace("norms[j] = sqrt(ssq);", "norms[j] = sqrt(ssq) + 0.0 * i;")
    assert read_after != text
    with pytest.raises(NoMoreCandidates, match="reads its loop counter i outside the loop"):
        OfflineOptimizer().propose(request_for(read_after, "dnrm2_cols_kernel", iteration=1))
    assigned_in_body = text.replace("ssq += a[IDX2C(i, j, lda)] * a[IDX2C(i, j, lda)];",
                                    "ssq += a[IDX2C(i, j, lda)] * a[IDX2C(i, j, lda)]; if (ssq > 1e300) i = m;")
    assert assigned_in_body != text
    with pytest.raises(NoMoreCandidates):
        OfflineOptimizer().propose(request_for(assigned_in_body, "dnrm2_cols_kernel", iteration=1))


@pytest.mark.nvcc
def test_the_row_rewrite_of_a_c89_loop_passes_the_static_gates():
    name = "colnorms_c89_ext.cu"
    split = split_program(generate((OUTSIDE / name).read_text(), SPECS[name], name).program, name)
    (rewrite,), refused = row_warp_rewrites(read_editable(split.editable, split.harness, split.exported),
                                            split.harness, split.preamble)
    editable, _ = candidate_editable_part(rewrite.source, split)
    assert_passes_the_static_gates(split, editable)
