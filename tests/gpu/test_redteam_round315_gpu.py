"""Red team round 315 on the GPU (tests/fixtures/redteam/round315): memory the kept launcher allocates and reads
before writing holds what the allocator hands back, which code init leaves out (the user's `main`) can decide. In
the verifier's runs with other bytes past the buffers, every block the part is handed (fresh or handed back) and
every host allocation but calloc's hold those bytes until the part writes them, so a baseline whose results follow
them is refused; a candidate counting on a fresh block's zeros computes from other bytes in its memcheck runs."""

from __future__ import annotations

import pytest

from kernelloop.config import Settings, VerifySettings
from kernelloop.errors import InputError
from kernelloop.program.init import InitSpec, generate
from kernelloop.program.split import BEGIN_MARKER, END_MARKER
from kernelloop.verify.gate import verify_files
from kernelloop.verify.verdict import Reason

from ..conftest import FIXTURES

pytestmark = pytest.mark.gpu
ROUND = FIXTURES / "redteam" / "round315"
SPEC = InitSpec(values={"n": ["4096", "3001"]}, roles={"y": "output", "x": "input"}, launcher="scale")


def _generated(name: str, tmp_path):
    out = tmp_path / name.replace(".cu", "_kl.cu")
    out.write_text(generate((ROUND / name).read_text(), SPEC, name).program)
    return out


def _with_part_of(program, other, tmp_path):
    """PROGRAM with OTHER's editable part (both generated around the same launcher signature)."""
    text, theirs = program.read_text(), other.read_text()
    part = theirs[BEGIN_MARKER.search(theirs).end():END_MARKER.search(theirs).start()]
    out = tmp_path / other.name.replace("_kl.cu", "_cand.cu")
    out.write_text(text[:BEGIN_MARKER.search(text).end()] + part + text[END_MARKER.search(text).start():])
    return out


@pytest.mark.parametrize("name", ["a2_pool_block_floor.cu", "a3_heap_chunk_weights.cu"])
def test_a_baseline_reading_what_its_allocator_hands_back_is_refused(name, tmp_path):
    program = _generated(name, tmp_path)
    with pytest.raises(InputError, match=r"reads memory no buffer of its harness holds.*memory its own code "
                                         r"allocates.*changes with them"):
        verify_files(program, program, Settings(cache_dir=tmp_path / "cache", verify=VerifySettings(memcheck="off")))


def test_a_launcher_writing_what_it_allocates_first_is_verified_and_a_candidate_counting_on_zeros_is_not(
        tmp_path, record_property):
    base = _generated("fr2_workspace_written_first.cu", tmp_path)
    cand = _with_part_of(base, _generated("c_counts_on_zeroed_block.cu", tmp_path), tmp_path)
    v = verify_files(base, cand, Settings(cache_dir=tmp_path / "cache", verify=VerifySettings(memcheck="on")))
    record_property("verdict", v.summary)
    print("\n" + "\n".join(f"{g.gate}: {g.status}: {g.detail}" for g in v.gates))
    memcheck = v.gate("memcheck")
    assert not v.accepted and Reason.correctness in v.reasons, v.summary
    assert memcheck is not None and memcheck.status == "fail" and "holding other bytes" in memcheck.detail, v.summary
