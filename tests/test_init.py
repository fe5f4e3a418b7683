"""`kernelloop init`: a contract-v2 program around a user's own kernel."""

from __future__ import annotations

import subprocess

import pytest

from kernelloop.config import Settings
from kernelloop.errors import InputError
from kernelloop.program.init import InitSpec, generate, parse_params
from kernelloop.program.split import split_program
from kernelloop.tools.nvcc import find_toolchain, harness_include_dir

from .outside_specs import OUTSIDE, SPECS

from .conftest import shared_cache_dir


def test_parameters_are_read_with_their_roles_guessed_from_const():
    params = parse_params("__global__ void k(const float* __restrict__ a, float *b, int n, const __nv_bfloat16* c)")
    assert [(p.name, p.element, p.pointer, p.const) for p in params] == [
        ("a", "float", True, True), ("b", "float", True, False), ("n", "int32_t", False, False),
        ("c", "__nv_bfloat16", True, True)]


@pytest.mark.parametrize("name", sorted(SPECS))
def test_init_writes_a_contract_program_that_keeps_the_kernel_verbatim(name):
    source = (OUTSIDE / name).read_text()
    result = generate(source, SPECS[name], name)
    split = split_program(result.program, "generated.cu")
    assert split.mode == "markers"
    kernel = next(i for i in source.split("__global__")[1:2])
    assert kernel.split("{")[0] in split.editable  # the signature, as written
    assert "kl::Harness h;" in split.harness and "int main()" not in split.editable
    if result.launcher is None:
        assert f"void launch_{result.kernel}(" in split.editable
    else:  # the file's own launcher, verbatim, is the editable part's entry point (a namespaced one through a wrapper)
        assert result.launcher in split.exported_names or f"launch_{result.launcher}" in split.exported_names
    assert all(f"// GUESS: {n}" in result.program for n in result.notes)


def test_roles_and_sizes_follow_the_options():
    result = generate((OUTSIDE / "gemm_accumulate.cu").read_text(), SPECS["gemm_accumulate.cu"])
    assert result.roles == {"A": "input", "B": "input", "C": "inout"}
    assert 'h.inout<float>("C", (size_t)(M * N)' in result.program
    assert "h.size<int32_t>({512, 333})" in result.program and "h.size<float>({1.5, 1.125f})" in result.program


@pytest.mark.parametrize("spec, message", [
    (InitSpec(), "give the value of vectorAdd's argument numElements"),
    (InitSpec(values={"numElements": ["5"]}, roles={"Q": "input"}), "has no parameter 'Q'"),
    (InitSpec(values={"numElements": ["5"]}, roles={"C": "input"}), "has no output"),
    (InitSpec(values={"numElements": ["5"]}, kernel="nope"), "no kernel named 'nope'"),
])
def test_what_init_cannot_guess_is_one_clear_line(spec, message):
    with pytest.raises(InputError, match=message) as err:
        generate((OUTSIDE / "vector_add.cu").read_text(), spec)
    assert "\n" not in str(err.value)


def test_a_template_kernel_without_template_args_is_one_line_saying_to_pass_them():
    with pytest.raises(InputError, match=r"k is a template <int B>: give its arguments with --template-args") as err:
        generate("template <int B> __global__ void k(float* x, int n) { x[0] = B; }\n", InitSpec(values={"n": ["4"]}))
    assert "\n" not in str(err.value)
    with pytest.raises(InputError, match="takes 1 template argument"):
        generate("template <int B> __global__ void k(float* x, int n) { x[0] = B; }\n",
                 InitSpec(values={"n": ["4"]}, template_args="4, 5"))


def test_template_arguments_name_the_parameter_types_and_the_launch():
    source = "template <typename T, int B = 64>\n__global__ void k(const T* x, T* y, T scale, int n) { }\n"
    result = generate(source, InitSpec(values={"n": ["64", "63"], "scale": ["2"]}, template_args="double"))
    assert [(p.name, p.type) for p in result.params] == [
        ("x", "const double*"), ("y", "double*"), ("scale", "double"), ("n", "int")]
    assert "k<double><<<(n + 255) / 256, 256>>>(x, y, scale, n);" in result.program
    assert 'h.input<double>("x"' in result.program and "h.size<double>({2, 1.5})" in result.program
    # as a CUPTI capture would give them: `void matrixMul<32>(float*, float*, int, int)`
    captured = generate("template <int BLOCK_SIZE> __global__ void matrixMul(float* C, const float* A, int n) { }\n",
                        InitSpec(values={"n": ["64"]}, template_args="32", counts={"C": "n", "A": "n"}))
    assert "matrixMul<32><<<" in captured.program


