"""Red team round 310 (init's guard, after round 309's fix).

Closed by class (the session after it was found): state kept in device memory no host copy
registers. nvcc puts a `static` variable inside device code in global memory but registers no host
copy, so the guard, which found device variables through their host shadows, neither asked for
--keep-state nor judged the left-out kernel launches that set it (a calibration kernel `main`
launched; a table the launcher builds on its first call, which `main` made at another size). Now
every module variable the registration does not name (a static, a string literal's storage) that
device code writes (tools.ptx_writes) and the kept kernels reach is device state; a `static const`
table, a device assert's function name and printf's format are only read, and stay unjudged.

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


def _check(name: str, keep_state: list[str] | None = None) -> None:
    source = (ROUND / name).read_text()
    result = generate(source, SPEC, name)
    refuse_state_set_by_dropped_code(source, result, arch="sm_90", cache_dir=shared_cache_dir(),
                                     generated=result.program, keep_state=keep_state)


@pytest.mark.parametrize("name", ["fr4_uniform.cu", "fr5_string.cu"])
def test_benchmark_mains_with_library_generators_and_strings_are_kept(name):
    _check(name)


@pytest.mark.parametrize("name", ["a1_device_static.cu", "a2_lazy_table.cu", "a3_literal_storage.cu"])
def test_state_in_unregistered_device_memory_is_refused(name):
    with pytest.raises(InputError, match="the generated program could compute something other than yours") as caught:
        _check(name)
    assert "no host copy registers" in str(caught.value)


def test_vouching_for_the_static_still_judges_the_left_out_launch_that_sets_it():
    with pytest.raises(InputError, match=r"main\(\) launches calibrate_kernel, which can write the device variables \(gain\)"):
        _check("a1_device_static.cu", keep_state=["gain"])


def test_constant_tables_asserts_and_printf_in_device_code_are_kept():
    _check("c1_const_tables.cu")
