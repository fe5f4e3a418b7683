"""Red team round 315 (init's guard, on round 314's fix).

Closed by class in the harness and the verifier (tests/gpu/test_redteam_round315_gpu.py): memory the kept
launcher allocates and reads before writing holds what the allocator hands back, which the code init leaves out
can decide (`main` set a block of the workspace's size in the stream-ordered pool and freed it on the launcher's
stream; a host table of the same size filled and freed before the call). Init's guard reads code, not what an
allocator hands back; in the verifier's runs with other bytes past the buffers every block the part is handed and
every host allocation but calloc's hold those bytes until the part writes them, so a baseline whose results follow
them is refused before anything is verified.

Fixed: a benchmark `main` that sets the device's scheduling flags and queries the stream priority range was
refused; both are allowed to the left-out code, and reading the flags back is a process read the kept code may
not make.
"""

from __future__ import annotations

import pytest

from kernelloop.errors import InputError
from kernelloop.init_state import _PROCESS_READS, left_out_call_allowed, refuse_state_set_by_dropped_code
from kernelloop.program.init import InitSpec, generate

from .conftest import FIXTURES, shared_cache_dir

ROUND = FIXTURES / "redteam" / "round315"
SPEC = InitSpec(values={"n": ["4096", "3001"]}, roles={"y": "output", "x": "input"}, launcher="scale")


def _check(name: str) -> None:
    source = (ROUND / name).read_text()
    result = generate(source, SPEC, name)
    refuse_state_set_by_dropped_code(source, result, arch="sm_90", cache_dir=shared_cache_dir(),
                                     generated=result.program)


@pytest.mark.nvcc
def test_a_benchmark_main_that_sets_scheduling_flags_is_kept():
    _check("fr1_priority_streams.cu")


def test_setting_the_device_flags_is_left_out_code_and_reading_them_is_a_process_read():
    assert left_out_call_allowed("cudaSetDeviceFlags") and left_out_call_allowed("cudaDeviceGetStreamPriorityRange")
    assert _PROCESS_READS.match("cudaGetDeviceFlags") and _PROCESS_READS.match("cuCtxGetFlags")


@pytest.mark.nvcc
def test_a_launcher_writing_a_host_table_it_allocated_is_refused_by_the_static_gates(tmp_path):
    # a3's table is host heap memory the launcher writes: host code may write only its own frame and globals, so the
    # generated program is refused before any run (what the table held before is then moot)
    from kernelloop.config import Settings
    from kernelloop.verify.static_check import check_static_files

    name = "a3_heap_chunk_weights.cu"
    program = tmp_path / "a3_kl.cu"
    program.write_text(generate((ROUND / name).read_text(), SPEC, name).program)
    with pytest.raises(InputError, match=r"foreign-store.*stores through a computed pointer"):
        check_static_files(program, program, Settings(cache_dir=shared_cache_dir()))
