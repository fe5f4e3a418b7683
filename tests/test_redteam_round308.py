"""Red team round 308 (init's guard, again): start-up code the user's file never runs, with no
function of the user's left to compare.

Round 307's guard compared every function the generated program's units define under a name the
file declares with the file's own. A template that the generated program's file-scope initialiser
picks once init left the exact overload out, marked `always_inline`, is compiled into the start-up
code itself: no symbol, so nothing was compared, and it emptied the C library's character classes
at start-up. The same class without any template: a statement expression that a `#define` in a
left-out launcher had switched off. Now the start-up code of each unit is compared with the user's
file's (init_state._startup_differences) on what it can reach outside its own variables: other
files' and libraries' functions and data, inlined code (read from the debug information), and
thread-local memory. A positive control keeps initialisers that do the same in both (a library
container built by a helper the harness's own code also instantiates, a lambda called in place).
"""

from __future__ import annotations

import pytest

from kernelloop.errors import InputError
from kernelloop.init_state import refuse_state_set_by_dropped_code
from kernelloop.program.init import InitSpec, generate

from .conftest import FIXTURES, shared_cache_dir

pytestmark = pytest.mark.nvcc

ROUND = FIXTURES / "redteam" / "round308"
SPEC = InitSpec(values={"n": ["4096", "3001"]}, roles={"y": "output", "x": "input"}, launcher="scale")
EXPECTED = {
    "inline_template_ctype.cu": "reaches __ctype_b_loc from its start-up code",
    "inline_template_own.cu": "inlines setup<int> into its start-up code",
    "define_switched_initialiser.cu": "reaches __ctype_b_loc from its start-up code",
    "define_switched_thread_memory.cu": "addresses thread-local memory (%fs) in its start-up code",
}


def _check(name: str) -> None:
    source = (ROUND / name).read_text()
    result = generate(source, SPEC, name)
    refuse_state_set_by_dropped_code(source, result, arch="sm_90", cache_dir=shared_cache_dir(),
                                     generated=result.program)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_start_up_code_the_users_file_never_runs_is_refused(name):
    with pytest.raises(InputError, match="the generated program could compute something other than yours") as caught:
        _check(name)
    assert EXPECTED[name] in str(caught.value), str(caught.value)


def test_start_up_code_that_runs_alike_in_both_is_kept():
    _check("startup_positive_control.cu")
