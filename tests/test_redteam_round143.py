"""Red team round 143 (tests/fixtures/redteam/round143/): the frozen preamble named a declaration
through a macro (`#define COMPAT_CLAMP max`, then `int COMPAT_CLAMP(short, int)`), which the
declared names, read before macros, saw as COMPAT_CLAMP; the row tier's `::max` chose it. Now
every name a `#define` writes in its body counts as declared by the program."""

from __future__ import annotations

from kernelloop.optimizers.base import NoMoreCandidates
from kernelloop.optimizers.offline.analysis import macro_words, names_the_rewrite_adds

from .conftest import FIXTURES
from .test_redteam_round109 import _first_proposal

ROUND = FIXTURES / "redteam" / "round143"


def test_the_round_gets_no_row_tier_rewrite_and_says_why():
    try:
        proposal = _first_proposal((ROUND / "a_qualified_call_macro_named_declaration" / "baseline.cu").read_text())
    except NoMoreCandidates as caught:
        assert "row tier: one warp per row of row_max: its code calls max, which the program declares itself" \
            in str(caught), str(caught)
        return
    assert "row tier" not in proposal.approach, proposal.approach


def test_a_name_a_macro_writes_counts_as_declared():
    assert macro_words("#define COMPAT_CLAMP max\n#define K ::ns::fminf\n#define SCALE sqrtf(2.0f / 3.14159f)\n") == {"max", "ns", "fminf"}
    preamble = "#define COMPAT_CLAMP max\n__device__ int COMPAT_CLAMP(short a, int b) { return a < b ? a : b; }"
    rewrite = "__global__ void q(short* m) { m[0] = ::max(m[0], 1); }"
    assert names_the_rewrite_adds("", preamble, "", rewrite) == ["max"]
