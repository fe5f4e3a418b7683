"""A launcher given the caller's stream (the PyTorch-extension style, `cudaStream_t stream` last):
the offline optimizer's template launches on that stream, every launch and helper copy included,
so the work stays ordered with what the caller queued there; a stream the launcher computes (a
call) is refused, since the rewritten launcher does not keep the code that computed it."""

from __future__ import annotations

import re

import pytest

from kernelloop.config import Settings
from kernelloop.optimizers.offline.launcher import read_editable
from kernelloop.optimizers.offline.optimizer import OfflineOptimizer
from kernelloop.program.init import generate
from kernelloop.program.split import candidate_editable_part, split_program
from kernelloop.tools.nvcc import find_toolchain
from kernelloop.verify.gate import static_gates

from .conftest import shared_cache_dir
from .outside_specs import OUTSIDE, SPECS
from .test_offline_optimizer import request_for

PROGRAM = "row_softmax_stream.cu"


def _program() -> str:
    return generate((OUTSIDE / PROGRAM).read_text(), SPECS[PROGRAM], PROGRAM).program


def test_the_template_launches_on_the_stream_the_launcher_is_given():
    proposal = OfflineOptimizer().propose(request_for(_program(), "softmax"))
    (call,) = re.findall(r"kl\w*_softmax_run\([^;]*\);", proposal.source)
    assert call.endswith(", stream);"), call
    # the template's launches on the stream it is handed; the baseline's own, kept beyond the
    # template's sizes, on the stream as the baseline wrote it
    launches = re.findall(r"<<<[^>]*>>>", proposal.source)
    assert launches and all(re.search(r", (0|kl\w*_shmem), (kl\w*_)?stream>>>$", launch) for launch in launches), launches
    assert any(re.search(r", 0, kl\w*_stream>>>$", launch) for launch in launches), launches


def test_a_launch_on_the_default_stream_hands_the_template_the_default_stream():
    text = _program().replace("<<<blocks, threads, 0, stream>>>", "<<<blocks, threads>>>")
    proposal = OfflineOptimizer().propose(request_for(text, "softmax"))
    (call,) = re.findall(r"kl\w*_softmax_run\([^;]*\);", proposal.source)
    assert call.endswith(", 0);"), call


@pytest.mark.parametrize("stream, taken", [
    ("stream ? stream : cudaStreamPerThread", True),  # made of the launcher's parameters: kept as written
    ("pick_stream()", False),  # a call: the rewritten launcher would not make it
])
def test_a_stream_the_launcher_computes_is_kept_only_when_made_of_its_parameters(stream, taken):
    text = _program().replace("<<<blocks, threads, 0, stream>>>", f"<<<blocks, threads, 0, {stream}>>>")
    text = text.replace("cudaError_t softmax_forward(", "static cudaStream_t pick_stream() { return 0; }\n"
                                                          "cudaError_t softmax_forward(")
    split = split_program(text, PROGRAM)
    part = read_editable(split.editable, split.harness, split.exported)
    (launcher,) = [lau for lau in part.launchers if lau.fn.name == "softmax_forward"]
    if taken:
        assert launcher.problem is None and launcher.stream is not None, launcher.problem
    else:
        assert launcher.problem is not None and "launches on a stream it computes (pick_stream())" in launcher.problem


@pytest.mark.nvcc
def test_the_stream_template_candidate_passes_the_static_gates():
    text = _program()
    split = split_program(text, PROGRAM)
    proposal = OfflineOptimizer().propose(request_for(text, "softmax"))
    editable, _ = candidate_editable_part(proposal.source, split)
    result = static_gates(split, editable, arch="sm_86", settings=Settings(cache_dir=shared_cache_dir()),
                          toolchain=find_toolchain())
    assert not result.violations, [v.describe() for v in result.violations]
    assert result.candidate is not None and result.candidate.ok, result.candidate.log[-2000:]


def test_the_zeroing_a_reduction_adds_runs_on_the_launch_stream():
    # red team round 81: the template's atomics went to the caller's stream, the zeroing it adds to the legacy one
    from .conftest import FIXTURES
    from .test_offline_optimizer import analysis_of
    text = (FIXTURES / "heldout" / "single_block_sum.cu").read_text()
    launch = re.search(r"(\w+)<<<([^>]*)>>>", text)
    assert launch is not None
    streamed = text.replace(launch.group(0), f"{launch.group(1)}<<<{launch.group(2)}, 0, cudaStreamPerThread>>>")
    (match,) = analysis_of(streamed).matches
    assert match.family == "reduction"
    assert match.zeroing == ["::cudaMemsetAsync(res, 0, sizeof(float), cudaStreamPerThread);"], match.zeroing


def test_a_transposed_operand_on_a_given_stream_is_no_gemm():
    # red team round 81: the row-major copy's workspace is kept between calls, shared by calls on two streams
    from .test_matmul_layouts import _program
    text = _program("matmul_atb_naive.cu")
    launch = re.search(r"(\w+)<<<([^>]*)>>>", text)
    assert launch is not None
    streamed = text.replace(launch.group(0), f"{launch.group(1)}<<<{launch.group(2)}, 0, cudaStreamPerThread>>>")
    from kernelloop.optimizers.offline.analysis import analyze
    split = split_program(streamed, "mm.cu")
    analysis = analyze(split.editable, split.harness, split.exported, split.preamble)
    assert not analysis.matches, [m.family for m in analysis.matches]
