"""Red team round 157 (tests/fixtures/redteam/round157/): the policy scan's translation phase 1
was not the compiler's. gcc and nvcc end a line at a lone CR too, so `// ...` CR `#define Q
__LINE__` was a directive to them and part of a comment to every view of the scan (also
`__COUNTER__`, `##`, `#include <dlfcn.h>`); and they take a vertical tab or form feed as a blank
beside a directive's `#`, where the directive rules allowed only space and tab (`#` VT `include
<dlfcn.h>`, `#` FF `line 1`, `#` VT `ifdef NDEBUG`). All certain: every static gate passed. Fixed
by class: normalize_source reads line ends and blanks as phase 1 does (CRLF and a lone CR are line
ends, VT and FF blanks), and a splice ends at any line end."""

from __future__ import annotations

import pytest

from kernelloop.config import Settings, VerifySettings
from kernelloop.verify.static_check import check_static_files

from .conftest import FIXTURES, shared_cache_dir

CASE = FIXTURES / "redteam" / "round157" / "policy"
BASE = FIXTURES / "redteam" / "round156" / "policy" / "base_kl.cu"


@pytest.mark.parametrize("candidate, rule", [
    ("cr_line_cand.cu", "build-context"), ("cr_counter_cand.cu", "build-context"), ("cr_paste_cand.cu", "macro"),
    ("cr_include2_cand.cu", "include"), ("vt_include2_cand.cu", "include"), ("ff_line_cand.cu", "line-directive"),
    ("vt_ifdef_cand.cu", "build-context"),
])
def test_the_red_teams_candidates_are_refused(candidate, rule):
    check = check_static_files(BASE, CASE / candidate, Settings(cache_dir=shared_cache_dir(), verify=VerifySettings(arch="sm_90")))
    assert not check.ok and rule in check.summary, check.summary


def test_the_fixtures_keep_their_line_ends_and_blanks():
    assert b"\r#define" in (CASE / "cr_line_cand.cu").read_bytes()
    assert b"#\x0binclude" in (CASE / "vt_include2_cand.cu").read_bytes()
