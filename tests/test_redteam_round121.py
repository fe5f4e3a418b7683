"""Red team round 121 (tests/fixtures/redteam/round121/): (a, b) the grammar folds a sign into a
number (`-010`), which was then read as decimal -10 where C reads -(010) = -8, in a constant and in
a kernel's own index; (c) the stack window of an `extern "C"` launcher was taken from its declared
types by their names, so `typedef float int24_t;` counted as an integer slot the harness never
passes. Now a sign is an operator on the literal, and a declared signature counts keywords and
pointers only (a name the program may define is no known class; a keyword it redefines is none)."""

from __future__ import annotations

import pytest

from kernelloop.optimizers.base import NoMoreCandidates
from kernelloop.optimizers.offline.cparse import parse_expression
from kernelloop.optimizers.offline.sizes import eval_int
from kernelloop.optimizers.offline.syntax import Num, Unary

from .conftest import FIXTURES
from .test_redteam_round109 import _first_proposal

ROUND = FIXTURES / "redteam" / "round121"


@pytest.mark.parametrize("folder", ["a_negated_octal", "b_negated_octal_in_kernel"])
def test_a_signed_octal_literal_gets_no_wrong_rewrite(folder):
    with pytest.raises(NoMoreCandidates):
        _first_proposal((ROUND / folder / "baseline.cu").read_text())


@pytest.mark.parametrize("text, value", [("-010", -8), ("((-010 + 10) / 2)", 1), ("-0x10", -16), ("-0b11", -3),
                                         ("+07", 7), ("-1", -1)])
def test_a_sign_is_an_operator_on_the_literal(text, value):
    e = parse_expression(text)
    assert not any(isinstance(n, Num) and n.text.startswith(("-", "+")) for n in _nodes(e))
    assert eval_int(e, {}) == value


def _nodes(e):
    yield e
    for child in vars(e).values():
        if isinstance(child, (Unary, Num)) or hasattr(child, "__dataclass_fields__"):
            yield from _nodes(child)


@pytest.mark.nvcc
@pytest.mark.parametrize("candidate", ["proposal", "proposal_write"])
def test_a_typedef_named_like_an_integer_gives_no_stack_window(candidate):
    from kernelloop.config import Settings
    from kernelloop.program.split import candidate_editable_part, split_program
    from kernelloop.tools.nvcc import find_toolchain
    from kernelloop.verify.gate import static_gates

    from .conftest import shared_cache_dir

    folder = ROUND / "c_extern_c_typedef_window"
    split = split_program((folder / "baseline.cu").read_text(), "baseline.cu")
    editable, _ = candidate_editable_part((folder / candidate / "candidate.cu").read_text(), split)
    result = static_gates(split, editable, arch="sm_90", settings=Settings(cache_dir=shared_cache_dir()),
                          toolchain=find_toolchain())
    assert any(v.rule == "foreign-load" and "mix_gpu" in v.detail for v in result.violations), \
        [v.describe() for v in result.violations]


def test_a_redefined_keyword_gives_no_declared_signature():
    from kernelloop.program.split import split_program
    from kernelloop.verify.gate import c_linkage_signatures

    program = ('#define real int\n// kernelloop: editable begin\n__global__ void k(float* y) { y[0] = 1; }\n'
               'extern "C" void go(float* y, real a, real b, real c, real d, real e, real f) { k<<<1, 1>>>(y); }\n'
               '// kernelloop: editable end\nint main() { printf("KERNEL_MS: 1\\n"); return 0; }\n')
    split = split_program(program, "p.cu")
    assert c_linkage_signatures(split, ["go"]) == {}
    plain = program.replace("#define real int\n", "").replace("real ", "int ")
    assert c_linkage_signatures(split_program(plain, "p.cu"), ["go"]) == {"go": "go(float*, int, int, int, int, int, int)"}
