"""Red team round 97 (tests/fixtures/redteam/round97/b_shift_promotion/): the typed value path
gave `k << 4` of an `unsigned char` the operand's type, where C++ promotes it to int, so a running
max truncated to 8 bits at each step was read as fitting and split over lanes. The class: every
operator's result type must be C++'s, promotions included. The table of every operator over every
pair of integer types is checked against nvcc's own `decltype` (one host+device compile)."""

from __future__ import annotations

import itertools
import re
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
    unsigned, bits = ctype.startswith("u"), int(re.search(r"\d+", ctype).group())
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


# every call the typed value path types from its arguments or by name (round 98: abs of an int8_t)
CALLS = {"abs": "abs(a)", "min": "min(a, b)", "max": "max(a, b)", "llabs": "llabs(a)", "umin": "umin(a, b)",
         "umax": "umax(a, b)", "llmin": "llmin(a, b)", "llmax": "llmax(a, b)", "ullmin": "ullmin(a, b)",
         "ullmax": "ullmax(a, b)", "__shfl_sync": "__shfl_sync(0xffffffffu, a, 0)",
         "__shfl_xor_sync": "__shfl_xor_sync(0xffffffffu, a, 1)", "__shfl_down_sync": "__shfl_down_sync(0xffffffffu, a, 1)",
         "__shfl_up_sync": "__shfl_up_sync(0xffffffffu, a, 1)", "__reduce_add_sync": "__reduce_add_sync(0xffffffffu, a)",
         "__reduce_min_sync": "__reduce_min_sync(0xffffffffu, a)", "__reduce_max_sync": "__reduce_max_sync(0xffffffffu, a)",
         "__reduce_and_sync": "__reduce_and_sync(0xffffffffu, a)", "__reduce_or_sync": "__reduce_or_sync(0xffffffffu, a)",
         "__reduce_xor_sync": "__reduce_xor_sync(0xffffffffu, a)"}


def _call_types() -> dict[tuple[str, str], str | None]:
    """(call, argument type) -> the type the value path proves for it, both arguments of that type."""
    exprs = [(name, t, re.sub(r"\bb\b", f"b_{t}", re.sub(r"\ba\b", f"a_{t}", call)))
             for name, call in CALLS.items() for t in TYPES]
    proven = _proven_types([e for _, _, e in exprs])
    return {(name, t): proven[i] for i, (name, t, _) in enumerate(exprs)}


def test_calls_are_typed_as_the_overload_cxx_picks():
    types = _call_types()
    assert types[("abs", "int8_t")] == "int32_t" and types[("max", "uint8_t")] == "int32_t"
    assert types[("__shfl_xor_sync", "uint16_t")] == "int32_t" and types[("__reduce_add_sync", "uint8_t")] == "int32_t"
    assert types[("umin", "int32_t")] == "uint32_t" and types[("__reduce_or_sync", "uint32_t")] == "uint32_t"
    assert types[("__reduce_add_sync", "int64_t")] is None  # no overload takes it: not proven


@pytest.mark.nvcc
def test_the_calls_agree_with_nvcc(tmp_path):
    # each call in a template of its argument type, so an overload set that does not take that type is
    # simply skipped (`requires`), and what it does take must give the type the value path proves
    lines = ["#include <cstdint>", "#include <type_traits>",
             "template <typename T, typename E> struct kl_same_kind { static constexpr bool value =",
             "  std::is_same_v<E, bool> ? std::is_same_v<T, bool> : (std::is_integral_v<T> && !std::is_same_v<T, bool>",
             "  && sizeof(T) == sizeof(E) && std::is_unsigned_v<T> == std::is_unsigned_v<E>); };"]
    checked = 0
    for (name, t), proven in sorted(_call_types().items()):
        if proven is None or name not in CALLS:
            continue
        expected = proven
        fn = f"kl_check_{name.strip('_')}_{t}"
        lines += [f"template <typename A> __device__ void {fn}() {{ A a{{}}; A b{{}}; (void)b;",
                  f"  if constexpr (requires {{ {CALLS[name]}; }})",
                  f"    static_assert(kl_same_kind<std::decay_t<decltype({CALLS[name]})>, {expected}>::value, \"{name}({t})\"); }}",
                  f"template __device__ void {fn}<{t}>();"]
        checked += 1
    assert checked > 100
    path = tmp_path / "calls.cu"
    path.write_text("\n".join(lines) + "\n")
    done = subprocess.run(["nvcc", "-std=c++20", "-arch=sm_80", "-c", str(path), "-o", str(tmp_path / "calls.o")],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]


def test_a_narrow_running_max_of_abs_gets_no_rewrite():
    assert _proposals(FIXTURES / "redteam" / "round98" / "a_abs_narrow" / "baseline.cu") == []


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
