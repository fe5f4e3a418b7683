"""Red team round 238's fixtures (tests/fixtures/redteam/round238) pass every gate decided before anything runs:
the contract split and the policy's source scan (under a second), and, with nvcc (about 7 s a candidate: the
deep tier), every static gate: the policy's object and program scans (a greatest-priority non-blocking stream
never joined back is honest launcher code) and the verifier's two-unit build. What only a GPU decides (the timing
audit's span from the start marker, the speed-up) is tests/gpu/test_redteam_round238_gpu.py."""

from __future__ import annotations

import pytest

from kernelloop.program.split import split_program

from .conftest import FIXTURES
from .redteam_static import assert_passes_source_scan, assert_passes_static_gates

ROUND = FIXTURES / "redteam" / "round238"
CANDIDATES = ["side_whole.cu", "side_tail.cu", "side_gated.cu", "honest_faster.cu"]


def test_every_candidate_keeps_the_baselines_frozen_code():
    """A whole program each, with the baseline's preamble and harness word for word: the candidate builds alone
    with nvcc as the verifier builds it (its editable part + the baseline's frozen code)."""
    base = split_program((ROUND / "base.cu").read_text(), "base.cu")
    for name in CANDIDATES:
        cand = split_program((ROUND / name).read_text(), name)
        assert cand.harness == base.harness, name
        assert "run_affine" in cand.editable, name


@pytest.mark.parametrize("name", CANDIDATES)
def test_the_round238_candidates_pass_the_source_scan(name):
    assert_passes_source_scan(ROUND / "base.cu", ROUND / name)


@pytest.mark.nvcc
@pytest.mark.parametrize("name", CANDIDATES)
def test_the_round238_candidates_pass_the_static_gates(name):
    assert_passes_static_gates(ROUND / "base.cu", ROUND / name)
