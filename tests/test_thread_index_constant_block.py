"""A thread index that writes the block's size as a constant (issue 11): `blockIdx.x * BLOCK +
threadIdx.x` (a macro), `256 * blockIdx.x + threadIdx.x` (a literal), `blockIdx.x * kThreads +
threadIdx.x` (a `constexpr` / `static const int`), either order, through casts, is the global thread
index exactly when the launch's block is (K, 1, 1). The shared reading (rowwarp.index_form, proved
by rowwarp.block_proof from rowwarp.launch_block) lets every tier that reads the index take such a
kernel: row, column, remap, transpose, grid. Negative controls (a block of another size, a 2-D
block, a block passed at run time) are refused with one line. Fixtures: tests/fixtures/
thread_index_constant_block (outside-style kernels written for this)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from kernelloop.optimizers.base import NoMoreCandidates
from kernelloop.optimizers.offline.optimizer import OfflineOptimizer
from kernelloop.optimizers.offline.symbolic import Poly
from kernelloop.program.init import InitSpec, generate
from kernelloop.program.split import candidate_editable_part, split_program

from .conftest import FIXTURES, assert_passes_the_static_gates
from .test_offline_optimizer import request_for

HERE = FIXTURES / "thread_index_constant_block"

POSITIVES = {
    # a macro block, `threadIdx.x + blockIdx.x * K`, in a row-per-thread reduction and map
    "row_rms_macro_block.cu": (InitSpec(values={"rows": ["4096", "1001"], "cols": ["1024", "333"], "eps": ["1e-5"]},
                                        counts={"in": "rows * cols", "out": "rows * cols"}, roles={"out": "output"}),
                               "row tier:"),
    # a macro block under a cast, in a column reduction (the column tier launches other blocks)
    "column_sum_macro_block.cu": (InitSpec(values={"rows": ["8192", "1001"], "cols": ["512", "333"]},
                                           counts={"grad": "rows * cols", "dbias": "cols"}, roles={"dbias": "output"}),
                                  "column tier:"),
    # a constexpr int, a dim3 block, a column-first elementwise split
    "remap_constexpr_threads.cu": (InitSpec(values={"rows": ["4096", "1001"], "cols": ["1024", "333"]},
                                            counts={"in": "rows * cols", "out": "rows * cols", "gamma": "cols",
                                                    "beta": "cols"}, roles={"out": "output"}),
                                   "remap tier:"),
    # the literal 256, `256 * blockIdx.x`, in a 1-D transpose
    "transpose_literal_256.cu": (InitSpec(values={"rows": ["4096", "1001"], "cols": ["2048", "333"], "gain": ["0.5"]},
                                          counts={"in": "rows * cols", "out": "rows * cols"}, roles={"out": "output"}),
                                 "transpose tier:"),
    # a static const int in a grid-stride loop's start and stride
    "gridstride_static_const.cu": (InitSpec(values={"n": ["16777216", "1000001"], "a": ["0.5"], "b": ["2.0"]},
                                            counts={"x": "n", "y": "n"}, roles={"y": "output"}),
                                   "grid tier:"),
}
_ROWS = InitSpec(values={"rows": ["4096", "1001"], "cols": ["1024", "333"]}, counts={"in": "rows * cols", "out": "rows"},
                 roles={"out": "output"})
CONTROLS = {
    "control_block_differs.cu": (_ROWS, "numbers its threads row = blockIdx.x * 256 + threadIdx.x, and is launched "
                                        "with blocks of 128 x 1 x 1, not 256 x 1 x 1"),
    "control_block_2d.cu": (_ROWS, "numbers its threads row = blockIdx.x * 32 + threadIdx.x, and is launched with "
                                   "blocks of 32 x 4 x 1, not 32 x 1 x 1"),
    "control_block_runtime.cu": (InitSpec(values={"rows": ["4096", "1001"], "cols": ["2048", "333"], "s": ["0.5"],
                                                  "threads": ["256"]},
                                          counts={"in": "rows * cols", "out": "rows * cols"}, roles={"out": "output"}),
                                 "numbers its threads idx = blockIdx.x * 256 + threadIdx.x, and is launched with a "
                                 "block (threads) that is not a constant"),
}
# the tiers that read the thread index, each of which must give the control's reason
INDEX_TIERS = ("row", "column", "remap", "transpose")


def _program(name: str, spec: InitSpec) -> str:
    return generate((HERE / name).read_text(), spec, name).program


def _propose(program: str, name: str):
    opt = OfflineOptimizer(cache_dir=Path(tempfile.mkdtemp(prefix="kl-constblock-")))
    return opt.propose(request_for(program, name))


def test_the_index_form_reads_a_constant_block_only_as_a_number_times_blockIdx():
    from kernelloop.optimizers.offline.rowwarp import _global_x, block_proof, index_form

    bx, tx = Poly.atom("blockIdx.x"), Poly.atom("threadIdx.x")
    assert index_form(_global_x()) == (_global_x(), None)
    assert index_form(bx.scale(256) + tx) == (bx.scale(256) + tx, 256)
    assert index_form(bx.scale(256) + tx + Poly.const(1))[1] == 256  # the offset is the caller's to allow
    assert index_form(bx.scale(256) + tx.scale(2))[1] is None  # not threadIdx.x once
    assert index_form(bx * Poly.atom("p:block") + tx)[1] is None  # a parameter is no constant
    assert block_proof("i", 256, (256, 1, 1)) is None
    assert "not 256 x 1 x 1" in block_proof("i", 256, (256, 2, 1))  # type: ignore[operator]
    assert "no launch shows" in block_proof("i", 256, None)  # type: ignore[operator]


@pytest.mark.parametrize("name", sorted(POSITIVES))
def test_a_constant_block_index_gets_the_tier_that_reads_it(name):
    spec, approach = POSITIVES[name]
    proposal = _propose(_program(name, spec), name)
    assert proposal.approach.startswith(approach), (proposal.approach, proposal.notes)


def test_the_column_tier_writes_blockDim_in_place_of_the_constant():
    # it launches blocks of 32 x split: an index still reading 64 would number its threads wrongly
    spec, _ = POSITIVES["column_sum_macro_block.cu"]
    proposal = _propose(_program("column_sum_macro_block.cu", spec), "column_sum_macro_block.cu")
    rewritten = proposal.source[proposal.source.index("column_sums_kl_rewritten"):]
    rewritten = rewritten[:rewritten.index("\nvoid ")]
    assert "int col = ((int)(blockIdx.x * ((decltype(64))blockDim.x))) + threadIdx.x;" in rewritten, rewritten
    assert "* 64" not in rewritten and "COLS_PER_BLOCK" not in rewritten


def test_the_row_tier_numbers_its_warps_from_blockDim():
    spec, _ = POSITIVES["row_rms_macro_block.cu"]
    proposal = _propose(_program("row_rms_macro_block.cu", spec), "row_rms_macro_block.cu")
    rewritten = proposal.source[proposal.source.index("rms_scale_rows_kl_rewritten"):]
    assert "blockIdx.x * blockDim.x + threadIdx.x) / 32" in rewritten
    assert "* 128" not in rewritten[:rewritten.index("\nvoid ")]


@pytest.mark.parametrize("name", sorted(CONTROLS))
def test_a_block_that_is_not_the_constant_is_refused_with_its_reason(name):
    spec, reason = CONTROLS[name]
    with pytest.raises(NoMoreCandidates) as exc:
        _propose(_program(name, spec), name)
    kernel = next(line.split("(")[0].split()[-1] for line in (HERE / name).read_text().splitlines()
                  if line.startswith("__global__"))
    for tier in INDEX_TIERS:
        assert f"{tier} tier: kernel {kernel} {reason}" in str(exc.value), (tier, str(exc.value))


@pytest.mark.nvcc
@pytest.mark.parametrize("name", sorted(POSITIVES))
def test_the_rewrite_passes_the_static_gates(name):
    spec, _ = POSITIVES[name]
    program = _program(name, spec)
    proposal = _propose(program, name)
    split = split_program(program, name)
    editable, _ = candidate_editable_part(proposal.source, split)
    assert_passes_the_static_gates(split, editable)