LAUNCHERS = """#include <cstdio>
#define CHECK(x) do { if ((x) != cudaSuccess) exit(1); } while (0)
__global__ void k1(float* y, const float* x, int n) { }
__global__ void k2(float* y, int n) { }
void run_both(float* y, const float* x, int n, int block_size) {
  k1<<<(n + block_size - 1) / block_size, block_size>>>(y, x, n);
  CHECK(cudaGetLastError());
  k2<<<(n + block_size - 1) / block_size, block_size>>>(y, n);
}
static void run_k2(float* y, int n) { k2<<<1, 32>>>(y, n); }
int main() { run_both(nullptr, nullptr, 0, 32); run_k2(nullptr, 0); }
"""


def test_a_launcher_is_wrapped_verbatim_with_its_kernels_and_its_parameters():
    spec = InitSpec(launcher="run_both", values={"n": ["1024", "1023"], "block_size": ["128"]},
                    roles={"y": "output"})
    result = generate(LAUNCHERS, spec)
    assert (result.launcher, result.kernels, result.kernel) == ("run_both", ["k1", "k2"], "k1")
    split = split_program(result.program, "generated.cu")
    assert "CHECK(cudaGetLastError());" in split.editable and "void run_both(" in split.editable
    assert "run_k2" not in result.program.split("// kernelloop: editable end")[1]  # another launcher: left out
    assert "h.run([&] { run_both(y, x, n, block_size); }" in split.harness
    assert "const int32_t block_size = (int32_t)(128);" in split.harness and "<<<" not in split.harness
    # the launcher of the named kernel is found by itself; a static one is called through a wrapper
    only_k2 = generate(LAUNCHERS, InitSpec(kernel="k2", launcher="run_k2", values={"n": ["64", "63"]}))
    assert "void launch_run_k2(float* y, int n) {\n  run_k2(y, n);\n}" in only_k2.program
    with pytest.raises(InputError, match="run_both, run_k2 all launch k2: choose one with --launcher"):
        generate(LAUNCHERS, InitSpec(kernel="k2", values={"n": ["64"]}))
    with pytest.raises(InputError, match="the launcher run_both chooses its own launch configuration"):
        generate(LAUNCHERS, spec.model_copy(update={"grid": "1", "block": "1"}))
    with pytest.raises(InputError, match="no host function named 'nope' launches a kernel; the file's launchers: "
                                         "run_both, run_k2"):
        generate(LAUNCHERS, InitSpec(launcher="nope"))
    # --grid/--block with --kernel wrap the kernel alone, as before
    alone = generate(LAUNCHERS, InitSpec(kernel="k2", values={"n": ["64"]}, grid="1", block="64"))
    assert alone.launcher is None and "void launch_k2(float* y, int n)" in alone.program


@pytest.mark.nvcc
@pytest.mark.parametrize("name", sorted(SPECS))
def test_the_generated_program_passes_every_static_gate_against_itself(name, tmp_path):
    from kernelloop.tools.nvcc import find_toolchain, harness_include_dir
    from kernelloop.verify.gate import static_gates
    program = generate((OUTSIDE / name).read_text(), SPECS[name], name).program
    split = split_program(program, "generated.cu")
    result = static_gates(split, split.editable, arch="sm_90", settings=Settings(cache_dir=shared_cache_dir()),
                          toolchain=find_toolchain())
    assert result.candidate is not None and result.candidate.ok and result.violations == []


REWRITES = OUTSIDE / "rewrites"


@pytest.mark.nvcc
@pytest.mark.parametrize("name", sorted(p.name for p in REWRITES.glob("*.cu")))
def test_each_scripted_rewrite_passes_every_static_gate_against_its_init_program(name, tmp_path):
    # The faster rewrites the GPU tests serve from a scripted LLM server (tests/gpu/test_init_gpu.py):
    # well-formed editable parts that keep the launcher the harness calls.
    from kernelloop.tools.nvcc import find_toolchain, harness_include_dir
    from kernelloop.verify.gate import static_gates
    program = generate((OUTSIDE / name).read_text(), SPECS[name], name).program
    split = split_program(program, "generated.cu")
    result = static_gates(split, (REWRITES / name).read_text(), arch="sm_90", settings=Settings(cache_dir=shared_cache_dir()),
                          toolchain=find_toolchain())
    assert result.candidate is not None and result.candidate.ok, result.candidate.log if result.candidate else ""
    assert result.violations == [], [v.describe() for v in result.violations]


