"""Red team round 313 (init's guard, on round 312's fix): device memory no host copy registers.

Closed by class, both through inline assembly that ptxas reads otherwise than the PTX reading did:
(1) global memory a function body declares itself (`{ .global .f32 gain = 0f3F800000; ... }`), out
of the module's list of variables, now counts as written device state (tools.ptx_writes.body_memory);
(2) a `.loc` line directive has no `;`, so the store on the next line was read as part of it and
dropped: a line directive ends at its line's end, and one that shares its line or an open statement
makes the module's reading fail closed. Kept: a constant table copied to a local array and printed;
a template kernel with cooperative groups, atomics into its output, an assert and `printf("%s",
__func__)`.
"""

from __future__ import annotations

import pytest

from kernelloop.errors import InputError
from kernelloop.init_state import refuse_state_set_by_dropped_code
from kernelloop.program.init import InitSpec, generate

from .conftest import FIXTURES, shared_cache_dir

pytestmark = pytest.mark.nvcc

ROUND = FIXTURES / "redteam" / "round313"
SPEC = InitSpec(values={"n": ["4096", "3001"]}, roles={"y": "output", "x": "input"}, launcher="scale")


def _check(name: str) -> None:
    source = (ROUND / name).read_text()
    result = generate(source, SPEC, name)
    refuse_state_set_by_dropped_code(source, result, arch="sm_90", cache_dir=shared_cache_dir(),
                                     generated=result.program)


@pytest.mark.parametrize("name", ["a1_asm_scope_global.cu", "a2_loc_hides_store.cu"])
def test_state_inline_assembly_hid_from_the_reading_is_refused(name):
    with pytest.raises(InputError, match="device memory that device code writes and no host copy registers"):
        _check(name)


@pytest.mark.parametrize("name", ["fr1_table_local_printf.cu", "fr2_cg_atomic_assert.cu"])
def test_honest_kernels_with_tables_printf_asserts_and_atomics_are_kept(name):
    _check(name)
