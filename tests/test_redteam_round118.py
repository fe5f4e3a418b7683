"""Red team round 118 (tests/fixtures/redteam/round118/): a program constant was read with a value
the kernel never sees. `sizes.constants` keeps the first definition it meets, whatever `#if`,
`#undef`, namespace or function it sits in; read as a number, `y[c - LAG]` with LAG read as 0 was
the element `y[c]`, and the row tier split a recurrence along a row across a warp. Only a constant
with one value every line sees is read as a number now (`sizes.known_constants`); the arithmetic
that evaluates it follows C's conversions and leaves int's range unknown."""

from __future__ import annotations

import pytest

from kernelloop.optimizers.offline.cparse import parse_expression
from kernelloop.optimizers.offline.sizes import eval_int, known_constants

from .conftest import FIXTURES
from .test_redteam_round109 import _first_proposal

ROUND = FIXTURES / "redteam" / "round118"


@pytest.mark.parametrize("folder", ["b_macro_if_else", "b_macro_if_else/undef", "c_namespace_shadow",
                                    "d_other_function_local"])
def test_a_recurrence_through_a_constant_of_two_values_gets_no_rewrite(folder):
    from kernelloop.optimizers.base import NoMoreCandidates
    with pytest.raises(NoMoreCandidates):
        _first_proposal((ROUND / folder / "baseline.cu").read_text())


@pytest.mark.parametrize("text, known", [
    ("#define CHUNK 16\n", {"CHUNK": 16}),
    ("constexpr int kBlock = 256;\nstatic const int TILE = kBlock / 8;\n", {"kBlock": 256, "TILE": 32}),
    ("namespace ops { constexpr int kBlock = 128; }\n", {"kBlock": 128}),  # one definition, in a namespace
    ("#ifndef OPS_H\n#define OPS_H\n#define CHUNK 16\n#endif\n", {"CHUNK": 16}),  # an include guard
    ("#pragma once\n#define CHUNK 16\n", {"CHUNK": 16}),
    # two values, or one the lines after may not see
    ("#if defined(FAST)\n#define LAG 0\n#else\n#define LAG 1\n#endif\n", {}),
    ("#ifdef FAST\n#define LAG 2\n#endif\n", {}),
    ("#define LAG 0\n#undef LAG\n#define LAG 1\n", {}),
    ("#define LAG 1\n#undef LAG\n", {}),
    ("namespace a { constexpr int LAG = 0; }\nconstexpr int LAG = 1;\n", {}),
    ("enum { LAG = 1 };\nvoid f() { const int LAG = 0; }\n", {}),
    ("#define LAG 1\nstruct S { int LAG; };\n", {}),
])
def test_only_a_constant_every_line_sees_alike_is_known(text, known):
    assert known_constants(text) == known


@pytest.mark.parametrize("text, value", [
    ("(unsigned char)300", 44),
    ("(short)40000", -25536),
    ("(int)7", 7),
    ("65536 * 65536", None),  # 0 in int, 2^32 in long long: unknown
    ("1 << 26", 1 << 26),
    ("(float)3", None),
])
def test_constant_arithmetic_follows_cs_conversions(text, value):
    assert eval_int(parse_expression(text), {}) == value