def test_a_pointer_without_const_is_guessed_by_what_the_code_writes_and_a_kernel_reading_nothing_is_refused():
    source = "__global__ void popcount(unsigned* words, int* counts, int n) { counts[0] = __popc(words[0]); }\n"
    result = generate(source, InitSpec(values={"n": ["64", "63"]}))
    # words is only read: an input (the harness checks it stays as filled); counts is written
    assert result.roles == {"words": "input", "counts": "inout"}
    assert any("words is an input (guessed from no const, never written" in n for n in result.notes)
    # passed to a function not in the file, or through a copy: it may be written
    for body in ("counts[0] = __popc(words[0]); mystery(words);", "unsigned* w = words; w[1] = 0; counts[0] = 1;"):
        other = generate(source.replace("counts[0] = __popc(words[0]);", body), InitSpec(values={"n": ["64"]}))
        assert other.roles["words"] == "inout", body
    assert any("words holds integers in [0, 16)" in n for n in result.notes)
    with pytest.raises(InputError, match="reads nothing the harness generates"):
        generate(source, InitSpec(values={"n": ["64"]}, roles={"words": "output", "counts": "output"}))
    ranged = generate(source, InitSpec(values={"n": ["64"]}, roles={"counts": "output"},
                                       ranges={"words": ("0", "1000000")}))
    assert "kl::UniformInt<uint32_t>{0, 1000000}" in ranged.program


def test_a_kernel_with_dynamic_shared_memory_needs_its_size():
    source = (OUTSIDE.parent / "kept_aside" / "row_sums_launchkernel.cu").read_text()
    spec = InitSpec(values={"cols": ["3000", "2999"]}, counts={"in": "4096 * cols", "out": "4096"}, grid="4096",
                    block="256")
    with pytest.raises(InputError, match="dynamic shared memory .* --shared-memory"):
        generate(source, spec)
    program = generate(source, spec.model_copy(update={"shared_memory": "256 * sizeof(float)"})).program
    assert "row_sums<<<4096, 256, 256 * sizeof(float)>>>(in, out, cols);" in program


def test_a_float_argument_given_one_value_takes_another_at_the_second_size():
    # Red team round 15: alpha and beta set once were constants in every run, so a GEMM that
    # hard-coded them matched the baseline exactly.
    source = ("__global__ void axpby(const float* x, float* y, int n, float alpha, double beta) {\n"
              "  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = alpha * x[i] + beta * y[i]; }\n")
    result = generate(source, InitSpec(values={"n": ["4096", "3001"], "alpha": ["1.5"], "beta": ["0"]}))
    assert "h.size<float>({1.5, 1.125f})" in result.program and "h.size<double>({0, 0.5})" in result.program
    assert any("alpha is 1.5 and, at the second size, 1.125f" in n for n in result.notes)
    # one size given: the floats still get a second run (the integer keeps its value)
    single = generate(source, InitSpec(values={"n": ["4096"], "alpha": ["2"], "beta": ["0.25"]}))
    assert "h.size<float>({2, 1.5f})" in single.program and "const int32_t n = (int32_t)(4096);" in single.program
    assert any(n.startswith("one size only") for n in single.notes)
    # the same value twice pins it
    pinned = generate(source, InitSpec(values={"n": ["4096"], "alpha": ["2", "2"], "beta": ["0.25", "0.25"]}))
    assert "h.size<float>({2, 2})" in pinned.program


def test_a_half_precision_argument_given_one_value_varies_too():
    # Red team round 16: the round-15 fix left __half and __nv_bfloat16 arguments constant, so a
    # half axpby could hard-code beta = 0 and never read y.
    source = ("#include <cuda_fp16.h>\n__global__ void half_axpby(const __half* x, __half* y, __half alpha, "
              "__half beta, int n) {\n  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
              "  if (i < n) y[i] = __hadd(__hmul(alpha, x[i]), __hmul(beta, y[i])); }\n")
    result = generate(source, InitSpec(values={"n": ["4096", "3001"], "alpha": ["1.5"], "beta": ["0"]}))
    assert "h.size<__half>({1.5, 1.125})" in result.program and "h.size<__half>({0, 0.5})" in result.program


