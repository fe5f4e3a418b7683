"""Red team round 156 (tests/fixtures/redteam/round156/): the policy scan split the candidate into
lines differently from the compiler. (1) It joined only a backslash followed by a newline, where
gcc and nvcc also join a backslash, blanks and a newline: a `//` comment ending `\\ ` swallowed an
`R"a(` line to the compiler, while the scan read a raw string over `#define Q __LINE__` (also
__COUNTER__, __FILE__). (2) It read directives line by line after keeping each comment's line
breaks, where the compiler reads a comment as one space: `# /*`, newline, `*/ include <dlfcn.h>`
opened a header the allow-list refuses, and `# /* */ line 1` (over two lines) renamed the lines.
All certain: every static gate passed. Fixed by class: one splice (scanner.SPLICE) for every
reader, and every rule also runs on the text as the compiler reads it, each comment one space."""

from __future__ import annotations

import pytest

from kernelloop.config import Settings, VerifySettings
from kernelloop.verify.static_check import check_static_files

from .conftest import FIXTURES, shared_cache_dir

CASE = FIXTURES / "redteam" / "round156" / "policy"


@pytest.mark.parametrize("candidate, rule", [
    ("splice_line_cand.cu", "build-context"), ("splice_counter_cand.cu", "build-context"),
    ("splice_file_cand.cu", "build-context"), ("comment_include_cand.cu", "include"),
    ("comment_line_cand.cu", "line-directive"),
])
def test_the_red_teams_candidates_are_refused(candidate, rule):
    check = check_static_files(CASE / "base_kl.cu", CASE / candidate,
                               Settings(cache_dir=shared_cache_dir(), verify=VerifySettings(arch="sm_90")))
    assert not check.ok and rule in check.summary, check.summary


def test_the_splice_fixtures_keep_their_blanks():
    # the attack needs the blanks between the backslash and the newline (an editor may strip them)
    assert "\\ \n" in (CASE / "splice_line_cand.cu").read_text()
