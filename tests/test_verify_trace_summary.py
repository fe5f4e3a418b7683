"""benchmarks/verify_trace.py's summary of where a verification's time goes, on a real H100 capture."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from .conftest import FIXTURES

_SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "verify_trace.py"


def _module():
    spec = importlib.util.spec_from_file_location("verify_trace", _SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_steps_that_differ_only_in_seeds_sizes_and_scales_are_one_kind():
    trace = (FIXTURES / "gpu_captures" / "verify_trace_rmsnorm_gridstride_h100.log").read_text()
    rows = _module().kinds_of_steps(trace)
    total = sum(seconds for _, seconds, _ in rows)
    assert 460 < total < 470  # the whole verification, to the verdict line
    kinds = {kind: (seconds, count) for kind, seconds, count in rows}
    drawn = kinds["correctness: seed N (a size drawn at verify time): candidate, then baseline"]
    assert drawn[1] >= 10 and 50 < drawn[0] < 70  # one kind, many steps
    assert any(k.startswith("memcheck: compute-sanitizer") for k in kinds)
    timing_pairs = [k for k in kinds if k.startswith("timing: pair N: baseline N ms")]
    assert len(timing_pairs) == 1 and kinds[timing_pairs[0]][1] == 7
    # the correctness experiments are most of the time (the figure the closing note gives)
    correctness = sum(seconds for kind, seconds, _ in rows if kind.startswith("correctness:"))
    assert correctness > 0.8 * total


def test_a_trace_with_one_step_has_nothing_to_total():
    assert _module().kinds_of_steps("     1.0 s  compile: x\n") == []
