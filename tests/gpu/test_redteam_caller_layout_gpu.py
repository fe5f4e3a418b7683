"""Red team rounds 189-200 on the GPU: parts that told the verifier's runs from a caller's by what
lies around, at, or beside their buffers (guard zones, memcheck's serialisation, 256-byte alignment,
an address bit, which buffer lies lower, the order with the alignment, adjacency, a size no shifted
run used), and one fast only where the timed runs put its buffers. Each passed every static gate and
was closed in the harness and gate._caller_layout_check without a GPU run; this is the run that
counts. Each is rejected (on correctness, or as not faster where a caller's buffers lie); the honest
warp-per-row rewrite they were all built from is accepted, so the exact-size, mapped, shifted,
packed and reordered runs turn away no honest part.

Groups (README, GPU test groups): one verification takes 45 s to 4.5 minutes on an H200 (2026-12-03), so
two or three at a time, by round: `pytest -m gpu tests/gpu/test_redteam_caller_layout_gpu.py -k "round189 or
round190"`, then `round191`, `round192 or round193`, `round194`, `round195`, `round198`, `round200 or round202`,
`round203 or round204`, `round205 or round207`, `honest`.
"""

from __future__ import annotations

import pytest

from kernelloop.config import Settings
from kernelloop.verify.gate import verify_files
from kernelloop.verify.verdict import Reason

from ..conftest import FIXTURES, ROOT

pytestmark = pytest.mark.gpu
REDTEAM = FIXTURES / "redteam"
ROW_SUM = REDTEAM / "round164" / "policy" / "base_kl.cu"

CHEATS = [
    (ROW_SUM, "round189/guardsense"),      # reads the guard zone beside its input
    (ROW_SUM, "round189/guardsense_out"),  # ... beside its output
    (ROW_SUM, "round190/memsense"),        # tells memcheck's exact-size runs apart by serialisation
    (ROW_SUM, "round191/align"),           # drops a misaligned prefix no aligned run shows
    (ROOT / "kernels" / "sum_reduction.cu", "round191/align_gate"),  # reads otherwise on a misaligned pointer
    (ROW_SUM, "round192/alignsense"),      # honest only on aligned pointers where memcheck serialises
    (ROW_SUM, "round193/bit8"),            # keyed on address bit 8 (and serialisation)
    (ROW_SUM, "round193/bit8_plain"),      # keyed on address bit 8 in the launcher
    (ROW_SUM, "round194/order"),           # keyed on which buffer lies lower, in the kernel
    (ROW_SUM, "round194/order_host"),      # ... in the launcher
    (ROW_SUM, "round195/order_aligned"),   # keyed on the order with both buffers aligned, in the kernel
    (ROW_SUM, "round195/order_aligned_host"),  # ... in the launcher
    (ROW_SUM, "round198/peel_edge"),       # a misaligned path wrong only at a size not a multiple of 16
    (ROW_SUM, "round198/adjacent"),        # takes adjacent buffers (one allocation cut in two) for overlap
    (ROOT / "kernels" / "sum_reduction.cu", "round198/fwd_aligned"),  # declared order with both aligned
    (ROW_SUM, "round200/adjacent_misaligned"),  # adjacent and misaligned
    (ROW_SUM, "round207/noise_inverted"),  # honest on a misaligned view only beside the harness's (unmixed) noise
    (ROW_SUM, "round207/plausible_values"),  # ... only where the bytes below it are no plausible floats
]
# Correct everywhere, faster only where the timed runs put a buffer, or slower for aligned buffers: not faster
SLOW_FOR_A_CALLER = [(ROW_SUM, "round200/guard_fast"), (ROW_SUM, "round202/median_aligned_slow"),
                     (ROW_SUM, "round203/cudamalloc_only_slow"), (ROW_SUM, "round204/aligned_at_par"),
                     (ROW_SUM, "round204/host_gap_aligned"), (ROW_SUM, "round205/othersize_aligned_slow")]


@pytest.mark.parametrize("baseline, case", CHEATS, ids=[c for _, c in CHEATS])
def test_a_part_that_tells_the_verifiers_buffers_from_a_callers_is_rejected(baseline, case, tmp_path,
                                                                            record_property):
    v = verify_files(baseline, REDTEAM / case / "cand.cu", Settings(cache_dir=tmp_path / "cache"))
    record_property("verdict", v.summary)
    print(f"\n{case}: {v.reasons} {v.summary}")
    # wrong results somewhere, or (H200, 2026-12-03: round190/memsense) work that differs between calls
    assert not v.accepted and {Reason.correctness, Reason.inconsistent_work} & set(v.reasons), v.summary


def test_the_honest_rewrite_they_were_built_from_is_accepted(tmp_path, record_property):
    v = verify_files(ROW_SUM, REDTEAM / "round194" / "honest" / "cand.cu",
                     Settings(cache_dir=tmp_path / "cache"))
    record_property("verdict", v.summary)
    print(f"\nhonest: {v.summary}")
    layout = [g for g in v.gates if g.gate == "correctness" and "exact size" in (g.detail or "")]
    assert v.accepted, v.summary
    assert not layout  # no caller-layout experiment failed
    # every caller layout ran: no baseline failure, no driver that could not map the buffers
    assert not any("offsets a cudaMalloc address does not have" in n or "could not map" in n
                   or "that layout was not checked" in n for n in v.notes), v.notes


@pytest.mark.parametrize("baseline, case", SLOW_FOR_A_CALLER, ids=[c for _, c in SLOW_FOR_A_CALLER])
def test_a_part_fast_only_where_the_timed_runs_put_its_buffers_is_rejected(baseline, case, tmp_path, record_property):
    v = verify_files(baseline, REDTEAM / case / "cand.cu", Settings(cache_dir=tmp_path / "cache"))
    record_property("verdict", v.summary)
    print(f"\n{case}: {v.reasons} {v.summary}")
    assert not v.accepted and Reason.not_faster in v.reasons, v.summary
    assert any(g.gate == "caller layouts" and g.status == "fail" for g in v.gates), v.summary
