"""Red team round 113 (tests/fixtures/redteam/round113/), the class of rounds 108-112 by other
routes: (a, b, c, e) an implicit conversion read as no change (`unsigned short row = ...`, an `int`
handed to an `unsigned short rows` parameter), where round 109 had fixed explicit casts; (f) a
baseline whose int index wraps past 2^31 elements, inside the templates' size range; (g) a
`static` local's initializer read as its value at every call."""

from __future__ import annotations

import pytest

from .conftest import FIXTURES, ROOT
from .test_redteam_round107 import _verdict
from .test_redteam_round109 import _first_proposal

ROUND = FIXTURES / "redteam" / "round113"
KERNELS = ROOT / "kernels"


def _no_family(folder: str, launcher: str, family: str) -> None:
    verdict = _verdict((ROUND / folder / "baseline.cu").read_text(), launcher)
    assert verdict.match is None or verdict.match.family != family, verdict.match.detail


@pytest.mark.parametrize("folder, launcher, family", [
    ("a_transpose_short_local", "launch_transpose", "transpose"),
    ("b_softmax_short_param", "launch_softmax", "softmax"),
    ("c_stencil_short_local", "launch_stencil", "stencil"),
    ("e_matmul_short_local", "launch_matmul", "matmul"),
    ("g_softmax_static_grid", "launch_softmax", "softmax"),
])
def test_a_value_the_baseline_narrows_or_keeps_between_calls_gets_no_template(folder, launcher, family):
    _no_family(folder, launcher, family)


def test_a_32_bit_index_gets_the_template_only_where_it_is_exact():
    text = (ROUND / "f_stencil_int_index" / "baseline.cu").read_text()
    verdict = _verdict(text, "launch_stencil")
    assert verdict.match is not None and verdict.match.family == "stencil"
    assert "(long long)(cols) * (long long)(rows) <= 2147483647LL" in verdict.match.conditions
    assert "(long long)(cols) * (long long)(rows) <= 2147483647LL" in _first_proposal(text).source


_MATMUL = (KERNELS / "naive_matmul.cu").read_text()
_SOFTMAX = (KERNELS / "row_softmax.cu").read_text()
_TRANSPOSE = (KERNELS / "transpose.cu").read_text()


@pytest.mark.parametrize("text, launcher, family, old, new", [
    # other narrow types, and the parameter side
    (_MATMUL, "launch_matmul", "matmul", "int col = blockIdx.x", "short col = blockIdx.x"),
    (_MATMUL, "launch_matmul", "matmul", "const float* B, float* C, int n) {\n  int row",
     "const float* B, float* C, unsigned short n) {\n  int row"),
    (_TRANSPOSE, "launch_transpose", "transpose", "float* out, int rows, int cols) {\n  int col",
     "float* out, int rows, unsigned char cols) {\n  int col"),
    # state kept between calls
    (_SOFTMAX, "launch_softmax", "softmax", "  int grid = ", "  static int grid = "),
    (_SOFTMAX, "launch_softmax", "softmax", "  int grid = ", "  thread_local int grid = "),
])
def test_other_spellings_of_the_class_are_refused(text, launcher, family, old, new):
    assert old in text, old
    verdict = _verdict(text.replace(old, new), launcher)
    assert verdict.match is None or verdict.match.family != family, verdict.match.detail


def test_a_widening_conversion_is_still_read():
    text = _MATMUL.replace("int col = blockIdx.x", "long long col = blockIdx.x")
    verdict = _verdict(text, "launch_matmul")
    assert verdict.match is not None and verdict.match.family == "matmul", verdict.mismatches
