"""init's object-level guard: state the dropped host code sets and the kept code reads
(src/kernelloop/init_state.py, src/kernelloop/tools/state_refs.py), on real nvcc objects."""

from __future__ import annotations

import pytest

from kernelloop.errors import InputError
from kernelloop.init_state import refuse_state_set_by_dropped_code, state_problems
from kernelloop.program.init import InitSpec, generate
from kernelloop.program.split import inline_user_headers
from kernelloop.tools.nvcc import build_whole_object
from kernelloop.tools.state_refs import state_references

from .conftest import FIXTURES, shared_cache_dir
from .outside_specs import OUTSIDE, SPECS

pytestmark = pytest.mark.nvcc

HIDDEN = FIXTURES / "init_state" / "hidden_setters.cu"


def test_every_spelling_of_state_main_sets_is_found_and_mains_own_state_is_not(tmp_path):
    build = build_whole_object(HIDDEN.read_text(), arch="sm_90", cache_dir=shared_cache_dir())
    assert build.ok, build.log
    problems = "\n".join(state_problems(state_references(build.binary), {"launch", "k"}))
    # red team round 19's nine spellings of a host global main sets, and device state set three ways
    for name in ["cfg::w_ns", "g_cfg", "Statics::w_static", "w_aliased", "w_second", "w_aligned", "w_cast", "w_pasted",
                 "w_referred"]:
        assert f"the kept code reads {name}," in problems
    assert "setup() can set the device variable d_table" in problems
    assert "main() can set the device variable c_gain" in problems
    assert "main() launches set_bias, which can write the device variables" in problems
    assert "w_main_only" not in problems and "w_first" not in problems  # main's own: the kernel never sees it


ROUND20 = {  # red team round 20: the kept code reads state that something else sets
    "accessor": ("static float& alpha() { static float value = 0.0f; return value; }\n", "alpha()",
                 "alpha() = 0.75f;", "value"),
    "launcher_mode": ("", "mode_alpha", "scale_forward(nullptr, nullptr, -1);", "mode_alpha"),
    "function_pointer": ("static float g_alpha = 0.0f;\nstatic float get_alpha() { return g_alpha; }\n"
                         "static float (*const k_alpha)() = get_alpha;\n", "k_alpha()", "g_alpha = 0.75f;", "g_alpha"),
    "other_file": ("extern float blend_alpha;\n", "blend_alpha", "", "blend_alpha"),
}


@pytest.mark.parametrize("variant", sorted(ROUND20))
def test_state_the_kept_code_reads_is_refused_unless_named(variant, tmp_path):
    decl, use, setter, name = ROUND20[variant]
    launcher = ("void scale_forward(const float* x, float* y, int n) {\n"
                + ("  static float mode_alpha = 0.0f; if (n < 0) { mode_alpha = 0.75f; return; }\n"
                   if variant == "launcher_mode" else "")
                + f"  scale<<<(n + 255) / 256, 256>>>(x, y, {use}, n);\n}}\n")
    source = decl + KERNEL + launcher + f"int main() {{ {setter} return 0; }}\n"
    spec = SPEC.model_copy(update={"launcher": "scale_forward"})
    result = generate(source, spec)
    with pytest.raises(InputError, match=rf"^the kept code reads {name}, .*--keep-state {name} if the launcher keeps it"):
        refuse_state_set_by_dropped_code(source, result, arch="sm_90", cache_dir=shared_cache_dir())
    if variant != "other_file":  # a cached value the user vouches for
        refuse_state_set_by_dropped_code(source, result, arch="sm_90", cache_dir=shared_cache_dir(), keep_state=[name])


KERNEL = ("__global__ void scale(const float* x, float* y, float s, int n) {\n"
          "  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = s * x[i]; }\n")
SPEC = InitSpec(values={"n": ["4096", "3001"]}, roles={"y": "output"})


