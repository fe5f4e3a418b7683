"""Red team round 146 (tests/fixtures/redteam/round146/): a raw string literal hid a macro use from
the expansion the name checks read (the tokenizer does not know raw strings), so the program's
`max(short, int)` stayed unseen, the sixth route in rounds 138-146 to one class. Closed by class in
the emission, not the reading: the combine's library calls take their operands as the library
overload's own types (tests/test_exact_combine_calls.py), so the program's `max` is not chosen
even where the name checks miss it."""

from __future__ import annotations

from .conftest import FIXTURES
from .test_redteam_round109 import _first_proposal

ROUND = FIXTURES / "redteam" / "round146"


def test_the_rewrite_calls_the_library_max_exactly():
    from kernelloop.optimizers.base import NoMoreCandidates

    try:
        proposal = _first_proposal((ROUND / "a_raw_string_hides_macro_use" / "baseline.cu").read_text())
    except NoMoreCandidates:
        return  # refused by the name checks: also safe
    if "row tier" in proposal.approach:
        exact = "(typename ::kl_lib<decltype(best)>::type)(best)"
        assert f"::max({exact}, ::__shfl_xor_sync(0xffffffffu, {exact}, kl_offset))" in proposal.source
