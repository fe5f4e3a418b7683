"""The checks a red-team round's fixtures get before anything runs: a candidate passes the policy's source scan
(under a second) and, with nvcc, every static gate against its baseline (the verifier's two-unit build)."""

from __future__ import annotations

from pathlib import Path

from kernelloop.config import Settings
from kernelloop.program.split import candidate_editable_part, split_program
from kernelloop.tools.nvcc import find_toolchain
from kernelloop.verify import policy
from kernelloop.verify.gate import static_gates

from .conftest import shared_cache_dir


def _editable(base: Path, cand: Path):
    split = split_program(base.read_text(), base.name)
    editable, _ = candidate_editable_part(cand.read_text(), split, cand.name)
    return split, editable


def assert_passes_source_scan(base: Path, cand: Path) -> None:
    split, editable = _editable(base, cand)
    found = policy.scan_source(editable, policy.defined_macros(split.preamble))
    assert not found, [v.describe() for v in found]


def assert_passes_static_gates(base: Path, cand: Path) -> None:
    split, editable = _editable(base, cand)
    result = static_gates(split, editable, arch="sm_90", settings=Settings(cache_dir=shared_cache_dir()),
                          toolchain=find_toolchain())
    assert result.baseline.ok, result.baseline.log[-2000:]
    assert not result.violations, [v.describe() for v in result.violations]
    assert result.candidate is not None and result.candidate.ok, result.candidate.log[-2000:]