def test_init_refuses_state_main_sets_in_one_line_and_keeps_mains_own(tmp_path):
    launcher = "void scale_forward(const float* x, float* y, int n) { scale<<<(n + 255) / 256, 256>>>(x, y, *g_slot, n); }\n"
    aliased = ("static float g_scale = 0.1f;\nstatic float* const g_slot = &g_scale;\n" + KERNEL + launcher +
               "int main(int argc, char**) { *g_slot = argc > 1 ? 2.0f : 0.5f; return 0; }\n")
    spec = SPEC.model_copy(update={"launcher": "scale_forward"})
    with pytest.raises(InputError, match=r"^the kept code reads g_scale, state that persists between calls"):
        refuse_state_set_by_dropped_code(aliased, generate(aliased, spec), arch="sm_90", cache_dir=shared_cache_dir())
    own = ("static int g_runs = 0;\n" + KERNEL + launcher.replace("*g_slot", "0.5f") +
           "int main() { ++g_runs; return g_runs; }\n")
    refuse_state_set_by_dropped_code(own, generate(own, spec), arch="sm_90", cache_dir=shared_cache_dir())  # no refusal


@pytest.mark.parametrize("name", sorted(SPECS))
def test_the_outside_programs_keep_nothing_their_dropped_code_sets(name, tmp_path):
    source = (OUTSIDE / name).read_text()
    result = generate(source, SPECS[name], name)
    # as `kernelloop init` reads it: the user's file with a launcher's printing statements moved into
    # frozen helpers, where init moved them (result.copied_from)
    copied = result.copied_from if result.copied_from is not None else source
    whole = inline_user_headers(copied, str(OUTSIDE / name), [OUTSIDE / "include"])
    generated = inline_user_headers(result.program, str(OUTSIDE / name), [OUTSIDE / "include"])
    # no refusal: nothing set by the left-out code, and the copy compiles to the same code
    refuse_state_set_by_dropped_code(whole, result, arch="sm_90", cache_dir=shared_cache_dir(), generated=generated)


ROUND21 = {  # red team round 21's programs (tests/fixtures/redteam/round21/init) and what init says
    "a1_nvname.cu": "the kept code reads blend__nv_alpha,",  # a user's name with the compiler's prefix inside it
    "a2_device_setup.cu": "the kernels can read the device variable d_alpha",  # set by a kept set-up kernel
    "a3_device_other_tu.cu": "the kernels can read the device variable blend_alpha",  # set by another file
    "a4_template_other_tu.cu": "launch is not in the compiled file",  # a template launcher never instantiated
    "a5_getenv.cu": "main() calls setenv",
    "a6_heap_limit.cu": "main() calls cudaDeviceSetLimit",
}


@pytest.mark.parametrize("name", sorted(ROUND21))
def test_round21_ways_around_the_state_rule_are_refused(name, tmp_path):
    source = (FIXTURES / "redteam" / "round21" / "init" / name).read_text()
    build = build_whole_object(source, arch="sm_90", cache_dir=shared_cache_dir())
    assert build.ok, build.log
    problems = state_problems(state_references(build.binary), {"launch", "blend"}, launcher="launch")
    assert any(p.startswith(ROUND21[name]) for p in problems), problems


ROUND22 = {  # red team round 22: a setting reached without importing it by name; a launcher reading stdin
    "b1_heap_dlsym.cu": "main() calls dlsym", "b2_heap_entrypoint.cu": "main() calls cudaGetDriverEntryPoint",
    "b3_scanf.cu": "the kept code calls __isoc99_scanf",
}


@pytest.mark.parametrize("name", sorted(ROUND22))
def test_round22_ways_around_the_settings_rule_are_refused(name, tmp_path):
    source = (FIXTURES / "redteam" / "round22" / "init" / name).read_text()
    build = build_whole_object(source, arch="sm_90", cache_dir=shared_cache_dir())
    assert build.ok, build.log
    problems = state_problems(state_references(build.binary), {"launch", "blend"}, launcher="launch")
    assert any(p.startswith(ROUND22[name]) for p in problems), problems


LEFT_OUT_SETTINGS = {  # what the code init leaves out may not do, each a way no name of a setting shows
    "static_initialiser": ("static int g_heap = (cudaDeviceSetLimit(cudaLimitMallocHeapSize, 1 << 30), 0);\n", "",
                           "a file-scope initialiser calls cudaDeviceSetLimit, a CUDA call"),
    "context_made_current": ("#include <cuda.h>\n", "CUcontext c; CUdevice d; cuDeviceGet(&d, 0); cuDevicePrimaryCtxRetain(&c, d); cuCtxSetCurrent(c);",
                             "main() calls cuCtxSetCurrent"),
    "function_attribute": ("", "cudaFuncSetAttribute(scale, cudaFuncAttributePreferredSharedMemoryCarveout, 0);",
                           "main() calls cudaFuncSetAttribute, a CUDA call"),
    "mxcsr_in_asm": ("", "unsigned m = 0x9fc0; asm volatile(\"ldmxcsr %0\" :: \"m\"(m));",
                     "main() runs a `ldmxcsr` instruction"),
    "raw_syscall": ("", "asm volatile(\"mov $39, %%eax; syscall\" ::: \"rax\", \"rcx\", \"r11\", \"memory\");",
                    "main() runs a `syscall` instruction"),
    "locale": ("#include <clocale>\n", "setlocale(LC_ALL, \"de_DE.UTF-8\");", "main() calls setlocale"),
}


