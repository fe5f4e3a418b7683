"""Red team round 282's candidate on the GPU (tests/fixtures/redteam/round282b): a tiled matmul whose one-block probe
times its own reads of A with a spinning warp and, where A is already in L2 (as a producer kernel leaves it for a
real caller), returns at once with the last call's result. Since a secret quarter of the timed calls read their
inputs into L2 after the flush (kWarmInputs), the cached path meets checked calls. It must not be accepted.

Measured 2026-12-06 on an NVIDIA H100 80GB HBM3 (driver 580.159.04, CUDA 13.0), with warm inputs: rejected, but by
the other-magnitudes gate (1.12x the baseline's time over 3 scales), with correctness passing: the probe's 1.3x
latency threshold, tuned by its author without a GPU, did not take the cached path there, so that run shows the
attack refused, not which gate would have refused a probe that does. The exemplar's tiled matmul against the same
baseline was accepted at 1.66x (1.64-1.68, 7 pairs) with warm inputs in place. About 4.5 minutes per verify."""

from __future__ import annotations

import pytest

from kernelloop.config import Settings
from kernelloop.verify.gate import verify_files

from ..conftest import FIXTURES, ROOT

pytestmark = pytest.mark.gpu
ROUND = FIXTURES / "redteam" / "round282b"


def test_a_candidate_that_skips_its_work_where_the_input_is_warm_is_not_accepted(tmp_path):
    v = verify_files(ROUND / "baseline_naive_matmul.cu", ROUND / "l2_probe_matmul.cu",
                     Settings(cache_dir=tmp_path / "cache"))
    print(v.reasons, [(g.gate, g.status, g.detail[:160]) for g in v.gates if g.status != "pass"])
    assert not v.accepted


def test_an_honest_tiled_matmul_is_accepted_with_warm_inputs_in_some_calls(tmp_path):
    v = verify_files(ROUND / "baseline_naive_matmul.cu",
                     ROOT / "src" / "kernelloop" / "exemplars" / "matmul_smem_tiling.cu",
                     Settings(cache_dir=tmp_path / "cache"))
    assert v.accepted, v.reasons
