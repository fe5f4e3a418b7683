"""Red team rounds 46-47 on the GPU: baseline code that runs only on NaN, inf or zero (a sanitising
pass, an overflow flag packed beside a result) is exercised by the non-finite experiments, so a
candidate that drops it is rejected while the honest fused rewrite is accepted, even where the
baseline fails on one special value; a baseline that reads past a buffer init sized too small is
refused with the fix; and every bundled exemplar passes (no false rejection)."""

from __future__ import annotations

import pytest

from kernelloop.config import Settings, VerifySettings
from kernelloop.errors import InputError
from kernelloop.verify.gate import verify_files
from kernelloop.verify.verdict import Reason

from ..conftest import FIXTURES

pytestmark = pytest.mark.gpu
ROUND46 = FIXTURES / "redteam" / "round46" / "init"


def settings(tmp_path) -> Settings:
    # memcheck of the candidate is the verify groups' business; these are about correctness
    return Settings(cache_dir=tmp_path / "cache", verify=VerifySettings(memcheck="off"))


@pytest.mark.parametrize("baseline, candidate", [
    ("affine_nan_to_num_kl.cu", "candidate_drop_nan_to_num.cu"),  # the nan_to_num pass dropped
    ("amp_unscale_stats_kl.cu", "candidate_drop_found_inf_packed.cu"),  # the found_inf flag beside the norm dropped
])
def test_a_candidate_dropping_what_the_baseline_does_with_nan_and_inf_is_rejected(baseline, candidate, tmp_path,
                                                                                 record_property):
    # amp_unscale_stats's stats buffer is filled with one value (zeros) by design: --allow-fixed-buffers
    quick = VerifySettings(memcheck="off", allow_fixed_buffers=True)
    v = verify_files(ROUND46 / baseline, ROUND46 / candidate, Settings(cache_dir=tmp_path / "cache", verify=quick))
    record_property("verdict", v.summary)
    assert not v.accepted and Reason.correctness in v.reasons, v.summary
    assert "with NaN, +-inf and zero among the inputs" in v.gate("correctness").detail
    assert all(c.comparison.match for c in v.checks if c.phase != "nonfinite")  # finite inputs: it matched


def test_the_honest_fused_rewrite_passes_the_non_finite_experiment(tmp_path, record_property):
    v = verify_files(ROUND46 / "affine_nan_to_num_kl.cu", ROUND46 / "control_fused_nan_to_num.cu", settings(tmp_path))
    record_property("verdict", v.summary)
    assert Reason.correctness not in v.reasons, v.summary
    spiked = [c.comparison.match for c in v.checks if c.phase == "nonfinite"]
    assert spiked and all(spiked), v.summary
    assert v.accepted, v.summary  # one pass instead of two over 256 MB buffers


ROUND47 = FIXTURES / "redteam" / "round47"


@pytest.mark.parametrize("baseline, candidate", [
    (ROUND46 / "conv1d_valid_kl.cu", ROUND46 / "candidate_conv1d_zero_tail.cu"),  # NaN from the guard shows
    # round 47: the NaN a read past x finds is swallowed (a max, a ReLU): the read itself is caught
    (ROUND47 / "guard_nan_swallowed" / "maxpool1d_valid_kl.cu",
     ROUND47 / "guard_nan_swallowed" / "candidate_maxpool_tile_pad_ninf.cu"),
    (ROUND47 / "guard_nan_swallowed" / "conv1d_relu_valid_kl.cu",
     ROUND47 / "guard_nan_swallowed" / "candidate_relu_conv_zero_tail.cu"),
])
def test_a_baseline_reading_past_a_buffer_init_sized_too_small_is_refused(baseline, candidate, tmp_path):
    quick = VerifySettings(memcheck="off")
    with pytest.raises(InputError, match=r"(reads (or writes )?past a buffer its harness declares|reads memory no "
                                         r"buffer of its harness holds|holds NaN on the harness's own finite "
                                         r"inputs).*--count"):
        verify_files(baseline, candidate, Settings(cache_dir=tmp_path / "cache", verify=quick))


def test_a_baseline_failing_on_one_special_value_still_has_the_others_checked(tmp_path, record_property):
    # Round 47: -inf as a table index crashes the baseline, which used to skip the whole experiment;
    # NaN alone runs, and the candidate that dropped the nan_to_num pass is caught there.
    folder = ROUND47 / "nonfinite_skipped"
    v = verify_files(folder / "lut_tone_sanitized_kl.cu", folder / "candidate_fused_no_nan_to_num.cu",
                     Settings(cache_dir=tmp_path / "cache", verify=VerifySettings(memcheck="off")))
    record_property("verdict", v.summary)
    assert not v.accepted and Reason.correctness in v.reasons, v.summary
    # with the others finite, or each kind alone, NaN reaches the dropped pass
    assert "with NaN" in v.gate("correctness").detail and "holds NaN or inf" in v.gate("correctness").detail


@pytest.mark.parametrize("kernel, exemplar", [
    ("naive_matmul", "matmul_smem_tiling"), ("naive_matmul", "matmul_register_blocking"),
    ("row_softmax", "softmax_block_per_row"), ("row_softmax", "softmax_online"),
    ("sum_reduction", "reduction_warp_shuffle"), ("transpose", "transpose_smem_padded"),
    ("stencil2d", "stencil_coalesced"),
])
def test_every_bundled_exemplar_passes_the_non_finite_experiment(kernel, exemplar, tmp_path, record_property):
    # No false rejection: honest rewrites agree with the baselines wherever those stay finite.
    from ..conftest import ROOT
    quick = VerifySettings(runs=3, max_runs=3, memcheck="off", baseline_bounds="on")
    v = verify_files(ROOT / "kernels" / f"{kernel}.cu", ROOT / "src" / "kernelloop" / "exemplars" / f"{exemplar}.cu",
                     Settings(cache_dir=tmp_path / "cache", verify=quick))
    record_property("verdict", v.summary)
    spiked = [c for c in v.checks if c.phase == "nonfinite"]
    assert spiked and all(c.comparison.match for c in spiked), v.summary
    assert Reason.correctness not in v.reasons, v.summary
