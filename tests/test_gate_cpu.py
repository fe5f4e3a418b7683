"""The verify gate's early exits, with real nvcc and no GPU: nothing rejected is ever run."""

from __future__ import annotations

import pytest

from kernelloop.config import load_settings
from kernelloop.errors import EnvironmentProblem, InputError
from kernelloop.tools.gpu import GpuInfo
from kernelloop.verify import gate
from kernelloop.verify.verdict import Reason

from .conftest import FIXTURES, ROOT

NAIVE = (ROOT / "kernels" / "naive_matmul.cu").read_text()
FAKE_H100 = GpuInfo(index=0, name="fake H100 (test)", compute_capability="9.0", driver_version="0")


@pytest.fixture
def no_runs(monkeypatch):
    def refuse(*a, **k):
        raise AssertionError("a program was run although an earlier gate failed")
    monkeypatch.setattr(gate, "run_program", refuse)


@pytest.fixture
def settings(isolated_cache, tmp_path):
    return load_settings(project_dir=tmp_path)


def verify(candidate: str, settings):
    return gate.verify_sources(NAIVE, candidate, settings, baseline_name="naive_matmul.cu",
                               candidate_name="cand.cu", gpu=FAKE_H100)


@pytest.mark.nvcc
def test_policy_violation_is_rejected_without_running(no_runs, settings):
    cand = (FIXTURES / "candidates" / "matmul" / "fake_kernel_ms.cu").read_text()
    v = verify(cand, settings)
    assert not v.accepted and v.reasons == [Reason.policy]
    assert any(x.rule == "printing" for x in v.policy)
    assert v.gate("policy").status == "fail" and v.gate("speedup") is None


@pytest.mark.nvcc
def test_object_scan_catches_what_the_text_scan_cannot_see(no_runs, settings):
    # a function pointer hides the name `write` from the source rules, not from the linker
    cand = NAIVE.split("// kernelloop: editable begin")[1].split("// kernelloop: editable end")[0]
    cand = 'extern "C" long write(int, const void*, unsigned long);\n' + cand.replace(
        "naive_matmul_kernel<<<grid, block>>>(A, B, C, n);",
        "naive_matmul_kernel<<<grid, block>>>(A, B, C, n);\n  auto w = &::write; w(2, \"KERNEL_MS: 0.001\\n\", 17);")
    v = verify(cand, settings)
    assert Reason.policy in v.reasons
    assert any(x.where == "object" and "write" in x.detail for x in v.policy)


@pytest.mark.nvcc
def test_compile_error_is_rejected_with_the_log(no_runs, settings):
    v = verify("__global__ void broken( { }\nvoid launch_matmul(const float*, const float*, float*, int) {}\n", settings)
    assert v.reasons == [Reason.compile]
    assert "candidate.cu" in v.builds["candidate"].log_excerpt and "error" in v.builds["candidate"].log_excerpt


@pytest.mark.nvcc
def test_changed_launcher_signature_fails_at_link_time(no_runs, settings):
    cand = (FIXTURES / "candidates" / "matmul" / "wrong_signature.cu").read_text()
    v = verify(cand, settings)
    assert v.reasons == [Reason.compile] and v.builds["candidate"].stage == "link"
    assert "launch_matmul" in v.builds["candidate"].log_excerpt


@pytest.mark.nvcc
def test_preamble_error_check_macro_is_allowed_but_its_printf_is_not(monkeypatch, settings):
    """CUDA_CHECK from the frozen preamble prints with fprintf: the candidate may use it."""
    ran = []
    monkeypatch.setattr(gate, "run_program", lambda *a, **k: ran.append(1) or (_ for _ in ()).throw(RuntimeError("stop")))
    body = NAIVE.split("// kernelloop: editable begin")[1].split("// kernelloop: editable end")[0]
    with_check = body.replace("naive_matmul_kernel<<<grid, block>>>(A, B, C, n);",
                              "naive_matmul_kernel<<<grid, block>>>(A, B, C, n);\n  CUDA_CHECK(cudaGetLastError());")
    with pytest.raises(RuntimeError, match="stop"):
        verify(with_check, settings)  # got past policy and compile to the first run
    assert ran
    smuggled = "#define CAT(a, b) a##b\n" + with_check.replace("CUDA_CHECK(cudaGetLastError());",
                                                               'CAT(fpr, intf)(stderr, "x");')
    monkeypatch.setattr(gate, "run_program", lambda *a, **k: (_ for _ in ()).throw(AssertionError("ran")))
    v = verify(smuggled, settings)
    assert Reason.policy in v.reasons


@pytest.mark.nvcc
def test_baseline_that_does_not_build_is_an_input_error(settings):
    broken = NAIVE.replace("acc += A[row * n + k]", "acc += A[row * n + k")
    with pytest.raises(InputError, match="baseline does not build"):
        gate.verify_sources(broken, NAIVE, settings, baseline_name="b.cu", candidate_name="c.cu", gpu=FAKE_H100)