@pytest.mark.parametrize("variant", sorted(LEFT_OUT_SETTINGS))
def test_settings_the_left_out_code_makes_are_refused_however_made(variant, tmp_path):
    head, body, expected = LEFT_OUT_SETTINGS[variant]
    launcher = "void scale_forward(const float* x, float* y, int n) { scale<<<(n + 255) / 256, 256>>>(x, y, 0.5f, n); }\n"
    source = head + KERNEL + launcher + f"int main() {{ {body} return 0; }}\n"
    build = build_whole_object(source, arch="sm_90", cache_dir=shared_cache_dir())
    assert build.ok, build.log
    problems = state_problems(state_references(build.binary), {"scale_forward", "scale"}, launcher="scale_forward")
    assert any(p.startswith(expected) for p in problems), problems


def test_a_main_as_cuda_developers_write_it_is_not_refused(tmp_path):
    # seeding, device selection and queries, a set-up kernel, events, copies, printing, a vector
    main = """
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <vector>
__global__ void fill(float* x, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] = i * 0.5f; }
static std::vector<float> g_host(1024);
int main() {
  srand((unsigned)time(nullptr));
  int count = 0; cudaGetDeviceCount(&count); cudaSetDevice(0);
  cudaDeviceProp prop; cudaGetDeviceProperties(&prop, 0);
  float *x, *y; cudaMalloc(&x, 4096); cudaMalloc(&y, 4096);
  fill<<<4, 256>>>(x, 1024);
  for (float& v : g_host) v = rand() / (float)RAND_MAX;
  cudaMemcpy(x, g_host.data(), 4096, cudaMemcpyHostToDevice);
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b); cudaEventRecord(a);
  scale_forward(x, y, 1024);
  cudaEventRecord(b); cudaEventSynchronize(b); float ms = 0; cudaEventElapsedTime(&ms, a, b);
  cudaError_t e = cudaGetLastError(); if (e != cudaSuccess) { fprintf(stderr, "%s\\n", cudaGetErrorString(e)); exit(1); }
  cudaMemcpy(g_host.data(), y, 4096, cudaMemcpyDeviceToHost);
  printf("%s %f ms %f\\n", prop.name, ms, g_host[3]);
  cudaFree(x); cudaFree(y); cudaDeviceReset();
  return 0;
}
"""
    launcher = "void scale_forward(const float* x, float* y, int n) { scale<<<(n + 255) / 256, 256>>>(x, y, 0.5f, n); }\n"
    source = KERNEL + launcher + main
    spec = SPEC.model_copy(update={"launcher": "scale_forward"})
    refuse_state_set_by_dropped_code(source, generate(source, spec), arch="sm_90", cache_dir=shared_cache_dir())  # no refusal


ROUND23 = {  # red team round 23: settings reached through a function's address, and a signal handler
    "fp_heap.cu": ["main() calls cudaDeviceSetLimit", "the kernels allocate from the device heap"],
    "round_ptr.cu": ["main() calls fesetround"],
    "round_sig.cu": ["main() calls sigaction"],
}


@pytest.mark.parametrize("name", sorted(ROUND23))
def test_round23_settings_made_through_an_address_or_a_handler_are_refused(name, tmp_path):
    source = (FIXTURES / "redteam" / "round23" / "init" / name).read_text()
    build = build_whole_object(source, arch="sm_90", cache_dir=shared_cache_dir())
    assert build.ok, build.log
    problems = state_problems(state_references(build.binary), {"launch", "blend", "smooth"}, launcher="launch")
    for expected in ROUND23[name]:
        assert any(p.startswith(expected) for p in problems), problems


