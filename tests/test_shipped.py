"""What is verified is what ships (red team round 51): a candidate whose code depends on what else
is in its translation unit, or on values the build supplies, is refused before it runs."""

from __future__ import annotations

import pytest

from kernelloop.config import Settings
from kernelloop.program.split import candidate_editable_part, split_program
from kernelloop.tools.nvcc import find_toolchain
from kernelloop.verify.gate import static_gates
from kernelloop.verify.policy import defined_macros, scan_source
from kernelloop.verify.shipped import shipped_build_differences

from .conftest import FIXTURES, ROOT, shared_cache_dir

ROUND51 = FIXTURES / "redteam" / "round51" / "build_identity"
ROUND52 = FIXTURES / "redteam" / "round52"


@pytest.mark.parametrize("token", ["__LINE__", "__FILE__", "__COUNTER__", "__DATE__", "__TIME__", "__TIMESTAMP__",
                                   "__BASE_FILE__", "__FILE_NAME__", "__INCLUDE_LEVEL__", "__builtin_LINE()",
                                   "std::source_location::current().line()"])
def test_a_value_the_build_supplies_is_refused_in_the_editable_part(token):
    found = scan_source(f"__global__ void k(long* o) {{ o[0] = (long){token}; }}\n")
    assert [v.rule for v in found] == ["build-context"], found
    # in a comment or a string it is no value of the build
    assert scan_source(f"__global__ void k(long* o) {{ o[0] = 1; }}  // {token}\n") == []


def _static(baseline: str, candidate_path):
    split = split_program((ROOT / "kernels" / baseline).read_text(), baseline)
    editable, _ = candidate_editable_part(candidate_path.read_text(), split, "candidate")
    return static_gates(split, editable, arch="sm_90", settings=Settings(cache_dir=shared_cache_dir()),
                        toolchain=find_toolchain())


def _differences(baseline: str, candidate_path, one_file: bool = True):
    split = split_program((ROOT / "kernels" / baseline).read_text(), baseline)
    editable, _ = candidate_editable_part(candidate_path.read_text(), split, "candidate")
    return shipped_build_differences(split, editable, arch="sm_90", cache_dir=shared_cache_dir(),
                                     toolchain=find_toolchain(), one_file=one_file)


@pytest.mark.nvcc
@pytest.mark.parametrize("candidate", [
    # round 51: a template's end-of-unit lookup finds kl::mix64 only where the harness's header is in
    # the same unit, and picks the exact kernel for the verifier, a 1/16 subsample everywhere else
    ROUND51 / "candidate_adl_switch.cu",
    # round 52: the same switch behind a function whose name looks like the compiler's
    ROUND52 / "opaque_generated_name" / "candidate_nv_probe.cu",
])
def test_a_candidate_that_compiles_otherwise_in_one_file_with_the_harness_differs(candidate):
    # The comparison itself, past the source rules that now refuse both candidates first
    # (namespace kl, a reserved name): the build-identity gate is the class's general guard.
    assert any("launch_reduce_sum" in name for name in _differences("sum_reduction.cu", candidate))


@pytest.mark.nvcc
@pytest.mark.parametrize("candidate, rules", [
    (ROUND51 / "candidate_adl_switch.cu", {"reserved-name"}),
    (ROUND51 / "candidate_line_switch.cu", {"build-context"}),
    (ROUND52 / "opaque_generated_name" / "candidate_nv_probe.cu", {"reserved-name"}),
    (ROUND52 / "include_path_switch" / "candidate_has_include.cu", {"build-context"}),
    (ROUND52 / "include_path_switch" / "candidate_workdir_probe.cu", {"build-context"}),
])
def test_the_rounds_build_switches_are_refused(candidate, rules):
    result = _static("sum_reduction.cu", candidate)
    assert {v.rule for v in result.violations} == rules, result.violations


@pytest.mark.parametrize("condition", ["#ifdef NDEBUG", "#if __OPTIMIZE__", "#if defined(KL_VERIFY) && 1",
                                       "#ifndef __CUDACC_DEBUG__", "#elif __CUDACC_RDC__",
                                       "#if __has_include(<cub/cub.cuh>)"])
