"""Red team round 153 (tests/fixtures/redteam/round153/), a differential fuzz of the expander
against g++ -E (6000 cases, 44 differing, all in three classes): a macro named like a literal's
encoding prefix (`#define L`, then `sizeof(L"ab")`: one wide string to the compiler) or its
user-defined suffix (`"ab"_n`) was expanded, and the row tier copied `sizeof("ab")` into the
rewrite's loop bound (certain: static gate passed; host check C - 12 vs C - 3); and a `'` after a
number read as a digit separator before `(` (`1'('`), which hid the next `#define`. Fixed by class:
a literal is one token with its prefix and suffix, and a `'` joins a number only before a digit,
a letter or `_`, as the compiler reads them."""

from __future__ import annotations

import re

from kernelloop.program.macros import expand, program_macros
from kernelloop.program.scanner import in_number

from .conftest import FIXTURES
from .test_redteam_round109 import _first_proposal

CASE = FIXTURES / "redteam" / "round153" / "macro_reading"


def test_a_literals_prefix_is_no_macro_in_the_rewrite():
    proposal = _first_proposal((CASE / "lpre_kl.cu").read_text())
    bounds = re.findall(r"c < [^;]*;", proposal.source)
    assert 'c < (C - ((int)sizeof(L"ab")));' in bounds, bounds


def test_prefixes_and_suffixes_belong_to_their_literal():
    macros = program_macros('#define L\n#define u8 x\n#define _n + 1\n#define W(_n) "ab"_n\n')
    assert expand('sizeof(L"ab") + u8\'a\' + "ab"_n', macros).split() == ['sizeof(L"ab")', "+", "u8'a'", "+",
                                                                         '"ab"_n']
    assert "".join(expand("W(+1)", macros).split()) == '"ab"_n'


def test_a_quote_joins_a_number_only_before_a_digit_a_letter_or_an_underscore():
    assert in_number("1'000", 1) and in_number("0xFF'ff", 4) and not in_number("1'('", 1)
    assert set(program_macros("#define NOTE 1'('\n#define K 4\n").defined) == {"NOTE", "K"}
