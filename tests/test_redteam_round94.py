"""Red team round 94 (tests/fixtures/redteam/round94/): NDEBUG defined inside a `main` that init
leaves out (with <assert.h> included again there) switched the user's `assert` off while the
generated copy keeps it on; the positionless stand-in compared both as "on". Now any sign that
`assert` may be off or changed somewhere (NDEBUG, a directive naming assert) keeps it as written.
CPU and nvcc."""

from __future__ import annotations

import pytest

from kernelloop.errors import InputError
from kernelloop.init_state import _defines_assert, refuse_state_set_by_dropped_code
from kernelloop.program.init import InitSpec, generate

from .conftest import FIXTURES, shared_cache_dir

ROUND = FIXTURES / "redteam" / "round94"


@pytest.mark.parametrize("text", [
    "int main() {\n#define NDEBUG\n#include <assert.h>\n}", "#pragma push_macro(\"assert\")",
    "#if defined(assert)\n#endif", "-DNDEBUG is not here but NDEBUG is",
])
def test_anything_that_can_switch_assert_keeps_it_as_written(text):
    assert _defines_assert(text)


def test_a_plain_assert_use_is_still_compared_without_positions():
    assert not _defines_assert("#include <cassert>\n#include <assert.h>\nvoid f(int n) { assert(n > 0); }")


@pytest.mark.nvcc
def test_init_refuses_the_copy_whose_assert_is_switched_on_again():
    path = ROUND / "a_init_ndebug_in_dropped_main" / "user.cu"
    source = path.read_text()
    result = generate(source, InitSpec(values={"n": ["4096", "1000"]}), path.name)
    with pytest.raises(InputError, match="compiles to other code"):
        refuse_state_set_by_dropped_code(source, result, arch="sm_90", cache_dir=shared_cache_dir(),
                                         generated=result.program)
