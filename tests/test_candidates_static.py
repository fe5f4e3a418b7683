"""Every bundled program builds under the contract, and every candidate fixture meets its
expected fate in the gates decided before anything runs (policy and compile), with real nvcc.

What only a GPU can decide (correctness, memcheck, timing audit, speedup) is checked by
tests/gpu/test_verify_gpu.py with the same manifests.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernelloop.config import Settings
from kernelloop.program.split import candidate_editable_part, split_program
from kernelloop.tools.nvcc import build_program, find_toolchain
from kernelloop.verify.gate import static_gates
from kernelloop.verify import policy
from kernelloop.verify.policy import _CUDA_REFUSED as CUDA_REFUSED

from .conftest import FIXTURES, ROOT, shared_cache_dir

SUITE = {
    "matmul": "naive_matmul.cu",
    "row_softmax": "row_softmax.cu",
    "sum_reduction": "sum_reduction.cu",
    "transpose": "transpose.cu",
    "stencil2d": "stencil2d.cu",
    "histogram": "histogram.cu",
}
STATIC_REASONS = {"policy", "compile", "reduced_precision"}
# Other families' attack fixtures and the rules that must reject each (red team round 19).
RULES: dict[str, set[str]] = {
    "rt19_launch_args_read.cu": {"launch-arguments"}, "rt19_cooperative_args_read.cu": {"launch-arguments"},
    "rt19_graph_node_args_read.cu": {"launch-arguments"}, "rt19_pasted_internal_launch.cu": {"reserved-name"},
    "rt8_comdat_vector_zero_write.cu": {"reserved-name"}, "harness_name.cu": {"reserved-name"},
    "rt19_memcpy_h2h_write.cu": {"host-copy"}, "rt19_memcpy_kind_computed.cu": {"host-copy"},
    "rt19_memcpy_size_unknown.cu": {"host-copy"}, "rt19_memcpy_htod_foreign.cu": {"foreign-load"},
    "rt19_memcpy_dtoh_heap.cu": {"foreign-store"}, "vault_role_write.cu": {"foreign-store"},
    "rt20_launchex_kernel_overload_read.cu": {"launch-arguments"}, "rt20_launchex_pointer_chase.cu": {"launch-arguments"},
    "rt20_launch_attrs_foreign.cu": {"launch-arguments"},
    "rt21_redzone_retaddr.cu": {"foreign-store"}, "rt21_redzone_outptr.cu": {"foreign-store"},
    "rt21_input_pointers_foreign.cu": {"foreign-load"},
    "rt23_msabi_launcher.cu": {"compiler-options"},
    "rt28_xsave_unsized_store.cu": {"host-instruction"}, "own_xsaveopt_global.cu": {"host-instruction"},
}
# Verifier v2 attack fixtures (tests/fixtures/candidates/matmul): the rules that must reject
# each, from the source scan, and from the object and program scans when the source scan
# is bypassed (defence in depth: the object is what really runs).
V2_RULES: dict[str, tuple[set[str], set[str]]] = {
    "ifunc_resolver.cu": ({"ifunc"}, {"ifunc"}),
    "init_section.cu": ({"static-init"}, {"static-init"}),
    "exit_handler.cu": ({"exit-handler"}, {"exit-handler"}),
    "fini_destructor.cu": ({"exit-handler"}, {"static-init"}),
    "tls_cache.cu": ({"tls"}, {"tls"}),
    "graph_host_node.cu": ({"graph-node"}, {"graph-node"}),
    "graph_generic_node.cu": ({"graph-node"}, {"graph-node"}),
    "user_object_dtor.cu": ({"user-object"}, {"user-object"}),
    "host_callback.cu": ({"host-callback"}, {"host-callback"}),
    "library_load.cu": ({"code-loading"}, {"code-loading"}),
    "driver_entry.cu": ({"code-loading"}, {"code-loading"}),
    "planted_window.cu": ({"timing"}, {"timing"}),
    "persist_l2.cu": ({"device-state", "l2-persistence"}, {"device-state", "l2-persistence"}),
    "mapped_host.cu": ({"host-memory"}, {"host-memory"}),
    "other_gpu.cu": ({"device-state"}, {"device-state"}),
    "profiler_stop.cu": ({"profiler"}, {"profiler"}),
    "symver_import.cu": ({"symver"}, {"forbidden-call"}),
}


def cases():
    for family, baseline in SUITE.items():
        folder = FIXTURES / "candidates" / family
        for name, entry in json.loads((folder / "manifest.json").read_text()).items():
            # entries are paths relative to the folder: the positives live in exemplars/
            yield pytest.param(baseline, (folder / name).resolve(), entry["expect"], id=f"{family}/{Path(name).name}")


@pytest.fixture(scope="module")
def settings(tmp_path_factory):
    return Settings(cache_dir=shared_cache_dir())


def test_every_manifest_entry_has_a_file_and_every_file_an_entry():
    for family in SUITE:
        folder = FIXTURES / "candidates" / family
        listed = {(folder / name).resolve() for name in json.loads((folder / "manifest.json").read_text())}
        assert all(p.is_file() for p in listed)
        assert {p.resolve() for p in folder.glob("*.cu")} <= listed


@pytest.mark.nvcc
@pytest.mark.parametrize("baseline, candidate, expect", list(cases()))
def test_static_gates(baseline: str, candidate: Path, expect: str, settings):
    split = split_program((ROOT / "kernels" / baseline).read_text(), baseline)
    editable, _ = candidate_editable_part(candidate.read_text(), split, candidate.name)
    if expect not in STATIC_REASONS | {"accepted"}:
        # A wrong kernel that only a run refuses (tests/gpu/test_verify_gpu.py): what the static tier owes
        # it is a build; whether a static gate would refuse it too changes nothing (refused either way),
        # and the gates' whole cost belongs to the candidates whose verdict they decide.
        build = build_program(split.editable_unit(editable, "candidate.cu"), split.harness_unit(), arch="sm_90",
                              cache_dir=settings.cache_dir, toolchain=find_toolchain())
        assert build.ok, build.log[-2000:]
        return
    result = static_gates(split, editable, arch="sm_90", settings=settings, toolchain=find_toolchain())
    assert result.baseline.ok
    manifest = candidate.parent / "manifest.json"  # the exemplars live outside the fixture folders
    entry = json.loads(manifest.read_text()).get(candidate.name, {}) if manifest.exists() else {}
    if expect == "policy" and entry.get("compiler_specific") and not result.violations:
        pytest.skip(f"this host compiler does not produce the attack: {entry['compiler_specific']}")
    if expect == "policy":
        assert result.violations, "a policy candidate got past the policy gate"
        want = V2_RULES.get(candidate.name, (RULES.get(candidate.name, set()), set()))[0]
        assert want <= {v.rule for v in result.violations}, [v.describe() for v in result.violations]
    elif expect == "reduced_precision":
        assert result.candidate is not None and result.candidate.ok, result.candidate.log if result.candidate else ""
        assert "reduced_precision" in {v.rule for v in result.violations}, [v.describe() for v in result.violations]
    elif expect == "compile":
        assert result.candidate is not None and not result.candidate.ok and not result.violations
    else:
        assert result.candidate.ok, result.candidate.log
        assert not result.violations, [v.describe() for v in result.violations]


@pytest.mark.nvcc
def test_interposing_a_library_function_is_caught_and_contained(settings, monkeypatch):
    from kernelloop.verify import policy

    # the source scan already refuses the name (rule `timing`); what is tested here is the object
    monkeypatch.setattr(policy, "scan_source", lambda editable, *_: [])
    monkeypatch.setattr(policy, "scan_host_pass", lambda lines: [])  # the host-pass scan: a source scan too
    split = split_program((ROOT / "kernels" / "naive_matmul.cu").read_text())
    editable, _ = candidate_editable_part((FIXTURES / "candidates/matmul/interpose_elapsed.cu").read_text(), split)
    result = static_gates(split, editable, arch="sm_90", settings=settings, toolchain=find_toolchain())
    assert result.candidate.ok  # it links only because containment made its definition local
    assert any(v.rule == "interposition" and "cudaEventElapsedTime" in v.detail for v in result.violations)
    assert "cudaEventElapsedTime" not in result.candidate.kept_global


SHARED_TEMPLATE_PROGRAM = """#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>
template <class T> __attribute__((noinline)) T kl_twice(T x) { return x + x; }  // COMDAT in both units
// kernelloop: editable begin
__global__ void k(float* out) { out[threadIdx.x] = threadIdx.x; }
void launch(float* out) { k<<<1, 32>>>(out); volatile float in = 1.0f; volatile float f = kl_twice((float)in); (void)f; }
// kernelloop: editable end
int main() {
  float* d; cudaMalloc(&d, 128); launch(d);
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b); cudaEventRecord(a); launch(d); cudaEventRecord(b);
  cudaEventSynchronize(b); float ms; cudaEventElapsedTime(&ms, a, b);
  volatile float two = 2.0f; printf("%f\\n", kl_twice((float)two)); fprintf(stderr, "KERNEL_MS: %f\\n", ms); return 0;
}
"""


@pytest.mark.nvcc
def test_a_template_instantiated_in_both_units_still_links(settings):
    split = split_program(SHARED_TEMPLATE_PROGRAM)
    cand = split.editable.replace("out[threadIdx.x] = threadIdx.x;", "out[threadIdx.x] = 2 * threadIdx.x;")
    result = static_gates(split, cand, arch="sm_90", settings=settings, toolchain=find_toolchain())
    assert result.candidate.ok, result.candidate.log
    assert not result.violations


@pytest.mark.nvcc
def test_a_weak_definition_of_a_library_function_the_harness_imports_is_interposition(settings, monkeypatch):
    split = split_program((ROOT / "kernels" / "naive_matmul.cu").read_text())
    editable, _ = candidate_editable_part((ROOT / "src" / "kernelloop" / "exemplars" / "matmul_smem_tiling.cu").read_text(), split)
    # the harness's std::vector imports std::__throw_length_error from libstdc++; the source scan
    # refuses the reserved name first (rule reserved-name), so both are off here: the object scan is the guard
    from kernelloop.verify import policy
    monkeypatch.setattr(policy, "scan_source", lambda editable, *_: [])
    monkeypatch.setattr(policy, "scan_preprocessed", lambda *_: [])  # the same rule on the expanded text
    evil = editable + '\nnamespace std { __attribute__((weak)) void __throw_length_error(const char*) { for (;;) {} } }\n'
    result = static_gates(split, evil, arch="sm_90", settings=settings, toolchain=find_toolchain())
    assert any(v.rule == "interposition" and "__throw_length_error" in v.detail for v in result.violations)


@pytest.mark.nvcc
@pytest.mark.parametrize("name", sorted(V2_RULES))
def test_object_and_program_scans_catch_what_the_source_scan_would(name, settings, monkeypatch):
    """With the source scan switched off, the compiled object and the linked program alone
    still reject every verifier-v2 attack for the intended reason."""
    from kernelloop.verify import policy

    monkeypatch.setattr(policy, "scan_source", lambda editable, *_: [])
    monkeypatch.setattr(policy, "scan_host_pass", lambda lines: [])  # the host-pass scan: a source scan too
    monkeypatch.setattr(policy, "_attribute_rules", lambda text, where: [])  # the preprocessed part's, as well
    split = split_program((ROOT / "kernels" / "naive_matmul.cu").read_text())
    editable, _ = candidate_editable_part((FIXTURES / "candidates/matmul" / name).read_text(), split, name)
    result = static_gates(split, editable, arch="sm_90", settings=settings, toolchain=find_toolchain())
    assert result.candidate is not None and result.candidate.ok, result.candidate.log if result.candidate else ""
    found = {v.rule for v in result.violations if v.where in ("object", "program")}
    assert V2_RULES[name][1] <= found, [v.describe() for v in result.violations]
    if name == "ifunc_resolver.cu":  # the linked program too: an IRELATIVE relocation the baseline lacks
        assert any(v.rule == "ifunc" and v.where == "program" for v in result.violations)
    if name == "fini_destructor.cu":
        assert any(v.rule == "static-init" and v.where == "program" for v in result.violations)


@pytest.mark.nvcc
def test_a_static_local_in_an_inline_host_function_is_a_unique_symbol_and_refused(settings):
    split = split_program((ROOT / "kernels" / "naive_matmul.cu").read_text())
    editable, _ = candidate_editable_part((ROOT / "src" / "kernelloop" / "exemplars" / "matmul_smem_tiling.cu").read_text(), split)
    # `inline` gives the static local GNU-unique binding: bound process-wide, left global by containment
    unique = editable + "\ninline int kl_calls() { static int calls = 0; return ++calls; }\n" \
                        "int kl_probe_calls() { return kl_calls(); }\n"
    result = static_gates(split, unique, arch="sm_90", settings=settings, toolchain=find_toolchain())
    assert any(v.rule == "symbol-type" and "nm type u" in v.detail for v in result.violations), \
        [v.describe() for v in result.violations]
    # the fix the message suggests: a static (internal) function keeps its static local local
    local = unique.replace("inline int kl_calls", "static int kl_calls")
    result = static_gates(split, local, arch="sm_90", settings=settings, toolchain=find_toolchain())
    assert not [v for v in result.violations if v.rule == "symbol-type"], [v.describe() for v in result.violations]


@pytest.mark.nvcc
def test_honest_launcher_runtime_calls_pass_the_allow_list(settings):
    """Streams, events without elapsed time, capture into a kernel graph, cluster launches,
    occupancy and attribute queries, async allocation: what honest launchers use."""
    split = split_program((ROOT / "kernels" / "naive_matmul.cu").read_text())
    editable, _ = candidate_editable_part((ROOT / "src" / "kernelloop" / "exemplars" / "matmul_smem_tiling.cu").read_text(), split)
    extra = """
