"""Red team round 92 (tests/fixtures/redteam/round92/): aliases and constants declared again where
the text patterns did not look (behind a comment, a `# /* */ define`, a parenthesized declarator),
a bool updated by `-=` (parity, not a sum), and init comparing code with positions made equal that
the copy really moves (`__builtin_LINE()`, `__LINE__` as a value). CPU and nvcc."""

from __future__ import annotations

import pytest

from kernelloop.errors import InputError
from kernelloop.init_state import refuse_state_set_by_dropped_code
from kernelloop.optimizers.offline.cparse import declared_names
from kernelloop.optimizers.offline.sizes import integral_constants
from kernelloop.program.init import InitSpec, generate

from .conftest import FIXTURES, shared_cache_dir
from .test_redteam_round85 import _proposals

ROUND = FIXTURES / "redteam" / "round92"
SPEC = InitSpec(values={"n": ["1048576", "1000003"]}, counts={"in": "n", "out": "n"}, roles={"out": "output"})


@pytest.mark.parametrize("path", ["a_comment_typedef/baseline.cu", "b_bool_minus/baseline.cu",
                                  "c_paren_const/baseline.cu", "d_comment_define/baseline.cu"])
def test_a_name_declared_again_or_a_bool_parity_gets_no_rewrite(path):
    assert _proposals(ROUND / path) == []


def test_every_declarator_of_a_list_is_a_declaration():
    assert {"g", "K", "b", "c", "d"} <= declared_names("float g, K;\nint a = 1, b, *c, d[3];")
    assert "K" not in integral_constants("struct Tile { static const int K = 4; };\nconst float (K) = 0.5f;")


@pytest.mark.nvcc
@pytest.mark.parametrize("value, expected", [
    ("(float)__builtin_LINE()", "compiles to other code"),  # a position the comparison cannot equalize
    ("(float)__LINE__", "computes with its own position"),  # one it equalizes: probed at another position
    ("(float)(__COUNTER__ + 2)", "computes with its own position"),
])
def test_init_refuses_a_kernel_that_computes_with_its_position(value, expected):
    source = (ROUND / "init_builtin_line" / "user.cu").read_text().replace("(float)__builtin_LINE()", value)
    result = generate(source, SPEC, "user.cu")
    with pytest.raises(InputError, match=expected):
        refuse_state_set_by_dropped_code(source, result, arch="sm_90", cache_dir=shared_cache_dir(),
                                         generated=result.program)


@pytest.mark.nvcc
def test_asserts_in_the_launcher_and_the_kernel_are_compared_without_their_positions():
    source = (ROUND / "init_builtin_line" / "user.cu").read_text()
    source = "#include <cassert>\n" + source.replace("* (float)__builtin_LINE()", "* 2.0f").replace(
        "__global__ void scale_kernel(const float* in, float* out, int n) {",
        "__global__ void scale_kernel(const float* in, float* out, int n) {\n    assert(n >= 0);").replace(
        "void scale(const float* in, float* out, int n) {", "void scale(const float* in, float* out, int n) {\n"
        "    assert(n > 0 &&\n           n < (1 << 30));")
    result = generate(source, SPEC, "user.cu")
    refuse_state_set_by_dropped_code(source, result, arch="sm_90", cache_dir=shared_cache_dir(),
                                     generated=result.program)
