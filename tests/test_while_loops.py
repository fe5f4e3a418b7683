"""Counted `while` loops read as the `for` loops they are (optimizers/offline/whileloop.py): the
grid tiers reach grid-stride loops written C89 or C style, and nothing that could run otherwise."""

from __future__ import annotations

import pytest

from kernelloop.optimizers.offline.gridstride import grid_rewrites
from kernelloop.optimizers.offline.launcher import read_editable
from kernelloop.optimizers.offline.rowstride import row_stride_rewrites
from kernelloop.optimizers.offline.whileloop import for_form
from kernelloop.program.init import generate
from kernelloop.program.split import candidate_editable_part, split_program

from .conftest import assert_passes_the_static_gates
from .outside_specs import OUTSIDE, SPECS

_LAUNCHER = "void launch(float* y, const float* x, float a, int n)"
_HARNESS = "launch(0, 0, 1.f, 0);"


def _kernel(body: str):
    text = (f"__global__ void scale(float* y, const float* x, float a, int n) {{\n{body}}}\n"
            f"{_LAUNCHER} {{ scale<<<128, 256>>>(y, x, a, n); }}\n")
    return read_editable(text, _HARNESS, [_LAUNCHER]).functions["scale"]


_INDEX = "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"


@pytest.mark.parametrize("step", ["i += blockDim.x * gridDim.x;", "i = i + blockDim.x * gridDim.x;"])
def test_a_counted_while_is_read_as_its_for(step):
    fn = for_form(_kernel(_INDEX + f"  while (i < n) {{\n    y[i] = a * x[i];\n    {step}\n  }}\n  return;\n"))
    assert fn is not None
    text = fn.item.text
    assert "while" not in text and f"for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; {step[:-1]})" in text
    assert "y[i] = a * x[i];" in text and text.count(step[:-1]) == 1  # the step moved to the header, not kept twice


@pytest.mark.parametrize("body, why", [
    # a continue skips the step in the while form; the for form would step
    (_INDEX + "  while (i < n) {\n    if (x[i] < 0.f) continue;\n    y[i] = a * x[i];\n"
              "    i += blockDim.x * gridDim.x;\n  }\n", "continue"),
    (_INDEX + "  while (i < n) {\n    i += blockDim.x * gridDim.x;\n    y[i] = a * x[i];\n  }\n", "step not last"),
    (_INDEX + "  while (i < n) {\n    y[i] = a * x[i];\n    i += blockDim.x * gridDim.x;\n  }\n  y[0] = (float)i;\n",
     "counter read after the loop"),
    (_INDEX + "  do {\n    y[i] = a * x[i];\n    i += blockDim.x * gridDim.x;\n  } while (i < n);\n", "do-while"),
    ("  int i = blockIdx.x * blockDim.x + threadIdx.x, j = 0;\n  while (i < n) {\n    y[i] = a * x[i];\n"
     "    i += blockDim.x * gridDim.x;\n  }\n", "two declarators"),
    (_INDEX + "  while (i < n) {\n    y[i] = a * x[i];\n    i -= 1;\n  }\n", "not a step up"),
])
def test_loops_whose_forms_could_differ_are_left_as_written(body, why):
    assert for_form(_kernel(body)) is None, why


def _split(name: str):
    return split_program(generate((OUTSIDE / name).read_text(), SPECS[name], name).program, name)


@pytest.mark.parametrize("name, tier, label", [
    ("clamp_while_c89.cu", grid_rewrites, "grid tier: clamp_signal on a grid covering its elements"),
    ("rownorm_while_c.cu", row_stride_rewrites, "row tier: one warp per row of row_norms (grid-stride)"),
])
def test_outside_style_while_loops_get_the_grid_tiers(name, tier, label):
    split = _split(name)
    rewrites, refused = tier(read_editable(split.editable, split.harness, split.exported), split.harness, split.preamble)
    assert [r.label for r in rewrites] == [label], refused
    # the rewritten kernel (beside the one as written, which the baseline's launch keeps) is made
    # from the `for` form
    rewritten = rewrites[0].source.split("_kl_rewritten(", 1)[1]
    loop = {"clamp_while_c89.cu": "idx < count", "rownorm_while_c.cu": "row < rows"}[name]
    assert f"while ({loop})" not in rewritten.split("\n}\n")[0] and "for (" in rewritten


@pytest.mark.nvcc
@pytest.mark.parametrize("name, tier", [("clamp_while_c89.cu", grid_rewrites), ("rownorm_while_c.cu", row_stride_rewrites)])
def test_the_while_loop_rewrites_pass_the_static_gates(name, tier):
    split = _split(name)
    (rewrite,), _ = tier(read_editable(split.editable, split.harness, split.exported), split.harness, split.preamble)
    editable, _ = candidate_editable_part(rewrite.source, split)
    assert_passes_the_static_gates(split, editable)


@pytest.mark.parametrize("name, label", [
    ("clamp_while_c89.cu", "grid tier: clamp_signal on a grid covering its elements"),
    ("rownorm_while_c.cu", "row tier: one warp per row of row_norms (grid-stride)"),
])
def test_the_proposal_loop_offers_the_tier_first(name, label):
    """Through the optimizer's own reading (value types proven), not the tier alone: a counter
    stepped by `row = row + blockDim.x * gridDim.x` (an unsigned step into an int) is the `+=` it
    spells, a wrapped sum, not a value kept narrowed (found on an H100: the grid tier came first
    and was 1.00x)."""
    from kernelloop.optimizers.offline.optimizer import OfflineOptimizer

    from .test_offline_optimizer import request_for
    split = _split(name)
    p = OfflineOptimizer().propose(request_for(split.whole_program(split.editable), name, iteration=1))
    assert p.approach == label, p.notes


@pytest.mark.parametrize("step, read", [
    ("acc = acc + blockDim.x * gridDim.x;", True),   # the `+=` it spells: a wrapped sum
    ("acc = blockDim.x * gridDim.x + acc;", True),
    ("acc = acc - blockDim.x;", True),
    ("acc = blockDim.x - acc;", False),              # not an update of acc by a sum
    ("acc = acc * blockDim.x;", False),              # a product narrowed at each step
    ("acc = other + blockDim.x;", False),            # another value kept narrowed
])
def test_an_update_spelled_out_is_read_as_its_compound_form(step, read):
    from kernelloop.optimizers.offline.analysis import value_conversion
    from kernelloop.optimizers.offline.facts import collect_facts
    from kernelloop.optimizers.offline.valuetype import ValueTypes

    fn = _kernel("  int acc = 0; int other = 3;\n  for (int k = 0; k < n; ++k) {\n"
                 f"    {step}\n  }}\n  y[0] = (float)acc;\n")
    facts = collect_facts(fn.sig, fn.body)
    why = value_conversion(facts, ValueTypes(facts))
    assert (why is None or "acc" not in why) == read, why