def test_a_condition_on_the_build_configuration_is_refused(condition):
    opener = "#if 0\n" if condition.startswith("#elif") else ""
    found = scan_source(f"{opener}{condition}\n__global__ void k(float* o) {{ o[0] = 1; }}\n#endif\n")
    assert found and {v.rule for v in found} == {"build-context"}, found


@pytest.mark.parametrize("condition", ["#if __CUDA_ARCH__ >= 800", "#ifdef __CUDACC__", "#ifndef TILE",
                                       "#if defined(__CUDA_ARCH__) && TILE > 8", "#if __cplusplus >= 201703L",
                                       "#if CUDART_VERSION >= 12000", "#ifdef USE_HALF"])
def test_the_target_the_toolchain_and_the_programs_own_macros_may_be_tested(condition):
    # TILE is the part's own macro, USE_HALF the preamble's
    found = scan_source(f"#define TILE 16\n{condition}\n__global__ void k(float* o) {{ o[0] = 1; }}\n#endif\n",
                        defined_macros("#define USE_HALF 1\n"))
    assert found == [], found


@pytest.mark.parametrize("declaration", [
    'extern "C" static int __nv_probe(void) { return 0; }', "__device__ float _Scale(float x) { return x; }",
    "namespace kl { struct Probe {}; }", "struct __cuda_state { int x; };", "static int __counter = 0;",
    "#define PROBE __device_stub__probe",
])
def test_a_name_reserved_for_the_compiler_or_the_harness_is_refused(declaration):
    found = scan_source(f"{declaration}\n__global__ void k(float* o) {{ o[0] = 1; }}\n")
    assert "reserved-name" in {v.rule for v in found}, found


def test_using_the_compilers_names_is_not_declaring_them():
    code = ("__global__ void __launch_bounds__(256) k(__nv_bfloat16* o, const float* __restrict__ x) {\n"
            "  __shared__ float s[32]; s[threadIdx.x] = __ldg(x); __syncthreads();\n"
            "  o[0] = __float2bfloat16(__shfl_down_sync(0xffffffffu, s[0], 1)); }\n")
    assert scan_source(code) == []


@pytest.mark.nvcc
@pytest.mark.parametrize("baseline, exemplar", [
    ("histogram.cu", "histogram_privatized.cu"),  # constants pooled at another width, strings merged elsewhere
    ("sum_reduction.cu", "reduction_warp_shuffle.cu"),
    ("naive_matmul.cu", "matmul_register_blocking.cu"),
])
def test_honest_rewrites_compile_alike_in_both_builds(baseline, exemplar):
    result = _static(baseline, ROOT / "src" / "kernelloop" / "exemplars" / exemplar)
    assert result.violations == [], result.violations


ROUND53 = FIXTURES / "redteam" / "round53"


@pytest.mark.nvcc
@pytest.mark.parametrize("candidate, rules", [
    # a header's macro reaching __builtin_LINE / __has_include (CCCL's, through <cuda/std/...>)
    (ROUND53 / "library_line_switch" / "candidate_cccl_line.cu", {"build-context"}),
    (ROUND53 / "library_line_switch" / "candidate_cccl_has_include.cu", {"build-context"}),
    # names declared through an identity macro: namespace SAME(kl), SAME(__nv_probe_impl)
    (ROUND53 / "macro_declarator" / "candidate_macro_declarator.cu", {"reserved-name"}),
])
def test_what_the_compiler_reads_after_macros_is_scanned_too(candidate, rules):
    result = _static("sum_reduction.cu", candidate)
    assert result.violations and {v.rule for v in result.violations} == rules, result.violations


@pytest.mark.nvcc
def test_only_nvccs_own_registration_symbols_count_by_name():
    # round 53: a helper named __nv_module_id_probe matched a prefix and its code went uncompared
    assert any("launch_reduce_sum" in name for name in
               _differences("sum_reduction.cu", ROUND53 / "macro_declarator" / "candidate_macro_declarator.cu"))


