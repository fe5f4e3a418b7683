"""A template's call takes the launch statement's place, reading the launch's words as written
there; every other statement of the launcher stays where it was (red team round 102: statements
the old rewritten launcher left out hid effects behind a global, a preamble function, an
object-like macro, and names like `max`). What is left to refuse: an analysis reading a local
through its initializer when a statement between may have changed what that read (each statement
read with the program's macros expanded), a launch whose own words change or call what may, and
a zeroing with something between it and the launch that could write memory."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import pytest

from kernelloop.config import Settings
from kernelloop.optimizers.base import NoMoreCandidates
from kernelloop.optimizers.offline import OfflineOptimizer
from kernelloop.optimizers.offline.analysis import analyze
from kernelloop.optimizers.offline.launch_guard import baseline_launch
from kernelloop.optimizers.offline.optimizer import _context
from kernelloop.program.split import candidate_editable_part, split_program

from .conftest import ROOT, shared_cache_dir
from .test_offline_optimizer import request_for

BASELINE = (ROOT / "kernels" / "sum_reduction.cu").read_text()
HEAD = "void launch_reduce_sum(const float* in, float* out, int n) {\n"
LAUNCH = "  reduce_interleaved_kernel<<<grid, block, block * sizeof(float)>>>(in, out, n);\n"
ROUND102 = ROOT / "tests" / "fixtures" / "redteam" / "round102"


def _program(preamble: str = "", before_launch: str = "", launch: str = LAUNCH, top: str = "") -> str:
    text = BASELINE.replace("// kernelloop: editable begin\n", f"{preamble}// kernelloop: editable begin\n", 1)
    assert HEAD in text and LAUNCH in text
    text = text.replace(HEAD, HEAD + top, 1)
    return text.replace(LAUNCH, before_launch + launch, 1)


def _verdict(text: str):
    request = request_for(text, "baseline")
    preamble, harness, exported = _context(request)
    analysis = analyze(request.baseline_editable, harness, exported, preamble)
    return next(v for v in analysis.verdicts if v.launcher == "launch_reduce_sum")


def _proposal(text: str) -> str:
    opt = OfflineOptimizer(cache_dir=Path(tempfile.mkdtemp(prefix="kl-inplace-")))
    return opt.propose(request_for(text, "baseline")).source


def _body(source: str, name: str) -> str:
    start = source.index("{", re.search(rf"\b{name}\s*\(", source).start())
    depth = 0
    for i in range(start, len(source)):
        depth += {"{": 1, "}": -1}.get(source[i], 0)
        if depth == 0:
            return source[start + 1:i]
    raise AssertionError("unbalanced")


def _words(text: str) -> str:
    return " ".join(re.sub(r"//[^\n]*", "", text).split())


def template_call(middle: str) -> re.Match[str] | None:
    """`{ CONFIGURATION EVALUATED; if (SIZES FIT && BASELINE'S LAUNCH LEGAL) { [zeroing] kl_X_run(...); }
    else { THE LAUNCH AS WRITTEN, ON THE EVALUATED CONFIGURATION } }` (words joined): the template's
    call where its sizes fit and the baseline's launch is legal, the baseline's own launch elsewhere
    (rounds 109-110, 116)."""
    return re.fullmatch(r"\{ (?P<decl>const dim3 (?P<p>kl\d?_)grid = .*?) "
                        # the arithmetic conditions and the runtime queries, in the order launch_guard puts them
                        r"if \((?P<fits>(?=[^{}]*\(long long\))[^{}]*?\((?P=p)kernel_takes\(\(const void\*\)[^{}]*?)\) "
                        r"\{ (?P<run>[^{}]*\bkl\d?_\w+_run\([^{}]*\);) \} "
                        r"else \{ (?P<launch>[^{}]*<<<[^{}]*;) \} \}", middle)


def _assert_in_place(baseline: str, source: str, name: str) -> None:
    """The proposal's launcher is the baseline's, with the launch statement alone replaced by
    (an optional zeroing and) the template's call, the launch kept for sizes beyond the template's."""
    old = _body(split_program(baseline, "b.cu").editable, name)
    new = _words(_body(source, name))
    launches = list(re.finditer(r"[^;{}]*<<<[^;]*;", old))
    assert launches
    for launch in launches:  # the one replaced, of several
        before, after = _words(old[:launch.start()]), _words(old[launch.end():])
        middle = new[len(before):len(new) - len(after)]
        call = template_call(middle.strip())
        if not (new.startswith(before) and new.endswith(after) and call is not None and "<<<" not in call["run"]):
            continue
        written = baseline_launch(_words(launch.group(0)), call["p"])
        if call["launch"] == written.statement and call["decl"] == written.declarations:
            return
    raise AssertionError((old, new))


@pytest.mark.parametrize("path", ["a_global_exchange/exchange.cu", "b_preamble_function/preamble.cu",
                                  "c_object_macro/object.cu", "d_value_call_names/umax_macro.cu",
                                  "d_value_call_names/max_overload.cu"])
def test_round_102s_hidden_effects_stay_where_they_were(path):
    # each fixture halves what the launch sums through an effect its syntax hides; the old rewritten
    # launcher left that statement out (2x the baseline's sum)
    text = (ROUND102 / path).read_text()
    try:
        source = _proposal(text)
    except NoMoreCandidates:
        return
    _assert_in_place(text, source, "launch_reduce_sum")


@pytest.mark.parametrize("preamble, statement", [
    ("#define HALVE_N() (n /= 2)\n", "  HALVE_N();\n"),
    ("#define LAUNCH_CHECK n /= 2, cudaGetLastError\n", "  LAUNCH_CHECK();\n"),
    ("#define umax(a, b) ((a) /= (b))\n", "  const int parts = umax(n, 2);\n"),
    ("static int max(int& a, long b) { a /= 2; return a > b ? a : (int)b; }\n", "  const int m = max(n, 1L);\n"),
    ("static int g_parts = 1;\nstatic void note(cudaError_t) { g_parts = 2; }\n", "  note(cudaGetLastError());\n"),
])
def test_a_local_read_through_what_a_later_statement_may_change_stops_the_templates(preamble, statement):
    # `count` is read as `n` (or n / g_parts); the statement between changes that, and count keeps the old value
    count = "n / g_parts" if "g_parts" in preamble else "n"
    text = _program(preamble, top=f"  int count = {count};\n", before_launch=statement,
                    launch=LAUNCH.replace("(in, out, n)", "(in, out, count)"))
    verdict = _verdict(text)
    assert verdict.match is None and verdict.problem is not None
    # count (or block, read the same way before it) is read through what the statement may change
    assert re.search(r"reads (count|block) through what it was computed from", verdict.problem), verdict.problem


def test_a_local_read_past_an_honest_check_is_read_as_written():
    text = _program(top="  int count = n;\n", before_launch="  CUDA_CHECK(cudaGetLastError());\n",
                    launch=LAUNCH.replace("(in, out, n)", "(in, out, count)"))
    assert _verdict(text).match is not None
    source = _proposal(text)
    _assert_in_place(text, source, "launch_reduce_sum")
    assert "_reduction_run(in, out, (int)(count), 0);" in source


@pytest.mark.parametrize("helper, why", [
    ("static int g_calls = 0;\nstatic int next_grid(int n) { g_calls++; return (n + 255) / 256; }\n",
     "computes its launch's words with next_grid"),
    ("", "changes a value in"),
])
def test_launch_words_that_change_something_stop_the_templates(helper, why):
    launch = (LAUNCH.replace("<<<grid,", "<<<next_grid(n),") if helper else
              LAUNCH.replace("(in, out, n)", "(in, out, n--)"))
    verdict = _verdict(_program(helper, launch=launch))
    assert verdict.match is None and verdict.problem is not None and why in verdict.problem, verdict.problem


def test_launch_words_through_a_pure_helper_are_fine():
    helper = "static int ceil_div(int a, int b) { return (a + b - 1) / b; }\n"
    text = _program(helper, launch=LAUNCH.replace("<<<grid,", "<<<ceil_div(n, block),"))
    assert _verdict(text).match is not None


ROUND103 = ROOT / "tests" / "fixtures" / "redteam" / "round103"


@pytest.mark.parametrize("path", ["a_zeroing_undone/z_global.cu", "a_zeroing_undone/z_auto.cu",
                                  "a_zeroing_undone/z_direct.cu", "b_macro_not_in_force/z_ifdef.cu",
                                  "b_macro_not_in_force/z_after.cu", "d_zeroing_extent/z_size.cu"])
def test_a_template_never_takes_the_launchers_zeroing_as_done(path):
    # red team round 103: the kernel stores its sum, the launcher zeroes the output, then something
    # writes it again (a program function's memset, reached through a global or an `auto` local,
    # hidden by a macro not in force), or the zeroing covers one byte; the template took the output
    # as zeroed and added onto it. Now it zeroes what it needs itself, right before its own call.
    text = (ROUND103 / path).read_text()
    try:
        source = _proposal(text)
    except NoMoreCandidates:
        return
    _assert_in_place(text, source, "launch_reduce_sum")
    launcher = source[source.index("void launch_reduce_sum"):]
    assert re.search(r"::cudaMemsetAsync\(out, 0, sizeof\(float\), 0\);\s*kl\d?_reduction_run\(", launcher), launcher


def test_a_zeroing_before_something_that_writes_the_output_is_kept_where_it_is():
    fill = ("__global__ void fill_one(float* p) { *p = 1.0f; }\n"
            "#define FILL_ONE(p) fill_one<<<1, 1>>>(p)\n")
    text = _program(fill, before_launch="  FILL_ONE(out);\n")
    text = text.replace(fill, "").replace(HEAD, fill + HEAD, 1)  # the kernel in the editable part
    source = _proposal(text)  # the kernel adds onto what the output holds: so does the template
    _assert_in_place(text, source, "launch_reduce_sum")


def test_a_macro_name_in_the_launchs_words_is_read_in_parentheses():
    # red team round 103: `#define PAIRS n / 2` and a guard `i < 2u * pairs` read as (2)*PAIRS = n
    text = (ROUND103 / "c_macro_precedence" / "prec.cu").read_text()
    try:
        source = _proposal(text)
    except NoMoreCandidates:
        return
    assert "(2)*(PAIRS)" in source.replace(" ", ""), source[source.index("_run("):][:120]


@pytest.mark.nvcc
def test_an_in_place_proposal_with_a_local_passes_every_static_gate():
    from kernelloop.tools.nvcc import find_toolchain
    from kernelloop.verify.gate import static_gates
    baseline = _program(top="  int count = n;\n", launch=LAUNCH.replace("(in, out, n)", "(in, out, count)"))
    split = split_program(baseline, "b.cu")
    editable, _ = candidate_editable_part(_proposal(baseline), split, "candidate")
    result = static_gates(split, editable, arch="sm_90", settings=Settings(cache_dir=shared_cache_dir()),
                          toolchain=find_toolchain())
    assert result.candidate is not None and result.candidate.ok, result.candidate.log if result.candidate else ""
    assert result.violations == [], [v.describe() for v in result.violations]


def test_a_grid_that_stops_short_of_the_input_stops_the_reduction_template():
    # red team round 103 (e): `grid = n / block` skips a tail of fewer than a block, a difference of
    # a sum well inside its tolerance; the template summed all n
    verdict = _verdict((ROUND103 / "e_grid_not_read" / "floor.cu").read_text())
    assert verdict.match is None
    assert any("grid not shown to reach every element" in m.reason for m in verdict.mismatches), verdict.mismatches
    # the ceiling, with the block size as a local or a number in the index, still fits
    assert _verdict(BASELINE).match is not None
    stride = _program(launch=LAUNCH.replace("<<<grid,", "<<<(n + 255) / 256,").replace("block, block *", "256, 256 *"))
    assert _verdict(stride).match is not None


@pytest.mark.parametrize("loop, fits", [
    ("for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) s += in[i];", True),
    ("for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += 2 * blockDim.x * gridDim.x) s += in[i];", False),
    ("for (int i = blockIdx.x * blockDim.x + threadIdx.x + 1; i < n; i += blockDim.x * gridDim.x) s += in[i];", False),
])
def test_a_loop_over_the_input_must_visit_every_element(loop, fits):
    kernel = ("__global__ void strided_sum(const float* in, float* out, int n) {\n"
              f"  float s = 0.0f;\n  {loop}\n  atomicAdd(out, s);\n}}\n\n")
    text = _program(launch="  strided_sum<<<264, 256>>>(in, out, n);\n")
    text = text.replace(HEAD, kernel + HEAD, 1)
    verdict = _verdict(text)
    assert (verdict.match is not None and verdict.match.kernel == "strided_sum") == fits, (verdict.problem, verdict.mismatches)


@pytest.mark.parametrize("helper, fits", [
    ("#define CEIL_DIV(a, b) (((a) + (b) - 1) / (b))\n", True),
    ("#define CEIL_DIV(a, b) ((a) / (b))\n", False),  # named like a ceiling, computes the floor
    ("static int CEIL_DIV(int a, int b) { return (a + b - 1) / b; }\n", True),
    ("static int CEIL_DIV(int a, int b) { return a / b; }\n", False),
])
def test_a_grid_helper_is_read_by_its_arithmetic_not_its_name(helper, fits):
    text = _program(helper, launch=LAUNCH.replace("<<<grid,", "<<<CEIL_DIV(n, block),"))
    assert (_verdict(text).match is not None) == fits


ROUND104 = ROOT / "tests" / "fixtures" / "redteam" / "round104"


@pytest.mark.parametrize("path, why", [
    # a `+` of the program's own (int&, Threads) in the grid, and a conversion to dim3
    ("a_operator_overload/baseline.cu", "defines operator"),
    # `using Count = int&;`: a reference behind an alias, in the shared-memory size
    ("b_reference_alias/baseline.cu", "computes its launch's words with tree_bytes"),
    # a macro under a guard a toolkit header already defines, and one in a guard's #else
    ("c_macro_guard/header_guard.cu", "cannot be read for sure"),
    ("c_macro_guard/else_branch.cu", "cannot be read for sure"),
])
def test_round_104s_hidden_calls_in_the_launchs_words_stop_the_templates(path, why):
    # red team round 104: the template's call drops the launch's grid and shared-memory words, and
    # each of these changed n there without showing a call or an assignment
    verdict = _verdict((ROUND104 / path).read_text())
    assert verdict.match is None and verdict.problem is not None and why in verdict.problem, verdict.problem


def test_a_device_only_operator_does_not_stop_the_templates():
    helper = ("struct pair_f { float a, b; };\n"
              "__device__ pair_f operator+(pair_f x, pair_f y) { return {x.a + y.a, x.b + y.b}; }\n")
    assert _verdict(_program(helper)).match is not None


ROUND105 = ROOT / "tests" / "fixtures" / "redteam" / "round105"


@pytest.mark.parametrize("path, why", [
    # `if (i % 1000003 == 17) { if (pad) continue; }` before the load, a nested return, a helper
    # that ends the thread with inline asm: what follows may not run for every thread
    ("a_nested_exit/baseline.cu", "a condition selects"),
    ("a_nested_exit/baseline_nested_return.cu", "a condition selects"),
    ("a_nested_exit/baseline_device_exit.cu", "a condition selects"),
    # the loop variable stepped again inside the body: the header says nothing of its values
    ("b_loop_var_step/baseline.cu", "cannot tell the element count"),
])
def test_round_105s_skipped_elements_stop_the_reduction_template(path, why):
    verdict = _verdict((ROUND105 / path).read_text())
    assert verdict.match is None
    # a helper of inline assembly is not read at all since round 127 (asm counts as reading the thread's place)
    assert any(m.family == "reduction" and why in m.reason for m in verdict.mismatches) or \
        "which reads where its thread runs" in (verdict.problem or ""), (verdict.mismatches, verdict.problem)


@pytest.mark.parametrize("path", ["c_operator_splice/baseline.cu", "c_operator_splice/baseline_host_macro.cu"])
def test_an_operator_read_as_the_compiler_reads_it(path):
    # `oper\` + newline + `ator+`, and `__host__` behind a macro on a `__device__` operator
    verdict = _verdict((ROUND105 / path).read_text())
    assert verdict.match is None and "defines operator" in (verdict.problem or ""), verdict.problem


def test_a_helper_known_to_return_keeps_the_reduction():
    helper = "__device__ float twice(float v) { return v + v; }\n"
    # a call of the program's own device helper, which returns, before the load: still a plain sum
    kernel = ("__global__ void helper_sum(const float* in, float* out, int n) {\n"
              "  float s = 0.0f;\n"
              "  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {\n"
              "    (void)twice(1.0f);\n    s += in[i];\n  }\n  atomicAdd(out, s);\n}\n\n")
    text = _program(launch="  helper_sum<<<264, 256>>>(in, out, n);\n").replace(HEAD, helper + kernel + HEAD, 1)
    verdict = _verdict(text)
    assert verdict.match is not None and verdict.match.kernel == "helper_sum", (verdict.problem, verdict.mismatches)
    # the same helper ending the thread (not read: inline asm): what follows may not run for every thread
    exits = text.replace("{ return v + v; }", '{ asm volatile("exit;"); return v; }')
    assert _verdict(exits).match is None


ROUND106 = ROOT / "tests" / "fixtures" / "redteam" / "round106"


@pytest.mark.parametrize("path, why", [
    # `if (pad && i % P == 17) break;` after the load: the loop may stop before its bound
    ("a_loop_ends_early/baseline.cu", "cannot tell the element count"),
    # `i < n && !done`: the header's `i < n` is only an upper limit
    ("c_loop_condition/baseline.cu", "cannot tell the element count"),
    # the loop variable stepped by a device helper taking `int&`
    ("b_helper_reference/baseline.cu", "cannot tell the element count"),
    # the thread's index moved past n by a helper taking `unsigned&` (it was read as its initial value)
    ("b_helper_reference/baseline_inlined_index.cu", "cannot tell the element count"),
])
def test_round_106s_loops_that_visit_less_than_their_header_says(path, why):
    verdict = _verdict((ROUND106 / path).read_text())
    assert verdict.match is None
    assert any(m.family == "reduction" and why in m.reason for m in verdict.mismatches), verdict.mismatches
