"""The offline optimizer's grid tier (optimizers/offline/gridstride.py): a grid-stride kernel
launched on fewer threads than elements is launched, unchanged, on a grid that covers them, only
where any grid computes the same result.

Tier 1: which kernels it takes (the stride spelled in the loop or in a local, two elements per
iteration, a read-modify-write of the iteration's own element, a constant bound) and which it
refuses, by class (a value carried between iterations, another iteration's element, a built-in,
a macro hiding one, shared memory, atomics, calls with effects, an early exit, a step or start
that is not the grid's, a bound that is no parameter, a narrow counter, a store through a local
pointer, a launch that already covers the bound). Tier 2 (nvcc): the outside-style program's
rewrite passes the verifier's static gates for sm_86 and sm_90, and its launch guard, compiled
for the host, launches what the module says at the sizes where that matters.
"""

from __future__ import annotations

import subprocess

import pytest

from kernelloop.optimizers.base import FailedAttempt, NoMoreCandidates
from kernelloop.optimizers.offline.gridstride import WIDE_THREADS, grid_rewrites, plan_grid_stride
from kernelloop.optimizers.offline.launcher import expanded_function, read_editable
from kernelloop.optimizers.offline.optimizer import OfflineOptimizer
from kernelloop.optimizers.offline.rowwarp import NotARowKernel, pure_helpers
from kernelloop.program.init import generate
from kernelloop.program.macros import program_macros
from kernelloop.program.split import candidate_editable_part, split_program

from .conftest import assert_passes_the_static_gates
from .outside_specs import OUTSIDE, SPECS

PROGRAM = "gelu_gridstride_fixed.cu"


def _plan(text: str):
    part = read_editable(text, "", [])
    (fn,) = [f for f in part.functions.values() if f.is_kernel]
    read = expanded_function(fn, program_macros("", text))
    if isinstance(read, str):
        raise NotARowKernel(read)
    return plan_grid_stride(read, pure_helpers(list(part.functions.values())), {})


SCALE = """
__device__ float clampf(float v, float lo, float hi) { return fminf(fmaxf(v, lo), hi); }
__global__ void scale_clamp(float* y, const float* x, float a, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    float v = a * x[i];
    y[i] = clampf(v, -1.0f, 1.0f);
  }
}
"""

STRIDE_LOCAL = """
__global__ void axpy(double* y, const double* x, double a, long long n) {
  const long long start = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  const long long step = (long long)gridDim.x * blockDim.x;
  for (long long i = start; i < n; i += step) {
    y[i] += a * x[i];
  }
}
"""

PAIRS = """
__global__ void swap_pairs(float* out, const float* in, unsigned int pairs) {
  for (unsigned int p = blockIdx.x * blockDim.x + threadIdx.x; p < pairs; p += blockDim.x * gridDim.x) {
    float lo = in[2 * p], hi = in[2 * p + 1];
    out[2 * p] = hi;
    out[2 * p + 1] = lo;
  }
}
"""


def test_grid_stride_kernels_the_tier_takes():
    plan = _plan(SCALE)
    assert (plan.counter, plan.counter_kind, plan.bound_param, plan.bound_kind) == ("i", (32, True), "n", (32, True))
    plan = _plan(STRIDE_LOCAL)  # start and stride in locals; a read-modify-write of the iteration's own element
    assert (plan.counter_kind, plan.bound_param, plan.bound_kind) == ((64, True), "n", (64, True))
    plan = _plan(PAIRS)  # two elements an iteration: 2p and 2p + 1 are p's alone
    assert plan.counter_kind == (32, False)
    plan = _plan(SCALE.replace("i < n", "i < 4096"))
    assert plan.bound_param is None and plan.bound_value == 4096


# A bit-mixing helper in the style hash code is written in: it works on its by-value parameter.
MIX = """
__device__ unsigned int scramble(unsigned int v, unsigned int salt) {
  v ^= salt; v *= 0x9e3779b1u; v ^= v >> 15; v++;
  return v;
}
__global__ void scramble_all(const unsigned int* in, unsigned int* out, int n, unsigned int salt) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    out[i] = scramble(in[i], salt);
  }
}
"""


