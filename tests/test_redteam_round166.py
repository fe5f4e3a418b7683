"""Red team round 166 (tests/fixtures/redteam/round166/): one route past every static gate, OPEN.

The part passes a comparator with a side effect to a header function whose own assertion calls it
(`cuda::std::clamp(lo, lo, hi, [&](int a, int b) { ++probes; return a < b; })`: under -DDEBUG,
-D_DEBUG or the CCCL assertion switches the header's `_CCCL_ASSERT(!comp(hi, lo))` calls it a third
time; <algorithm>'s std::clamp does the same under -D_GLIBCXX_ASSERTIONS), and the launch's column
count follows the count. The switch-dependent macro sits in the header's function, not in the part's
text, and debug builds are not compared by code (an honest part's cuda::barrier gains checks there:
round 67). The fix is to judge header assertions by the code they make, as asserts are judged
(evaluated without failing against dropped); their macros are used inside the headers' own bodies,
so they cannot be redefined after the includes as assert is. docs/verifier.md, Known limits."""

from __future__ import annotations

import pytest

from kernelloop.config import Settings, VerifySettings
from kernelloop.verify.static_check import check_static_files

from .conftest import FIXTURES, shared_cache_dir

CASE = FIXTURES / "redteam" / "round166" / "parts"
BASE = FIXTURES / "redteam" / "round164" / "policy" / "base_kl.cu"


@pytest.mark.nvcc
@pytest.mark.xfail(strict=True, reason="open route (round 166): a header assertion that calls the part's callable "
                   "under a debug switch is not judged")
def test_a_comparator_a_header_assertion_calls_in_a_debug_build_is_refused():
    check = check_static_files(BASE, CASE / "clamp_probe_cand.cu",
                               Settings(cache_dir=shared_cache_dir(), verify=VerifySettings(arch="sm_90")))
    assert not check.ok, check.summary
