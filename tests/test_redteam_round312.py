"""Red team round 312 (init's guard, on round 311's fix): device memory no host copy registers.

Closed by class: (1) a store inside inline assembly after `/* ... // */` was lost, since the PTX
statements were cut at `//` before block comments were taken out (tools.ptx_writes now drops
comments as ptxas reads them, with tools.ptx_module's reader); (2) an address passed its bits to
the carry flag (`add.cc`) and a binary search rebuilt it from the `addc` that reads only the flag:
an instruction that sets the carry flag is no move. Kept: a table of strings printed with `%s`.
Refused on purpose (over-approximation, the message says why): `printf("%s", __func__)` in a kernel
that also reads local memory, since a local read could return the parked address.
"""

from __future__ import annotations

import pytest

from kernelloop.errors import InputError
from kernelloop.init_state import refuse_state_set_by_dropped_code
from kernelloop.program.init import InitSpec, generate

from .conftest import FIXTURES, shared_cache_dir

pytestmark = pytest.mark.nvcc

ROUND = FIXTURES / "redteam" / "round312"
SPEC = InitSpec(values={"n": ["4096", "3001"]}, roles={"y": "output", "x": "input"}, launcher="scale")


def _check(name: str) -> None:
    source = (ROUND / name).read_text()
    result = generate(source, SPEC, name)
    refuse_state_set_by_dropped_code(source, result, arch="sm_90", cache_dir=shared_cache_dir(),
                                     generated=result.program)


@pytest.mark.parametrize("name", ["a1_asm_comment_store.cu", "a2_carry_search.cu"])
def test_writes_the_ptx_reading_lost_are_refused(name):
    with pytest.raises(InputError, match=r"output_gain\(\)::gain, device memory that device code writes"):
        _check(name)


def test_a_table_of_strings_printed_is_kept():
    _check("fr1_string_table.cu")


def test_a_string_parked_beside_local_arrays_is_refused_with_a_plain_reason():
    with pytest.raises(InputError, match=r"a string literal's storage \(__unnamed_\d+: its address kept in memory"):
        _check("fr2_printf_local_array.cu")