def test_a_helper_that_works_on_its_own_copies_of_its_arguments_is_pure():
    assert _plan(MIX).bound_param == "n"
    assert _plan(MIX.replace("unsigned int v,", "long long v,").replace("return v;", "return (unsigned int)v;"))


@pytest.mark.parametrize("helper_params", [
    "unsigned int& v, unsigned int salt",  # a reference: the caller's variable changes
    "vref v, unsigned int salt",  # a reference behind an alias
    "word v, unsigned int salt",  # a type name the scan cannot see is not a reference
])
def test_a_helper_assigning_a_parameter_that_may_be_a_reference_is_not_pure(helper_params):
    text = ("typedef unsigned int& vref;\ntypedef unsigned int word;\n"
            + MIX.replace("unsigned int v, unsigned int salt", helper_params)
            .replace("out[i] = scramble(in[i], salt);", "unsigned int x = in[i]; out[i] = scramble(x, salt);"))
    with pytest.raises(NotARowKernel):
        _plan(text)


@pytest.mark.parametrize("text, why", [
    # a value carried from one iteration to the next the thread runs
    (SCALE.replace("for (int i", "float carry = 0.0f;\n  for (int i").replace("y[i] = clampf(v, -1.0f, 1.0f);",
                                                                             "carry += v; y[i] = carry;"),
     "assigns carry, declared outside"),
    (SCALE.replace("float a, int n", "float a, int n, float bias").replace("float v = a * x[i];",
                                                                         "float v = a * x[i]; bias = v;"),
     "assigns bias, declared outside"),
    # another iteration's element
    (SCALE.replace("y[i] = clampf(v, -1.0f, 1.0f);", "y[i] = clampf(v + y[i + 1], -1.0f, 1.0f);"),
     "elements another iteration stores"),
    (PAIRS.replace("out[2 * p + 1] = lo;", "out[2 * p + 2] = lo;"), "elements another iteration stores"),
    (SCALE.replace("y[i] = clampf", "y[i / 2] = clampf"), "not read as a polynomial|not moving one-to-one"),
    (SCALE.replace("y[i] = clampf(v, -1.0f, 1.0f);", "y[i] = v; y[n - 1 - i] = v;"), "different strides"),
    # the thread that runs it
    (SCALE.replace("float v = a * x[i];", "float v = a * x[i] + threadIdx.x;"), "uses threadIdx besides"),
    ("#define LANE (threadIdx.x % 32)\n" + SCALE.replace("float v = a * x[i];", "float v = a * x[i] + LANE;"),
     "uses threadIdx besides"),
    (STRIDE_LOCAL.replace("y[i] += a * x[i];", "y[i] += a * x[i] * step;"), "reads the loop's start or stride"),
    (SCALE.replace("float v = a * x[i];", "__shared__ float s[8]; float v = a * x[i] + s[0];"), "shared memory"),
    (SCALE.replace("y[i] = clampf(v, -1.0f, 1.0f);", "atomicAdd(&y[i], v);"), "calls atomicAdd|uses atomics"),
    (SCALE.replace("y[i] = clampf(v, -1.0f, 1.0f);", "y[i] = v; printf(\"%f\", v);"), "calls printf"),
    (SCALE.replace("y[i] = clampf(v, -1.0f, 1.0f);", "y[i] = __shfl_xor_sync(0xffffffffu, v, 1);"),
     "calls __shfl_xor_sync|uses __shfl_xor_sync"),
    # the loop's shape
    (SCALE.replace("y[i] = clampf(v, -1.0f, 1.0f);", "if (v > 0.5f) break; y[i] = v;"), "may end early"),
    (SCALE.replace("y[i] = clampf(v, -1.0f, 1.0f);", "if (v > 0.5f) return; y[i] = v;"), "may end early"),
    (SCALE.replace("i += blockDim.x * gridDim.x", "i += blockDim.x"), "does not step by the grid's width"),
    (SCALE.replace("int i = blockIdx.x * blockDim.x + threadIdx.x", "int i = threadIdx.x"), "does not start at"),
    (SCALE.replace("i < n;", "i < n / 2;"), "not to a parameter or a constant"),
    (SCALE.replace("i < n;", "i < n && x[i] > 0.0f;"), "condition is not `counter < bound`|may end early"),
    (SCALE.replace("int i = blockIdx", "short i = blockIdx").replace("int n", "short n"), "not an integer type of 32"),
    (SCALE.replace("}\n}\n", "}\n  y[0] = 0.0f;\n}\n"), "is not one grid-stride loop"),
    (SCALE.replace("y[i] = clampf(v, -1.0f, 1.0f);", "float* o = y; o += 1; o[i] = v;"),
     "neither a parameter's array|assigns o"),
    # round 135: a copy of the stride, a local array or a static carrying values
    (STRIDE_LOCAL.replace("for (long long i = start;", "const long long every = step;\n  for (long long i = start;")
     .replace("y[i] += a * x[i];", "y[i] += a * x[i] * every;"), "reads the loop's start or stride"),
    (SCALE.replace("for (int i", "float last[1] = {0.0f};\n  for (int i").replace(
        "y[i] = clampf(v, -1.0f, 1.0f);", "y[i] = v + last[0]; last[0] = v;"), "neither a parameter's array"),
    (SCALE.replace("float v = a * x[i];", "static float keep; keep = a; float v = keep * x[i];"),
     "static local|assigns keep"),
])
def test_kernels_the_grid_tier_refuses(text, why):
    with pytest.raises(NotARowKernel, match=why):
        _plan(text)


