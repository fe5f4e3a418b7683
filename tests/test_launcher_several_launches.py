"""A launcher of several launches (the commonest shape the kept-aside sets found the templates
refusing: "launches 2 kernels (a template replaces exactly one launch)"): when each launch is a
statement of its own at the top of the body, a template replaces one launch in place and the rest
of the body stays as written (issue 11: optimize the hot launch, keep the others)."""

from __future__ import annotations

import re

import tempfile
from pathlib import Path

import pytest

from kernelloop.config import Settings
from kernelloop.optimizers.base import NoMoreCandidates
from kernelloop.optimizers.offline import OfflineOptimizer
from kernelloop.optimizers.offline.launcher import read_editable
from kernelloop.optimizers.offline.optimizer import _context
from kernelloop.program.split import candidate_editable_part, split_program

from .conftest import ROOT, shared_cache_dir
from .test_offline_optimizer import request_for

BASELINE = (ROOT / "kernels" / "sum_reduction.cu").read_text()
LAUNCH = "  reduce_interleaved_kernel<<<grid, block, block * sizeof(float)>>>(in, out, n);\n"
HALVE = "__global__ void halve_kernel(float* out) { out[0] = 0.5f * out[0]; }\n\n"


def _program(after_launch: str, before_launch: str = "") -> str:
    text = BASELINE.replace("// Zeroes *out itself", HALVE + "// Zeroes *out itself", 1)
    assert LAUNCH in text
    return text.replace(LAUNCH, before_launch + LAUNCH + after_launch, 1)


def _launcher(text: str):
    request = request_for(text, "baseline")
    _, harness, exported = _context(request)
    part = read_editable(request.baseline_editable, harness, exported)
    return next(lau for lau in part.launchers if lau.fn.name == "launch_reduce_sum")


def _first_proposal(text: str) -> str:
    return OfflineOptimizer(cache_dir=Path(tempfile.mkdtemp(prefix="kl-ml-"))).propose(
        request_for(text, "baseline")).source


TWO = _program("  CUDA_CHECK(cudaGetLastError());\n  halve_kernel<<<1, 1>>>(out);\n")


def test_each_launch_gets_a_view_and_the_launcher_keeps_its_problem_for_the_tiers():
    lau = _launcher(TWO)
    assert lau.problem == "launches 2 kernels (a template replaces exactly one launch)"
    assert [v.kernel for v in lau.per_launch] == ["reduce_interleaved_kernel", "halve_kernel"]
    first, second = lau.per_launch
    assert first.problem is None and first.in_place is not None
    # since round 103 no template takes a launcher's zeroing as done (it zeroes what it needs
    # itself), so a zeroing before an earlier launch no longer stops the second view (round 100)
    assert second.problem is None and second.in_place is not None


def test_the_template_replaces_its_launch_and_keeps_the_rest_as_written():
    source = _first_proposal(TWO)
    launcher = source[source.index("void launch_reduce_sum"):]
    lines = [ln.strip() for ln in launcher.splitlines()]
    run = next(i for i, ln in enumerate(lines) if "_reduction_run(" in ln)
    assert lines[run + 1:run + 3] == ["CUDA_CHECK(cudaGetLastError());", "halve_kernel<<<1, 1>>>(out);"], launcher
    assert lines[1] == "CUDA_CHECK(cudaMemsetAsync(out, 0, sizeof(float)));"
    # the replaced launch's kernel stays: the candidate launches it beyond the template's sizes
    assert source.count("reduce_interleaved_kernel<<<") == 1 and "__global__ void halve_kernel" in source


def test_a_kernel_launched_again_by_the_kept_statements_is_kept():
    again = _program("  halve_kernel<<<1, 1>>>(out);\n" + LAUNCH)
    source = _first_proposal(again)
    assert "__global__ void reduce_interleaved_kernel" in source
    # the kept launch, and the replaced one kept beyond the template's sizes
    assert source.count("reduce_interleaved_kernel<<<") == 2 and "_reduction_run(" in source


def test_launches_in_a_loop_get_no_template():
    program = _program("  for (int k = 0; k < 2; ++k) halve_kernel<<<1, 1>>>(out);\n")
    assert _launcher(program).per_launch == []  # replacing one would change how often it runs
    try:
        source = _first_proposal(program)
    except NoMoreCandidates:
        return
    assert "_reduction_run(" not in source


def test_a_zeroing_after_the_replaced_launch_stays_after_it():
    # round 100 refused this; a template's call in the launch's place keeps the zeroing after it
    from .test_launch_in_place import _assert_in_place
    program = _program("  CUDA_CHECK(cudaMemsetAsync(out, 0, sizeof(float)));\n  halve_kernel<<<1, 1>>>(out);\n")
    _assert_in_place(program, _first_proposal(program), "launch_reduce_sum")


@pytest.mark.nvcc
def test_the_in_place_proposal_passes_every_static_gate():
    from kernelloop.tools.nvcc import find_toolchain
    from kernelloop.verify.gate import static_gates
    split = split_program(TWO, "b.cu")
    editable, _ = candidate_editable_part(_first_proposal(TWO), split, "candidate")
    result = static_gates(split, editable, arch="sm_90", settings=Settings(cache_dir=shared_cache_dir()),
                          toolchain=find_toolchain())
    assert result.candidate is not None and result.candidate.ok, result.candidate.log if result.candidate else ""
    assert result.violations == [], [v.describe() for v in result.violations]


ROUND100 = ROOT / "tests" / "fixtures" / "redteam" / "round100"


@pytest.mark.parametrize("path", ["b_inplace_zeroing_stale/baseline.cu", "c_inplace_shadowed_name/baseline.cu"])
def test_in_place_the_facts_must_hold_where_the_launch_is(path):
    # red team round 100: a zeroing before an earlier launch that writes the output (the template
    # took it as done), and a local whose value names a global N that a later local shadows (the
    # value was inlined where N is the local). Now the template zeroes for itself right before its
    # call, and reads the launch's words as written where the launch was.
    from .test_launch_in_place import _assert_in_place
    text = (ROUND100 / path).read_text()
    try:
        source = _first_proposal(text)
    except NoMoreCandidates:
        return
    _assert_in_place(text, source, "launch_reduce_sum")
    launcher = source[source.index("void launch_reduce_sum"):]
    run = launcher.index("_reduction_run(")
    if "sum_one_block" in text:  # it stores its sum: the template zeroes right before its own launch
        assert re.search(r"::cudaMemsetAsync\(out, 0, sizeof\(float\), 0\);\s*kl\d?_reduction_run\(", launcher), launcher
    else:
        assert "(int)(count)" in launcher[run:run + 80] and "N" not in launcher[run:run + 80], launcher
