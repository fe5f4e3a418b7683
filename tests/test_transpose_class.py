"""Transposes with an elementwise value (issue 11): the transpose family reads a 2-D transpose whose
stored value is any expression of the one loaded element and of uniform values (families/base.
elementwise_value); the transpose tier (optimizers/offline/transposes.py) reads the same class
written with a 1-D thread index split by / and % into (batch, row, col), of any element type, and
rewrites it as a shared-memory tiled transpose per batch slice. Negative controls are refused with
one line. Fixtures: tests/fixtures/outside_transpose (outside-style kernels written for this)."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import pytest

from kernelloop.optimizers.base import NoMoreCandidates
from kernelloop.optimizers.offline.optimizer import OfflineOptimizer
from kernelloop.program.init import InitSpec, generate
from kernelloop.program.split import candidate_editable_part, split_program

from .conftest import FIXTURES, assert_passes_the_static_gates
from .test_offline_optimizer import request_for

HERE = FIXTURES / "outside_transpose"
KEPT = FIXTURES / "kept_aside_21"

POSITIVES = {
    "scaled_bias_transpose_2d.cu": (InitSpec(values={"rows": ["4096", "1001"], "cols": ["4096", "777"],
                                                     "scale": ["0.5", "-1.25"], "bias": ["1.0", "0.25"]},
                                             counts={"x": "rows * cols", "y": "rows * cols"}, roles={"y": "output"}),
                                    "padded shared-memory transpose"),
    "batched_cast_transpose_1d.cu": (InitSpec(template_args="float",
                                              values={"batch": ["8", "3"], "rows": ["1024", "333"],
                                                      "cols": ["1024", "257"], "scale": ["0.125", "-0.75"]},
                                              counts={"src": "batch * rows * cols", "dst": "batch * rows * cols"},
                                              roles={"dst": "output"}),
                                     "transpose tier:"),
    "output_walk_transpose_int.cu": (InitSpec(values={"n_rows": ["4096", "1001"], "n_cols": ["2048", "777"],
                                                      "offset": ["3", "-17"]},
                                              counts={"in": "n_rows * n_cols", "out": "n_rows * n_cols"},
                                              roles={"out": "output"}),
                                     "transpose tier:"),
}
CONTROLS = {
    "control_value_uses_row.cu": (InitSpec(values={"rows": ["2048", "1001"], "cols": ["2048", "777"],
                                                   "decay": ["0.5", "0.25"]},
                                           counts={"in": "rows * cols", "out": "rows * cols"}, roles={"out": "output"}),
                                  "depends on the thread's coordinates"),
    "control_second_array.cu": (InitSpec(values={"rows": ["2048", "1001"], "cols": ["2048", "777"]},
                                         counts={"in": "rows * cols", "bias": "cols", "out": "rows * cols"},
                                         roles={"out": "output"}),
                                "does not load one element and store one"),
    "control_not_a_transpose.cu": (InitSpec(values={"batch": ["8", "3"], "rows": ["512", "333"],
                                                    "cols": ["512", "257"], "alpha": ["2.0", "0.5"]},
                                            counts={"in": "batch * rows * cols", "out": "batch * rows * cols"},
                                            roles={"out": "output"}),
                                   "does not store at the transposed place of its one load"),
}
# kept aside, never tuned on (README): a block size written as a macro, `blockIdx.x * BLOCK + threadIdx.x`,
# read since the shared thread-index reading takes a constant block proven from the launch
NCHW = (HERE / "kept_nchw_to_nhwc.cu", InitSpec(
    values={"n": ["8", "3"], "c": ["64", "33"], "hw": ["1024", "257"], "mul": ["0.5", "-1.5"], "add": ["1.0", "0.25"]},
    counts={"src": "n * c * hw", "dst": "n * c * hw"}, roles={"dst": "output"}))
EXAMPLE = (KEPT / "transpose_scale_ext.cu", InitSpec(
    template_args="float", values={"batch": ["8", "3"], "rows": ["1024", "333"], "cols": ["2048", "257"],
                                   "alpha": ["0.08838834764831845"]},
    counts={"input": "batch * rows * cols", "output": "batch * rows * cols"}, roles={"output": "output"},
    ranges={"input": ("-3", "3")}))


def _program(path: Path, spec: InitSpec) -> str:
    return generate(path.read_text(), spec, path.name).program


def _propose(program: str, name: str):
    opt = OfflineOptimizer(cache_dir=Path(tempfile.mkdtemp(prefix="kl-transpose-")))
    return opt.propose(request_for(program, name))


@pytest.mark.parametrize("name", sorted(POSITIVES))
def test_an_elementwise_transpose_gets_a_tiled_rewrite(name):
    spec, approach = POSITIVES[name]
    proposal = _propose(_program(HERE / name, spec), name)
    assert approach in proposal.approach, (proposal.approach, proposal.notes)
    if approach.startswith("transpose tier"):
        assert "__shared__" in proposal.source and "_kl_rewritten" in proposal.source


def test_the_kept_aside_example_gets_the_tier_with_its_own_expression_and_types():
    path, spec = EXAMPLE
    proposal = _propose(_program(path, spec), path.name)
    assert proposal.approach.startswith("transpose tier:"), proposal.notes
    assert "__shared__ scalar_t kl_tile[32][33];" in proposal.source
    assert "= (alpha * kl_tile[threadIdx.x][kl_j]);" in proposal.source
    # the double instantiation keeps the baseline's launch
    assert "if constexpr (::kl_same_type<scalar_t, float>::value)" in proposal.source


def test_the_kept_nchw_example_with_a_macro_block_gets_the_tier():
    path, spec = NCHW
    proposal = _propose(_program(path, spec), path.name)
    assert proposal.approach.startswith("transpose tier:"), proposal.notes
    assert "(batch=n, rows=c, cols=hw)" in proposal.notes[0]
    assert "= ((kl_tile[threadIdx.x][kl_j] * mul) + add);" in proposal.source


def test_the_2d_value_is_applied_as_written_by_the_template():
    spec, _ = POSITIVES["scaled_bias_transpose_2d.cu"]
    proposal = _propose(_program(HERE / "scaled_bias_transpose_2d.cu", spec), "scaled_bias_transpose_2d.cu")
    assert re.search(r"return \(\(\(\(float\)\((kl\d*_)v\)\) \* \1e0\) \+ \1e1\);", proposal.source)
    assert re.search(r"kl\d*_transpose_run\(x, y, \(int\)\(rows\), \(int\)\(cols\), scale, bias, 0\);", proposal.source)


@pytest.mark.parametrize("name", sorted(CONTROLS))
def test_a_negative_control_is_refused_with_its_reason(name):
    spec, reason = CONTROLS[name]
    try:
        proposal = _propose(_program(HERE / name, spec), name)
    except NoMoreCandidates as exc:
        assert reason in str(exc), str(exc)
        return
    assert "transpose" not in proposal.approach, proposal.approach


@pytest.mark.nvcc
@pytest.mark.parametrize("name", sorted(POSITIVES) + ["transpose_scale_ext.cu", "kept_nchw_to_nhwc.cu"])
def test_the_rewrite_passes_the_static_gates(name):
    path, spec = (HERE / name, POSITIVES[name][0]) if name in POSITIVES else \
        NCHW if name == "kept_nchw_to_nhwc.cu" else EXAMPLE
    program = _program(path, spec)
    proposal = _propose(program, name)
    split = split_program(program, name)
    editable, _ = candidate_editable_part(proposal.source, split)
    assert_passes_the_static_gates(split, editable)
