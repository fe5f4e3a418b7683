"""`kernelloop init --capture` on a real GPU: each outside-style program with its own main is
built and run once under the capture library; the launch it records is what the program really
launched, and the program init writes from it is a contract-v2 program the verifier runs against
itself (A/A: about 1.00x, never accepted).

Set KERNELLOOP_GPU_REPORT_DIR=folder to keep each raw capture there (tests/fixtures/capture/
holds the ones the CPU tests read)."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

from kernelloop.config import Settings, VerifySettings
from kernelloop.program.init import InitSpec
from kernelloop.capture_init import init_from_capture
from kernelloop.tools.capture import CaptureLimits
from kernelloop.tools.gpu import detect_gpus
from kernelloop.verify.gate import verify_files
from kernelloop.verify.verdict import Reason

from ..outside_specs import OUTSIDE

pytestmark = pytest.mark.gpu

# program -> (kernel, grid, block, scalar values as the program launches it, template arguments)
CAPTURED = {
    "matrix_mul_sample.cu": ("MatrixMulCUDA", (40, 20, 1), (32, 32, 1), {"wA": "640", "wB": "1280"}, "32"),
    "gelu_forward_main.cu": ("gelu_forward_kernel1", (49152, 1, 1), (128, 1, 1), {"N": "6291456"}, None),
    "embedding_lookup_main.cu": ("embed_tokens", (8192, 1, 1), (256, 1, 1), {"num_tokens": "8192", "dim": "256"},
                                 None),
}


def _capture(name: str, tmp_path: Path):
    keep = os.environ.get("KERNELLOOP_GPU_REPORT_DIR")
    result, capture = init_from_capture(OUTSIDE / name, InitSpec(), cache_dir=tmp_path / "cache",
                                        arch=detect_gpus()[0].arch, limits=CaptureLimits(),
                                        keep=(Path(keep) / f"capture-{Path(name).stem}.jsonl") if keep else None)
    return result, capture


@pytest.mark.parametrize("name", sorted(CAPTURED))
def test_the_capture_records_what_the_program_launched(name, tmp_path):
    kernel, grid, block, values, template_args = CAPTURED[name]
    result, capture = _capture(name, tmp_path)
    assert capture.complete and capture.exit_code == 0, capture.output_tail
    top = next(k for k in capture.kernels if k.base_name == kernel)
    example = top.shapes[0].example
    assert example.grid == grid and example.block == block
    assert top.template_args == template_args
    assert all(a.pointer is None or a.pointer.memory == "device" for a in example.args)
    assert top.gpu_ns > 0 and all(a.raw is not None for a in example.args)
    assert result.kernel == kernel
    for arg, value in values.items():
        assert f"{arg} = " in result.program and value in result.program, (arg, value)


@pytest.mark.parametrize("name", sorted(CAPTURED))
def test_a_captured_program_against_itself_is_about_1x_and_rejected(name, tmp_path):
    result, _ = _capture(name, tmp_path)
    program = tmp_path / f"{Path(name).stem}_kl.cu"
    program.write_text(result.program)
    v = verify_files(program, program, Settings(cache_dir=tmp_path / "cache", verify=VerifySettings()))
    # Never accepted; a kernel of a few microseconds may be too noisy to call (the verifier then
    # says "inconclusive, retry" rather than a figure: seen once on the embedding lookup).
    assert not v.accepted and v.reasons in ([Reason.not_faster], [Reason.inconclusive]), v.summary
    if v.reasons == [Reason.not_faster]:
        assert 0.9 <= v.speed.speedup <= 1.1
    assert v.contract == 2 and all(c.comparison.match for c in v.checks)


def test_the_embedding_ids_are_drawn_below_the_vocabulary_the_capture_saw(tmp_path):
    result, _ = _capture("embedding_lookup_main.cu", tmp_path)
    found = re.search(r"int32_t\* tokens = h\.input<int32_t>\(.*kl::UniformInt<int32_t>\{(\d+), (\d+)\}", result.program)
    assert found, result.program  # ids were (i * 7919 + 13) % 5000: in [0, 5000)
    low, high = int(found.group(1)), int(found.group(2))
    assert 0 <= low < 100 and 4900 < high <= 5000


def test_a_copy_of_the_capture_is_kept_where_asked(tmp_path):
    keep = tmp_path / "kept.jsonl"
    init_from_capture(OUTSIDE / "gelu_forward_main.cu", InitSpec(), cache_dir=tmp_path / "cache",
                      arch=detect_gpus()[0].arch, limits=CaptureLimits(), keep=keep)
    assert keep.is_file() and '"kind":"launch"' in keep.read_text()
    assert shutil.which("nvcc")