def test_initialized_tables_are_kept_in_the_preamble():
    # What main() and other dropped host code set is refused on the compiled object
    # (tests/test_init_state.py); tables with initialisers are the file's own and stay.
    kernel = ("__global__ void gain(const float* x, float* y, int n) {\n"
              "  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = c_gain[i & 3] * x[i]; }\n")
    spec = InitSpec(values={"n": ["4096", "3001"]}, roles={"y": "output"})
    table = "__constant__ float c_gain[4] = {1.1f, 0.9f, 1.05f, 1.0f};\n" + kernel
    assert "c_gain[4] = {1.1f" in generate(table, spec).program
    const_table = "static const float c_gain[4] = {1.1f, 0.9f, 1.05f, 1.0f};\n" + kernel + "int main() { return (int)c_gain[0]; }\n"
    assert "c_gain[4] = {1.1f" in generate(const_table, spec).program


def test_a_parameter_named_like_the_harness_object_is_fine():
    # Red team round 18: a kernel argument named `h` collided with the generated `kl::Harness h`.
    source = "__global__ void k(const float* x, float* h, int n) { int i = threadIdx.x; if (i < n) h[i] = x[i]; }\n"
    program = generate(source, InitSpec(values={"n": ["64", "33"]}, roles={"h": "output"})).program
    assert "kl::Harness kl_harness;" in program and 'float* h = kl_harness.output<float>("h"' in program


def test_a_launcher_that_returns_a_result_is_refused_by_init_and_by_the_contract():
    # Red team round 41: a launcher returning the mean loss it copied back was wrapped with the
    # value dropped, and nothing compared it; a candidate returning 0.0f would have been accepted.
    from kernelloop.program.split import launcher_result_type, split_program
    from .conftest import FIXTURES
    folder = FIXTURES / "redteam" / "round41"
    spec = InitSpec(values={"N": ["4096", "1001"], "C": ["1000", "333"]}, roles={"probs": "output"},
                    counts={"logits": "N * C", "probs": "N * C", "labels": "N"}, ranges={"labels": ("0", "166")})
    with pytest.raises(InputError, match=r"^launch_softmax_xent returns float, a result the verifier would never"):
        generate((folder / "softmax_xent_returns_loss.cu").read_text(), spec)
    with pytest.raises(InputError, match=r"launch_softmax_xent returns float, a result the verifier never compares"):
        split_program((folder / "softmax_xent_v2.cu").read_text(), "softmax_xent_v2.cu")
    # round 42: the same behind an attribute, or as a template called with explicit arguments
    for name in ("xent_attr_v2.cu", "xent_tmpl_v2.cu"):
        with pytest.raises(InputError, match=r"launch_softmax_xent returns (float|T), a result the verifier never"):
            split_program((FIXTURES / "redteam" / "round42" / name).read_text(), name)
    # round 43: memory the frozen code allocates itself and hands the launcher (device, pinned)
    for name in ("rt43_xent_devbuf_v2.cu", "rt43_xent_pinned_v2.cu"):
        with pytest.raises(InputError, match=r"the frozen code allocates memory itself \(cudaMalloc(Host)?\)"):
            split_program((FIXTURES / "redteam" / "round43" / name).read_text(), name)
    # round 44: the same through a template call, or a variable's address
    for name, what in (("rt44_tmpl_alloc_v2.cu", "cudaMalloc"), ("rt44_devsym_v2.cu", "cudaGetSymbolAddress")):
        with pytest.raises(InputError, match=rf"the frozen code allocates memory itself \({what}\)"):
            split_program((FIXTURES / "redteam" / "round44" / name).read_text(), name)
    # proven to return nothing, or else a result (fail closed)
    cases = {"float launch_x(int a)": "float", "void launch_x(int a)": None, "cudaError_t launch_x()": None,
             "template <typename T, int B> static inline double launch_x(T* p)": "double",
             'extern "C" void launch_x(float* x)': None, "std::vector<float> launch_x()": "std::vector<float>",
             "float __attribute__((noinline)) launch_x(int)": "float",
             "void __attribute__((noinline)) launch_x(int)": None, "[[nodiscard]] cudaError_t launch_x()": None,
             "template <typename T> T launch_x(T* p)": "T", "decltype(0.0f) launch_x()": "decltype(0.0f)",
             "float (launch_x)(int)": "an unreadable type", "auto launch_x(int) -> void": "auto"}
    for head, kind in cases.items():
        assert launcher_result_type(head, "launch_x") == kind, head


