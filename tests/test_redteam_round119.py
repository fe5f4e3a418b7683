"""Red team round 119 (tests/fixtures/redteam/round119/): round 118's class by other spellings. A
trusted constant defined through an untrusted one (`#define LAG SMOOTH_LAG`, SMOOTH_LAG under
`#if`/`#else`), a `#define` continued with a backslash read from its first line, directives hidden
by line splices (`#i\\` + `f 0`), a fake include guard, and unsigned literals evaluated as signed.
Now lines are joined first, a constant is trusted only where everything it is defined through is,
an include guard is one only where its name is defined nowhere else, and only int arithmetic is
evaluated (a suffixed or too-large literal is unknown)."""

from __future__ import annotations

import pytest

from kernelloop.optimizers.base import NoMoreCandidates
from kernelloop.optimizers.offline.cparse import parse_expression
from kernelloop.optimizers.offline.sizes import eval_int, known_constants

from .conftest import FIXTURES
from .test_redteam_round109 import _first_proposal

ROUND = FIXTURES / "redteam" / "round119"


@pytest.mark.parametrize("folder", ["a_indirect_macro", "b_backslash_continuation", "c_unsigned_arith",
                                    "d_line_splice", "e_constexpr_indirect"])
def test_a_constant_of_uncertain_value_gets_no_rewrite(folder):
    with pytest.raises(NoMoreCandidates):
        _first_proposal((ROUND / folder / "baseline.cu").read_text())


@pytest.mark.parametrize("text, known", [
    ("#if FAST\n#define SMOOTH 0\n#else\n#define SMOOTH 1\n#endif\n#define LAG SMOOTH\n", {}),
    ("#if FAST\n#define SMOOTH 0\n#else\n#define SMOOTH 1\n#endif\nconstexpr int LAG = SMOOTH;\n", {}),
    ("#define LAG 0 \\\n  + 1\n", {"LAG": 1}),  # the continued line is the definition's
    ("#i\\\nf 0\n#define LAG 0\n#endif\n#define LA\\\nG2 1\n", {"LAG2": 1}),
    ("#define G\n#ifndef G\n#define G\n#define LAG 0\n#endif\n", {}),  # not an include guard
    ("#define LAG (0u - 1u)\n", {}),
    ("#define LAG 0x80000000\n", {}),
    ("const unsigned LAG = 1;\n", {}),  # unsigned: its arithmetic is not int's
    ("#define BASE 8\n#define LAG (BASE / 4)\n", {"BASE": 8, "LAG": 2}),
])
def test_a_constant_is_known_only_through_known_names_and_int_arithmetic(text, known):
    assert known_constants(text) == known


@pytest.mark.parametrize("text", ["-1 / 0xFFFFFFFF", "(0u - 1u) >> 31", "1ull << 40", "-1 << 2"])
def test_arithmetic_outside_int_is_unknown(text):
    assert eval_int(parse_expression(text), {}) is None
