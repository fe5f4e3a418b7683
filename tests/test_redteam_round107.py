"""Red team round 107 (tests/fixtures/redteam/round107/): (a) a softmax's subtracted max moved
between its sum and its store (`m += 1e-5f`, or only for rows holding a value >= 100) was read as one
value because the two were compared by spelling; (b) a kernel parameter (`n &= ~3`, `if (n > 4096) n
= 4096`) or a pointer parameter (`in += 1`) written in the kernel still read as the launch's
argument; (c) small outputs kept at fp16 precision passed inside the near-zero floor (in
test_tolerance.py)."""

from __future__ import annotations

import pytest

from kernelloop.optimizers.offline.analysis import analyze
from kernelloop.optimizers.offline.optimizer import _context

from .conftest import FIXTURES, ROOT
from .test_offline_optimizer import request_for

ROUND = FIXTURES / "redteam" / "round107"


def _verdict(text: str, launcher: str):
    request = request_for(text, "baseline")
    preamble, harness, exported = _context(request)
    analysis = analyze(request.baseline_editable, harness, exported, preamble)
    return next(v for v in analysis.verdicts if v.launcher == launcher)


def _reason(verdict, family: str) -> str:
    return next(m.reason for m in verdict.mismatches if m.family == family)


@pytest.mark.parametrize("name", ["baseline.cu", "baseline_always.cu"])
def test_a_max_changed_between_the_sum_and_the_store_is_no_softmax(name):
    verdict = _verdict((ROUND / "a_softmax_shift" / name).read_text(), "launch_softmax")
    assert verdict.match is None or verdict.match.family != "softmax"
    assert "not exp(x - max) / sum" in _reason(verdict, "softmax")


SOFTMAX = (ROOT / "kernels" / "row_softmax.cu").read_text()


def _softmax_with(old: str, new: str) -> str:
    assert old in SOFTMAX
    return SOFTMAX.replace(old, new, 1)


def test_the_bundled_softmax_is_still_one():
    verdict = _verdict(SOFTMAX, "launch_softmax")
    assert verdict.match is not None and verdict.match.family == "softmax", verdict.mismatches


@pytest.mark.parametrize("old, new", [
    # a shadowing `m` in the store loop: another variable of the same spelling
    ("y[c] = expf(x[c] - m) / s;",
     "{ float m = 0.5f; y[c] = expf(x[c] - m) / s; }"),
    # written inside the store loop, after the store: later columns see another m
    ("y[c] = expf(x[c] - m) / s;",
     "{ y[c] = expf(x[c] - m) / s; m += 1e-6f; }"),
    # its address handed to a call: written where no assignment shows
    ("y[c] = expf(x[c] - m) / s;",
     "{ y[c] = expf(x[c] - m) / s; nudge(&m); }"),
])
def test_any_write_or_shadow_between_the_sum_and_the_store_is_seen(old, new):
    text = _softmax_with(old, new).replace("__global__", "__device__ void nudge(float* p) { *p += 1e-6f; }\n"
                                           "__global__", 1)
    verdict = _verdict(text, "launch_softmax")
    assert verdict.match is None or verdict.match.family != "softmax", verdict.match


@pytest.mark.parametrize("name, launcher", [("reduction_baseline.cu", "launch_reduce_sum"),
                                            ("matmul_baseline.cu", "launch_matmul")])
def test_a_parameter_the_kernel_writes_is_not_the_launchs_value(name, launcher):
    verdict = _verdict((ROUND / "b_param_written" / name).read_text(), launcher)
    assert verdict.match is None, verdict.match


REDUCTION = (ROOT / "kernels" / "sum_reduction.cu").read_text()


@pytest.mark.parametrize("moved", ["in += 1;", "in = in + (n > 1 ? 1 : 0);", "n -= 1;", "++n;"])
def test_a_pointer_or_count_moved_in_the_kernel_is_read_as_unknown(moved):
    head = "  unsigned int tid = threadIdx.x;\n"
    assert head in REDUCTION
    text = REDUCTION.replace(head, head + f"  {moved}\n", 1)
    verdict = _verdict(text, "launch_reduce_sum")
    assert verdict.match is None, verdict.match
    assert _verdict(REDUCTION, "launch_reduce_sum").match is not None
