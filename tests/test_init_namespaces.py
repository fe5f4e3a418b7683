"""init on kernels and launchers inside namespaces (named, nested, anonymous: PyTorch extensions put
kernels in `namespace {}`) and on files whose other code names the editable part (explicit
instantiations of a template launcher go with it; a binding that calls it is left out like main).
Found by the kept-aside set of 2026-11-29 (tests/fixtures/kept_aside_2/README.md)."""

from __future__ import annotations

import pytest

from kernelloop.config import Settings
from kernelloop.init_state import refuse_state_set_by_dropped_code
from kernelloop.program.init import InitSpec, generate
from kernelloop.program.scanner import in_scope, scope_qualifier, scoped_items
from kernelloop.program.split import split_program
from kernelloop.tools.nvcc import compiler_error

from .conftest import shared_cache_dir
from .outside_specs import OUTSIDE

SPECS = {
    "scale_rows_ext.cu": InitSpec(template_args="float", values={"rows": ["8192", "3001"], "cols": ["512", "257"]},
                                  counts={"in": "rows * cols", "out": "rows * cols"}, roles={"out": "output"}),
    "clamp_nested_ns.cu": InitSpec(values={"lo": ["-0.5"], "hi": ["0.75"], "n": ["16777216", "1000003"]},
                                   roles={"y": "output"}),
}


def test_items_inside_namespaces_carry_their_blocks():
    items = scoped_items('namespace a::b { namespace { int x; } }\nextern "C" { void f(); }\nint y;\n')
    assert [(i.text, i.scope) for i in items] == [("int x;", ("namespace a::b", "namespace")),
                                                  ("void f();", ('extern "C"',)), ("int y;", ())]
    assert scope_qualifier(items[0].scope) == "a::b::" and scope_qualifier(items[1].scope) == ""
    assert in_scope(items[0]).startswith("namespace a::b {\nnamespace {\nint x;")


def test_a_namespaced_launcher_is_called_through_a_plain_wrapper_and_kept_in_its_namespace():
    result = generate((OUTSIDE / "clamp_nested_ns.cu").read_text(), SPECS["clamp_nested_ns.cu"], "clamp_nested_ns.cu")
    assert result.launcher == "clamp" and result.kernels == ["clamp_kernel"]
    editable = split_program(result.program, "g.cu").editable
    assert "namespace ops::pointwise {\nvoid clamp(" in editable
    assert "ops::pointwise::clamp(y, x, lo, hi, n);" in editable
    assert "namespace ops::pointwise {\nconstexpr int kThreads = 256;" in split_program(result.program, "g.cu").preamble


def test_explicit_instantiations_go_with_the_part_and_a_binding_is_left_out():
    result = generate((OUTSIDE / "scale_rows_ext.cu").read_text(), SPECS["scale_rows_ext.cu"], "scale_rows_ext.cu")
    split = split_program(result.program, "g.cu")
    assert "template void scale_rows_cuda<double>" in split.editable
    assert "scale_rows_float" not in split.harness and "caller scale_rows_float" in result.program


def test_a_kernel_named_with_its_namespace_is_found():
    spec = SPECS["clamp_nested_ns.cu"].model_copy(update={"kernel": "ops::pointwise::clamp_kernel",
                                                          "grid": "(n + 255) / 256", "block": "256"})
    result = generate((OUTSIDE / "clamp_nested_ns.cu").read_text(), spec, "clamp_nested_ns.cu")
    assert "ops::pointwise::clamp_kernel<<<(n + 255) / 256, 256>>>" in result.program


@pytest.mark.nvcc
@pytest.mark.parametrize("name", sorted(SPECS))
def test_the_program_init_writes_is_the_users_code_and_passes_every_static_gate(name, tmp_path):
    from kernelloop.tools.nvcc import find_toolchain
    from kernelloop.verify.gate import static_gates
    source = (OUTSIDE / name).read_text()
    result = generate(source, SPECS[name], name)
    # the copy compiles to the same code as the user's file (anonymous namespaces named by the file)
    refuse_state_set_by_dropped_code(source, result, arch="sm_90", cache_dir=shared_cache_dir(), generated=result.program)
    split = split_program(result.program, "generated.cu")
    static = static_gates(split, split.editable, arch="sm_90", settings=Settings(cache_dir=shared_cache_dir()),
                          toolchain=find_toolchain())
    assert static.candidate is not None and static.candidate.ok and static.violations == [], static.violations


@pytest.mark.parametrize("log, line", [
    ('h.cu(12): error: f is not a template\nh.cu(12): error: invalid\n2 errors detected in the compilation of "h.cu".',
     "h.cu(12): error: f is not a template"),
    ("a.cu:3:5: fatal error: x.h: No such file or directory\ncompilation terminated.",
     "a.cu:3:5: fatal error: x.h: No such file or directory"),
    ("/usr/bin/ld: e.o: in function `f':\ne.cu:(.text+0x5): undefined reference to `g()'\n"
     "collect2: error: ld returned 1 exit status\n[link] the harness calls g(), a template defined in the part",
     "[link] the harness calls g(), a template defined in the part"),
])
def test_a_failed_build_is_told_by_its_first_diagnostic(log, line):
    assert compiler_error(log) == line


def test_specializations_and_instantiations_go_with_the_part_and_callers_of_callers_are_left_out():
    from kernelloop.program.init import _naming_the_editable_part
    items = scoped_items("template <typename T> void f(T* p) { k<<<1, 1>>>(p); }\n"
                         "template <> void f<double>(double* p) { k<<<1, 1>>>(p); }\n"
                         "template void f<float>(float*);\n"
                         "void bind(float* p) { f<float>(p); }\n"
                         "void user(float* p) { bind(p); }\n"
                         "constexpr float f(long) { return 0; }\n")
    instances, callers = _naming_the_editable_part(items[1:], items[:1])
    assert [i.text[:26] for i in instances] == ["template <> void f<double>", "template void f<float>(flo"]
    assert [i.text[:9] for i in callers] == ["void bind", "void user"]  # an overload of f stays


@pytest.mark.nvcc
def test_the_offline_optimizer_follows_inits_wrapper_into_the_namespace_and_its_rewrite_passes_the_gates():
    from kernelloop.optimizers.offline.optimizer import OfflineOptimizer
    from kernelloop.tools.nvcc import find_toolchain
    from kernelloop.verify.gate import candidate_editable_part, static_gates

    from .test_offline_optimizer import request_for

    spec = InitSpec(values={"rows": ["16384", "3001"], "cols": ["1024", "257"]},
                    counts={"x": "rows * cols", "y": "rows * cols"}, roles={"y": "output"})
    program = generate((OUTSIDE / "row_rmsnorm_ns_ext.cu").read_text(), spec, "row_rmsnorm_ns_ext.cu").program
    proposal = OfflineOptimizer().propose(request_for(program, "rms"))
    # init calls the namespaced launcher through launch_rms_rows; the analysis reads myext::rms_rows
    assert proposal.approach == "row tier: one warp per row of rms_rows_kernel", proposal.notes
    assert "(launched by rms_rows)" in proposal.notes[0]
    assert "namespace myext {" in proposal.source and "myext::rms_rows(x, y, rows, cols);" in proposal.source
    split = split_program(program, "generated.cu")
    editable, _ = candidate_editable_part(proposal.source, split)
    result = static_gates(split, editable, arch="sm_90", settings=Settings(cache_dir=shared_cache_dir()),
                          toolchain=find_toolchain())
    assert result.candidate is not None and result.candidate.ok, result.candidate.log[-1500:]
    assert not result.violations, [v.describe() for v in result.violations]