def test_an_own_macro_that_tests_a_build_macro_is_a_build_condition():
    found = scan_source("#define OWN defined(NDEBUG)\n#if OWN\n__global__ void k(float* o) { o[0] = 1; }\n#endif\n")
    assert [v.rule for v in found] == ["build-context"] and "NDEBUG" in found[0].detail, found
    # a function-like macro's parameters are no names of the build
    assert scan_source("#define TILE 16\n#define AT_LEAST(a, b) ((a) >= (b))\n#if AT_LEAST(TILE, 8)\n"
                       "__global__ void k(float* o) { o[0] = 1; }\n#endif\n") == []


def test_stringizing_a_macro_is_refused():
    # `XS(NDEBUG)` is "NDEBUG" in the verifier's build and "1" in a release build, outside any condition
    found = scan_source('#define S(x) #x\n#define XS(x) S(x)\n__global__ void k(char* o) { o[0] = XS(NDEBUG)[0]; }\n')
    assert "build-context" in {v.rule for v in found}, found


ROUND54 = FIXTURES / "redteam" / "round54"


@pytest.mark.nvcc
@pytest.mark.parametrize("candidate", [
    # the file name nvcc builds from, read through an anonymous namespace's name (__PRETTY_FUNCTION__)
    ROUND54 / "unit_file_name" / "candidate_unit_file_name.cu",
    # the dialect: the verifier built with -std=c++17, the contract's command does not
    ROUND54 / "language_dialect" / "candidate_dialect.cu",
])
@pytest.mark.parametrize("one_file", [True, False])
def test_the_one_file_build_differs_in_file_name_and_dialect_too(candidate, one_file):
    # a part the rest of its file cannot reach (no template) is compared alone under the other file
    # name and dialect: those two facts still show
    assert any("launch_reduce_sum" in name for name in _differences("sum_reduction.cu", candidate, one_file))


@pytest.mark.nvcc
def test_an_honest_helper_in_an_anonymous_namespace_is_the_same_code_under_another_file_name():
    # nvcc names the namespace by the file: the comparison takes the file's name out (round 54's side finding)
    result = _static("sum_reduction.cu", ROUND54 / "unit_file_name" / "control_anonymous_namespace_helper.cu")
    assert result.violations == [], result.violations


@pytest.mark.parametrize("code", [
    '#define MODE defined(NDEBUG)\n#if MODE\n#endif\n#undef MODE\n#define MODE 1\n',  # the first definition counts too
    'static const char* where() { return __PRETTY_FUNCTION__; }\n',
])
def test_the_rounds_source_level_routes_are_refused(code):
    found = scan_source(code + "__global__ void k(float* o) { o[0] = 1; }\n")
    assert "build-context" in {v.rule for v in found}, found


ROUND55 = FIXTURES / "redteam" / "round55" / "digit_separator_desync"


@pytest.mark.nvcc
def test_a_digit_separator_does_not_hide_the_rest_of_a_line():
    # round 55: `1'0` read as a character literal ran to a quote inside "'//", and the string's `//`
    # was taken for a comment that hid `__LINE__`
    result = _static("sum_reduction.cu", ROUND55 / "candidate_digit_separator.cu")
    assert {v.rule for v in result.violations} == {"build-context"}, result.violations


def test_digit_separators_in_honest_code_are_numbers():
    assert scan_source("__global__ void k(int* o) { o[0] = 1'000'000 + 0xFF'FF; char c = 'x'; }\n") == []


def test_a_second_reading_by_a_real_parser_catches_what_the_lexer_misses(monkeypatch):
    # Were the hand-written lexer to misread a line again, tree-sitter's reading still sees the token.
    from kernelloop.verify import policy
    monkeypatch.setattr(policy, "strip_comments", lambda text: text.split("// ")[0])
    found = scan_source('__global__ void k(long* o) { const char* s = "// "; o[0] = __LINE__; }\n')
    assert "build-context" in {v.rule for v in found}, found