def test_a_launcher_that_launches_with_an_argument_array_is_refused_with_what_to_do():
    # A candidate may not launch with an argument array (verify.policy, `launch-arguments`), so
    # the file's launcher written that way cannot be the editable part.
    source = ("__global__ void k(const float* x, float* y, int n) { int i = threadIdx.x; if (i < n) y[i] = x[i]; }\n"
              "void run(const float* x, float* y, int n) { void* args[] = {&x, &y, &n};\n"
              "  cudaLaunchKernel((const void*)k, dim3(1), dim3(32), args, 0, 0); }\n")
    with pytest.raises(InputError, match=r"^run launches with cudaLaunchKernel, .* --kernel NAME --grid EXPR --block EXPR"):
        generate(source, InitSpec(values={"n": ["32", "17"]}, roles={"y": "output"}))
    wrapped = generate(source, InitSpec(kernel="k", grid="1", block="32", values={"n": ["32", "17"]}, roles={"y": "output"}))
    assert wrapped.launcher is None and "k<<<" in wrapped.program


_TONE = ("__global__ void tone(const float* x, float* y, int n) {\n"
         "  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = x[i] > 1.0f ? x[i] / 255.0f : x[i]; }\n")


def test_every_float_input_says_the_values_it_is_drawn_from_and_takes_a_range():
    spec = InitSpec(values={"n": ["4096", "3001"]}, roles={"y": "output"})
    result = generate(_TONE, spec)
    assert any(n.startswith("x holds values drawn uniform in [-1, 1) (--range x=LO,HI") for n in result.notes)
    assert "kl::Uniform<float>{-1.0f, 1.0f}" in result.program and "GUESS unless --range gave it" in result.program
    ranged = generate(_TONE, spec.model_copy(update={"ranges": {"x": ("0", "255.5")}}))
    assert "kl::Uniform<float>{0.0f, 255.5f}" in ranged.program
    # a range the user gave is no guess: said as GIVEN, and not among the notes to check
    assert "// GIVEN: x holds values drawn uniform in [0, 255.5) (--range x=0,255.5)" in ranged.program
    assert not any(n.startswith("x holds values") for n in ranged.notes)
    assert "GUESS unless --range gave it" not in ranged.program


def test_a_double_input_takes_its_range_in_double():
    source = _TONE.replace("float", "double").replace("1.0f", "1.0").replace("255.0f", "255.0")
    spec = InitSpec(values={"n": ["4096", "3001"]}, roles={"y": "output"}, ranges={"x": ("0.1", "0.3")})
    assert "kl::Uniform<double>{0.1, 0.3}" in generate(source, spec).program
    # drawn in double: a range one float wide still varies
    from kernelloop.program.init import _values_in_range
    assert _values_in_range("double", "1", "1.00000001") == 3 and _values_in_range("float", "1", "1.00000001") == 1


def test_a_float_range_of_one_value_once_rounded_is_refused():
    # Red team round 40: `--range keep=1,1.00000001` passed LO < HI in double precision and was
    # one float32 value (1.0f) in every element of every call.
    spec = InitSpec(values={"n": ["4096", "3001"]}, roles={"y": "output"})
    with pytest.raises(InputError, match=r"^--range x=1,1.00000001 holds one float value once rounded"):
        generate(_TONE, spec.model_copy(update={"ranges": {"x": ("1", "1.00000001")}}))
    assert "kl::Uniform<float>{1.0f, 1.001f}" in generate(
        _TONE, spec.model_copy(update={"ranges": {"x": ("1", "1.001")}})).program
    from kernelloop.program.init import _values_in_range
    assert _values_in_range("__nv_bfloat16", "1", "1.001") == 1 and _values_in_range("__nv_bfloat16", "1", "1.1") > 1
    assert _values_in_range("__half", "1", "1.0001") == 1 and _values_in_range("double", "0", "1") == 3


