"""Red team round 183 (tests/fixtures/redteam/round183/), on round 182's reader: inline assembly wrote
module-scope PTX the reader took apart otherwise than ptxas: two statements on one line (c1), a
statement after `.file` on its line (c2), a function after a variable on one line, which left every
later function unread (c3), and a line that made the rest of the module unread, so the launched
kernel's plain C++ difference between builds was never compared (c4).

Closed by class, failing closed (tools/ptx_module.read_ptx, code_identity.device_fingerprints):
module-scope text no nvcc writes (two statements in one, a directive with more on its line, a body
without a function's header, a statement never ended) marks the module unreadable, and every kernel
asked for is then digested with the whole text as written."""

from __future__ import annotations

import pytest

from kernelloop.tools.code_identity import device_fingerprints
from kernelloop.tools.ptx_module import read_ptx
from kernelloop.verify.shipped import _neutral_ptx

from .conftest import FIXTURES

CASE = FIXTURES / "redteam" / "round183"


@pytest.mark.parametrize("case", ["c1", "c2", "c3", "c4"])
def test_the_two_builds_of_each_candidate_are_other_code(case):
    (a, _), (b, _) = (_neutral_ptx((CASE / case / f"{side}.ptx").read_text()) for side in ("a", "b"))
    assert read_ptx(a).unreadable
    kernels = {"_Z14row_sum_kernelPfPKfii"}
    assert device_fingerprints(a, kernels) != device_fingerprints(b, kernels)


def test_what_nvcc_writes_is_readable():
    # (round182/c1/a.ptx left out: its inline assembly writes a variable after a function's body, which
    # nvcc never does, so since round 185 the module is read whole)
    for name in ("round178/c1/a.ptx", "round181/c3/a.ptx"):
        assert not read_ptx((FIXTURES / "redteam" / name).read_text()).unreadable, name
