"""Red team round 240's fixtures (tests/fixtures/redteam/round240) pass every gate decided before anything runs:
the policy's source scan here (under a second), every static gate with nvcc in the deep tier. What only a GPU
decides (the small-magnitude stress, the round size draw, the caller layouts' floored times) is
tests/gpu/test_redteam_round240_gpu.py."""

from __future__ import annotations

import pytest

from kernelloop.config import Settings
from kernelloop.program.split import candidate_editable_part, split_program
from kernelloop.tools.nvcc import find_toolchain
from kernelloop.verify import policy
from kernelloop.verify.gate import static_gates

from .conftest import FIXTURES, ROOT, shared_cache_dir

ROUND = FIXTURES / "redteam" / "round240"
# (baseline, candidate): an int64 fixed-point sum, a matmul fast path keyed on n % 64 == 0 using the preamble's
# N, and round 238's map run where a caller's input is 2 MiB-aligned with a tail behind a starved end marker
PAIRS = [(ROOT / "kernels" / "sum_reduction.cu", ROUND / "fixed_point_sum.cu"),
         (ROOT / "kernels" / "naive_matmul.cu", ROUND / "matmul_round_size.cu"),
         (FIXTURES / "redteam" / "round238" / "base.cu", ROUND / "layout_tail" / "cand.cu")]
IDS = [cand.stem if cand.parent == ROUND else "layout_tail" for _, cand in PAIRS]


@pytest.mark.parametrize(("base", "cand"), PAIRS, ids=IDS)
def test_the_round240_candidates_pass_the_source_scan(base, cand):
    split = split_program(base.read_text(), base.name)
    editable, _ = candidate_editable_part(cand.read_text(), split, cand.name)
    found = policy.scan_source(editable, policy.defined_macros(split.preamble))
    assert not found, [v.describe() for v in found]


@pytest.mark.nvcc
@pytest.mark.parametrize(("base", "cand"), PAIRS, ids=IDS)
def test_the_round240_candidates_pass_the_static_gates(base, cand):
    split = split_program(base.read_text(), base.name)
    editable, _ = candidate_editable_part(cand.read_text(), split, cand.name)
    result = static_gates(split, editable, arch="sm_90", settings=Settings(cache_dir=shared_cache_dir()),
                          toolchain=find_toolchain())
    assert result.baseline.ok, result.baseline.log[-2000:]
    assert not result.violations, [v.describe() for v in result.violations]
    assert result.candidate is not None and result.candidate.ok, result.candidate.log[-2000:]
