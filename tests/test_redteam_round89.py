"""Red team round 89 (tests/fixtures/redteam/round89/): narrowing conversions the float rewrites
dropped (through a local, to bf16, an int sum the row tier split over lanes) and a library call a
family still wrote unqualified (the reduction's zeroing). CPU only."""

from __future__ import annotations

import re

import pytest

from .conftest import FIXTURES
from .test_redteam_round85 import _proposals

ROUND = FIXTURES / "redteam" / "round89"


@pytest.mark.parametrize("path", [
    "local_narrowing/mm_int_local.cu", "local_narrowing/mm_intacc_locals.cu", "local_narrowing/rd_int_local.cu",
    "local_narrowing/st_int_local.cu", "local_narrowing/tr_int_local.cu", "narrow_float_cast/mm_bf16_cast.cu",
    "narrow_float_cast/mm_bf16_local.cu", "narrow_float_cast/tr_bf16_cast.cu", "rowtier_int_sum/baseline.cu",
])
def test_a_kernel_that_narrows_a_floating_value_gets_no_float_rewrite(path):
    sources = _proposals(ROUND / path)
    if path == "local_narrowing/st_int_local.cu":
        # the axis tier swaps the thread axes and keeps every expression as written: the narrowing stays
        # (twice: the baseline's kernel and the rewritten one beside it); no family's float rewrite
        assert sources and all(s.count("const int whole = v;") == 2 for s in sources), sources
        return
    assert sources == []


def test_the_zeroing_a_family_adds_calls_the_runtime_by_its_global_name():
    sources = _proposals(ROUND / "unqualified_zeroing" / "baseline.cu")
    # statements, not lines: the template's call now takes the launch's place, on its line
    zeroing = [st for s in sources for st in re.findall(r"[^;{}]*cudaMemsetAsync\([^;]*;", s) if "kl_" not in st]
    added = [line for line in zeroing if "sizeof(float)" in line and "::cudaMemsetAsync(" in line]
    assert sources and added, zeroing
