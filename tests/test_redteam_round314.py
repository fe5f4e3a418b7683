"""Red team round 314 (init's guard, on round 313's fix): device memory no host copy registers.

Closed by class: (1) local memory outlives a call: a function parked a static's address in its
printf argument buffer, and the next function called at the same depth read it back from an
uninitialised local array and stored through it; the exemption for printf's parked arguments now
holds only where no function of the module reads local memory or lets a local address go; (2) the
exemption for `vprintf`'s arguments was decided by position (any `st.param` before the call): an
address stored into a parameter of its own, then passed to the next call, was exempted; now only a
parameter that call lists, and no other call passes nor any load reads, is exempt.
"""

from __future__ import annotations

import pytest

from kernelloop.errors import InputError
from kernelloop.init_state import refuse_state_set_by_dropped_code
from kernelloop.program.init import InitSpec, generate

from .conftest import FIXTURES, shared_cache_dir

pytestmark = pytest.mark.nvcc

ROUND = FIXTURES / "redteam" / "round314"
SPEC = InitSpec(values={"n": ["4096", "3001"]}, roles={"y": "output", "x": "input"}, launcher="scale")


@pytest.mark.parametrize("name", ["a1_stack_slot_asm.cu", "a2_stack_slot.cu", "a3_param_beside_vprintf.cu"])
def test_addresses_handed_on_through_local_or_parameter_memory_are_refused(name):
    source = (ROUND / name).read_text()
    result = generate(source, SPEC, name)
    with pytest.raises(InputError, match=r"gain\(\)::g, device memory that device code writes"):
        refuse_state_set_by_dropped_code(source, result, arch="sm_90", cache_dir=shared_cache_dir(),
                                         generated=result.program)
