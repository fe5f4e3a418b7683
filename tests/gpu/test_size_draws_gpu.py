"""Sizes drawn at verify time on a real GPU (tests/fixtures/size_draws/): a program whose launcher
aborts on sizes it refuses (C not divisible by the group count; more than 4608 rows) is verified at
drawn sizes that keep what its declared sizes show (the group count divides C) and, where a draw
breaks a check no declared size shows, at another draw, not blamed on the candidate; a candidate
failing at a drawn size the baseline runs is still rejected."""

from __future__ import annotations

import pytest

from kernelloop.config import Settings, VerifySettings
from kernelloop.verify.gate import verify_files
from kernelloop.verify.verdict import Reason

from ..conftest import FIXTURES

pytestmark = pytest.mark.gpu
FOLDER = FIXTURES / "size_draws"
MASK = (1 << 64) - 1


def _mix64(z: int) -> int:
    """kernelloop_harness.cuh's kl::mix64 (splitmix64's finalizer)."""
    z = (z + 0x9E3779B97F4A7C15) & MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def _drawn_rows(draw: int) -> int:
    """The first size() call's draw (rows, options 4096 and 1001: no relation, no common factor)."""
    r = _mix64(draw ^ _mix64(0x53495A45 + 0))
    return 500 + r % (5120 - 500 + 1)


def _draw_refused_first() -> int:
    """A draw whose rows the baseline refuses (more than 4608), odd as KERNELLOOP_SIZE_DRAW needs."""
    return next(d for d in range(1, 1 << 20, 2) if _drawn_rows(d) > 4608)


@pytest.fixture(scope="module")
def settings(tmp_path_factory):
    return Settings(cache_dir=tmp_path_factory.mktemp("gpu-cache"),
                    verify=VerifySettings(size_draw=_draw_refused_first()))


def test_a_drawn_size_the_baseline_refuses_is_drawn_again(settings):
    v = verify_files(FOLDER / "group_scale.cu", FOLDER / "group_scale_same.cu", settings)
    assert v.gate("correctness").status == "pass", v.summary
    assert any("the baseline itself failed at" in n for n in v.notes), v.notes
    drawn = [c for c in v.checks if c.size_index < 0]
    assert len(drawn) == settings.verify.size_draws  # a refused draw is not judged; another is


def test_a_candidate_failing_where_the_baseline_runs_is_rejected(settings):
    v = verify_files(FOLDER / "group_scale.cu", FOLDER / "group_scale_declared_only.cu", settings)
    assert not v.accepted and Reason.run_failed in v.reasons, v.summary


def test_after_a_refused_draw_the_sizes_keep_the_group_count_a_divisor(tmp_path):
    # drawn on its own, the group count rarely divides C; a redraw keeps the one relation the
    # options show (the group count divides C), and later refusals try it first
    settings = Settings(cache_dir=tmp_path / "cache", verify=VerifySettings(size_draws=8, size_redraws=24))
    v = verify_files(FOLDER / "group_scale.cu", FOLDER / "group_scale_same.cu", settings)
    assert v.gate("correctness").status == "pass", v.summary
    assert sum(c.size_index < 0 for c in v.checks) == 8


def _plain_draw(draw: int, call: int, lo: int, hi: int, g: int) -> int:
    """kernelloop_harness.cuh's drawn_size for a draw keeping nothing: a multiple of the options' common factor G
    in [lo / 2, 1.25 hi]."""
    first, last = max(1, (lo // 2 + g - 1) // g), (hi + hi // 4) // g
    return (first + _mix64(draw ^ _mix64(0x53495A45 + call)) % (last - first + 1)) * g


def test_a_drawn_pitch_below_the_width_is_drawn_again_not_blamed_on_the_candidate(tmp_path):
    # pitched_hist.cu: width {1024, 333}, pitch {1088, 352} (at least the width in every option), height {512, 97};
    # the first draw puts the pitch well below the width, so the baseline's last row reads past its image (kept-aside
    # set 22's histogram, H200 2026-12-06: rejected on correctness in the packed layout before)
    draw = next(d for d in range(1, 1 << 20, 2)
                if _plain_draw(d, 0, 333, 1024, 1) - _plain_draw(d, 1, 352, 1088, 32) >= 128)
    settings = Settings(cache_dir=tmp_path / "cache", verify=VerifySettings(size_draw=draw, memcheck="off"))
    v = verify_files(FOLDER / "pitched_hist.cu", FOLDER / "pitched_hist_private.cu", settings)
    assert v.gate("correctness").status == "pass", v.summary
    assert any("follows the bytes past its buffers" in n for n in v.notes), v.notes