LEFT_OUT_BY_ADDRESS = {  # our own variants of round 23's class: calls no direct call shows
    "table_of_setters": ("#include <cfenv>\nstatic int (*const g_setters[])(int) = {fesetround};\n",
                         "g_setters[0](FE_DOWNWARD);", "main() calls fesetround"),
    "thread": ("#include <thread>\n", "std::thread t([] { }); t.join();", "main() calls std::thread::_M_start_thread"),
    "alarm_handler": ("#include <csignal>\nstatic void on_alarm(int) { }\n", "signal(SIGALRM, on_alarm);",
                      "main() calls signal"),
    "setter_address_in_a_global": ("static void* g_fn = (void*)&cudaDeviceSetLimit;\n",
                                   "((cudaError_t (*)(cudaLimit, size_t))g_fn)(cudaLimitMallocHeapSize, 1 << 30);",
                                   "main() calls cudaDeviceSetLimit"),
}


@pytest.mark.parametrize("variant", sorted(LEFT_OUT_BY_ADDRESS))
def test_calls_the_left_out_code_makes_by_address_or_unknown_are_refused(variant, tmp_path):
    head, body, expected = LEFT_OUT_BY_ADDRESS[variant]
    launcher = "void scale_forward(const float* x, float* y, int n) { scale<<<(n + 255) / 256, 256>>>(x, y, 0.5f, n); }\n"
    source = head + KERNEL + launcher + f"int main() {{ {body} return 0; }}\n"
    build = build_whole_object(source, arch="sm_90", cache_dir=shared_cache_dir())
    assert build.ok, build.log
    problems = state_problems(state_references(build.binary), {"scale_forward", "scale"}, launcher="scale_forward")
    assert any(p.startswith(expected) for p in problems), problems


def test_a_call_the_user_vouches_for_passes_and_device_malloc_needs_consent(tmp_path):
    kernel = ("__global__ void scale(const float* x, float* y, float s, int n) {\n"
              "  float* t = new float[4]; int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
              "  if (i < n) y[i] = s * x[i] * (t ? 1.0f : 0.0f); delete[] t; }\n")
    launcher = "void scale_forward(const float* x, float* y, int n) { scale<<<(n + 255) / 256, 256>>>(x, y, 0.5f, n); }\n"
    source = "#include <csignal>\n" + kernel + launcher + "int main() { signal(SIGINT, SIG_IGN); return 0; }\n"
    spec = SPEC.model_copy(update={"launcher": "scale_forward"})
    result = generate(source, spec)
    with pytest.raises(InputError, match=r"the kernels allocate from the device heap .*--keep-state device-heap"):
        refuse_state_set_by_dropped_code(source, result, arch="sm_90", cache_dir=shared_cache_dir(), trust_calls=["signal"])
    with pytest.raises(InputError, match=r"^main\(\) calls signal, .*--trust-call signal if"):
        refuse_state_set_by_dropped_code(source, result, arch="sm_90", cache_dir=shared_cache_dir(), keep_state=["device-heap"])
    refuse_state_set_by_dropped_code(source, result, arch="sm_90", cache_dir=shared_cache_dir(), keep_state=["device-heap"],
                                     trust_calls=["signal"])  # both vouched for: no refusal


ROUND24 = {  # red team rounds 24 and 26: the copy init makes differs from the user's file; -O0 hid a variable
    "round24/init/c_dead_overload.cu": "blend compiles to other code in the generated program",
    "round24/init/b_optimize.cu": "the kept code reads g_scale",
    # a kernel launched through a macro's name, and a table whose second half the copy changed
    # (since contract v2's checks of the generated program: refused there first, as a copy that does not build
    # and as a launcher that hands back a result nothing compares)
    "round26/init/hidden_kernel_macro.cu": "blend compiles to other code in the generated program|editable part does "
                                           "not compile as it is",
    "round26/init/table_past_window.cu": "run compiles to other code in the generated program|a result the verifier "
                                         "never compares",
}


@pytest.mark.parametrize("name", sorted(ROUND24))
def test_round24_26_a_copy_that_compiles_differently_is_refused(name, tmp_path):
    path = FIXTURES / "redteam" / name
    source = path.read_text()
    result = generate(source, InitSpec(values={"n": ["1048576", "1000003"]}, roles={"y": "output"}), path.name)
    with pytest.raises(InputError, match=ROUND24[name]):
        refuse_state_set_by_dropped_code(source, result, arch="sm_90", cache_dir=shared_cache_dir(), generated=result.program)


