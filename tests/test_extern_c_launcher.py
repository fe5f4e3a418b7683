"""A launcher with C linkage (`extern "C"`, the normal spelling for a routine called from Fortran
or C) is wrapped like any other (kept-aside sets 11 and 12: three launchers refused as "may hand a
result back through host memory"). Its symbol is its plain name, which says nothing of its
parameters, so the host-code scan read none of its stack-passed arguments as its own; now it reads
them by the baseline's declaration, the one the harness calls it by, whatever a candidate's own
definition claims."""

from __future__ import annotations

import re

import pytest

from kernelloop.program.cuda_tree import declared_signature
from kernelloop.program.init import InitSpec, generate

SOURCE = r'''
__global__ void scale_rows(const double* x, double* y, int rows, int cols, int ld, int first, double a) {
  int c = blockIdx.x * blockDim.x + threadIdx.x;
  int r = blockIdx.y;
  if (c < cols && r < rows) y[(size_t)r * ld + c] = a * x[(size_t)r * ld + c] + first;
}
extern "C" void scale_rows_gpu(const double* x, double* y, int rows, int cols, int ld, int first, int spare,
                               double a) {
  if (rows == 0 || cols == 0) return;
  dim3 block(256, 1);
  dim3 grid((cols + 255) / 256, rows);
  scale_rows<<<grid, block>>>(x, y, rows, cols, ld, first + spare, a);
}
'''
SPEC = InitSpec(values={"rows": ["512", "37"], "cols": ["1024", "333"], "ld": ["1024", "333"], "first": ["1", "2"],
                        "spare": ["0", "0"], "a": ["0.5", "-1.5"]},
                counts={"x": "rows * ld", "y": "rows * ld"})


@pytest.mark.parametrize("declaration, signature", [
    ('extern "C" void f(const double *__restrict__ x, int n, float a[], unsigned long long k, const int &r);',
     "f(double const*, int, float*, unsigned long long, int const&)"),
    ('extern "C" void f(void);', "f()"),
    ("void g(float* const* p, dim3 grid);", "g(float**, dim3)"),
    ('extern "C" void f(void (*callback)(int));', None),  # not read: the scan counts nothing
    ('extern "C" void f(int n, ...);', None),
])
def test_a_declaration_gives_its_signature_as_a_demangler_would(declaration, signature):
    assert declared_signature(declaration) == signature


def _build(program: str, candidate_text: str | None = None):
    from kernelloop.config import Settings
    from kernelloop.program.split import candidate_editable_part, split_program
    from kernelloop.tools.nvcc import find_toolchain
    from kernelloop.verify.gate import static_gates

    from .conftest import shared_cache_dir

    split = split_program(program, "scale_rows.cu")
    editable = split.editable if candidate_text is None else candidate_editable_part(candidate_text, split)[0]
    return static_gates(split, editable, arch="sm_90", settings=Settings(cache_dir=shared_cache_dir()),
                        toolchain=find_toolchain())


@pytest.mark.nvcc
def test_an_extern_c_launcher_with_stack_passed_arguments_is_wrapped_and_passes_against_itself():
    program = generate(SOURCE, SPEC, "scale_rows.cu").program
    assert re.search(r'extern "C" void scale_rows_gpu\(', program)
    result = _build(program)
    assert not result.violations, [v.describe() for v in result.violations]
    assert result.candidate is not None and result.candidate.ok


@pytest.mark.nvcc
def test_a_candidate_claiming_more_parameters_than_the_baseline_declares_reads_its_callers_frame():
    program = generate(SOURCE, SPEC, "scale_rows.cu").program
    # the harness passes 7 integer arguments (one on the stack); this definition reads three more
    # stack slots, which hold the harness's frame
    greedy = program.replace("int spare,\n                               double a) {",
                             "int spare, double a, long p7, long p8, long p9) {\n  if (p7 + p8 + p9 == 42) first = 0;")
    assert greedy != program
    result = _build(program, greedy)
    assert any(v.rule == "foreign-load" and "scale_rows_gpu" in v.detail for v in result.violations), \
        [v.describe() for v in result.violations]