def test_an_integer_input_refuses_a_fractional_range():
    gather = ("__global__ void gather(const int* idx, const float* t, float* y, int n) {\n"
              "  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = t[idx[i]]; }\n")
    spec = InitSpec(values={"n": ["4096", "3001"]}, roles={"y": "output"}, counts={"t": "16"},
                    ranges={"idx": ("0", "15.5")})
    with pytest.raises(InputError, match=r"^--range idx=0,15.5: idx holds integers"):
        generate(gather, spec)
    # a half-open range of one integer gives the input no variety (red team round 39 read 0,1 as "0 or 1")
    with pytest.raises(InputError, match=r"^--range idx=3,4 holds one integer \(3\): ranges are half-open.*give 3,5"):
        generate(gather, spec.model_copy(update={"ranges": {"idx": ("3", "4")}}))
    assert "kl::UniformInt<int32_t>{3, 5}" in generate(gather, spec.model_copy(update={"ranges": {"idx": ("3", "5")}})).program


def test_a_table_role_declares_an_input_read_in_part():
    from kernelloop.program.init import InitSpec
    source = """
__global__ void gather_rows(float* out, const int* idx, const float* table, int n, int c) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n * c) out[i] = table[idx[i / c] * c + i % c];
}
"""
    spec = InitSpec(values={"n": ["4096", "1001"], "c": ["256"]}, counts={"out": "n * c", "idx": "n", "table": "50000 * c"},
                    roles={"out": "output", "table": "table"}, ranges={"idx": ("0", "50000")},
                    grid="(n * c + 255) / 256", block="256")
    program = generate(source, spec, "gather.cu").program
    assert 'float* table = h.table_input<float>("table", (size_t)(50000 * c)' in program
    assert 'int32_t* idx = h.input<int32_t>("idx"' in program


def test_vector_types_every_integer_spelling_and_a_stream_parameter_are_generated():
    params = {p.name: p for p in parse_params(
        "void f(const float4* __restrict__ a, __half2* h2, unsigned long n, long int m, long long* c, cudaStream_t s)")}
    assert (params["a"].element, params["a"].lanes, params["a"].argument()) == ("float", 4, "(const float4*)(a)")
    assert (params["h2"].element, params["h2"].lanes) == ("__half", 2)
    assert (params["n"].element, params["m"].element) == ("uint64_t", "int64_t")
    assert params["c"].argument() == "(long long*)(c)"  # int64_t is `long` here: the buffer is cast
    assert params["s"].stream and not params["s"].pointer
    with pytest.raises(InputError, match="parameter v has type 'float2', which init cannot generate"):
        parse_params("void f(float* x, float2 v)")  # a vector by value is no buffer and no number


@pytest.mark.parametrize("spelled, element, lanes", [
    ("const uchar3*", "uint8_t", 3), ("float3*", "float", 3), ("char3*", "int8_t", 3), ("ushort4*", "uint16_t", 4),
    ("const short3*", "int16_t", 3), ("int1*", "int32_t", 1), ("ulong2*", "uint64_t", 2), ("longlong3*", "int64_t", 3),
    ("double3*", "double", 3), ("double4_32a*", "double", 4), ("const ulonglong4_16a*", "uint64_t", 4)])
def test_every_cuda_vector_type_is_a_buffer_of_its_lanes(spelled, element, lanes):
    # kept-aside set 22: a `const uchar3*` frame was refused with "numbers, pointers to numbers or CUDA vector
    # types", a vector type among them: vector_types.h's whole family, not a list of the common ones
    (param,) = parse_params(f"void f({spelled} v)")
    assert (param.element, param.lanes, param.pointer) == (element, lanes, True)
    assert param.argument() == f"({spelled})(v)"


