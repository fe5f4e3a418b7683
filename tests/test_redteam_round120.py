"""Red team round 120 (tests/fixtures/redteam/round120/): a program constant's value misread three
more ways. A macro whose body is not one operand (`#define LAG BASE - 1`) read as its value where
the preprocessor pastes its tokens (`y[c - LAG]` is `y[c - BASE - 1]`); a cast to an unsigned type
whose later arithmetic was done signed (`((unsigned)0 - 1) >> 31` is 1 in C); and a shadowing
template parameter lost because blanking a `const` definition from `const` on left its specifiers
(`[[maybe_unused]] static`) to break the parse. Now constant arithmetic carries C's types, a loose
macro body is read only where every use stands alone, and a parse with errors trusts no constant."""

from __future__ import annotations

import pytest

from kernelloop.optimizers.base import NoMoreCandidates
from kernelloop.optimizers.offline.cparse import parse_expression
from kernelloop.optimizers.offline.sizes import eval_int, eval_typed, integral_constants, known_constants

from .conftest import FIXTURES
from .test_redteam_round109 import _first_proposal

ROUND = FIXTURES / "redteam" / "round120"
KERNEL = "__global__ void k(float* y, int c) {{ {body} }}\n"


@pytest.mark.parametrize("folder", ["a_macro_unparenthesized", "b_unsigned_cast", "c_template_param_shadow"])
def test_a_constant_of_uncertain_value_gets_no_rewrite(folder):
    with pytest.raises(NoMoreCandidates):
        _first_proposal((ROUND / folder / "baseline.cu").read_text())


@pytest.mark.parametrize("body, trusted", [
    ("y[c - LAG] = 0;", False),               # c - BASE - 1
    ("y[LAG * 2] = 0;", False),               # BASE - 1 * 2
    ("y[LAG] = 0; int n = LAG;", True),      # alone between delimiters
    ("if (c < LAG) y[c] = 0;", True),         # `<` binds more loosely than `-`
    ("y[(LAG)] = y[c + (LAG)];", True),
    ("y[-LAG] = 0;", False),                  # -BASE - 1
    ("y[MIN(LAG, c)] = 0;", False),           # a function-like macro pastes it again
    ("y[min(LAG, c)] = 0;", True),            # a function's argument is one value
])
def test_a_loose_macro_body_is_read_only_where_every_use_stands_alone(body, trusted):
    preamble = "#define BASE 1\n#define LAG BASE - 1\n#define MIN(a, b) a < b ? a : b\n"
    assert ("LAG" in known_constants(preamble, KERNEL.format(body=body))) is trusted


@pytest.mark.parametrize("definition", ["#define N (1 << 20)", "#define N 1048576", "const int N = 1 << 20;"])
def test_a_constant_that_is_one_operand_is_read_anywhere(definition):
    kernel = KERNEL.format(body="if (c < N * 4) y[N - c] = y[c * N];")
    assert known_constants(definition + "\n", kernel) == {"N": 1 << 20}


@pytest.mark.parametrize("text, value", [
    ("(((((unsigned)0 - 1) >> 31) + 1) / 2)", None),  # unsigned: 1, but not an int
    ("(int)(((((unsigned)0 - 1) >> 31) + 1) / 2)", 1),
    ("(int)(-1 / 0xFFFFFFFF)", 1),                    # -1 converted to unsigned first
    ("(int)((0u - 1u) >> 31)", 1),
    ("(int)(1LL << 33 >> 32)", 2),
    ("(unsigned char)300 + 1", 45),                    # promoted to int
    ("~0", -1),
    ("0xFF & 0x0F", 15),
    ("0x7fffffff + 1", None),                          # signed overflow
    ("-(-2147483647 - 1)", None),
    ("1 << 31", None),
])
def test_constant_arithmetic_carries_cs_types(text, value):
    assert eval_int(parse_expression(text), {}) == value


def test_an_unsigned_result_keeps_its_type():
    v = eval_typed(parse_expression("((unsigned)0 - 1) >> 31"), {})
    assert (v.value, v.bits, v.signed) == (1, 32, False)


def test_blanking_a_definition_takes_its_specifiers_and_a_parse_error_trusts_nothing():
    preamble = "[[maybe_unused]] static const int ROWS = 4;\nconstexpr int LAG = 0;\n"
    templated = "template <int LAG> __global__ void k(float* y, int c) { y[c - LAG] = 0; }\n"
    assert "LAG" not in known_constants(preamble, templated)
    assert known_constants(preamble, KERNEL.format(body="y[c - LAG] = ROWS;")) == {"ROWS": 4, "LAG": 0}
    assert integral_constants("const int N = 4;\n", "__global__ void k( { N }\n") == frozenset()
