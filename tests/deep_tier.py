"""Writes tests/deep_tier.txt: the tests of the deep tier, chosen by what they cost.

The deep tier holds the tests that run the verifier's whole static battery on candidates that pass
it, or whole optimize flows: tens of nvcc builds each (seconds to minutes on one core). The default
test command leaves them out (`-m "not deep"` in pyproject's addopts) so CI stays near 15 minutes
on a 2-core machine; `python3 -m pytest -q -n auto -m deep` runs them, and `-m "deep or not deep"`
runs everything.

Usage: run the suite with `--durations=0` (`python3 -m pytest -q -n auto -m "deep or not deep"
--durations=0 > LOG`), then `python3 tests/deep_tier.py LOG [LOG ...]`: every test whose set-up and
call took THRESHOLD (5) seconds or more of one worker in any LOG goes into the list, save our own
attack fixtures (OWN_THRESHOLD): a refusal is what CI must never stop checking, so they stay in the
default tier below 30 s. A listed test no LOG measured stays listed (a run without it measured nothing
of it); delete a line by hand to bring a test back.
"""

from __future__ import annotations

import re
import sys
from collections import defaultdict
from pathlib import Path

LIST = Path(__file__).with_name("deep_tier.txt")
THRESHOLD = 5.0
# Tests kept in the default tier up to a cost of their own: a test id's prefix, and its threshold.
OWN_THRESHOLD = {
    # the whole static battery passing an honest candidate through the CLI: worth it in every CI run
    "tests/test_cli.py::test_static_check_passes_an_honest_candidate": float("inf"),
    # our own attack fixtures (the honest exemplars among them cost minutes and go deep)
    "tests/test_candidates_static.py::test_static_gates[": 30.0,
    "tests/test_candidates_static.py::test_object_and_program_scans_catch_what_the_source_scan_would[": 30.0,
    # the precision and module-memory scans' refusals, the placement and slowdown experiments' decisions
    "tests/test_precision.py::": 30.0,
    "tests/test_placement.py::": 30.0,
    "tests/test_confirm_slowdowns.py::": 30.0,
    # the red team rounds' refusals, and the host-code scan's channels and its false refusals
    "tests/test_redteam_round": 30.0,
    "tests/test_frame_writes.py::": float("inf"),
    # the verifier's newest experiments and the harness pieces they rest on (2026-12-04)
    # (since 2026-12-08 their costliest tests, 7 s and more, go deep: CI had reached its 15 minutes)
    "tests/test_wide_integers.py::": 7.0,
    "tests/test_harness_groups.py::": 10.0,
    "tests/test_nested_check_macro.py::": float("inf"),
    # the gate's own decisions on scripted runs (caller layouts, memcheck's exact buffers, special values)
    "tests/test_nonfinite.py::": 20.0,
    # init's refusal of state its left-out main sets
    "tests/test_init_state.py::test_init_refuses": 30.0,
    # the built wheel, installed alone, runs every command that reads its shipped files (issue 12: the
    # wheel smoke check runs in CI)
    "tests/test_packaging.py::test_the_built_wheel_works_outside_the_source_tree": float("inf"),
    # retrieval quality must fail, not skip, where the corpus lacks its notes (issue 12)
    "tests/test_retrieval_quality.py::": float("inf"),
}
_DURATION = re.compile(r"^([0-9.]+)s (setup|call|teardown) +(.+)$")


def threshold_of(test_id: str) -> float:
    return next((t for prefix, t in OWN_THRESHOLD.items() if test_id.startswith(prefix)), THRESHOLD)


def costs_from_log(text: str) -> dict[str, float]:
    """Seconds per test id (set-up + call + teardown) from pytest's `--durations` report."""
    costs: dict[str, float] = defaultdict(float)
    for line in text.splitlines():
        match = _DURATION.match(line.strip())
        if match:
            costs[match.group(3)] += float(match.group(1))
    return dict(costs)


def listed() -> set[str]:
    if not LIST.exists():
        return set()
    return {line.strip() for line in LIST.read_text().splitlines() if line.strip() and not line.startswith("#")}


def main(argv: list[str]) -> int:
    costs: dict[str, float] = {}
    for log in argv[1:]:
        for test_id, seconds in costs_from_log(Path(log).read_text(errors="replace")).items():
            costs[test_id] = max(seconds, costs.get(test_id, 0.0))
    deep = {t for t, s in costs.items() if s >= threshold_of(t)} | (listed() - set(costs))
    header = [f"# The deep tier: tests that took {THRESHOLD:g} s or more of one worker (2-core machine) in a",
              "# `--durations=0` run (our own attack fixtures: 30 s). Written by tests/deep_tier.py; read by",
              "# tests/conftest.py.", ""]
    LIST.write_text("\n".join(header + sorted(deep)) + "\n")
    kept = sum(s for t, s in costs.items() if t not in deep)
    print(f"{len(deep)} tests in the deep tier; {kept:.0f} s of measured worker time stays in the default tier")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
