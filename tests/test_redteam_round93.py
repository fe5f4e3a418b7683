"""Red team round 93 (tests/fixtures/redteam/round93/): a running max kept in an `int` but computed
in 64 bits (a narrowing update depends on the order; only sums wrap the same in any order), and
init's positionless `assert` swapped in for a program's own `assert` hidden from a text pattern
(`#undef` continued onto the next line, `void (assert)(...)`). CPU and nvcc."""

from __future__ import annotations

import pytest

from kernelloop.errors import InputError
from kernelloop.init_state import _defines_assert, refuse_state_set_by_dropped_code
from kernelloop.optimizers.offline.valuetype import _holds, _usual_integer_conversion
from kernelloop.program.init import InitSpec, generate

from .conftest import FIXTURES, shared_cache_dir
from .test_redteam_round85 import _proposals
from .test_redteam_round90 import _read

ROUND = FIXTURES / "redteam" / "round93"


def test_a_running_max_of_narrowed_integers_gets_no_rewrite():
    assert _proposals(ROUND / "a_truncating_max" / "baseline.cu") == []


KERNEL = """
__global__ void k(const {elem}* x, int* y, int n) {{
    int m = 0;
    for (int c = threadIdx.x; c < n; c += blockDim.x) {update};
    y[blockIdx.x] = m;
}}
void launch(const {elem}* x, int* y, int n) {{ k<<<n, 256>>>(x, y, n); }}
"""


@pytest.mark.parametrize("elem, update, read", [
    ("int", "if (x[c] * 100000000LL > m) m = x[c] * 100000000LL", False),  # 64-bit values into an int max
    ("unsigned int", "if (x[c] > m) m = x[c]", False),  # unsigned into signed: not every value held
    ("long long", "m = max(m, (int)x[c])", True),  # narrowed first, then a max of ints: order-free
    ("int", "if (x[c] > m) m = x[c]", True),
    ("short", "if (x[c] > m) m = x[c]", True),  # a narrower integer is held
    ("long long", "m += x[c]", True),  # a sum wraps the same in any order
])
def test_an_integer_update_must_hold_its_value_unless_it_is_a_sum(elem, update, read):
    kept, problems = _read(KERNEL.format(elem=elem, update=update))
    assert ("k" in kept) == read, problems


def test_integer_conversions_follow_cpp():
    assert _usual_integer_conversion("int32_t", "int64_t") == "int64_t"
    assert _usual_integer_conversion("uint32_t", "int32_t") == "uint32_t"
    assert _usual_integer_conversion("uint32_t", "int64_t") == "int64_t"
    assert _usual_integer_conversion("int8_t", "uint16_t") == "int32_t"
    assert _holds("int32_t", "int16_t") and _holds("int64_t", "uint32_t") and _holds("int32_t", "bool")
    assert not _holds("int32_t", "uint32_t") and not _holds("uint64_t", "int8_t") and not _holds("int32_t", "int64_t")


def test_the_programs_own_assert_is_seen_however_written():
    assert _defines_assert("#undef \\\nassert\n")
    assert _defines_assert("__device__ void (assert)(float& v, int tag = 0) { v *= tag; }")
    assert _defines_assert("#define assert(x) ((void)0)")
    assert not _defines_assert("#include <cassert>\nvoid f(int n) { assert(n > 0); static_assert(1, \"\"); }")


@pytest.mark.nvcc
def test_init_refuses_the_own_assert_that_computes_with_its_line():
    source = (ROUND / "b_init_own_assert" / "user.cu").read_text()
    spec = InitSpec(values={"n": ["1048576", "1000003"]}, counts={"in": "n", "out": "n"}, roles={"out": "output"})
    result = generate(source, spec, "user.cu")
    with pytest.raises(InputError, match="own position|compiles to other code"):
        refuse_state_set_by_dropped_code(source, result, arch="sm_90", cache_dir=shared_cache_dir(),
                                         generated=result.program)
