"""Honest controls the verifier must accept (no false rejections), beyond the suite's own
exemplars: a block-reduce dot product whose sum cancels, and a true 1.25x candidate (the same
kernel launched 4 times instead of 5, identical numerics). A/A is in test_verify_gpu.py; the
20-of-20 acceptance rate of the 1.25x control is measured by benchmarks/verify_overhead.py.
"""

from __future__ import annotations

import pytest

from kernelloop.config import Settings, VerifySettings
from kernelloop.verify.gate import verify_files

from ..conftest import FIXTURES

pytestmark = pytest.mark.gpu
CONTROLS = FIXTURES / "controls"


@pytest.fixture(scope="module")
def settings(tmp_path_factory):
    return Settings(cache_dir=tmp_path_factory.mktemp("gpu-cache"), verify=VerifySettings())


def test_block_reduce_dot_product_is_accepted(settings):
    v = verify_files(CONTROLS / "dot_product.cu", CONTROLS / "dot_block_reduce.cu", settings)
    assert v.accepted, v.summary
    assert v.contract == 2 and v.gate("speed of light").status == "pass"


def test_a_true_1_25x_candidate_is_accepted(settings):
    v = verify_files(CONTROLS / "repeat5_matmul.cu", CONTROLS / "repeat4.cu", settings)
    assert v.accepted, v.summary
    assert 1.2 < v.speed.speedup < 1.3
