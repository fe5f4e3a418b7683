"""Red team round 155 (tests/fixtures/redteam/round155/): the policy scan found literals with a
plain pattern that knows no raw strings, so `#define Q (sizeof(R"a(")a") * 0 + __LINE__ +
sizeof("x") * 0)` read as two strings around `__LINE__`; in a `#define` body the tree-sitter view
hands the text to the same reading, so a candidate reading `__LINE__` or `__TIME__` passed every
static gate (certain). Fixed by class: every literal the policy blanks or checks is found by the
one forward reading (scanner.literal_spans), raw strings ending only at their delimiter (which may
hold a quote: `R""(x)""`); names take `$` as gcc does, in the expander too."""

from __future__ import annotations

import pytest

from kernelloop.program.macros import expand, program_macros
from kernelloop.program.scanner import literal_spans
from kernelloop.verify.policy import scan_source

from .conftest import FIXTURES, shared_cache_dir

CASE = FIXTURES / "redteam" / "round155" / "policy"


@pytest.mark.parametrize("raw", ['R"a(")a"', 'u8R"a(")a"', 'LR"a(")a"', 'R""(")"")""'])
def test_a_build_value_after_a_raw_string_holding_a_quote_is_seen(raw):
    source = (f'#define Q (sizeof({raw}) * 0 + __LINE__ + sizeof("x") * 0)\n'
              "__global__ void k(int* y) { y[0] = Q; }\n")
    assert "build-context" in {v.rule for v in scan_source(source)}


@pytest.mark.parametrize("candidate", ["raw_line_cand.cu", "raw_time_cand.cu"])
def test_the_red_teams_candidates_are_refused(candidate):
    from kernelloop.config import Settings, VerifySettings
    from kernelloop.verify.static_check import check_static_files
    check = check_static_files(CASE / "base_kl.cu", CASE / candidate,
                               Settings(cache_dir=shared_cache_dir(), verify=VerifySettings(arch="sm_90")))
    assert not check.ok and "build-context" in check.summary, check.summary


def test_literals_are_read_forward_with_their_prefixes():
    text = 'a = R"a(")a" + 1\'000 + u8\'c\' + "s" + R""(q)"";'
    assert [text[s:e] for s, e in literal_spans(text)] == ['R"a(")a"', "u8'c'", '"s"', 'R""(q)""']


def test_a_dollar_is_part_of_a_name():
    assert expand("a$b $b b", program_macros("#define b 7\n")).split() == ["a$b", "$b", "7"]
