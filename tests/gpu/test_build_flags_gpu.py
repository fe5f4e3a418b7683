"""verify.build_flags on a GPU: a program verified for the build its user ships (PyTorch's half
switches with --expt-relaxed-constexpr, and C++20) is built, run and timed in that build, and the
verdict says which build it answers for. The candidate is the offline optimizer's register-blocked
rewrite of the bundled naive matmul (tests/fixtures/build_flags/naive_matmul_tiled.cu)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelloop.config import Settings, VerifySettings
from kernelloop.verify.gate import verify_files

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[2]
FLAGS = ["-D__CUDA_NO_HALF_OPERATORS__", "-D__CUDA_NO_HALF_CONVERSIONS__", "-D__CUDA_NO_BFLOAT16_CONVERSIONS__",
         "-D__CUDA_NO_HALF2_OPERATORS__", "--expt-relaxed-constexpr", "-std=c++20"]


def test_an_honest_rewrite_is_accepted_in_the_declared_build(tmp_path):
    settings = Settings(cache_dir=tmp_path, verify=VerifySettings(build_flags=FLAGS))
    v = verify_files(ROOT / "kernels" / "naive_matmul.cu",
                     ROOT / "tests" / "fixtures" / "build_flags" / "naive_matmul_tiled.cu", settings)
    assert v.accepted, v.summary
    assert any("built with your build flags" in n and "-std=c++20" in n for n in v.notes), v.notes
    assert v.settings.build_flags == FLAGS
