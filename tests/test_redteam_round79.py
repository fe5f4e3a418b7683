"""Red team round 79 (tests/fixtures/redteam/round79/REPORT.md), on round 78's commit: the freed
blocks' copies under graph capture (the recorders now end the run when the part allocates or frees
inside a capture: tests/gpu/test_part_state_gpu.py), a false refusal of a per-call workspace of
float atomics (a known limit: docs/verifier.md), and the near-zero floor's budget counted over a
baseline's infinities (here)."""

from __future__ import annotations

import numpy as np

from kernelloop.verify.outputs import compare_dumps


def test_the_floor_budget_counts_only_the_values_judged_with_a_tolerance():
    # a mostly -inf buffer (a banded mask: 2048 finite scores of 262144) whose finite values are put on
    # an absolute grid just inside rtol x RMS: 48% zeroed, 80% off by more than 1% of their own size.
    # The infinities are compared bit for bit and never lean on the floor: they must not buy budget.
    rng = np.random.default_rng(2)
    n = 1 << 18
    base = np.full(n, -np.inf, np.float32)
    at = rng.choice(n, n // 128, replace=False)
    base[at] = np.exp(rng.standard_normal(at.size) * 4).astype(np.float32)
    finite = np.isfinite(base)
    step = np.float32(2.0 ** -15 * np.sqrt(np.mean(base[finite].astype(np.float64) ** 2)) * 1.9)
    cand = base.copy()
    cand[finite] = (np.round(base[finite] / step) * step).astype(np.float32)
    alone = compare_dumps([base[finite]], [cand[finite]])
    assert not alone.match and "small values flushed or approximated" in alone.problem
    masked = compare_dumps([base], [cand])
    assert not masked.match and "small values flushed or approximated" in masked.problem, masked.problem
    assert compare_dumps([base], [base.copy()]).match
