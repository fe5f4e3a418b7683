"""Red team round 307 (init's guard): code init leaves out changes what the code it keeps means.

Init leaves out `main`, the launchers it does not wrap and their callers. A file-scope initialiser
that called a left-out function then picks another definition in the generated program: an inline
overload the file never called (so never compiled), a function template, the primary template of a
left-out specialisation; and a `#define` in left-out code no longer hides an `#ifndef` block. Each
variant set flush-to-zero at start-up (the baseline computed zeros, which a candidate that clears its
output matches) or changed a CUDA limit. The guard read only the user's object, where none of that
code exists. Now the generated program's own units are read too (init_state._code_your_file_never_ran):
their start-up code is judged like left-out code (calls by class, no floating-point mode set), and
every function they define under a name the file declares must be the file's own, compiled alike.
Two variants (c2, d1) were open before this session's change too; all are refused now.
"""

from __future__ import annotations

import pytest

from kernelloop.errors import InputError
from kernelloop.init_state import refuse_state_set_by_dropped_code
from kernelloop.program.init import InitSpec, generate

from .conftest import FIXTURES, shared_cache_dir

pytestmark = pytest.mark.nvcc

ROUND = FIXTURES / "redteam" / "round307"
SPEC = InitSpec(values={"n": ["4096", "3001"]}, roles={"y": "output", "x": "input"}, launcher="scale")
EXPECTED = {
    "c5_inline.cu": "runs a `ldmxcsr` instruction",  # an inline overload the file never called
    "c1_fallback.cu": "runs a `ldmxcsr` instruction",  # a function template (and inlined: round 308)
    "c4_specialization.cu": "runs a `ldmxcsr` instruction",  # the primary template of a left-out specialisation
    "d2_define_in_caller.cu": "runs a `ldmxcsr` instruction",  # a #define in a left-out caller
    "c2_fallback_kept.cu": "runs a `ldmxcsr` instruction",  # a caller of the kept launcher, left out
    "d1_define_in_main.cu": "runs a `ldmxcsr` instruction",  # a #define inside main
    "c6_limit.cu": "calls cudaDeviceSetLimit at start-up",  # the inline overload changes a limit instead
    "e1_meminfo.cu": "the kept code calls cudaMemGetInfo",  # a weight from the memory main left free
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_code_the_left_out_code_hid_is_refused(name):
    source = (ROUND / name).read_text()
    result = generate(source, SPEC, name)
    with pytest.raises(InputError, match="the generated program could compute something other than yours") as caught:
        refuse_state_set_by_dropped_code(source, result, arch="sm_90", cache_dir=shared_cache_dir(),
                                         generated=result.program)
    assert EXPECTED[name] in str(caught.value), str(caught.value)


@pytest.mark.parametrize("readable, name", [
    ("float const& std::max<float>(float const&, float const&)", "std::max<float>"),  # a library's, return type first
    ("int setup<int>(int)", "setup<int>"),
    ("setup(long)", "setup"),
    ("std::vector<float, std::allocator<float> >::size() const", "std::vector<float, std::allocator<float> >::size"),
])
def test_a_function_is_told_from_the_libraries_by_its_qualified_name(readable, name):
    # a file that declares `max` of its own must not make the harness's std::max<float> look like its code
    from kernelloop.init_state import _qualified_name
    assert _qualified_name(readable) == name
