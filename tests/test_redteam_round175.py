"""Red team round 175 (tests/fixtures/redteam/round175/README.md), on round 174's fix: three candidates
that pass every static gate and are wrong in a build the verifier does not make.

(c1, c4) The default stream's kind reaches a part through what calls *answer*, not only through
their order: the legacy stream cannot be captured (cudaStreamBeginCapture(0) fails) and per-thread
stream 0 can (c1, run on an H200: the per-thread build summed half the row); a capture of
cudaStreamPerThread, a blocking stream in the legacy build only, fails a legacy-stream launch (c4).
Closed by class in the host-code scan (rule `default-stream`): a part may not capture or query a
stream (hostcode.STREAM_MODE_CALLS) unless the build flags name the default stream.

(c5) The toolkit's own configuration switches (`-DCCCL_DISABLE_INT128_SUPPORT` takes `__int128` out
of `cuda::std::is_integral`) were in no list. Closed by class: the switches are read from the
toolkit's headers (verify/toolkit_switches.py: every configuration name a condition tests and no
header defines), reserved (the part may not name one) and set all at once in a build the part is
compared in where its unit includes CCCL."""

from __future__ import annotations

import pytest

from kernelloop.config import Settings, VerifySettings
from kernelloop.tools.nvcc import find_toolchain
from kernelloop.verify.static_check import check_static_files
from kernelloop.verify.toolkit_switches import NOT_SET_TOGETHER, switches_set_together, toolkit_config_switches

from .conftest import FIXTURES, shared_cache_dir
from .test_hostcode import scan
from .test_redteam_round166 import BASE

CASE = FIXTURES / "redteam" / "round175"


def _check(candidate_text: str, tmp_path, build_flags: tuple[str, ...] = ()):
    candidate = tmp_path / "cand.cu"
    candidate.write_text(candidate_text)
    return check_static_files(BASE, candidate, Settings(cache_dir=shared_cache_dir(), verify=VerifySettings(
        arch="sm_90", build_flags=list(build_flags))))


@pytest.mark.nvcc
@pytest.mark.parametrize("case", ["c1", "c4"])
def test_a_part_capturing_or_querying_the_default_stream_is_refused(case, tmp_path):
    check = _check((CASE / case / "cand.cu").read_text(), tmp_path)
    assert not check.ok and "default-stream" in {v.rule for v in check.violations}, check.summary


_CAPTURE = """
void launch(float* x, int n, cudaStream_t given) {
  static cudaStream_t s = nullptr;
  if (s == nullptr) CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaStreamCaptureStatus status;
  %s;
  k<<<(n + 255) / 256, 256, 0, s>>>(x, n);
  CUDA_CHECK(cudaStreamSynchronize(s));
}
"""


@pytest.mark.nvcc
@pytest.mark.parametrize("call, mode_dependent", [
    ("CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed))", True),  # the handle may be stream 0
    ("CUDA_CHECK(cudaStreamIsCapturing(given, &status))", True),
    ("unsigned flags = 0; CUDA_CHECK(cudaStreamGetFlags(cudaStreamPerThread, &flags)); (void)flags", True),
    ("(void)cudaStreamQuery(0)", True),
    ("(void)status; CUDA_CHECK(cudaStreamWaitEvent(s, nullptr, 0))", False),  # order only: alike in both builds
])
def test_calls_whose_answer_follows_the_default_stream_are_refused(tmp_path, call, mode_dependent):
    rules = scan(tmp_path, _CAPTURE % call)
    assert ("default-stream" in rules) == mode_dependent, rules


@pytest.mark.nvcc
def test_a_part_that_tests_a_switch_of_the_toolkit_is_refused(tmp_path):
    text = (CASE / "c5" / "cand.cu").read_text()
    check = _check(text, tmp_path)
    assert not check.ok, check.summary  # cuda::std::is_integral<__int128> compared in the switches' build
    named = text.replace("cuda::std::is_integral<__int128>::value ? 1 : 2",
                         "1;\n#ifdef CUDA_API_PER_THREAD_DEFAULT_STREAM\n    wide = 2;\n#endif\n    (void)0")
    named = named.replace("const int wide", "int wide")
    check = _check(named, tmp_path)
    assert not check.ok and "build-context" in {v.rule for v in check.violations}, check.summary


def test_the_switches_are_read_from_the_toolkit():
    switches, _ = toolkit_config_switches(find_toolchain())
    assert "CCCL_DISABLE_INT128_SUPPORT" in switches and "CUDA_API_PER_THREAD_DEFAULT_STREAM" in switches
    assert not {"__CUDA_ARCH__", "__CUDACC__"} & set(switches)  # the compiler's own facts are no switches
    together = switches_set_together(find_toolchain())
    assert "CCCL_DISABLE_INT128_SUPPORT" in together and not set(together) & set(NOT_SET_TOGETHER)


@pytest.mark.nvcc
def test_a_part_using_cccl_honestly_passes_the_switches_build(tmp_path):
    text = (CASE / "c5" / "cand.cu").read_text().replace(
        "const int wide = cuda::std::is_integral<__int128>::value ? 1 : 2;",
        "const int wide = cuda::std::is_integral<int>::value ? 1 : 2;").replace(
        "#include <cuda/std/type_traits>", "#include <cuda/std/type_traits>\n#include <cuda/std/utility>\n#include <cuda/std/cmath>")
    check = _check(text, tmp_path)
    assert check.ok, check.summary


def test_the_default_stream_flag_the_readme_names_is_taken_and_declares_the_stream():
    # README and docs/contract.md tell a user whose part captures a stream to name the default stream
    # (`--build-flag=--default-stream=legacy`); the settings took no such flag (seen on an H200: every
    # such verify stopped at the settings)
    from kernelloop.config import VerifySettings
    from kernelloop.verify.gate import default_stream_declared
    for kind in ("legacy", "per-thread", "null"):
        flags = VerifySettings(build_flags=[f"--default-stream={kind}"]).build_flags
        assert default_stream_declared(tuple(flags))
    with pytest.raises(ValueError, match="not a build flag"):
        VerifySettings(build_flags=["--default-stream=sometimes"])