def _program() -> str:
    return generate((OUTSIDE / PROGRAM).read_text(), SPECS[PROGRAM], PROGRAM).program


def _rewrites(text: str):
    split = split_program(text, PROGRAM)
    part = read_editable(split.editable, split.harness, split.exported)
    return split, grid_rewrites(part, split.harness, split.preamble)


def test_the_outside_style_program_gets_one_rewrite_that_keeps_the_kernel_and_its_launcher():
    _, (rewrites, refused) = _rewrites(_program())
    assert len(rewrites) == 1, refused
    (r,) = rewrites
    assert r.label == "grid tier: gelu_forward_kernel on a grid covering its elements" and r.launcher == "gelu_forward"
    # the kernel as written, beside a copy, read with the program's macros expanded, that asserts the
    # types the guard assumes
    assert r.source.count("out[i] = 0.5f * xi * (1.0f + tanhf(GELU_SCALING_FACTOR * (xi + cube)));") == 1
    assert "out[i] = 0.5f * xi * (1.0f + tanhf( sqrtf(2.0f / M_PI)  * (xi + cube)));" in r.source
    assert "static_assert(::kl_integer<int>::bits == 32 && ::kl_integer<int>::is_signed == true" in r.source
    assert "static_assert(::kl_integer<decltype(N)>::bits == 32" in r.source
    assert "cudaCheck(cudaGetLastError());" in r.source
    assert "else { gelu_forward_kernel<<<kl_grid, kl_block, kl_shmem>>>(out, inp, N); }" in r.source


def test_a_fixed_launch_of_a_kernel_whose_helper_works_on_its_own_arguments_gets_the_rewrite():
    name = "mix_words_fixedgrid.cu"
    text = generate((OUTSIDE / name).read_text(), SPECS[name], name).program
    split = split_program(text, name)
    rewrites, refused = grid_rewrites(read_editable(split.editable, split.harness, split.exported), split.harness,
                                      split.preamble)
    assert [r.label for r in rewrites] == ["grid tier: mix_words on a grid covering its elements"], refused
    assert "mix_words<<<kl_grid, kl_block, kl_shmem>>>(d_src, d_dst, count, key);" in rewrites[0].source


def test_a_launch_that_already_covers_the_bound_is_refused():
    covering = _program().replace("<<<GRID_BLOCKS, block_size>>>", "<<<(N + block_size - 1) / block_size, block_size>>>")
    _, (rewrites, refused) = _rewrites(covering)
    assert rewrites == [] and any("a thread for each of its N elements already" in r for r in refused), refused


