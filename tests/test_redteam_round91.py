"""Red team round 91 (tests/fixtures/redteam/round91/): types the typed value path proved wrongly
(a template parameter read as the file's alias of its name, a constant declared a second time in a
declaration list, a hexadecimal float literal) and a fit that does not hold (a bool accumulator:
conversion to bool does not wrap around). CPU only."""

from __future__ import annotations

import pytest

from kernelloop.optimizers.offline.sizes import integral_constants
from kernelloop.optimizers.offline.syntax import Num

from .conftest import FIXTURES
from .test_redteam_round85 import _proposals
from .test_redteam_round90 import _read

ROUND = FIXTURES / "redteam" / "round91"
SNIPPETS = ROUND / "snippets"


@pytest.mark.parametrize("path", ["tparam_shadows_alias/baseline.cu", "multidecl_const/baseline.cu",
                                  "hexfloat_literal/baseline.cu", "bool_accumulator/baseline.cu"])
def test_a_type_proven_wrongly_or_a_fit_that_does_not_hold_gets_no_rewrite(path):
    assert _proposals(ROUND / path) == []


@pytest.mark.parametrize("snippet", ["a_tparam_alias.cu", "b_multidecl_const.cu", "c_hexfloat.cu", "f_bool.cu",
                                     "i_macro_over_alias.cu", "e_expnolit.cu", "h_dotlit.cu"])
def test_each_snippet_is_kept_from_the_rewrites(snippet):
    kept, problems = _read((SNIPPETS / snippet).read_text())
    assert "k" not in kept and any(p.startswith("k: ") for p in problems), (kept, problems)


def test_an_int_sum_of_comparisons_is_still_read():
    kept, problems = _read((SNIPPETS / "j_shadow_param.cu").read_text())
    assert "k" in kept, problems


def test_literals_are_typed_by_the_grammar():
    assert Num("0x1p-1").is_float and Num("0x1p-1").value == 0.5 and Num("0X1.8P1f").is_float
    assert not Num("0x1f").is_float and Num("0x1f").value == 31
    assert not Num("0b101").is_float and Num("0b101").value == 5
    assert Num(".5").is_float and Num("5e-1").is_float and not Num("07").is_float and Num("07").value == 7


def test_a_constant_declared_or_assigned_again_anywhere_is_not_proven_integral():
    assert "K" not in integral_constants("struct Tile { static const int K = 4; };\nconst float kOne = 1.0f, K = 0.5f;")
    assert "K" not in integral_constants("const int K = 4;\nfloat g, K;")
    assert "K" not in integral_constants("#define K 4\n__device__ void f() { int K2 = 0; } float K;")
    assert "K" in integral_constants("const int K = 4;\n__global__ void f(int* y) { y[K] = K + 1; }")


@pytest.mark.parametrize("update", ["s -= x[c] > 0", "s += x[c] > 0", "s *= x[c] > 0", "s++"])
def test_a_bool_updated_by_a_compound_operator_is_not_read(update):
    text = f"""
__global__ void k(const float* x, bool* y, int n) {{
    bool s = false;
    for (int c = threadIdx.x; c < n; c += blockDim.x) {update};
    y[blockIdx.x] = s;
}}
void launch(const float* x, bool* y, int n) {{ k<<<n, 256>>>(x, y, n); }}
"""
    kept, problems = _read(text)
    assert "k" not in kept, problems
    kept, problems = _read(text.replace(update, "s = s || x[c] > 0"))
    assert "k" in kept, problems
