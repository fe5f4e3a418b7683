"""Red team round 152 (tests/fixtures/redteam/round152/), on the new hide-set expander: (1) `#` of
an argument handed on after its macros were expanded (`XS(E+1)`, the usual XSTR idiom) spelled the
spaces the expander puts around each replacement ("1 +1" for the compiler's "1+1": a `sizeof`
one larger in the rewrite's loop bound), also behind a size check that agrees at the declared
sizes; (3) a raw string split at its inner quote, so a macro name inside it was expanded. All
certain (static gate passed; host check of both bounds). Fixed by class: the spaces the expander
adds are marked, and `#` of an argument holding one is not read; raw strings (and pp-numbers such
as `1e+E`) are one token, as the compiler reads them; the differential test against g++ -E now
compares string literals byte for byte."""

from __future__ import annotations

import re

import pytest

from kernelloop.optimizers.base import NoMoreCandidates

from .conftest import FIXTURES
from .test_redteam_round109 import _first_proposal

CASE = FIXTURES / "redteam" / "round152" / "macro_reading"


@pytest.mark.parametrize("program", ["xstr_kl.cu", "xstrmask_kl.cu"])
def test_a_handed_on_stringized_argument_gets_no_rewrite(program):
    with pytest.raises(NoMoreCandidates):
        _first_proposal((CASE / program).read_text())


def test_a_macro_name_inside_a_raw_string_stays_text():
    proposal = _first_proposal((CASE / "rawmac_kl.cu").read_text())
    bounds = re.findall(r"c < [^;]*;", proposal.source)
    assert 'c < (C - ((int)sizeof(R"x(" E ")x")));' in bounds, bounds
