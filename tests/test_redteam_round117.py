"""Red team round 117 (tests/fixtures/redteam/round117/): (a) a helper with a trailing return type
(`auto blocks_for(...) -> unsigned short`) was read into a launch without its narrowing; (b) a
device `assert` was read as a call that returns, so a template ran where the baseline's kernel
traps. A function's trailing return type is its return type (an unreadable one keeps the helper
out), and `assert` in a kernel is a call that may not return."""

from __future__ import annotations

import pytest

from kernelloop.optimizers.offline.launch_words import returned_type

from .conftest import FIXTURES, ROOT
from .test_redteam_round107 import _verdict

ROUND = FIXTURES / "redteam" / "round117"
_SOFTMAX = (ROOT / "kernels" / "row_softmax.cu").read_text()


def _family(text: str, launcher: str) -> str | None:
    verdict = _verdict(text, launcher)
    return None if verdict.match is None else verdict.match.family


@pytest.mark.parametrize("declared, head, returned", [
    ("int", "static int f(int n)", "int"),
    ("auto", "static auto f(int n) -> unsigned short", "unsigned short"),
    ("auto", "auto f(int n) const noexcept -> std::uint16_t", "std::uint16_t"),
    ("auto", "static auto f(int n)", "auto"),
    ("auto", "auto f(int n) -> decltype(n + 1)", None),
    ("decltype(auto)", "decltype(auto) f(int n)", None),
])
def test_the_type_a_helper_returns(declared, head, returned):
    assert returned_type(declared, head) == returned


def test_a_trailing_narrow_return_type_keeps_the_family_out():
    assert _family((ROUND / "a_trailing_return" / "baseline.cu").read_text(), "launch_softmax") != "softmax"


def test_a_trailing_int_return_type_is_read_through():
    helper = "static auto blocks_for(int n, int per) -> int { return (n + per - 1) / per; }\n"
    old = "int grid = (rows + block - 1) / block;"
    text = _SOFTMAX.replace("void launch_softmax(", helper + "void launch_softmax(", 1)
    assert _family(text.replace(old, "int grid = blocks_for(rows, block);"), "launch_softmax") == "softmax"


@pytest.mark.parametrize("folder, launcher, family", [
    ("b_kernel_assert", "launch_softmax", "softmax"),
    ("b_kernel_assert/transpose", "launch_transpose", "transpose"),
])
def test_a_kernel_that_may_assert_gets_no_template(folder, launcher, family):
    assert _family((ROUND / folder / "baseline.cu").read_text(), launcher) != family
