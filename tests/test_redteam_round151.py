"""Red team round 151 (tests/fixtures/redteam/round151/): three ways the hand-written macro reader
disagreed with the compiler, each copied by the row tier into the rewrite's loop bound (certain:
the static gate passed, a host program built by nvcc showed the bounds differ): `#__VA_ARGS__`
stringized from arguments joined with ", " ("a, b" for the compiler's "a,b"); no hide sets, so
`skip(skip)(1)` (a call of the function skip to the compiler) was expanded again to `1`; and a
`#define` inside a raw string read as the program's. Fixed by class: the expansion follows the
standard's rescanning (each token carries the names it may not expand again; arguments expanded
before they are put in; `#` spells an argument as written), checked against g++ -E in
tests/test_program_macros.py; and the program is read with a raw string's lines joined."""

from __future__ import annotations

import re

import pytest

from kernelloop.optimizers.base import NoMoreCandidates

from .conftest import FIXTURES
from .test_redteam_round109 import _first_proposal

CASE = FIXTURES / "redteam" / "round151" / "macro_reading"


@pytest.mark.parametrize("program, bound", [
    ("vastr_kl.cu", 'c < (C - ((int)sizeof("a,b")));'),
    ("rawdef_kl.cu", "c < (C - TRIM);"),
])
def test_the_rewrites_bound_is_the_compilers(program, bound):
    proposal = _first_proposal((CASE / program).read_text())
    assert "row tier" in proposal.approach
    bounds = re.findall(r"c < [^;]*;", proposal.source)
    assert bound in bounds, bounds


def test_a_name_the_compiler_leaves_alone_is_not_expanded_into_the_rewrite():
    try:
        proposal = _first_proposal((CASE / "fnmac_kl.cu").read_text())
    except NoMoreCandidates:
        return
    assert "c < (C - 1)" not in proposal.source, re.findall(r"c < [^;]*;", proposal.source)
