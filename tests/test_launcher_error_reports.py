"""A launcher's error check through the program's own function or macro (cuda-samples'
`getLastCudaError("...")`, a project's `check_launch("name")`): kept where it is, as written, when
the program's code shows it changes none of the launcher's names and launches nothing (kept-aside
set 10: two launchers turned away for such a check). A helper that counts, writes memory, launches,
or writes a launcher's variable through printf's %n is still turned away."""

from __future__ import annotations

import pytest

from .conftest import ROOT
from .test_redteam_round107 import _verdict

MATMUL = (ROOT / "kernels" / "naive_matmul.cu").read_text()
LAUNCH = "  naive_matmul_kernel<<<grid, block>>>(A, B, C, n);\n"
BEGIN = "// kernelloop: editable begin\n"


def _with(helpers: str, statement: str) -> str:
    """naive_matmul with HELPERS in its frozen preamble (where init puts a file's helpers) and
    STATEMENT after the launch."""
    assert LAUNCH in MATMUL and BEGIN in MATMUL
    return MATMUL.replace(BEGIN, helpers + "\n" + BEGIN).replace(LAUNCH, LAUNCH + f"  {statement}\n")


SAMPLES_CHECK = """#define getLastCudaError(msg) report_last_error(msg, __FILE__, __LINE__)
inline void report_last_error(const char* what, const char* file, const int line) {
  cudaError_t err = cudaGetLastError();
  if (cudaSuccess != err) {
    fprintf(stderr, "%s(%i) : CUDA error : %s : (%d) %s.\\n", file, line, what, (int)err, cudaGetErrorString(err));
    exit(EXIT_FAILURE);
  }
}"""
NAMED_CHECK = """namespace {
inline void check_launch(const char* what) {
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) { std::fprintf(stderr, "%s failed: %s\\n", what, cudaGetErrorString(err)); std::abort(); }
}
}"""


@pytest.mark.parametrize("helpers, statement", [
    (SAMPLES_CHECK, 'getLastCudaError("naive_matmul_kernel failed");'),
    (NAMED_CHECK, 'check_launch("naive_matmul_kernel");'),
    (NAMED_CHECK.replace("std::fprintf", "printf").replace("stderr, ", ""), 'check_launch("matmul");'),
])
def test_an_error_check_of_the_programs_own_is_kept_and_the_template_applies(helpers, statement):
    verdict = _verdict(_with(helpers, statement), "launch_matmul")
    assert verdict.problem is None and verdict.match is not None and verdict.match.family == "matmul", verdict


@pytest.mark.parametrize("helpers, statement", [
    # state: a count of calls, a file-scope value the next call reads
    ("static int g_launches = 0;\ninline void note_launch(const char* what) { g_launches++; }", 'note_launch("mm");'),
    # memory: a write through a pointer it is handed
    ("inline void mark_done(float* flag) { *flag = 1.0f; }", "mark_done(C);"),
    # a launch of its own
    ("__global__ void touch(float* y) { y[0] = 0.0f; }\ninline void finish(float* y) { touch<<<1, 1>>>(y); }",
     "finish(C);"),
    # printing that writes: %n through a pointer argument
    ("inline void report(int* where) { printf(\"%n\", where); }", "report(&n);"),
    ("inline void report(int* where) { printf(\"x%n\\n\", where); }", "{ int k = 0; report(&k); }"),
    # a function the program does not define (its body cannot be read)
    ("void external_check(const char* what);", 'external_check("mm");'),
])
def test_a_statement_whose_call_may_act_is_still_turned_away(helpers, statement):
    verdict = _verdict(_with(helpers, statement), "launch_matmul")
    assert verdict.match is None, verdict.match
    assert verdict.problem is not None, verdict.mismatches


@pytest.mark.nvcc
def test_the_candidate_keeps_the_check_after_the_template_and_passes_the_static_gates():
    from kernelloop.config import Settings
    from kernelloop.optimizers.offline.optimizer import OfflineOptimizer
    from kernelloop.program.split import candidate_editable_part, split_program
    from kernelloop.tools.nvcc import find_toolchain
    from kernelloop.verify.gate import static_gates

    from .conftest import shared_cache_dir
    from .test_offline_optimizer import request_for

    text = _with(SAMPLES_CHECK, 'getLastCudaError("naive_matmul_kernel failed");')
    proposal = OfflineOptimizer().propose(request_for(text, "matmul"))
    run_at = proposal.source.index("kl_matmul_run(A, B, C")
    assert proposal.source.index('getLastCudaError("naive_matmul_kernel failed");') > run_at
    split = split_program(text)
    editable, _ = candidate_editable_part(proposal.source, split)
    result = static_gates(split, editable, arch="sm_86", settings=Settings(cache_dir=shared_cache_dir()),
                          toolchain=find_toolchain())
    assert not result.violations, [v.describe() for v in result.violations]
    assert result.candidate is not None and result.candidate.ok, result.candidate.log[-2000:]
