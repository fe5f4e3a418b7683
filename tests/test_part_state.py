"""State kept between calls (kernelloop_harness.cuh's part_state, tools/nvcc.py's
_link_part_state, experiment.state_kept_between_calls): the records, the judgement, and what the
build links where. The runs themselves: tests/gpu/test_part_state_gpu.py."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from kernelloop.agents.feedback import failure_from_verdict
from kernelloop.config import Settings, VerifySettings
from kernelloop.program.split import split_program
from kernelloop.tools.nvcc import build_program, find_toolchain
from kernelloop.verify.experiment import state_kept_between_calls
from kernelloop.verify.gate import candidate_editable_part, static_gates
from kernelloop.verify.records import DumpError, PartStateRecord, parse_records
from kernelloop.verify.verdict import GateResult, Reason, Verdict

from .conftest import FIXTURES, shared_cache_dir

STATE = FIXTURES / "part_state"


def test_the_state_record_is_read():
    records = parse_records(b"kernelloop-state 2 0 40 8 3\n")
    assert records.state == PartStateRecord(same=False, host_bytes=40, device_bytes=8, blocks=3)
    assert parse_records(b"kernelloop-state 2 1 0 0 0\n").state.same
    assert parse_records(b"").state is None
    with pytest.raises(DumpError, match="repeated part-state"):
        parse_records(b"kernelloop-state 2 1 0 0 0\nkernelloop-state 2 1 0 0 0\n")


def test_a_changed_state_is_a_failure_and_names_where():
    same = PartStateRecord(same=True, host_bytes=48, device_bytes=0, blocks=0)
    changed = PartStateRecord(same=False, host_bytes=48, device_bytes=8, blocks=1)
    assert state_kept_between_calls([(11, 0, same), (12, 1, None)]) is None
    reason, detail = state_kept_between_calls([(11, 0, same), (12, 1, changed), (13, -1, changed)])
    assert reason is Reason.state_between_calls
    assert detail.startswith("seed 12, size 1:") and "8 B of device memory" in detail


def test_the_optimizer_hears_the_gates_words():
    v = Verdict(accepted=False, summary="rejected", baseline_file="b.cu", candidate_file="c.cu",
                settings=VerifySettings(), reasons=[Reason.state_between_calls],
                gates=[GateResult(gate="correctness", status="fail", detail="seed 3: the candidate's state ...")])
    failed = failure_from_verdict(v, iteration=1, approach="x", source="")
    assert failed.kind == "correctness" and "the candidate's state" in failed.excerpt


def _symbols(binary: Path) -> dict[str, int]:
    out = subprocess.run(["nm", str(binary)], capture_output=True, text=True, check=True).stdout
    return {m.group(2): int(m.group(1), 16) for m in re.finditer(r"^([0-9a-f]+) \w (\S+)$", out, re.M)}


def _build(name: str) -> Path:
    split = split_program((STATE / name).read_text(), name)
    result = build_program(split.editable_unit(), split.harness_unit(), arch="sm_90", cache_dir=shared_cache_dir(),
                           toolchain=find_toolchain())
    assert result.ok, result.log[-2000:]
    return result.binary


@pytest.mark.nvcc
def test_the_parts_static_data_is_linked_inside_the_bounds_the_harness_reads():
    symbols = _symbols(_build("host_counter.cu"))
    counter = next(a for s, a in symbols.items() if s.startswith("_ZZ17launch_reduce_sum") and s.endswith("5calls"))
    cached = next(a for s, a in symbols.items() if s.startswith("_ZZ17launch_reduce_sum") and s.endswith("3sms"))
    for address in (counter, cached):
        assert symbols["__start_kl_part_bss"] <= address < symbols["__stop_kl_part_bss"]
    # the harness's own data is outside them
    assert not symbols["__start_kl_part_bss"] <= symbols["_ZZN2kl13part_registryEvE8registry"] < symbols["__stop_kl_part_bss"]


@pytest.mark.nvcc
@pytest.mark.parametrize("name, recorders", [
    ("allocated_counter.cu", ["__kl_part_cudaMalloc"]),
    ("heap_counter.cu", ["__kl_part__Znwm"]),
    ("device_counter.cu", ["__kl_part___cudaRegisterVar"]),
    # the driver objects the part holds are counted (red team round 341: a texture handle that counts the calls)
    ("../redteam/round341/texture_handle_counter.cu", ["__kl_part_cudaCreateTextureObject"]),
    ("honest_two_stream_workspaces.cu", ["__kl_part_cudaStreamCreateWithFlags", "__kl_part_cudaEventCreateWithFlags"]),
    # and what they hold is read (red team round 342: a count in a graph's nodes, in the priorities of streams)
    ("../redteam/round342/graph_node_counter.cu", ["__kl_part_cudaGraphCreate"]),
    ("../redteam/round342/stream_priority_counter.cu", ["__kl_part_cudaStreamCreateWithPriority",
                                                        "__kl_part_cudaStreamDestroy"]),
    # honest parts the deferred destroys must keep (round 344): a kept texture replaced every call, 2048 events a call
    ("../redteam/round344/honest_texture_rebind.cu", ["__kl_part_cudaDestroyTextureObject"]),
    ("../redteam/round344/honest_event_per_chunk.cu", ["__kl_part_cudaEventDestroy"]),
])
def test_the_parts_allocations_and_variables_go_through_the_recorders(name, recorders):
    disassembly = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(_build(name))], capture_output=True,
                                 text=True, check=True).stdout
    for recorder in recorders:
        assert re.search(rf"call\s+[0-9a-f]+ <{recorder}>", disassembly), recorder


@pytest.mark.nvcc
@pytest.mark.parametrize("name", ["stale_pointer_counter.cu", "past_block_counter.cu", "honest_two_stream_workspaces.cu",
                                  "spare_address_counter.cu"])
def test_the_freed_memory_fixtures_build_and_pass_the_static_gates(name):
    # a write through a freed block's pointer, a write past a block, and honest per-call stream-ordered
    # workspaces: their verdicts are the run's (tests/gpu/test_part_state_gpu.py), so the build must let them run
    split = split_program((STATE / "baseline.cu").read_text(), "baseline.cu")
    editable, _ = candidate_editable_part((STATE / name).read_text(), split)
    result = static_gates(split, editable, arch="sm_86", settings=Settings(cache_dir=shared_cache_dir()),
                          toolchain=find_toolchain())
    assert result.candidate is not None and result.candidate.ok, result.candidate.log[-1500:]
    assert not result.violations, [v.describe() for v in result.violations]



@pytest.mark.nvcc
def test_a_per_thread_default_stream_build_records_the_calls_it_renames():
    # red team round 342: --default-stream=per-thread names cudaStreamEndCapture and cudaGraphInstantiateWithParams
    # (cudaMallocAsync, cudaFreeAsync) with a _ptsz suffix; an honest part capturing a graph per call on its thread's
    # stream must build, its calls recorded like their plain names
    source = (FIXTURES / "redteam" / "round342" / "capture_per_thread_honest.cu").read_text()
    split = split_program(source, "capture_per_thread_honest.cu")
    toolchain = find_toolchain(build_flags=["--default-stream=per-thread"])
    result = build_program(split.editable_unit(), split.harness_unit(), arch="sm_90", cache_dir=shared_cache_dir(),
                           toolchain=toolchain)
    assert result.ok, result.log[-2000:]
    disassembly = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(result.binary)], capture_output=True,
                                 text=True, check=True).stdout
    assert re.search(r"call\s+[0-9a-f]+ <__kl_part_cudaStreamEndCapture_ptsz>", disassembly)