@pytest.mark.nvcc
def test_a_program_of_three_lane_vectors_is_generated_and_builds(tmp_path):
    source = """#include <cuda_runtime.h>
__global__ void planar_from_rgb(const uchar3* __restrict__ rgb, float3* __restrict__ unit, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) { uchar3 p = rgb[i]; unit[i] = make_float3(p.x / 255.0f, p.y / 255.0f, p.z / 255.0f); }
}
"""
    spec = InitSpec(values={"n": ["1048576", "1000003"]}, counts={"rgb": "n", "unit": "n"}, roles={"unit": "output"},
                    ranges={"rgb": ("0", "256")}, grid="(n + 255) / 256", block="256")
    program = generate(source, spec, "rgb.cu").program
    assert "(size_t)(n) * 3" in program
    (tmp_path / "rgb.cu").write_text(program)
    built = subprocess.run([str(find_toolchain().nvcc), "-arch=sm_90", "-I", str(harness_include_dir()), "-o",
                            str(tmp_path / "rgb"), str(tmp_path / "rgb.cu")],
                           capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr[-2000:]


def test_cucomplex_numbers_are_buffers_of_their_two_lanes():
    # kept-aside set 9 (conj_transpose_complex.cu): cuComplex.h's typedefs of float2/double2
    params = {p.name: p for p in parse_params(
        "void f(const cuFloatComplex* a, cuDoubleComplex* b, cuComplex* c)")}
    assert (params["a"].element, params["a"].lanes, params["a"].argument()) == ("float", 2, "(const cuFloatComplex*)(a)")
    assert (params["b"].element, params["b"].lanes) == ("double", 2)
    assert (params["c"].element, params["c"].lanes) == ("float", 2)


@pytest.mark.parametrize("spelled, element", [
    ("std::size_t", "uint64_t"), ("std::int64_t", "int64_t"), ("signed long long", "int64_t"),
    ("signed short", "int16_t"), ("long unsigned int", "uint64_t"), ("long long unsigned", "uint64_t"),
    ("short unsigned", "uint16_t"), ("int unsigned", "uint32_t"), ("const std::uint8_t*", "uint8_t"),
    ("int_least16_t", "int16_t"), ("int_fast32_t", "int64_t"),  # glibc: the fast types wider than a byte are long
    ("uint_fast8_t", "uint8_t"), ("std::ptrdiff_t", "int64_t")])
def test_every_spelling_of_an_integer_type_is_its_width(spelled, element):
    # red team round 73: `std::size_t` and keyword orders C allows were refused after "every integer spelling"
    assert parse_params(f"void f(float* x, {spelled} n)")[1].element == element


@pytest.mark.parametrize("spelled", ["long double", "unsigned signed", "long short int", "char"])
def test_what_is_no_integer_init_draws_stays_refused_or_a_character(spelled):
    element = parse_params(f"void f(float* x, {spelled} n)")[1].element if spelled == "char" else None
    if spelled == "char":
        assert element == "int8_t"  # as before: a char argument is drawn as a small integer
    else:
        with pytest.raises(InputError, match="which init cannot generate"):
            parse_params(f"void f(float* x, {spelled} n)")


@pytest.mark.parametrize("declared", ["float** rows", "const float4** rows", "float* rows[]"])
def test_a_pointer_to_pointers_is_refused_in_one_line(declared):
    # red team round 75: the stars were dropped and a float** taken for a float buffer
    with pytest.raises(InputError, match="a pointer to pointers, which init cannot generate"):
        parse_params(f"void f({declared}, int n)")


def test_type_aliases_of_numbers_are_read_as_the_numbers_and_nothing_else_is():
    from kernelloop.program.init import type_aliases
    source = """
typedef float sample_t;            // a number
using index_t = std::int64_t;      // a number, spelled with std::
using count_t = index_t;           // an alias of an alias
typedef struct { float re, im; } cplx_t;   // a struct: not a number
typedef float* sample_ptr;         // a pointer: left to the pointer rules
using vec_t = float4;              // a CUDA vector type
typedef double /* precision */ acc_t;
"""
    assert type_aliases(source) == {"sample_t": "float", "index_t": "std::int64_t", "count_t": "std::int64_t",
                                    "vec_t": "float4", "acc_t": "double"}


def test_a_launcher_whose_signature_names_aliased_types_is_wrapped_with_the_types_they_stand_for():
    name = "smooth_typedef.cu"
    program = generate((OUTSIDE / name).read_text(), SPECS[name], name).program
    # the wrapper sits outside the namespace that declares the aliases: it spells the types themselves
    assert "void launch_smooth(const float* in, float* out, int n, float gain) {" in program
    assert "dsp::smooth(in, out, n, gain);" in program


_FLAG_KERNEL = """
__global__ void scale_or_shift(const float* x, float* y, int n, bool shift, float a) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = shift ? x[i] + a : x[i] * a;
}
void scale_or_shift_cuda(const float* x, float* y, int n, bool shift, float a) {
  scale_or_shift<<<(n + 255) / 256, 256>>>(x, y, n, shift, a);
}
"""


@pytest.mark.parametrize("flag, line", [
    (["false", "true"], "const bool shift = h.size<bool>({false, true});"),
    (["true"], "const bool shift = (bool)(true);"),
])
def test_a_bool_flag_takes_the_value_the_user_states(flag, line):
    # a PyTorch-style launcher's `bool align_corners` (kept-aside set 23 met it): a flag, never the size
    spec = InitSpec(values={"n": ["1048576", "1000"], "shift": flag, "a": ["1.5"]}, roles={"y": "output"})
    result = generate(_FLAG_KERNEL, spec, "flag.cu")
    assert line in result.program
    assert "x holds n elements" in "\n".join(result.notes)
    split_program(result.program, "flag_kl.cu")


def test_a_bool_flag_given_anything_but_true_or_false_is_one_clear_error():
    spec = InitSpec(values={"n": ["1048576", "1000"], "shift": ["yes"], "a": ["1.5"]}, roles={"y": "output"})
    with pytest.raises(InputError, match="shift is a bool: give true or false"):
        generate(_FLAG_KERNEL, spec, "flag.cu")


# CUDA samples' order: the helpers declared first, the sizes defined after them, then the helpers'
# bodies, the kernel (kept-aside set 23's spectrum product, written afresh).
SAMPLES_ORDER = """#include <cstdio>
#include <cuda_runtime.h>
typedef float2 Cplx;
static __device__ __host__ inline Cplx cmul(Cplx, Cplx);

#define BLOCK_SIZE 128
#define TILE (BLOCK_SIZE / 32)

static __device__ __host__ inline Cplx cmul(Cplx a, Cplx b) {
  Cplx c; c.x = a.x * b.x - a.y * b.y; c.y = a.x * b.y + a.y * b.x; return c;
}

static const char* kNames[] = {"product"};  // host data the kernels never read

__global__ void product(const Cplx* a, const Cplx* b, Cplx* c, int n) {
  __shared__ Cplx staged[BLOCK_SIZE];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  staged[threadIdx.x] = i < n ? cmul(a[i], b[i]) : Cplx{0.f, 0.f};
  __syncthreads();
  if (i < n) c[i] = staged[threadIdx.x];
}

int main() {
  int n = 1 << 20;
  Cplx *a, *b, *c;
  cudaMalloc(&a, n * sizeof(Cplx)); cudaMalloc(&b, n * sizeof(Cplx)); cudaMalloc(&c, n * sizeof(Cplx));
  product<<<(n + BLOCK_SIZE - 1) / BLOCK_SIZE, BLOCK_SIZE>>>(a, b, c, n);
  printf("%s\\n", kNames[0]);
  return 0;
}
"""


@pytest.mark.nvcc
def test_a_macro_defined_between_the_editable_code_reaches_the_generated_launcher():
    # The generated launcher stands after the last kernel and uses the file's BLOCK_SIZE, which the file
    # defines after a prototype init puts in the editable part: it went below the markers and the editable
    # part did not compile ("identifier BLOCK_SIZE is undefined"). Frozen code before the last kernel goes
    # above (but for what names the editable code, which the harness may not name either).
    spec = InitSpec(kernel="product", values={"n": ["1048576", "100003"]}, counts={"a": "n", "b": "n", "c": "n"},
                    roles={"c": "output"}, grid="(n + BLOCK_SIZE - 1) / BLOCK_SIZE", block="BLOCK_SIZE")
    program = generate(SAMPLES_ORDER, spec, "samples_order.cu").program
    begin, end = program.index("// kernelloop: editable begin"), program.index("// kernelloop: editable end")
    assert program.index("#define BLOCK_SIZE 128") < begin and program.index("#define TILE") < begin
    assert program.index("static const char* kNames[]") < begin
    split = split_program(program, "samples_order_kl.cu")
    from kernelloop.verify.gate import static_gates
    result = static_gates(split, split.editable, arch="sm_90", settings=Settings(cache_dir=shared_cache_dir()),
                          toolchain=find_toolchain())
    assert result.candidate is not None and result.candidate.ok and result.violations == [], \
        [v.describe() for v in result.violations] or result.candidate.log[-2000:]
