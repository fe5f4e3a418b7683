"""Red team round 108 (tests/fixtures/redteam/round108/): (a) a variable written through an lvalue
that is not its plain name (`(true ? n : n) = 4096`, `(0, n) &= ~3`, `((int&)n) &= ~3`) went
uncounted, so a parameter still read as the launch's value and a softmax's max as one value; (b) a
stencil's third store whose guard (`row > 9000`) holds on no cell of the sample grids was dropped;
(c) the drift budget's reach (argued, in docs/verifier.md)."""

from __future__ import annotations

import pytest

from kernelloop.optimizers.offline.launcher import read_editable
from kernelloop.optimizers.offline.facts import collect_facts

from .conftest import FIXTURES, ROOT
from .test_redteam_round107 import _verdict

ROUND = FIXTURES / "redteam" / "round108"


@pytest.mark.parametrize("name, launcher", [
    ("matmul_baseline.cu", "launch_matmul"), ("matmul_acc_baseline.cu", "launch_matmul"),
    ("reduction_baseline.cu", "launch_reduce_sum"), ("softmax_baseline.cu", "launch_softmax")])
def test_a_write_through_a_conditional_lvalue_is_seen(name, launcher):
    verdict = _verdict((ROUND / "a_ternary_lvalue" / name).read_text(), launcher)
    assert verdict.match is None, verdict.match


REDUCTION = (ROOT / "kernels" / "sum_reduction.cu").read_text()
HEAD = "  unsigned int tid = threadIdx.x;\n"


@pytest.mark.parametrize("write", ["(true ? n : n) = n & ~3;", "(0, n) &= ~3;", "((int&)n) &= ~3;",
                                   "reinterpret_cast<int&>(n) &= ~3;", "++(true ? n : n);",
                                   "(tid > 0 ? in : in) += 1;"])
def test_every_lvalue_spelling_counts_as_a_write(write):
    text = REDUCTION.replace(HEAD, HEAD + f"  {write}\n", 1)
    assert text != REDUCTION
    assert _verdict(text, "launch_reduce_sum").match is None


@pytest.mark.parametrize("body, names", [
    ("(c ? a : b) = 1;", {"a", "b"}), ("(0, a) += 2;", {"a"}), ("v.x = 3.0f;", {"v"}),
    ("((int&)a)++;", {"a"}), ("(a = 1) = 2;", {"a"})])
def test_the_variables_an_lvalue_may_write_get_a_write_no_family_reads(body, names):
    text = (f"__device__ void f(int* out, bool c) {{\n  int a = 0, b = 0;\n  float4 v = make_float4(0, 0, 0, 0);\n"
            f"  {body}\n  out[0] = a + b + (int)v.x;\n}}\n")
    fn = read_editable(text, "", []).functions["f"]
    facts = collect_facts(fn.sig, fn.body, {})
    written = {b.name for b in facts.bindings if b.assignments}
    assert names <= written and not any(b.inlinable for b in facts.bindings if b.name in names)
    assert {w.binding.name for w in facts.assigns if w.op != "decl"} >= names


@pytest.mark.parametrize("body", ["(*p)++;", "p->x = 1.0f;", "(c ? p[0] : p[1]).y = 2.0f;"])
def test_memory_written_through_an_unusual_lvalue_is_an_unnamed_store(body):
    text = f"__device__ void f(float4* p, bool c) {{\n  {body}\n}}\n"
    fn = read_editable(text, "", []).functions["f"]
    facts = collect_facts(fn.sig, fn.body, {})
    assert any(a.kind == "store" and a.array is None for a in facts.accesses), facts.accesses


STENCIL = (ROOT / "kernels" / "stencil2d.cu").read_text()


def test_a_stencil_store_no_sample_cell_runs_is_no_stencil():
    verdict = _verdict((ROUND / "b_stencil_unsampled" / "baseline.cu").read_text(), "launch_stencil")
    assert verdict.match is None or verdict.match.family != "stencil"
    assert _verdict(STENCIL, "launch_stencil").match is not None


@pytest.mark.parametrize("guard", ["row == 0 || row == rows - 1 || col == 0 || col == cols - 1 || row == 4000",
                                   "row == 0 || row == rows - 1 || col == 0 || col >= cols - 1 - (rows > 9000)"])
def test_a_stencil_guard_with_a_number_beyond_the_samples_is_refused(guard):
    old = "row == 0 || row == rows - 1 || col == 0 || col == cols - 1"
    assert old in STENCIL
    verdict = _verdict(STENCIL.replace(old, guard, 1), "launch_stencil")
    assert verdict.match is None or verdict.match.family != "stencil"
