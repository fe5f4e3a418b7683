"""Red team round 310 (init's guard, after round 309's fix).

Open (recorded in docs/verifier.md, not closed this session): state kept in a `static` variable inside
device code. nvcc puts it in global memory but registers no host copy, so the guard, which finds
device variables through their host shadows, neither asks for --keep-state nor judges the left-out
kernel launches that set it (a calibration kernel `main` launched; a table the launcher builds on
its first call, which `main` made at another size). The strict xfail below fails once it is closed.

Fixed: two false refusals of common benchmark mains (libstdc++'s uniform distribution steps with
`nextafterf`; a `std::string` built from `argv` constructs and destroys `std::allocator<char>`).
"""

from __future__ import annotations

import pytest

from kernelloop.errors import InputError
from kernelloop.init_state import refuse_state_set_by_dropped_code
from kernelloop.program.init import InitSpec, generate

from .conftest import FIXTURES, shared_cache_dir

pytestmark = pytest.mark.nvcc

ROUND = FIXTURES / "redteam" / "round310"
SPEC = InitSpec(values={"n": ["4096", "3001"]}, roles={"y": "output", "x": "input"}, launcher="scale")


def _check(name: str) -> None:
    source = (ROUND / name).read_text()
    result = generate(source, SPEC, name)
    refuse_state_set_by_dropped_code(source, result, arch="sm_90", cache_dir=shared_cache_dir(),
                                     generated=result.program)


@pytest.mark.parametrize("name", ["fr4_uniform.cu", "fr5_string.cu"])
def test_benchmark_mains_with_library_generators_and_strings_are_kept(name):
    _check(name)


@pytest.mark.xfail(strict=True, raises=pytest.fail.Exception, reason="open: device-code statics have no host shadow")
@pytest.mark.parametrize("name", ["a1_device_static.cu", "a2_lazy_table.cu"])
def test_state_in_a_device_function_static_is_refused(name):
    with pytest.raises(InputError, match="the generated program could compute something other than yours"):
        _check(name)
