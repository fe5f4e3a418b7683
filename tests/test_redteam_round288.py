"""Red team round 288 (tests/fixtures/redteam/round288/REPORT.md), on round 287's checks: frozen code reached by the
timed call without being named, and frozen code beside it. (A) The harness defined `log2f`, which the part's honest
`std::log2` compiles to: the link bound the part's call to the frozen one before libm's (a harness
`extern "C" float log2f(...) {...}` without braces also escaped round 286's name check). (B) A thread started before
`h.run`, and a SIGALRM handler on an interval timer, ran frozen code beside and inside the timed calls. Closed by
class, in the objects: the harness's object may define no symbol the part's imports, and no strong symbol of the
C, C++ or CUDA runtime libraries (their own calls inside the part's would reach it); it may not import what starts
code beside the calls (threads, signals, timers, processes, loaded libraries, stream callbacks); and the frozen
source makes no system call of its own. Own variants: memset defined by the harness, std::async, a stream
callback, a raw syscall (all accepted before)."""

from __future__ import annotations

import pytest

from kernelloop.config import Settings
from kernelloop.errors import InputError
from kernelloop.program.split import split_program

from .conftest import FIXTURES, shared_cache_dir

ROUND = FIXTURES / "redteam" / "round288"
BESIDE = "a thread, a signal handler, a timer, a process, a loaded library or a stream callback"
REFUSED_AT_LINK = {
    "v_libm_log2f.cu": "the frozen code defines log2f, which the editable part's code calls",
    "v_libm_log2f_onefile.cu": "the frozen code defines log2f, which the editable part's code calls",
    "v_thread_beside_calls.cu": f"the frozen code uses std::thread::_M_start_thread: {BESIDE}",
    "v_signal_timer.cu": "the frozen code uses s",  # sigaction, signal or setitimer: whichever sorts first
    "own/o_memset_defined.cu": "the frozen code defines memset, a function of the C, C++ or CUDA runtime libraries",
    "own/o_async_beside.cu": f"the frozen code uses std::thread::_M_start_thread: {BESIDE}",
    "own/o_stream_callback.cu": f"the frozen code uses cudaStreamAddCallback: {BESIDE}",
}


def _static(name: str):
    from kernelloop.tools.nvcc import find_toolchain
    from kernelloop.verify.gate import static_gates

    split = split_program((ROUND / name).read_text(), name)
    return static_gates(split, split.editable, arch="sm_90", settings=Settings(cache_dir=shared_cache_dir()),
                        toolchain=find_toolchain())


@pytest.mark.nvcc
@pytest.mark.parametrize("name", sorted(REFUSED_AT_LINK))
def test_round288_frozen_code_the_part_reaches_by_symbol_or_that_runs_beside_it_is_refused(name):
    with pytest.raises(InputError) as caught:
        _static(name)
    assert REFUSED_AT_LINK[name] in str(caught.value), str(caught.value)


@pytest.mark.parametrize("name, why", [
    ("v_extern_c_single_log2f.cu", "its editable part names log2f, which the harness defines"),
    ("own/o_raw_syscall.cu", "its frozen code makes system calls of its own (syscall)"),
])
def test_round288_refused_in_the_source(name, why):
    with pytest.raises(InputError) as caught:
        split_program((ROUND / name).read_text(), name)
    assert why in str(caught.value), str(caught.value)


@pytest.mark.nvcc
def test_round288_the_honest_program_calling_log2_passes_every_static_gate():
    result = _static("controls/honest_log2.cu")
    assert result.candidate is not None and result.candidate.ok and result.violations == [], \
        [v.describe() for v in result.violations]


def test_round288_a_candidate_calling_a_function_the_harness_defines_is_a_violation():
    # the candidate's side of class A, judged on symbols alone: what its object imports, the harness's defines
    from kernelloop.tools.nvcc import BuildResult, ObjectSymbols
    from kernelloop.verify.gate import frozen_link_problem

    build = BuildResult(ok=True, stage="done", log="", flags=[],
                        editable_symbols=ObjectSymbols(defined_global=["_Z6launchPfi"], undefined=["log2f"]),
                        harness_symbols=ObjectSymbols(defined_global=["main", "log2f"], undefined=["_Z6launchPfi"]))
    assert "the frozen code defines log2f, which the editable part's code calls" in frozen_link_problem(build, ["launch"])
    build.harness_symbols = ObjectSymbols(defined_global=["main"], undefined=["_Z6launchPfi", "printf"])
    assert frozen_link_problem(build, ["launch"]) is None
    assert "runtime libraries" in frozen_link_problem(
        build.model_copy(update={"harness_symbols": ObjectSymbols(defined_global=["main", "memcpy"], undefined=[])}),
        ["launch"], frozenset({"memcpy"}))
