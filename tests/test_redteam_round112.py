"""Red team round 112 (tests/fixtures/redteam/round112/), the class of rounds 108-111 in the 2-D
families: a family read its sizes from the first `coord < X` of a guard and never asked whether
the baseline computes exactly the elements below them. A second bound (`row < 32768`), or a grid
capped by a ternary, left rows the template computes and the baseline never writes, past the
harness's two sizes. The fix is one reading shared by the families (families/coverage.py): every
condition an access runs under says only `coord < bound`, and the launch reaches every coordinate
below the bound along its own direction; a grid rounding down covers it where the tile divides the
size, which the candidate asks at run time."""

from __future__ import annotations

import pytest

from .conftest import FIXTURES, ROOT
from .test_redteam_round107 import _verdict
from .test_redteam_round109 import _first_proposal

ROUND = FIXTURES / "redteam" / "round112"
KERNELS = ROOT / "kernels"

FOUND = [  # folder, launcher, family the sample passed as
    ("a_transpose_second_bound", "launch_transpose", "transpose"),
    ("b_softmax_second_bound", "launch_softmax", "softmax"),
    ("c_stencil_capped_grid", "launch_stencil", "stencil"),
    ("d_transpose_capped_grid", "launch_transpose", "transpose"),
    ("e_matmul_second_bound", "launch_matmul", "matmul"),
    ("g_softmax_capped_grid", "launch_softmax", "softmax"),
    ("h_matmul_capped_grid", "launch_matmul", "matmul"),
]
_WHY = ("a condition selects", "reach every element")


def _refused_by(verdict, family: str) -> str:
    assert verdict.match is None or verdict.match.family != family, verdict.match
    return next(m.reason for m in verdict.mismatches if m.family == family)


@pytest.mark.parametrize("folder, launcher, family", FOUND, ids=[f for f, _, _ in FOUND])
def test_a_baseline_that_computes_part_of_its_range_gets_no_template(folder, launcher, family):
    text = (ROUND / folder / "baseline.cu").read_text()
    reason = _refused_by(_verdict(text, launcher), family)
    assert any(w in reason for w in _WHY), reason


@pytest.mark.parametrize("folder", ["b_softmax_second_bound", "g_softmax_capped_grid"])
def test_the_row_tier_keeps_the_baselines_rows(folder):
    # the row tier rewrites the kernel in place: its guards stay, and the launch keeps the
    # baseline's thread count as the rows it may compute (kl_items)
    proposal = _first_proposal((ROUND / folder / "baseline.cu").read_text())
    assert "row tier" in proposal.approach, proposal.approach
    assert "65536" in proposal.source or "512" in proposal.source
    assert "kl_items" in proposal.source


# -- the class, in spellings the red team did not send -------------------------------------------

_MATMUL = (KERNELS / "naive_matmul.cu").read_text()
_TRANSPOSE = (KERNELS / "transpose.cu").read_text()
_SOFTMAX = (KERNELS / "row_softmax.cu").read_text()
_STENCIL = (KERNELS / "stencil2d.cu").read_text()
_SUM = (KERNELS / "sum_reduction.cu").read_text()


@pytest.mark.parametrize("text, launcher, family, old, new", [
    # a bit test, a flag, a mask: part of the range, in forms `literals` used to drop unread
    (_TRANSPOSE, "launch_transpose", "transpose", "if (row < rows && col < cols)",
     "if (row < rows && col < cols && (row >> 15) == 0)"),
    (_TRANSPOSE, "launch_transpose", "transpose", "if (row < rows && col < cols)",
     "if (row < rows && col < cols && rows)"),
    (_MATMUL, "launch_matmul", "matmul", "if (row < n && col < n) {", "if (row < n && col < n && (col & 4095) == col) {"),
    (_SOFTMAX, "launch_softmax", "softmax", "if (row >= rows) return;", "if (row >= rows || (row >> 16)) return;"),
    (_SUM, "launch_reduce_sum", "reduction", "(i < (unsigned int)n) ? in[i] : 0.0f",
     "(i < (unsigned int)n && (i >> 29) == 0) ? in[i] : 0.0f"),
    # grids that reach a prefix: min(), a constant, a block of fewer threads than the coordinate's step
    (_MATMUL, "launch_matmul", "matmul", "dim3 grid((n + block.x - 1) / block.x, (n + block.y - 1) / block.y);",
     "dim3 grid((n + block.x - 1) / block.x, min((n + block.y - 1) / block.y, 256));"),
    (_TRANSPOSE, "launch_transpose", "transpose", "dim3 grid((cols + block.x - 1) / block.x, (rows + block.y - 1) / block.y);",
     "dim3 grid((cols + block.x - 1) / block.x, 4096);"),
    (_STENCIL, "launch_stencil", "stencil", "dim3 grid((rows + block.x - 1) / block.x,",
     "dim3 grid((rows + 63) / 64,"),
    (_MATMUL, "launch_matmul", "matmul", "dim3 grid((n + block.x - 1) / block.x, (n + block.y - 1) / block.y);",
     "dim3 grid((n + block.x - 1) / block.x, (n + block.y - 1) / block.y / 2);"),
], ids=["transpose-bit-test", "transpose-flag", "matmul-mask", "softmax-shift-test", "sum-bit-test",
        "matmul-min-grid", "transpose-constant-grid", "stencil-half-grid", "matmul-half-grid"])
def test_part_of_the_range_in_other_spellings_is_refused(text, launcher, family, old, new):
    assert old in text
    reason = _refused_by(_verdict(text.replace(old, new), launcher), family)
    assert any(w in reason for w in _WHY), reason


def test_a_grid_rounding_down_gets_the_template_only_where_the_tile_divides():
    # `n / 16` blocks cover every row only where 16 divides n: the candidate asks, at run time,
    # and launches the baseline otherwise (the harness's 1001 takes the baseline's path)
    text = _MATMUL.replace("dim3 grid((n + block.x - 1) / block.x, (n + block.y - 1) / block.y);",
                           "dim3 grid(n / block.x, (n + block.y - 1) / block.y);")
    verdict = _verdict(text, "launch_matmul")
    assert verdict.match is not None and verdict.match.family == "matmul", verdict.mismatches
    # the coverage condition, and the one that keeps the baseline's int index exact (round 113)
    assert verdict.match.conditions == ["(n) % 16 == 0", "(long long)(n) * (long long)(n) <= 2147483647LL"]
    proposal = _first_proposal(text)
    assert "(n) % 16 == 0" in proposal.source
    # the fallback: the baseline's launch as written, its configuration evaluated once
    assert "const dim3 kl_grid = dim3(grid); const dim3 kl_block = dim3(block);" in proposal.source
    assert "naive_matmul_kernel<<<kl_grid, kl_block, kl_shmem>>>(A, B, C, n);" in proposal.source


def test_the_bundled_kernels_need_no_coverage_condition():
    for text, launcher in [(_MATMUL, "launch_matmul"), (_TRANSPOSE, "launch_transpose"),
                           (_SOFTMAX, "launch_softmax"), (_STENCIL, "launch_stencil")]:
        verdict = _verdict(text, launcher)
        assert verdict.match is not None, (launcher, verdict.mismatches)
        assert not [c for c in verdict.match.conditions if "%" in c], verdict.match.conditions