__global__ void kl_noop_kernel(float* x) { if (x && threadIdx.x == 1024) x[0] = 0.0f; }
void kl_honest_runtime_use(float* x) {
  int device = 0, sms = 0, blocks = 0, min_grid = 0, block = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, device);
  cudaFuncSetAttribute(kl_noop_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 1024);
  cudaFuncAttributes attrs;
  cudaFuncGetAttributes(&attrs, kl_noop_kernel);
  cudaFuncSetCacheConfig(kl_noop_kernel, cudaFuncCachePreferShared);
  cudaOccupancyMaxPotentialBlockSize(&min_grid, &block, kl_noop_kernel, 0, 0);
  cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kl_noop_kernel, 256, 0);
  cudaStream_t s;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  cudaEvent_t e;
  cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
  float* t = nullptr;
  cudaMallocAsync(&t, 64, s);
  cudaMemsetAsync(t, 0, 64, s);
  cudaMemcpyAsync(t, x, 64, cudaMemcpyDeviceToDevice, s);
  cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
  kl_noop_kernel<<<1, 32, 0, s>>>(t);
  cudaGraph_t g;
  cudaStreamEndCapture(s, &g);
  cudaGraphExec_t ge;
  cudaGraphInstantiate(&ge, g, 0);
  cudaGraphLaunch(ge, s);
  kl_noop_kernel<<<1, 32, 0, s>>>(t);
  cudaEventRecord(e, s);
  cudaStreamWaitEvent(0, e, 0);
  cudaFreeAsync(t, s);
  cudaStreamSynchronize(s);
  cudaGraphExecDestroy(ge);
  cudaGraphDestroy(g);
  cudaEventDestroy(e);
  cudaStreamDestroy(s);
  (void)cudaPeekAtLastError();
  (void)cudaGetErrorString(cudaGetLastError());
}
"""
    result = static_gates(split, editable + extra, arch="sm_90", settings=settings, toolchain=find_toolchain())
    assert result.candidate is not None and result.candidate.ok, result.candidate.log if result.candidate else ""
    # the import, CUDA-call, symbol-kind, section and code-outside-main allow-lists (the host
    # code scan of verify/hostcode.py judges the stores and out-pointers separately)
    allow_list_rules = {"forbidden-call", "driver-api", "symbol-type", "section", "tls", "ifunc", "exit-handler",
                        "static-init", "symver", *(rule for rule, _, _ in CUDA_REFUSED)}
    assert not [v for v in result.violations if v.rule in allow_list_rules], [v.describe() for v in result.violations]


# -- the allow-lists themselves (no nvcc) -------------------------------------------------------

def test_cuda_runtime_allow_list_and_the_rules_of_what_it_refuses():
    from kernelloop.verify.policy import cuda_call_rule

    for honest in ["cudaLaunchKernel", "cudaLaunchKernel_ptsz",
                   "cudaFuncSetAttribute", "cudaFuncGetAttributes", "cudaFuncSetCacheConfig",
                   "cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags", "cudaGetDevice",
                   "cudaDeviceGetAttribute", "cudaGetDeviceProperties_v2", "cudaMalloc", "cudaFreeAsync",
                   "cudaMemsetAsync", "cudaMemcpyAsync", "cudaMemcpyToSymbol", "cudaStreamCreateWithFlags",
                   "cudaStreamWaitEvent", "cudaEventCreateWithFlags", "cudaEventRecord", "cudaEventSynchronize",
                   "cudaStreamBeginCapture", "cudaStreamGetCaptureInfo_v3", "cudaGraphInstantiateWithFlags",
                   "cudaGraphLaunch", "cudaGetLastError", "cudaPeekAtLastError", "cudaGetErrorString",
                   "__cudaRegisterFunction", "__cudaLaunchKernel", "memcpy",
                   # cuComplex.h's inline arithmetic (kept-aside set 9's conjugate transpose)
                   "cuConjf", "cuCaddf", "cuCmul", "cuCrealf", "cuCabs", "cuComplexFloatToDouble"]:
        assert cuda_call_rule(honest) is None, honest
    refused = {
        "cudaLaunchHostFunc": "host-callback", "cudaStreamAddCallback": "host-callback",
        "cudaGraphAddHostNode": "graph-node", "cudaGraphHostNodeSetParams": "graph-node",
        "cudaGraphExecHostNodeSetParams": "graph-node", "cudaGraphAddNode": "graph-node",
        "cudaGraphAddNode_v2": "graph-node", "cudaGraphNodeSetParams": "graph-node",
        "cudaGraphExecNodeSetParams": "graph-node", "cudaUserObjectCreate": "user-object",
        "cudaGraphRetainUserObject": "user-object", "cudaLibraryLoadData": "code-loading",
        "cudaLibraryLoadFromFile": "code-loading", "cudaGetKernel": "code-loading",
        "cudaGetDriverEntryPoint": "code-loading", "cudaGetDriverEntryPointByVersion": "code-loading",
        "cudaGetExportTable": "code-loading", "cuModuleLoadData": "driver-api", "cuLaunchKernel": "driver-api",
        "cudaEventElapsedTime": "timing", "cudaEventElapsedTime_v2": "timing", "cudaProfilerStart": "profiler",
        "cudaCtxResetPersistingL2Cache": "l2-persistence", "cudaStreamSetAttribute": "l2-persistence",
        "cudaGraphKernelNodeSetAttribute": "l2-persistence", "cudaDeviceSetLimit": "device-state",
        "cudaSetDevice": "device-state", "cudaDeviceReset": "device-state", "cudaMemcpyPeerAsync": "device-state",
        "cudaHostAlloc": "host-memory", "cudaMallocHost": "host-memory", "cudaHostRegister": "host-memory",
        "cudaHostGetDevicePointer": "host-memory", "cudaMallocManaged": "host-memory",
        "__cudaRegisterManagedVar": "host-memory", "cudaIpcGetMemHandle": "ipc",
        "cudaGraphDebugDotPrint": "file-io", "cudaLogsDumpToFile": "file-io",
        "cudaLaunchCooperativeKernel": "launch-arguments", "cudaGraphAddKernelNode": "launch-arguments",
        "cudaLaunchKernelExC": "launch-arguments",
        "cudaGraphExecKernelNodeSetParams": "launch-arguments", "cudaMemcpy2DAsync": "host-copy",
        "cudaMemcpy3D": "host-copy", "cudaMemcpyToArray": "host-copy",
        "cudaSomethingNew": "forbidden-call", "cuConjugateModule": "driver-api", "cuCtxCreate": "driver-api",
    }
    for name, rule in refused.items():
        assert cuda_call_rule(name) is not None and cuda_call_rule(name)[0] == rule, name


@pytest.mark.parametrize("text, rules", [
    ('asm(".pushsection .init, \\"ax\\", @progbits\\n call f@PLT\\n .popsection");', {"static-init", "host-asm"}),
    ('asm(".symver inner, popen@GLIBC_2.2.5");', {"symver", "host-asm"}),
    # host assembly anywhere: in a host function, a __host__ __device__ one, or a macro
    ('void launch() { asm volatile("nop"); }', {"host-asm"}),
    ('__host__ __device__ void f() { asm("nop"); }', {"host-asm"}),
    ('#define BARRIER asm volatile("" ::: "memory")\n', {"host-asm"}),
    ('static int f() __attribute__((ifunc("pick")));', {"ifunc"}),
    ('__attribute__((target_clones("avx2", "default"))) int g() { return 1; }', {"ifunc"}),
    ("thread_local int calls = 0;", {"tls"}),
    ("__attribute__((used, destructor)) static void bye() {}", {"exit-handler"}),
    ("[[gnu::destructor]] void bye() {}", {"exit-handler"}),
    ("__attribute__((noinline, constructor)) static void hi() {}", {"static-init"}),
    ("void f() { atexit(g); }", {"exit-handler"}),
    ("float ms; cudaEventElapsedTime(&ms, a, b);", {"timing"}),
    ("cudaStream_t s; cudaStreamAttrValue v; cudaStreamSetAttribute(s, cudaStreamAttributeAccessPolicyWindow, &v);",
     {"l2-persistence"}),
    ("void* p; cudaHostAlloc(&p, 64, cudaHostAllocMapped);", {"host-memory"}),
    ("CUmodule m; cuModuleLoadData(&m, image);", {"driver-api"}),
    # not violations: member calls named init, CUDA types and enumerators, PTX in device asm
    ("struct S { void init(); } s; void f() { s.init(); int a[2]; (void)a; }", set()),
    ("cudaStream_t s; cudaMemcpyAsync(d, e, 4, cudaMemcpyDeviceToDevice, s); cudaGraph_t g; CUtensorMap t;", set()),
    ('__device__ int f(int y) { int x; asm volatile("{ .reg .pred p; setp.ne.b32 p, %1, 0; selp.b32 %0, 1, 0, p; }"'
     ' : "=r"(x) : "r"(y)); return x; }', set()),
])
def test_source_rules_of_verifier_v2(text, rules):
    from kernelloop.verify.policy import scan_source

    assert {v.rule for v in scan_source(text)} == rules


@pytest.mark.parametrize("name", ["rt7_ifdef_cuda_arch_host_asm.cu", "rt7_string_in_head_host_asm.cu"])
def test_host_assembly_is_judged_on_the_host_code_nvcc_compiles(name, settings):
    """Red-team round 7: `#ifdef __CUDA_ARCH__` around `__device__`, and a string holding
    "__device__" in a host function's head, made the source scan read host assembly as device
    code. The host pass (nvcc --cuda) is what the host compiler gets: the assembly is there."""
    split = split_program((ROOT / "kernels" / "sum_reduction.cu").read_text())
    editable, _ = candidate_editable_part((FIXTURES / "candidates/sum_reduction" / name).read_text(), split, name)
    result = static_gates(split, editable, arch="sm_90", settings=settings, toolchain=find_toolchain())
    assert [v.rule for v in result.violations] and {v.rule for v in result.violations} == {"host-asm"}


def test_the_host_pass_keeps_device_assembly_out_and_host_assembly_in(tmp_path):
    from kernelloop.tools.nvcc import host_pass
    from kernelloop.tools.sandbox import Limits
    unit = ("__global__ void k(float* x) { asm volatile(\"membar.gl;\"); x[0] = 1; }\n"
            "__device__ int d(int a) { int r; asm(\"mov.u32 %0, %1;\" : \"=r\"(r) : \"r\"(a)); return r; }\n"
            "#ifdef __CUDA_ARCH__\n__device__\n#endif\nvoid sneaky() { asm volatile(\"nop\"); }\n"
            "int main() { sneaky(); k<<<1, 1>>>(nullptr); return 0; }\n")
    hosted = host_pass(unit, arch="sm_90", toolchain=find_toolchain(), limits=Limits(wall_timeout_s=120))
    assert hosted.ok
    found = policy.scan_host_pass(hosted.lines)
    assert [v.where for v in found] == ["source line 6"]  # `void sneaky()`, the only host assembly


@pytest.mark.parametrize("directive", ['#line 1 "kernelloop_harness.cuh"', '  # 7 "x.h"', '%:line 3'])
def test_a_line_directive_is_refused(directive):
    found = policy.scan_source(f"{directive}\nvoid f() {{}}\n")
    assert [v.rule for v in found] == ["line-directive"]


@pytest.mark.nvcc
def test_a_template_the_harness_also_instantiates_runs_the_editable_units_own_copy(settings):
    """Red-team round 8: a weak COMDAT definition shared with the harness object was merged at
    link time and the harness's copy kept, so a launcher could run code the host-code scan never
    saw in its object. Shared definitions are renamed in the editable object: the linked program
    holds both copies, and each unit calls its own."""
    import subprocess
    split = split_program(SHARED_TEMPLATE_PROGRAM)
    result = static_gates(split, split.editable, arch="sm_90", settings=settings, toolchain=find_toolchain())
    assert result.candidate.ok and not result.violations
    symbols = subprocess.run(["nm", str(result.candidate.binary)], capture_output=True, text=True).stdout
    copies = [line.split()[-1] for line in symbols.splitlines() if "kl_twice" in line and " W " in line]
    assert len(copies) == 2 and any(name.startswith("__kl_editable_") for name in copies), copies
    relro = subprocess.run(["readelf", "-d", str(result.candidate.binary)], capture_output=True, text=True).stdout
    assert "BIND_NOW" in relro or "(NOW)" in relro  # full RELRO: the GOT is read-only after start-up


def test_naming_a_cxx_runtime_abi_function_in_host_code_is_refused():
    """Red-team round 9: __cxa_guard_release/abort (and __cxa_throw, _Unwind_Resume) write
    through the pointer they are given; the compiler calls them with pointers it makes, a
    launcher that names them chooses the pointer."""
    found = policy.scan_host_pass([(3, 'extern "C" void __cxa_guard_release(long long*);'),
                                   (4, "void f() { _Unwind_Resume(0); }"), (5, 'const char* s = "__cxa_throw";'),
                                   (6, "__cudaRegisterFunction(h, f, n, n, -1, 0, 0, 0, 0, 0);"),
                                   (7, "(__cudaPushCallConfiguration(1, 1)) ? (void)0 : k(x);")])  # a launch: allowed
    assert [(v.rule, v.where) for v in found] == [("abi-call", "source line 3"), ("abi-call", "source line 4"),
                                                  ("abi-call", "source line 6")]


@pytest.mark.nvcc
def test_a_constructor_group_the_harness_shares_is_kept_in_the_editable_unit(settings):
    """A constructor's C1/C2 pair sits in a COMDAT group named C5, which is none of its symbols:
    renaming the symbols alone left the group to merge with the harness's, the editable copy
    dropped and its renamed symbols undefined (weak: a call to address 0). The group's
    signature is renamed too."""
    import subprocess
    program = SHARED_TEMPLATE_PROGRAM.replace(
        "template <class T> __attribute__((noinline)) T kl_twice(T x) { return x + x; }  // COMDAT in both units",
        "template <class T> struct Box { T v; __attribute__((noinline)) Box(T x) : v(x + x) {} };\n"
        "template <class T> __attribute__((noinline)) T kl_twice(T x) { Box<T> b(x); return b.v; }")
    split = split_program(program)
    result = static_gates(split, split.editable, arch="sm_90", settings=settings, toolchain=find_toolchain())
    assert result.candidate is not None and result.candidate.ok, result.candidate.log if result.candidate else ""
    symbols = subprocess.run(["nm", str(result.candidate.binary)], capture_output=True, text=True).stdout
    renamed = [line.split() for line in symbols.splitlines() if "__kl_editable_" in line and "Box" in line]
    assert renamed and all(parts[-2] == "W" for parts in renamed), renamed  # defined, not a weak undefined
