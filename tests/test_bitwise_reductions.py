"""Bitwise reductions in the row and column tiers (`mask |= bit << c`, `ok &= ...`, `parity ^= ...`):
exact and the same in any order the lanes' partials combine in, so a thread-per-row kernel that
packs flags or checks a row gets the warp-per-row rewrite, each lane's partial starting from the
operator's identity (0, or all ones for &) and combined by shuffles. Kept-aside set 14's
pack_bits_bytes was refused as "not a sum, max or min"; these fixtures are our own."""

from __future__ import annotations

import pytest

from kernelloop.config import Settings
from kernelloop.program.split import candidate_editable_part, split_program
from kernelloop.tools.nvcc import find_toolchain
from kernelloop.verify.gate import static_gates

from .conftest import FIXTURES, shared_cache_dir
from .test_redteam_round109 import _first_proposal

FOLDER = FIXTURES / "bitwise_reductions"


@pytest.mark.parametrize("name, combined", [
    ("row_flags_mask.cu", ["seen |= ::__shfl_xor_sync", "odd ^= ::__shfl_xor_sync", "seen = kl_seen_before | seen",
                           "odd = kl_odd_before ^ odd", "seen = 0;"]),
    ("all_finite_rows.cu", ["ok &= ::__shfl_xor_sync", "ok = (uint64_t)~(uint64_t)0;", "ok = kl_ok_before & ok"]),
])
def test_a_bitwise_reduction_gets_a_warp_per_row(name, combined):
    proposal = _first_proposal((FOLDER / name).read_text())
    assert "row tier" in proposal.approach, proposal.approach
    for words in combined:
        assert words in proposal.source, words


@pytest.mark.nvcc
@pytest.mark.parametrize("name", ["row_flags_mask.cu", "all_finite_rows.cu"])
def test_the_bitwise_rewrites_pass_the_static_gates(name):
    program = (FOLDER / name).read_text()
    split = split_program(program, name)
    editable, _ = candidate_editable_part(_first_proposal(program).source, split)
    result = static_gates(split, editable, arch="sm_90", settings=Settings(cache_dir=shared_cache_dir()),
                          toolchain=find_toolchain())
    assert not result.violations, [v.describe() for v in result.violations]
    assert result.candidate is not None and result.candidate.ok, result.candidate.log[-2000:]


def test_two_bitwise_operators_on_one_accumulator_are_refused():
    from kernelloop.optimizers.base import NoMoreCandidates

    program = (FOLDER / "row_flags_mask.cu").read_text().replace(
        "    odd ^= (v > 0.5f) ? 1u : 0u;", "    odd ^= (v > 0.5f) ? 1u : 0u;\n    odd |= (v > 0.9f) ? 2u : 0u;")
    try:
        proposal = _first_proposal(program)
    except NoMoreCandidates as caught:
        assert "accumulates odd in two ways" in str(caught), str(caught)
        return
    assert "row tier" not in proposal.approach and "column tier" not in proposal.approach, proposal.approach


def test_an_assignment_spelling_of_the_reduction_is_read_too():
    program = (FOLDER / "row_flags_mask.cu").read_text().replace(
        "    seen |= (v < 0.0f) ? (1u << (c % 32)) : 0u;", "    if (v < 0.0f) {\n      seen = seen | (1u << (c % 32));\n    }")
    proposal = _first_proposal(program)
    assert "row tier" in proposal.approach, proposal.approach
    assert "seen |= ::__shfl_xor_sync" in proposal.source
