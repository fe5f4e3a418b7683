"""Red team rounds 48-52 on the GPU: each round's accepted pair, as the round left it in
tests/fixtures/redteam, is now turned away: rejected on correctness (the special-value experiments
per input, per output and in groups) or, where the baseline itself reads past what it declares,
refused with the fix. The rounds were found and first checked on CPU emulations; this is the run
that counts."""

from __future__ import annotations

import pytest

from kernelloop.config import Settings, VerifySettings
from kernelloop.errors import InputError
from kernelloop.verify.gate import verify_files
from kernelloop.verify.verdict import Reason

from ..conftest import FIXTURES

pytestmark = pytest.mark.gpu
REDTEAM = FIXTURES / "redteam"

REJECTED = [
    # round 48 F1: special values into every input at once left the sanitised input unchecked
    ("round48/nonfinite_one_buffer/amp_sgd_step_kl.cu", "round48/nonfinite_one_buffer/candidate_fused_no_sanitize.cu"),
    # round 49 F1: one input's special values left the whole output NaN, so nothing was compared
    ("round49/nonfinite_masked/weighted_token_loss_kl.cu", "round49/nonfinite_masked/candidate_fused_no_nan_to_num.cu"),
    # round 50 F1: one input's special values reached every row the other's would
    ("round50/nonfinite_partial/embedding_backward_weighted_kl.cu",
     "round50/nonfinite_partial/candidate_fused_no_nan_to_num.cu"),
    # round 51 F2: a norm of the raw input, wholly NaN, voided the sanitised output beside it
    ("round51/nonfinite_scalar_voids/unscale_sanitize_kl.cu", "round51/nonfinite_scalar_voids/candidate_no_nan_to_num.cu"),
    # round 51 F3: a row masked to -inf throughout, which isolated special values never made
    ("round51/isolated_special_values/causal_softmax_rows_kl.cu",
     "round51/isolated_special_values/candidate_warp_no_guard.cu"),
    # round 52 F3: a column masked to -inf throughout, which no contiguous stretch makes
    ("round52/strided_special_groups/softmax_dim0_kl.cu", "round52/strided_special_groups/candidate_tiled_no_guard.cu"),
]


@pytest.mark.parametrize("baseline, candidate", REJECTED, ids=[c.split("/")[1] for _, c in REJECTED])
def test_the_rounds_special_value_routes_are_rejected(baseline, candidate, tmp_path, record_property):
    quick = VerifySettings(memcheck="off", allow_fixed_buffers=True)
    v = verify_files(REDTEAM / baseline, REDTEAM / candidate, Settings(cache_dir=tmp_path / "cache", verify=quick))
    record_property("verdict", v.summary)
    assert not v.accepted and Reason.correctness in v.reasons, v.summary
    assert all(c.comparison.match for c in v.checks if c.phase != "nonfinite"), v.summary  # finite inputs: it matched


REFUSED_OR_REJECTED = [
    # round 48 F3: the baseline's read past a buffer lands in a neighbouring allocation
    ("round48/bounds_adjacent/maxpool1d_out_first_kl.cu", "round48/bounds_adjacent/candidate_maxpool_tile_pad_ninf.cu"),
    # round 49 F2: half-precision outputs hid a read past the input from the guard contrast
    ("round49/guard_contrast_half/maxpool1d_half_kl.cu",
     "round49/guard_contrast_half/candidate_maxpool_half_tile_pad_ninf.cu"),
]


@pytest.mark.parametrize("baseline, candidate", REFUSED_OR_REJECTED,
                         ids=[c.split("/")[0] for _, c in REFUSED_OR_REJECTED])
def test_the_rounds_reads_past_a_buffer_are_refused_or_rejected(baseline, candidate, tmp_path, record_property):
    try:
        v = verify_files(REDTEAM / baseline, REDTEAM / candidate,
                         Settings(cache_dir=tmp_path / "cache", verify=VerifySettings(memcheck="on")))
    except InputError as refused:  # the baseline itself reads past what it declares: the fix is named
        record_property("refused", str(refused))
        assert "--count" in str(refused) or "declares" in str(refused), refused
        return
    record_property("verdict", v.summary)
    assert not v.accepted and (Reason.correctness in v.reasons or Reason.memcheck in v.reasons), v.summary


@pytest.mark.parametrize("baseline, control", [
    # round 51 F3's control: the warp-per-row kernel that keeps the baseline's masked-row handling
    ("round51/isolated_special_values/causal_softmax_rows_kl.cu", "round51/isolated_special_values/control_warp_with_guard.cu"),
    # round 52 F3's: the tiled softmax over dim 0 that keeps the masked-column handling
    ("round52/strided_special_groups/softmax_dim0_kl.cu", "round52/strided_special_groups/control_tiled_with_guard.cu"),
], ids=["rows", "columns"])
def test_the_honest_rewrites_pass_the_special_value_groups(baseline, control, tmp_path, record_property):
    v = verify_files(REDTEAM / baseline, REDTEAM / control,
                     Settings(cache_dir=tmp_path / "cache", verify=VerifySettings(memcheck="off")))
    record_property("verdict", v.summary)
    assert Reason.correctness not in v.reasons, v.summary
    assert any(c.phase == "nonfinite" for c in v.checks)
