"""Red team round 145 (tests/fixtures/redteam/round145/): a function-like macro reached through an
object-like one (`#define COMPAT_DEFINE COMPAT_DECL`, then `COMPAT_DEFINE(max) {...}`) declared the
program's own `max` past round 144's reading of macro arguments; the third spelling in three
rounds of one class. Now the program's declarations are also read as the compiler reads them,
its macros expanded (`analysis.program_declarations`), and any name counts as declared where the
expansion cannot be read for sure."""

from __future__ import annotations

import pytest

from kernelloop.optimizers.base import NoMoreCandidates
from kernelloop.optimizers.offline.analysis import program_declarations
from kernelloop.optimizers.offline.cparse import UNKNOWN_NAMES

from .conftest import FIXTURES
from .test_redteam_round109 import _first_proposal

ROUND = FIXTURES / "redteam" / "round145"


def test_the_round_gets_no_row_tier_rewrite_and_says_why():
    with pytest.raises(NoMoreCandidates, match="row tier: one warp per row of row_max: its code calls max, which "
                                               "the program declares itself"):
        _first_proposal((ROUND / "a_object_macro_names_function_macro" / "baseline.cu").read_text())


@pytest.mark.parametrize("preamble", [
    "#define DECL(n) __device__ int n(short a, int b)\n#define DEFINE DECL\nDEFINE(max) { return a; }\n",
    "#define NAME max\n#define DECL(n) __device__ int n(short a, int b)\nDECL(NAME) { return a; }\n",
    "#define PASTE(a, b) a##b\n__device__ int PASTE(m, ax)(short a, int b) { return a; }\n",
])
def test_a_declaration_made_by_macros_is_seen(preamble):
    found = program_declarations(preamble, "")
    assert "max" in found or UNKNOWN_NAMES in found, found


def test_a_macro_that_cannot_be_read_for_sure_counts_every_name():
    preamble = "#define M max\n#undef M\n#define M min\n__device__ int M(short a, int b) { return a; }\n"
    found = program_declarations(preamble, "")
    assert "min" in found or UNKNOWN_NAMES in found, found