def test_the_grid_tier_is_proposed_once_then_the_optimizer_runs_out():
    from .test_offline_optimizer import request_for
    text = _program()
    opt = OfflineOptimizer()
    p = opt.propose(request_for(text, "gelu_forward_kernel", iteration=1))
    assert p.approach == "grid tier: gelu_forward_kernel on a grid covering its elements"
    failed = [FailedAttempt(iteration=1, approach=p.approach, kind="not_faster", reason="slower", source=p.source)]
    with pytest.raises(NoMoreCandidates, match="generic tiers' 1 rewrite"):
        opt.propose(request_for(text, "gelu_forward_kernel", iteration=2, failed_attempts=failed))


@pytest.mark.nvcc
def test_the_grid_rewrite_passes_the_static_gates():
    split, ((rewrite,), _) = _rewrites(_program())
    editable, _ = candidate_editable_part(rewrite.source, split)
    assert_passes_the_static_gates(split, editable)


@pytest.mark.nvcc
def test_the_grid_rewrite_of_a_kernel_with_a_helper_passes_the_static_gates():
    name = "mix_words_fixedgrid.cu"
    split = split_program(generate((OUTSIDE / name).read_text(), SPECS[name], name).program, name)
    (rewrite,), _ = grid_rewrites(read_editable(split.editable, split.harness, split.exported), split.harness,
                                  split.preamble)
    editable, _ = candidate_editable_part(rewrite.source, split)
    assert_passes_the_static_gates(split, editable)


@pytest.mark.nvcc
@pytest.mark.parametrize("wrong", [False, True])
def test_the_kernel_asserts_the_types_the_guard_assumed(wrong, tmp_path):
    # The guard evaluates the bound and bounds the counter in types read from the kernel's spelling;
    # the copy it launches asserts them, so the compiler decides (a spelling is no type: round 133).
    import dataclasses

    from kernelloop.optimizers.offline.gridstride import asserted_kernel
    from kernelloop.optimizers.offline.rowwarp import INTEGER_TYPE
    part = read_editable(SCALE, "", [])
    fn = part.functions["scale_clamp"]
    plan = _plan(SCALE)
    if wrong:
        plan = dataclasses.replace(plan, bound_kind=(64, True))
    (tmp_path / "k.cu").write_text("#include <cuda_runtime.h>\n" + INTEGER_TYPE + "\n"
                                   + SCALE.split("__global__")[0] + asserted_kernel(fn, plan))
    built = subprocess.run(["nvcc", "-c", "-arch=sm_90", "-o", str(tmp_path / "k.o"), str(tmp_path / "k.cu")],
                           capture_output=True, text=True)
    if wrong:
        assert built.returncode != 0 and "decltype(n) is a 64-bit signed integer" in built.stderr, built.stderr
    else:
        assert built.returncode == 0, built.stderr


_GUARD_PROBE = r"""
#include <cstdio>
struct dim3 { unsigned x, y, z; dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {} };
int main() {
  long long cases[][2] = {{33554432, 40}, {1000003, 40}, {0, 40}, {-5, 40}, {100, 4000}, {2147483647LL, 40},
                          {2147483647LL - (1LL << 24), 40}, {2140000000, 1}};
  float buffer_a[1], buffer_b[1];
  for (auto& c : cases) {
    const int n = (int)c[0];
    float* out = buffer_a; const float* inp = c[0] == 100 ? buffer_a : buffer_b;  // 100: one buffer for both
    const dim3 kl_grid = dim3((unsigned)c[1]); const dim3 kl_block = dim3(256);
    DECLARATIONS
    std::printf("%lld %llu %d\n", c[0], kl_blocks, (int)(CONDITIONS));
  }
}
"""


