"""Writes tests/deep_tier.txt: the tests of the deep tier, chosen by what they cost.

The deep tier holds the tests that run the verifier's whole static battery on candidates that pass
it, or whole optimize flows: tens of nvcc builds each (seconds to minutes on one core). The default
test command leaves them out (`-m "not deep"` in pyproject's addopts) so CI stays near 15 minutes
on a 2-core machine; `python3 -m pytest -q -n auto -m deep` runs them, and `-m "deep or not deep"`
runs everything.

Usage: run the whole suite with `--durations=0` (`python3 -m pytest -q -n auto -m "deep or not deep"
--durations=0 > LOG`), then `python3 tests/deep_tier.py LOG [SECONDS]`: every test whose set-up and
call took SECONDS (5) or more of one worker's time goes into the list, apart from the few kept in the
default tier on purpose (KEPT_IN_DEFAULT).
"""

from __future__ import annotations

import re
import sys
from collections import defaultdict
from pathlib import Path

LIST = Path(__file__).with_name("deep_tier.txt")
# Worth their cost in every CI run: the whole static battery passing an honest candidate through the CLI.
KEPT_IN_DEFAULT = {"tests/test_cli.py::test_static_check_passes_an_honest_candidate"}
_DURATION = re.compile(r"^([0-9.]+)s (setup|call|teardown) +(.+)$")


def costs_from_log(text: str) -> dict[str, float]:
    """Seconds per test id (set-up + call + teardown) from pytest's `--durations` report."""
    costs: dict[str, float] = defaultdict(float)
    for line in text.splitlines():
        match = _DURATION.match(line.strip())
        if match:
            costs[match.group(3)] += float(match.group(1))
    return dict(costs)


def main(argv: list[str]) -> int:
    log, threshold = Path(argv[1]), float(argv[2]) if len(argv) > 2 else 5.0
    costs = costs_from_log(log.read_text(errors="replace"))
    deep = sorted(t for t, s in costs.items() if s >= threshold and t not in KEPT_IN_DEFAULT)
    header = [f"# The deep tier: tests that took {threshold:g} s or more of one worker (2-core machine) in a",
              "# `--durations=0` run. Written by tests/deep_tier.py; read by tests/conftest.py.", ""]
    LIST.write_text("\n".join(header + deep) + "\n")
    kept = sum(s for t, s in costs.items() if t not in deep)
    print(f"{len(deep)} tests in the deep tier ({sum(costs[t] for t in deep):.0f} s); "
          f"{kept:.0f} s of worker time stays in the default tier")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
