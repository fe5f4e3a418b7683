"""Red team round 97 (tests/fixtures/redteam/round97/b_shift_promotion/): the typed value path
gave `k << 4` of an `unsigned char` the operand's type, where C++ promotes it to int, so a running
max truncated to 8 bits at each step was read as fitting and split over lanes. The class: every
operator's result type must be C++'s, promotions included. The table of every operator over every
pair of integer types is checked against nvcc's own `decltype` (one host+device compile)."""

from __future__ import annotations

import itertools
import subprocess

import pytest

from kernelloop.optimizers.offline.facts import collect_facts
from kernelloop.optimizers.offline.launcher import read_editable
from kernelloop.optimizers.offline.valuetype import ValueTypes

from .conftest import FIXTURES
from .test_redteam_round85 import _proposals

TYPES = ["bool", "int8_t", "uint8_t", "int16_t", "uint16_t", "int32_t", "uint32_t", "int64_t", "uint64_t"]
BINARY = ["+", "-", "*", "/", "%", "<<", ">>", "&", "|", "^"]
UNARY = ["-", "+", "~", "!"]


def _expressions() -> list[str]:
    exprs = [f"a_{ta} {op} b_{tb}" for ta, tb in itertools.product(TYPES, TYPES) for op in BINARY]
    exprs += [f"{op}a_{t}" for t in TYPES for op in UNARY]
    exprs += [f"(c ? a_{ta} : b_{tb})" for ta, tb in itertools.product(TYPES, TYPES)]
    exprs += [f"a_{t} {op} 1" for t in TYPES for op in ("+", "<<", "&")]
    exprs += [f"++a_{t}" for t in TYPES if t != "bool"]
    return exprs


def _function(exprs: list[str]) -> str:
    params = ", ".join([f"{t} a_{t}, {t} b_{t}" for t in TYPES] + ["bool c", "int* out"])
    lines = [f"    auto v{i} = {e};" for i, e in enumerate(exprs)]
    return f"__device__ void typed({params}) {{\n" + "\n".join(lines) + "\n    out[0] = 0;\n}\n"


def _proven_types(exprs: list[str]) -> dict[int, str | None]:
    text = _function(exprs)
    part = read_editable(text, "", [])
    fn = part.functions["typed"]
    facts = collect_facts(fn.sig, fn.body, {})
    types = ValueTypes(facts)
    return {int(b.name[1:]): types.of(b.init) for b in facts.bindings if b.name.startswith("v") and b.name[1:].isdigit()}


def _assertion(expr: str, ctype: str) -> str:
    t = f"std::decay<decltype({expr})>::type"
    if ctype == "bool":
        return f"static_assert(std::is_same<{t}, bool>::value, \"{expr}\");"
    unsigned, bits = ctype.startswith("u"), int(ctype.strip("uint_t"))
    return (f"static_assert(std::is_integral<{t}>::value && !std::is_same<{t}, bool>::value && "
            f"sizeof({t}) * 8 == {bits} && std::is_unsigned<{t}>::value == {str(unsigned).lower()}, \"{expr}\");")


def _checked_source() -> str:
    """The table's static_asserts, after checking it is whole and spells out the promotions."""
    exprs = _expressions()
    proven = _proven_types(exprs)
    assert len(proven) == len(exprs)
    # nothing left unproven among plain integer operands: an unknown here would hide the test
    assert [exprs[i] for i, t in proven.items() if t is None] == []
    checks = [_assertion(exprs[i], t) for i, t in sorted(proven.items())]
    # the promotion is what the finding was about: a few spelled out, so the table is not vacuous
    by_expr = {exprs[i]: t for i, t in proven.items()}
    assert by_expr["a_uint8_t << b_int32_t"] == "int32_t" and by_expr["-a_uint16_t"] == "int32_t"
    assert by_expr["a_uint8_t & b_uint8_t"] == "int32_t" and by_expr["(c ? a_uint8_t : b_uint8_t)"] == "uint8_t"
    assert by_expr["a_uint32_t % b_int64_t"] == "int64_t" and by_expr["~a_bool"] == "int32_t"
    params = ", ".join([f"{t} a_{t}, {t} b_{t}" for t in TYPES] + ["bool c"])
    source = ("#include <cstdint>\n#include <type_traits>\n"
              f"__device__ void check({params}) {{\n" + "\n".join(checks) + "\n}\n")
    return source


def test_every_integer_operator_is_proven_and_promotes():
    _checked_source()


@pytest.mark.nvcc
def test_the_table_agrees_with_nvcc(tmp_path):
    source = _checked_source()
    path = tmp_path / "types.cu"
    path.write_text(source)
    done = subprocess.run(["nvcc", "-std=c++17", "-arch=sm_80", "-c", str(path), "-o", str(tmp_path / "types.o")],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]


def test_a_narrow_running_max_of_a_shift_gets_no_rewrite():
    assert _proposals(FIXTURES / "redteam" / "round97" / "b_shift_promotion" / "baseline.cu") == []