def test_no_gpu_is_one_clear_line(monkeypatch, settings):
    monkeypatch.setattr(gate, "detect_gpus", lambda: [])
    with pytest.raises(EnvironmentProblem, match=r"verify needs a CUDA GPU; run `kernelloop doctor`"):
        gate.verify_sources(NAIVE, NAIVE, settings, baseline_name="b.cu", candidate_name="c.cu")


@pytest.mark.nvcc
def test_the_preprocessor_check_refuses_files_outside_the_toolkit():
    from kernelloop.tools.nvcc import check_includes, find_toolchain
    from kernelloop.tools.sandbox import Limits

    limits = Limits(wall_timeout_s=120, memory_bytes=4 << 30)
    ok = check_includes("#include <cuda_runtime.h>\n#include <cmath>\n__global__ void k() {}\n",
                        arch="sm_90", toolchain=find_toolchain(), limits=limits)
    assert ok.ok and not ok.outside
    bad = check_includes('#define F "/etc/hostname"\n#include F\n__global__ void k() {}\n',
                         arch="sm_90", toolchain=find_toolchain(), limits=limits)
    assert not bad.ok and bad.outside == ["/etc/hostname"]


def test_source_normalization_defeats_splices_and_digraphs():
    from kernelloop.verify.policy import scan_source

    for text in ('#inc\\\nlude "/etc/hostname"\n', '%:include "/etc/hostname"\n', '??=include "/etc/hostname"\n'):
        assert any(v.rule == "include" for v in scan_source(text)), text
    assert any(v.rule == "printing" for v in scan_source('void f() { prin\\\ntf("x"); }'))
    assert any(v.rule == "include" for v in scan_source('asm(".incbin \\"/etc/passwd\\"");'))
    assert any(v.rule == "static-init" for v in scan_source('__attribute__((section(".init_array"))) void* p;'))


def test_source_options_for_the_host_compiler_are_refused():
    # The host-code scan checks its stack model against the unwind tables gcc writes under its
    # default options (verify/unwind.py): the source may not change them.
    from kernelloop.verify.policy import scan_source

    for text in ('#pragma GCC optimize("O0")\nvoid f() {}\n',
                 '_Pragma("GCC optimize(\\"no-omit-frame-pointer\\")") void f() {}\n',
                 '__attribute__((noinline, optimize("O0"))) void f() {}\n',
                 '[[gnu::optimize("no-asynchronous-unwind-tables")]] void f() {}\n'):
        assert any(v.rule == "compiler-options" for v in scan_source(text)), text
    assert not any(v.rule == "compiler-options" for v in scan_source(
        '__global__ void k(float* x) {\n#pragma unroll 4\n  for (int i = 0; i < 4; ++i) x[i] = 0; }\n'))


@pytest.mark.nvcc
@pytest.mark.parametrize("baseline, candidate, rule", [
    ("xent_outptr_v2.cu", "rt42_xent_outptr_drop.cu", "foreign-store"),  # void launch(..., float* loss_out)
    ("xent_ref_v2.cu", "rt42_xent_outptr_drop.cu", "foreign-store"),  # void launch(..., float& loss_out)
    ("xent_global_v2.cu", "rt42_xent_global_drop.cu", "foreign-store"),  # a global the harness prints
    # round 43: the scan fails closed for a baseline too (a memcpy, a runtime call it does not model)
    ("../round43/rt43_xent_memcpy_v2.cu", "../round43/rt43_xent_memcpy_drop.cu", "host-memory-write"),
    ("../round43/rt43_xent_memcpy2d_v2.cu", "../round43/rt43_xent_memcpy_drop.cu", "unknown-call"),
])
def test_a_result_handed_back_through_host_memory_refuses_the_baseline(baseline, candidate, rule, no_runs, settings):
    # Red team round 42: after round 41 refused returned values, a launcher still handed its loss
    # back through an out-pointer, a reference or a global of the frozen code; nothing compared
    # it, and a candidate that dropped it would have matched. The baseline's host code is scanned
    # as a candidate's is, and a write of memory the harness can read refuses it.
    folder = FIXTURES / "redteam" / "round42"
    with pytest.raises(InputError, match=rf"its launcher.s host code fails the scan a candidate.s must pass \({rule} in "):
        gate.verify_sources((folder / baseline).read_text(), (folder / candidate).read_text(), settings,
                            baseline_name=baseline, candidate_name=candidate, gpu=FAKE_H100)


@pytest.mark.nvcc
def test_a_variable_of_the_editable_part_the_frozen_code_names_refuses_the_baseline(no_runs, settings):
    # Red team round 44: the launcher kept the loss in a global pointer of its own (a lazy
    # workspace), and the frozen code declared it extern and read it back: a result past every
    # compared buffer. In v2 the frozen code may name the editable part's functions only.
    folder = FIXTURES / "redteam" / "round44"
    with pytest.raises(InputError, match=r"the frozen code names kl_loss_dev, a variable the editable part defines"):
        gate.verify_sources((folder / "rt44_editable_global_v2.cu").read_text(),
                            (folder / "rt44_drop_global.cu").read_text(), settings,
                            baseline_name="rt44_editable_global_v2.cu", candidate_name="rt44_drop_global.cu",
                            gpu=FAKE_H100)
