"""Red team round 311 (init's guard, on round 310's fix): device memory no host copy registers.

Closed by class: (1) the kept kernels reach such memory through data as well as by name (a table of
pointers to two statics a calibration kernel sets; a table of device functions, one of which reads a
static slope), so every written one is state, reached by name or not; (2) an address rebuilt from
its bytes through a lookup table lost the write (a flow of values, not of addresses), so any use
of an address but moving, offsetting and loading at it counts as a write; (3) a function the file
defines under a runtime function's name (`__assertfail`) was trusted to only read its arguments:
only the `.extern` declaration is the runtime's. False refusal fixed: printf's `%s` of `__func__`
(an address parked in the thread's local argument buffer that only vprintf reads).
"""

from __future__ import annotations

import pytest

from kernelloop.errors import InputError
from kernelloop.init_state import refuse_state_set_by_dropped_code
from kernelloop.program.init import InitSpec, generate

from .conftest import FIXTURES, shared_cache_dir

pytestmark = pytest.mark.nvcc

ROUND = FIXTURES / "redteam" / "round311"
SPEC = InitSpec(values={"n": ["4096", "3001"]}, roles={"y": "output", "x": "input"}, launcher="scale")


def _check(name: str) -> None:
    source = (ROUND / name).read_text()
    result = generate(source, SPEC, name)
    refuse_state_set_by_dropped_code(source, result, arch="sm_90", cache_dir=shared_cache_dir(),
                                     generated=result.program)


@pytest.mark.parametrize("name", ["a1_pointer_table.cu", "a2_function_table.cu", "a3_laundered_address.cu",
                                  "a4_own_assertfail.cu"])
def test_unregistered_device_state_reached_otherwise_is_refused(name):
    with pytest.raises(InputError, match="no host copy registers"):
        _check(name)


def test_a_debug_printf_of_the_function_name_is_kept():
    _check("fr1_printf_func_name.cu")
