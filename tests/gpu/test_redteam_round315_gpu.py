"""Red team rounds 315 and 325 on the GPU: a program's results depending on memory it never wrote (what an
allocator, a caller's kernels or the harness hand it), which code outside the program can decide. In the
verifier's guard-contrast runs of the baseline every block and array the part is handed (fresh or handed back),
the guard past each block and shared memory hold other bytes in each run (NaN, a large value, zero), so a
baseline whose results follow them is refused; a candidate counting on a fresh block's zeros computes from other
bytes in its memcheck runs (tests/fixtures/redteam/round315, round325)."""

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
ROUND315, ROUND325 = FIXTURES / "redteam" / "round315", FIXTURES / "redteam" / "round325"
SPEC = InitSpec(values={"n": ["4096", "3001"]}, roles={"y": "output", "x": "input"}, launcher="scale")


def _generated(path, tmp_path):
    out = tmp_path / path.name.replace(".cu", "_kl.cu")
    out.write_text(generate(path.read_text(), SPEC, path.name).program)
    return out


def _with_part_of(program, other, tmp_path):
    """PROGRAM with OTHER's editable part (both generated around the same launcher signature)."""
    text, theirs = program.read_text(), other.read_text()
    part = theirs[BEGIN_MARKER.search(theirs).end():END_MARKER.search(theirs).start()]
    out = tmp_path / other.name.replace("_kl.cu", "_cand.cu")
    out.write_text(text[:BEGIN_MARKER.search(text).end()] + part + text[END_MARKER.search(text).start():])
    return out


@pytest.mark.parametrize("path", [
    ROUND315 / "a2_pool_block_floor.cu",  # a pool block the launcher's prepass writes in part
    ROUND325 / "b_flag.cu",  # a mode word tested only for zero
    ROUND325 / "b_offbyone.cu",  # one word past a block, in the part's own guard
    ROUND325 / "b_smem.cu",  # shared memory a tree sum reads where the last block wrote none
], ids=lambda p: p.stem)
def test_a_baseline_reading_memory_it_never_wrote_is_refused(path, tmp_path):
    program = _generated(path, tmp_path)
    with pytest.raises(InputError, match=r"reads memory no buffer of its harness holds.*memory its own code "
                                         r"allocates.*changes with them"):
        verify_files(program, program, Settings(cache_dir=tmp_path / "cache", verify=VerifySettings(memcheck="off")))


@pytest.mark.parametrize("candidate", [
    # the fill reaches only its first call, a warm-up call (H100, 2026-12-07, before warm-up calls were compared:
    # accepted 1.71x); the harness now samples every warm-up call's outputs and the verifier compares them
    "c_counts_on_zeroed_block.cu",
    "c_array.cu",
])
def test_a_candidate_counting_on_a_fresh_allocations_zeros_is_rejected(candidate, tmp_path, record_property):
    # the honest baseline writes the workspace it allocates before reading it: checked like any other
    base = _generated(ROUND325 / "b_ws.cu", tmp_path)
    cand = _with_part_of(base, _generated(ROUND325 / candidate, tmp_path), tmp_path)
    v = verify_files(base, cand, Settings(cache_dir=tmp_path / "cache", verify=VerifySettings(memcheck="on")))
    record_property("verdict", v.summary)
    print("\n" + "\n".join(f"{g.gate}: {g.status}: {g.detail}" for g in v.gates))
    assert not v.accepted, v.summary
    memcheck = v.gate("memcheck")
    # where the candidate is fast enough for memcheck to run, its results there are another's
    if memcheck is not None and memcheck.status != "skipped":
        assert memcheck.status == "fail" and "holding other bytes" in memcheck.detail, v.summary
        assert Reason.correctness in v.reasons
