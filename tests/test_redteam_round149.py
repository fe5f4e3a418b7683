"""Red team round 149 (tests/fixtures/redteam/round149/): a kernel's type alias (`using T = float;`)
was spelled out at its uses in the kernel's text and the alias statement left out, but a use a
macro of the program brings in (`#define WORDS (C % (int)sizeof(T) == 0 ? C : C - 1)` as the loop
bound) was not spelled out: in the rewrite (and the kernel's fallback copy) `sizeof(T)` named the
program's global `typedef unsigned char T`, and the loop summed C elements where the baseline
sums C - 1 (certain: the static gate passed; a host replay differs at C = 777). Fixed by class: an
alias whose name any macro of the program writes is not spelled out (the function is not read)."""

from __future__ import annotations

import pytest

from kernelloop.optimizers.base import NoMoreCandidates
from kernelloop.program.macros import macro_body_words

from .conftest import FIXTURES
from .test_redteam_round109 import _first_proposal

CASE = FIXTURES / "redteam" / "round149" / "alias_macro_scope"


@pytest.mark.parametrize("program", ["alias_tail_kl.cu", "alias_bound_kl.cu"])
def test_an_alias_a_macro_names_is_not_spelled_out(program):
    with pytest.raises(NoMoreCandidates, match=r"a macro of the program writes T"):
        _first_proposal((CASE / program).read_text())


def test_the_same_kernel_is_read_when_no_macro_names_its_alias():
    text = (CASE / "alias_tail_kl.cu").read_text().replace("(int)sizeof(T)", "(int)sizeof(float)")
    proposal = _first_proposal(text)
    assert "row tier" in proposal.approach, proposal.approach
    assert "using T" not in proposal.source.split("_kl_rewritten")[1].split("\n}\n")[0]


def test_the_names_a_macro_body_writes_leave_its_parameters_and_literals_out():
    words = macro_body_words('#define WORDS (C % (int)sizeof(T) == 0 ? C : C - 1)',
                             '#define F(T, x) ((T)(x) + y)\n#define S "U" \\\n + Q')
    assert {"C", "T", "sizeof", "int", "y", "Q"} <= words and "U" not in words and "x" not in words
