"""Red team round 315 (init's guard, on round 314's fix).

Open (recorded in docs/verifier.md, not closed this session): memory the kept launcher allocates
and reads before writing holds what the allocator hands back, which the code init leaves out can
decide (`main` set a block of the workspace's size in the stream-ordered pool and freed it on the
launcher's stream; a host table of the same size filled and freed before the call). The user's
program reads what `main` left; the generated one reads fresh memory. The strict xfails below fail
once the class is closed (by the harness poisoning what the part allocates, so a baseline that
reads it is seen, or by the guard).

Fixed: a benchmark `main` that sets the device's scheduling flags and queries the stream priority
range was refused; both are allowed to the left-out code, and reading the flags back is a process
read the kept code may not make.
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
@pytest.mark.xfail(strict=True, raises=pytest.fail.Exception, reason="open: allocator reuse decided by left-out code")
@pytest.mark.parametrize("name", ["a2_pool_block_floor.cu", "a3_heap_chunk_weights.cu"])
def test_memory_the_launcher_reads_before_writing_is_refused(name):
    with pytest.raises(InputError, match="the generated program could compute something other than yours"):
        _check(name)


@pytest.mark.nvcc
def test_a_benchmark_main_that_sets_scheduling_flags_is_kept():
    _check("fr1_priority_streams.cu")


def test_setting_the_device_flags_is_left_out_code_and_reading_them_is_a_process_read():
    assert left_out_call_allowed("cudaSetDeviceFlags") and left_out_call_allowed("cudaDeviceGetStreamPriorityRange")
    assert _PROCESS_READS.match("cudaGetDeviceFlags") and _PROCESS_READS.match("cuCtxGetFlags")
