"""Inputs of other shapes on their own range (kl::shaped_value, red team round 246): in half the heavy stressed calls
of correctness runs a spiked input's values are mapped onto [lo, hi) by u^P, keeping order and range but not the
uniform bulk, so a path keyed on the bulk's shape (how many probed values lie far above their median) meets the
shapes a caller's data has. Built with nvcc and run on the host: no GPU needed."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from kernelloop.tools.nvcc import harness_include_dir

PROGRAM = Path(__file__).parent / "harness" / "shapes.cu"
pytestmark = [pytest.mark.nvcc, pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")]


@pytest.fixture(scope="module")
def shapes(tmp_path_factory) -> dict[float, np.ndarray]:
    binary = tmp_path_factory.mktemp("shapes") / "shapes"
    built = subprocess.run(["nvcc", "-std=c++17", "-I", str(harness_include_dir()), str(PROGRAM), "-o", str(binary)],
                           capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr[-2000:]
    ran = subprocess.run([str(binary)], capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr
    return {float(w[0]): np.array([float(x) for x in w[1:]]) for w in (line.split() for line in ran.stdout.splitlines())}


def test_every_shape_keeps_the_order_and_the_half_open_range(shapes):
    assert set(shapes) == {0.125, 0.25, 0.5, 2.0, 4.0, 8.0, 16.0}
    for power, values in shapes.items():
        assert np.all(np.diff(values) >= 0), power
        assert values.min() >= -1.0 and values.max() < 3.0, power
        # round 247: nothing closer to lo than the generator's own step (2^-24 of the range): no subnormal, no zero
        assert np.all(values - (-1.0) >= 4.0 * 2.0**-24 * 0.99), power


def test_the_shapes_change_the_bulk_a_probe_of_the_median_sees(shapes):
    """The round 246 key: more than 16 of 256 probed values above 2.5x their median (values shifted to be
    positive). Uniform data never trips it; most powers do."""
    def trips(values: np.ndarray) -> bool:
        probe = np.random.default_rng(1).choice(values - values.min() + 1e-6, 256)
        return int((probe > 2.5 * np.median(probe)).sum()) > 16
    uniform = np.linspace(-1.0, 3.0, 1000, endpoint=False)
    assert not trips(uniform)
    assert sum(trips(values) for values in shapes.values()) >= 3
    heavy = shapes[16.0]
    assert np.median(heavy) < -0.99 and heavy.max() > 2.5  # most values near lo, a few large: a mix of magnitudes
