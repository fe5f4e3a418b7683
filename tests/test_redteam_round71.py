"""Red team round 71 (tests/fixtures/redteam/round71/REPORT.md), on the state check after round 70.
The static finding here; the dynamic ones (history rewound on recognised inputs, a block forgotten
without being freed, the registry overflowed) in tests/gpu/test_part_state_gpu.py."""

from __future__ import annotations

import pytest

from kernelloop.config import Settings
from kernelloop.program.split import split_program
from kernelloop.tools.nvcc import find_toolchain
from kernelloop.verify.gate import candidate_editable_part, static_gates

from .conftest import FIXTURES, shared_cache_dir

ROUND = FIXTURES / "redteam" / "round71"


@pytest.mark.nvcc
def test_a_suffixed_variant_of_a_recorded_allocation_does_not_build():
    split = split_program((ROUND / "ptsz_allocation" / "baseline.cu").read_text(), "baseline.cu")
    editable, _ = candidate_editable_part((ROUND / "ptsz_allocation" / "candidate.cu").read_text(), split)
    result = static_gates(split, editable, arch="sm_86", settings=Settings(cache_dir=shared_cache_dir()),
                          toolchain=find_toolchain())
    assert result.candidate is not None and not result.candidate.ok
    assert "calls cudaMallocAsync_ptsz, a variant of cudaMallocAsync that the harness cannot record" in \
        result.candidate.log


@pytest.mark.nvcc
@pytest.mark.parametrize("folder", ["history_rewind", "forget_without_free", "registry_overflow"])
def test_the_dynamic_routes_still_build_and_pass_the_static_gates(folder):
    # they are turned away at run time (tests/gpu/test_part_state_gpu.py): their build must link the recorders
    split = split_program((ROUND / folder / "baseline.cu").read_text(), "baseline.cu")
    editable, _ = candidate_editable_part((ROUND / folder / "candidate.cu").read_text(), split)
    result = static_gates(split, editable, arch="sm_86", settings=Settings(cache_dir=shared_cache_dir()),
                          toolchain=find_toolchain())
    assert result.candidate is not None and result.candidate.ok, result.candidate.log[-1500:]


@pytest.mark.nvcc
@pytest.mark.xfail(strict=True, reason="open false refusal (round 71 (6)): a frame address kept in a callee-saved "
                                       "register before it is passed is not tracked by the host-code scan")
def test_descriptor_locals_whose_address_travels_through_a_callee_saved_register_pass():
    folder = ROUND / "fr_frame_address_in_callee_saved"
    split = split_program((folder / "baseline.cu").read_text(), "baseline.cu")
    editable, _ = candidate_editable_part((folder / "honest.cu").read_text(), split)
    result = static_gates(split, editable, arch="sm_86", settings=Settings(cache_dir=shared_cache_dir()),
                          toolchain=find_toolchain())
    assert not result.violations, [v.describe() for v in result.violations]
