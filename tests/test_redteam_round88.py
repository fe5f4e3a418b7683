"""Red team round 88 (tests/fixtures/redteam/round88/): the name class again (a baseline call at
file scope masking the rewrite's added `fmaxf` in a namespace with an int overload; a declaration
`float (max)(float, float)`; a name pasted with `##`), and casts to an integer the matmul
template dropped. CPU only."""

from __future__ import annotations

import pytest

from kernelloop.optimizers.offline.cparse import UNKNOWN_NAMES, declared_names

from .conftest import FIXTURES
from .test_redteam_round85 import _proposals

ROUND = FIXTURES / "redteam" / "round88"


@pytest.mark.parametrize("path", ["baseline_call_masks_added/baseline.cu", "paren_declarator/baseline_write.cu"])
def test_the_code_a_rewrite_adds_calls_no_name_the_program_declares(path):
    # round 88 wrote the lane combine as `::fmaxf` and `::__shfl_xor_sync`; rounds 138-142 found
    # `::name` reaching the program's own declarations, so a program declaring `fmaxf` anywhere
    # gets no rewrite whose combine calls it
    sources = _proposals(ROUND / path)
    combines = [line for s in sources for line in s.splitlines() if "kl_offset" in line and "fmaxf" in line]
    assert combines == [], combines


@pytest.mark.parametrize("path", ["paren_declarator/baseline_read.cu", "paste_declared/baseline.cu",
                                  "matmul_store_cast/baseline_int.cu", "matmul_store_cast/baseline_intacc.cu",
                                  "matmul_store_cast/baseline_factor.cu"])
def test_no_rewrite_for_a_name_hidden_from_the_text_or_an_integer_conversion_of_a_value(path):
    assert _proposals(ROUND / path) == []


def test_declared_names_sees_parenthesized_declarators_and_flags_pasted_names():
    assert {"max", "fmaxf"} <= declared_names("namespace l1 { __device__ float (max)(float a, float b); "
                                              "int (fmaxf)(int, int); }")
    assert UNKNOWN_NAMES in declared_names("#define MINMAX(T, s) T fmax##s(T a, T b) { return a > b ? a : b; }")