@pytest.mark.nvcc
def test_the_launch_guard_covers_the_elements_and_never_lets_the_counter_wrap(tmp_path):
    from kernelloop.optimizers.offline.gridstride import widened_launch
    from kernelloop.optimizers.offline.launch_guard import baseline_launch
    split = split_program(_program(), PROGRAM)
    part = read_editable(split.editable, split.harness, split.exported)
    fn = part.functions["gelu_forward_kernel"]
    plan = plan_grid_stride(fn, frozenset(), {})
    from kernelloop.optimizers.offline.rowwarp import launch_sites
    (site,) = [s for s in launch_sites(part, split.harness, split.preamble) if not isinstance(s, tuple)]
    base = baseline_launch("gelu_forward_kernel<<<GRID_BLOCKS, block_size>>>(out, inp, n);")
    statement, grid, block, conditions, declarations = widened_launch(site, plan)(base, "k")
    assert "(const void*)(out) != (const void*)(inp)" in conditions
    source = _GUARD_PROBE.replace("DECLARATIONS", declarations.replace("(N)", "(n)")).replace(
        "CONDITIONS", " && ".join(f"({c})" for c in conditions))
    (tmp_path / "probe.cpp").write_text(source)
    built = subprocess.run(["g++", "-std=c++17", "-o", str(tmp_path / "probe"), str(tmp_path / "probe.cpp")],
                           capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    rows = [line.split() for line in subprocess.run([str(tmp_path / "probe")], capture_output=True, text=True,
                                                     check=True).stdout.splitlines()]
    got = {int(n): (int(blocks), ok == "1") for n, blocks, ok in rows}
    assert got[33554432] == (WIDE_THREADS // 256, True)  # capped at WIDE_THREADS threads
    assert got[1000003] == ((1000003 + 255) // 256, True)  # a thread an element
    assert got[0] == (40, True) and got[-5] == (40, True)  # no elements: never fewer blocks than the baseline
    assert got[100] == (4000, False)  # the stored buffer handed as the input too: the baseline's launch runs
    assert got[2147483647][1] is False  # i + stride would pass INT_MAX: the baseline's launch runs
    assert got[2147483647 - (1 << 24)][1] is True  # the last count where it cannot
    assert got[2140000000][1] is False  # also from a one-block baseline


def test_launch_arguments_that_do_more_than_compute_a_value_or_share_a_buffer_are_refused():
    program = _program()
    for launch, why in [("<<<GRID_BLOCKS, block_size>>>(out, inp, N--)", "does more than compute a value"),
                        ("<<<GRID_BLOCKS, block_size>>>(out, inp, next_size(N))", "does more than compute a value"),
                        ("<<<GRID_BLOCKS, block_size>>>(out, out + 1, N)", "is handed out and inp from one variable")]:
        text = program.replace("<<<GRID_BLOCKS, block_size>>>(out, inp, N)", launch).replace(
            "void gelu_forward(", "int next_size(int n) { return n; }\nvoid gelu_forward(")
        _, (rewrites, refused) = _rewrites(text)
        assert rewrites == [] and any(why in r for r in refused), refused
    # the same buffer in place: every access at the iteration's own element, so it is taken, and the
    # guard does not ask the two to differ
    split, ((rewrite,), _) = _rewrites(program.replace("<<<GRID_BLOCKS, block_size>>>(out, inp, N)",
                                                       "<<<GRID_BLOCKS, block_size>>>(out, out, N)"))
    assert "(const void*)(out) != (const void*)(out)" not in rewrite.source


def test_a_kernel_that_converts_values_gets_the_grid_tier_from_the_optimizer():
    # The families compute in float, so a kernel whose arithmetic converts values (a float quantised to
    # an int) is not read by them; the grid tier keeps every expression as written, so it reads it
    from .test_offline_optimizer import request_for
    text = _program().replace("out[i] = 0.5f * xi * (1.0f + tanhf(GELU_SCALING_FACTOR * (xi + cube)));",
                              "out[i] = (float)(int)(64.0f * xi * (1.0f + tanhf(GELU_SCALING_FACTOR * (xi + cube))));")
    assert "(float)(int)(64.0f" in text
    p = OfflineOptimizer().propose(request_for(text, "gelu_forward_kernel", iteration=1))
    assert p.approach == "grid tier: gelu_forward_kernel on a grid covering its elements"