UNFAITHFUL_COPIES = {  # our own: what the copied code means must not change on the way
    "host_overload_in_ifdef": ("#ifdef LEGACY_WEIGHTS\nstatic float weight(int) { return 1.0f; }\n#endif\n"
                               "static float weight(double) { return 0.75f; }\n", "weight(1)", None),  # kept in place: faithful
    "device_overload_in_if0": ("#if 0\n__device__ float gain(float v, int) { return v; }\n#endif\n"
                               "__device__ float gain(float v, double) { return 0.5f * v; }\n", None, "scale compiles"),
    "line_as_a_value": ("", "(__LINE__ % 2 ? 0.75f : 0.0f)", None),  # position macros: compared as equal
}


@pytest.mark.parametrize("variant", sorted(UNFAITHFUL_COPIES))
def test_kept_code_must_compile_the_same_in_the_generated_program(variant, tmp_path):
    head, factor, expected = UNFAITHFUL_COPIES[variant]
    kernel = KERNEL if factor is not None else KERNEL.replace("y[i] = s * x[i]", "y[i] = gain(x[i], 1)")
    launcher = ("void scale_forward(const float* x, float* y, int n) {\n"
                f"  scale<<<(n + 255) / 256, 256>>>(x, y, {factor or '0.5f'}, n);\n}}\n")
    source = "#include <cstdio>\n" + head + kernel + launcher + "int main() { return 0; }\n"
    spec = SPEC.model_copy(update={"launcher": "scale_forward"})
    result = generate(source, spec)
    if expected is None:
        refuse_state_set_by_dropped_code(source, result, arch="sm_90", cache_dir=shared_cache_dir(), generated=result.program)
        return
    with pytest.raises(InputError, match=expected):
        refuse_state_set_by_dropped_code(source, result, arch="sm_90", cache_dir=shared_cache_dir(), generated=result.program)


def test_round25_an_overload_the_verifiers_build_does_not_see_is_refused(tmp_path):
    # the copy put `weight(Tag<128>)` below the editable part: a whole-file build finds it by
    # argument-dependent lookup, the verifier's build of the editable unit does not
    path = FIXTURES / "redteam" / "round25" / "init" / "adl_late.cu"
    source = path.read_text()
    spec = InitSpec(values={"n": ["1048576", "1000003"]}, roles={"y": "output"}, template_args="128")
    result = generate(source, spec, path.name)
    with pytest.raises(InputError, match="launch compiles to other code in the generated program"):
        refuse_state_set_by_dropped_code(source, result, arch="sm_90", cache_dir=shared_cache_dir(), generated=result.program)


REPLACEABLE = {  # red team round 27 and our own: a definition another file's link replaces
    "attribute": "__attribute__((weak)) float weight() { return 0.0f; }\n",
    "pragma": "#pragma weak weight\nextern \"C\" float weight() { return 0.0f; }\n",  # C linkage: the pragma's name
    "reached_through_a_helper": "__attribute__((weak)) float weight() { return 0.0f; }\n",
}


@pytest.mark.parametrize("variant", sorted(REPLACEABLE))
def test_a_weak_definition_the_kept_code_uses_is_refused_unless_vouched_for(variant, tmp_path):
    helper = ("static float blend_weight() { return weight(); }\n" if variant == "reached_through_a_helper" else "")
    use = "blend_weight()" if helper else "weight()"
    # an inline template the launcher also uses: the compiler's own weak copy, in a COMDAT group
    source = (REPLACEABLE[variant] + helper + "template <class T> inline T half(T v) { return v / 2; }\n" + KERNEL
              + "void scale_forward(const float* x, float* y, int n) {\n"
              f"  scale<<<(n + 255) / 256, 256>>>(x, y, half({use}), n);\n}}\nint main() {{ return 0; }}\n")
    spec = SPEC.model_copy(update={"launcher": "scale_forward"})
    result = generate(source, spec)
    with pytest.raises(InputError, match=r"^the kept code uses weight(\(\))?, a weak definition .*--keep-state weight if"):
        refuse_state_set_by_dropped_code(source, result, arch="sm_90", cache_dir=shared_cache_dir())
    refuse_state_set_by_dropped_code(source, result, arch="sm_90", cache_dir=shared_cache_dir(),
                                     keep_state=["weight"])  # vouched for: the state guard is satisfied
    # and the generated program, read too, is refused by contract v2 all the same: weak frozen code
    with pytest.raises(InputError, match=r"weak"):
        refuse_state_set_by_dropped_code(source, result, arch="sm_90", cache_dir=shared_cache_dir(),
                                         generated=result.program, keep_state=["weight"])


