"""A launcher's own `assert`s on its arguments (llm.c's `assert(C % 4 == 0)`, kept-aside sets 6 and 7:
"does more than launch one kernel (statement calling assert)") no longer stop the templates: a
condition that calls, assigns and increments nothing and names no local stays, as written, where it
is in the template's launcher (only the launch's statement is replaced); anything else still stops
them."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from kernelloop.config import Settings
from kernelloop.optimizers.base import NoMoreCandidates
from kernelloop.optimizers.offline import OfflineOptimizer
from kernelloop.optimizers.offline.launcher import read_editable
from kernelloop.optimizers.offline.optimizer import _context
from kernelloop.program.split import candidate_editable_part, split_program

from .conftest import ROOT, shared_cache_dir
from .test_offline_optimizer import request_for

BASELINE = (ROOT / "kernels" / "sum_reduction.cu").read_text()
LAUNCHER_HEAD = "void launch_reduce_sum(const float* in, float* out, int n) {\n"
LAUNCH_LINE = "  reduce_interleaved_kernel<<<grid, block, block * sizeof(float)>>>(in, out, n);\n"


def _with(statement: str) -> str:
    text = BASELINE.replace("// kernelloop: editable begin\n", "// kernelloop: editable begin\n#include <cassert>\n", 1)
    assert LAUNCHER_HEAD in text
    return text.replace(LAUNCHER_HEAD, LAUNCHER_HEAD + f"  {statement}\n", 1)


def _launcher(text: str):
    request = request_for(text, "baseline")
    preamble, harness, exported = _context(request)
    part = read_editable(request.baseline_editable, harness, exported)
    return next(lau for lau in part.launchers if lau.fn.name == "launch_reduce_sum")


@pytest.mark.parametrize("statement", ["assert(n > 0);", 'assert(n > 0 && n % 1 == 0 && "n positive");',
                                       "assert(n >= 0 &&\n         n < (1 << 30));"])
def test_a_pure_assert_on_the_arguments_is_kept_as_written(statement):
    lau = _launcher(_with(statement))
    assert lau.problem is None


@pytest.mark.parametrize("statement", ["assert(check(n));", "assert(n++ > 0);", "assert((n = 4) > 0);",
                                       "int k = n; assert(k > 0);"])
def test_an_assert_that_calls_changes_or_reads_a_local_still_stops_the_templates(statement):
    lau = _launcher(_with(statement))
    assert lau.problem is not None


def _first_proposal(text: str) -> str:
    opt = OfflineOptimizer(cache_dir=Path(tempfile.mkdtemp(prefix="kl-pre-")))
    return opt.propose(request_for(text, "baseline")).source


def test_the_template_checks_what_the_baseline_checked_first():
    source = _first_proposal(_with('assert(n > 0 && "n positive");'))
    launcher = source[source.index("void launch_reduce_sum"):]
    body = launcher[launcher.index("{") + 1:].lstrip()
    assert body.startswith('assert(n > 0 && "n positive");'), launcher[:400]


@pytest.mark.nvcc
def test_the_proposal_passes_every_static_gate():
    from kernelloop.tools.nvcc import find_toolchain
    from kernelloop.verify.gate import static_gates
    baseline = _with("assert(n > 0);")
    split = split_program(baseline, "b.cu")
    editable, _ = candidate_editable_part(_first_proposal(baseline), split, "candidate")
    result = static_gates(split, editable, arch="sm_90", settings=Settings(cache_dir=shared_cache_dir()),
                          toolchain=find_toolchain())
    assert result.candidate is not None and result.candidate.ok, result.candidate.log if result.candidate else ""
    assert result.violations == [], [v.describe() for v in result.violations]


ROUND100 = ROOT / "tests" / "fixtures" / "redteam" / "round100" / "a_dropped_statements_with_effects"


@pytest.mark.parametrize("name, why", [
    ("addr.cu", "changes a value in a statement besides the launch"),
    ("assign.cu", "changes a value in a statement besides the launch"),
    ("ret.cu", "returns early on a condition a template could not keep"),
])
def test_statements_with_effects_are_never_dropped(name, why):
    # red team round 100: a local written through its address, an assignment inside a check, an early
    # return after the zeroing
    lau = _launcher((ROUND100 / name).read_text())
    assert lau.problem == why


@pytest.mark.parametrize("path", [ROUND100 / "upper.cu", ROOT / "tests" / "fixtures" / "redteam" / "round101" /
                                  "a_macro" / "global.cu", ROOT / "tests" / "fixtures" / "redteam" / "round101" /
                                  "a_macro" / "macro.cu", ROOT / "tests" / "fixtures" / "redteam" / "round101" /
                                  "b_decl_reference" / "exchange.cu"])
def test_effects_behind_a_name_stay_where_they_were(path):
    # red team rounds 100-101: an upper-case function of the part that launches (START_AT_ONE(out)), a
    # macro assigning its argument, a function of the part writing a global the launch reads, a library
    # call binding a parameter to a reference in a declaration. Rounds 100-101 stopped the templates;
    # since round 102 the template's call takes the launch's place alone and these stay before it.
    from .test_launch_in_place import _assert_in_place
    text = path.read_text()
    try:
        source = _first_proposal(text)
    except NoMoreCandidates:
        return
    _assert_in_place(text, source, "launch_reduce_sum")


@pytest.mark.parametrize("statement", ["if (n == 0) return;", "if (n <= 0 || n > (1 << 30)) return;"])
def test_an_early_return_on_the_arguments_before_anything_acts_is_kept_first(statement):
    text = BASELINE.replace(LAUNCHER_HEAD, LAUNCHER_HEAD + f"  {statement}\n", 1)
    lau = _launcher(text)
    assert lau.problem is None
    source = _first_proposal(text)
    body = source[source.index("void launch_reduce_sum"):]
    assert body[body.index("{") + 1:].lstrip().startswith(statement)


def test_a_macro_changing_the_launchers_values_stays_before_the_call_that_reads_them():
    # round 101 stopped the templates here; since round 102 the macro stays where it was, and the
    # template's call, in the launch's place, reads n after it, as the launch did
    text = BASELINE.replace("#define CUDA_CHECK(call)", "#define HALVE_N() (n /= 2)\n#define CUDA_CHECK(call)", 1)
    text = text.replace(LAUNCHER_HEAD, LAUNCHER_HEAD + "  HALVE_N();\n", 1)
    source = _first_proposal(text)
    launcher = source[source.index("void launch_reduce_sum"):]
    assert launcher.index("HALVE_N();") < launcher.index("_reduction_run(in, out, (int)(n), 0);")


def test_honest_helpers_of_the_part_still_pass():
    helpers = ("static void check_launch(cudaError_t e) { if (e != cudaSuccess) { printf(\"%s\\n\", "
               "cudaGetErrorString(e)); exit(1); } }\n"
               "static int ceil_div(int a, int b) { return (a + b - 1) / b; }\n\n")
    text = BASELINE.replace("// Zeroes *out itself", helpers + "// Zeroes *out itself", 1)
    text = text.replace("  int grid = (n + block - 1) / block;\n", "  int grid = ceil_div(n, block);\n", 1)
    text = text.replace(LAUNCH_LINE, LAUNCH_LINE + "  check_launch(cudaGetLastError());\n", 1)
    lau = _launcher(text)
    assert lau.problem is None
    assert "_reduction_run(" in _first_proposal(text)


@pytest.mark.parametrize("statements", [
    ["const long long total = (long long)n * 1;", "if (total == 0) return;"],  # PyTorch's `numel == 0`
    ["int blocks = (n + 255) / 256;", "if (blocks <= 0) { return; }"],
])
def test_an_early_return_on_locals_made_of_the_arguments_is_kept_where_it_is(statements):
    # kept-aside set 21: a PyTorch extension's launcher returned early on `numel == 0`, a local computed
    # from its arguments, and no template applied
    text = BASELINE.replace(LAUNCHER_HEAD, LAUNCHER_HEAD + "".join(f"  {s}\n" for s in statements), 1)
    assert _launcher(text).problem is None
    source = _first_proposal(text)
    body = source[source.index("void launch_reduce_sum"):]
    at = [body.index(s) for s in statements]
    assert at == sorted(at) and at[-1] < body.index("_reduction_run("), body[:500]


@pytest.mark.parametrize("statements", [
    ["int k = rand();", "if (k == 0) return;"],  # a local from a call: not the arguments' alone
    ["static int calls_so_far = 0;", "if (calls_so_far > 3) return;"],  # a value kept between calls
])
def test_an_early_return_on_a_local_not_made_of_the_arguments_still_stops_the_templates(statements):
    text = BASELINE.replace(LAUNCHER_HEAD, LAUNCHER_HEAD + "".join(f"  {s}\n" for s in statements), 1)
    assert _launcher(text).problem is not None
