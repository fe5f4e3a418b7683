"""Red team round 115 (tests/fixtures/redteam/round115/), round 113's classes by other spellings:
(a, c, e) a type the reader does not know as an integer (a typedef of `unsigned short`, for a
local, a kernel parameter, a launcher's grid) was taken as no integer, so as keeping every value;
(b) `(size_t)(row * cols + col)` was judged 64-bit by its outermost cast while it multiplies in
int. An unknown type now may narrow (only types known to be no integer hold any value), and every
step of an index's arithmetic is weighed."""

from __future__ import annotations

import pytest

from .conftest import FIXTURES, ROOT
from .test_redteam_round107 import _verdict
from .test_redteam_round109 import _first_proposal

ROUND = FIXTURES / "redteam" / "round115"


@pytest.mark.parametrize("folder, launcher, family", [
    ("a_typedef_local", "launch_transpose", "transpose"),
    ("c_softmax_alias_param", "launch_softmax", "softmax"),
    ("e_softmax_alias_grid", "launch_softmax", "softmax"),
])
def test_a_value_kept_in_a_type_of_unknown_width_gets_no_template(folder, launcher, family):
    verdict = _verdict((ROUND / folder / "baseline.cu").read_text(), launcher)
    assert verdict.match is None or verdict.match.family != family, verdict.match.detail


def test_an_index_multiplied_in_int_then_widened_keeps_the_template_where_it_is_exact():
    text = (ROUND / "b_stencil_cast_after_product" / "baseline.cu").read_text()
    verdict = _verdict(text, "launch_stencil")
    assert verdict.match is not None and verdict.match.family == "stencil"
    assert any("2147483647LL" in c for c in verdict.match.conditions), verdict.match.conditions
    assert "2147483647LL" in _first_proposal(text).source


_TRANSPOSE = (ROOT / "kernels" / "transpose.cu").read_text()


@pytest.mark.parametrize("prelude, old, new", [
    ("using coord_t = unsigned short;", "int row = blockIdx.y", "coord_t row = blockIdx.y"),
    ("enum Small : unsigned char { kZero };", "int row = blockIdx.y", "Small row = (Small)(blockIdx.y"),
    ("", "int row = blockIdx.y * blockDim.y + threadIdx.y;", "bool row = blockIdx.y * blockDim.y + threadIdx.y;"),
])
def test_other_types_of_unknown_width_are_refused(prelude, old, new):
    text = _TRANSPOSE.replace(old, new)
    if new.startswith("Small"):
        text = text.replace("(Small)(blockIdx.y * blockDim.y + threadIdx.y;", "(Small)(blockIdx.y * blockDim.y + threadIdx.y);")
    text = text.replace("// kernelloop: editable begin", prelude + "\n// kernelloop: editable begin")
    verdict = _verdict(text, "launch_transpose")
    assert verdict.match is None or verdict.match.family != "transpose", verdict.match.detail


def test_a_widened_product_and_a_float_local_are_still_read():
    # the shipped transpose widens before it multiplies: no condition needed
    assert _verdict(_TRANSPOSE, "launch_transpose").match.conditions == []