def test_round27_a_weak_weight_another_file_replaces_is_refused(tmp_path):
    path = FIXTURES / "redteam" / "round27" / "init" / "weak_override.cu"
    source = path.read_text()
    result = generate(source, InitSpec(values={"n": ["1048576", "1000003"]}, roles={"y": "output"}), path.name)
    with pytest.raises(InputError, match=r"the kept code uses weight\(\), a weak definition"):
        refuse_state_set_by_dropped_code(source, result, arch="sm_90", cache_dir=shared_cache_dir())
    with pytest.raises(InputError, match=r"weak"):  # the generated program: contract v2 refuses weak frozen code
        refuse_state_set_by_dropped_code(source, result, arch="sm_90", cache_dir=shared_cache_dir(), generated=result.program)


def test_code_the_compiler_numbers_differently_in_the_copy_is_not_refused(tmp_path):
    # switch tables and strings the compiler numbers in order of appearance (CSWTCH.17 in the
    # user's file, CSWTCH.15 in the editable unit) are the same code
    source = (FIXTURES / "init_state" / "numbered_tables.cu").read_text()
    result = generate(source, SPEC.model_copy(update={"launcher": "scale_forward"}))
    refuse_state_set_by_dropped_code(source, result, arch="sm_90", cache_dir=shared_cache_dir(), generated=result.program)


def test_round29_state_in_a_section_the_source_named_is_state(tmp_path):
    # `section(".data.rel.ro.w")` on a global main sets: only the compiler's own RELRO sections are
    # read-only when the program runs
    path = FIXTURES / "redteam" / "round29" / "init" / "relro_state.cu"
    source = path.read_text()
    result = generate(source, InitSpec(values={"n": ["1048576", "1000003"]}, roles={"y": "output"}), path.name)
    with pytest.raises(InputError, match=r"the kept code reads g_w, state that persists between calls"):
        refuse_state_set_by_dropped_code(source, result, arch="sm_90", cache_dir=shared_cache_dir())
    with pytest.raises(InputError, match=r"section"):  # the generated program: contract v2 refuses it too
        refuse_state_set_by_dropped_code(source, result, arch="sm_90", cache_dir=shared_cache_dir(), generated=result.program)


HEADER_ONLY = FIXTURES / "outside_headers" / "softplus_inline.cuh"
HEADER_SPEC = InitSpec(values={"n": ["16777216", "1000003"], "beta": ["1.0"]})


def test_a_header_only_inline_launcher_is_read_as_the_generated_program_calls_it():
    """A header-only library's launcher is inline and nothing in the header calls it, so the header's own object
    holds none of it: init compiles the header with a call made as the generated program makes it, and reads what
    the launcher reaches (before: "softplus is not in the compiled file")."""
    source = HEADER_ONLY.read_text()
    result = generate(source, HEADER_SPEC, HEADER_ONLY.name)
    assert result.launcher == "softplus" and result.keep_call and "act::softplus(" in result.keep_call
    refuse_state_set_by_dropped_code(source, result, arch="sm_90", cache_dir=shared_cache_dir(),
                                     generated=result.program)  # no refusal


def test_a_header_only_launcher_reading_state_set_elsewhere_is_still_refused():
    """The same call makes what the launcher reads visible: a file-scope setting another function sets is refused
    as for any launcher (red team round 21's template launcher, which no call instantiated, was refused blind)."""
    source = HEADER_ONLY.read_text().replace(
        "inline void softplus(", "static float g_beta_scale = 1.0f;\ninline void set_beta_scale(float s) "
        "{ g_beta_scale = s; }\ninline void softplus(").replace("(x, y, n, beta);", "(x, y, n, beta * g_beta_scale);")
    result = generate(source, HEADER_SPEC, HEADER_ONLY.name)
    with pytest.raises(InputError, match="g_beta_scale"):
        refuse_state_set_by_dropped_code(source, result, arch="sm_90", cache_dir=shared_cache_dir())
