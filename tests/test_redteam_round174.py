"""Red team round 174 (tests/fixtures/redteam/round174/), on round 173's fix: the toolkit's fp8, fp6 and
fp4 headers read "no conversions" switches of their own, like the six half and bfloat16 switches, in
no list: a launcher asked `std::is_constructible<float, __nv_fp8_e4m3>` and shifted the column count in
a -D__CUDA_NO_FP8_CONVERSIONS__ build.

Closed by class (shipped._NARROW_SWITCHES, policy.BUILD_SWITCHES): every such switch is in the build
compared with every switch at once, and the part may not name one. Which switches those are is not a
list kept by hand: the test below finds every `__CUDA_NO_*__` switch the toolkit's headers read.

The round's second find, `nvcc --default-stream per-thread` (per_thread_default_stream/), changes what
the runtime calls do, not the code compared: stream 0 becomes the thread's own stream, ordered with no
other, where the legacy default stream waits for every blocking stream and they for it. A part that
leaned on that implicit order (a kernel on a blocking stream it created, the next on stream 0) races
in such a build. Closed by class in the host-code scan (`default-stream`): a stream the part creates
is non-blocking, by a constant, so every order it has is one its code states, the same in both builds;
a user who declares the default stream's kind (`--build-flag=--default-stream=...`) is verified in
that build and may keep blocking streams."""

from __future__ import annotations

import re

import pytest

from kernelloop.config import Settings, VerifySettings
from kernelloop.tools.nvcc import find_toolchain
from kernelloop.tools.toolkit import real_nvcc
from kernelloop.verify import policy
from kernelloop.verify.gate import default_stream_declared
from kernelloop.verify.shipped import other_builds
from kernelloop.verify.static_check import check_static_files

from .conftest import FIXTURES, shared_cache_dir
from .test_hostcode import scan
from .test_redteam_round166 import BASE

CASE = FIXTURES / "redteam" / "round174"


@pytest.mark.nvcc
def test_a_part_asking_whether_fp8_converts_is_compared_in_a_build_without_its_conversions():
    check = check_static_files(BASE, CASE / "fp8_no_conversions" / "cand.cu",
                               Settings(cache_dir=shared_cache_dir(), verify=VerifySettings(arch="sm_90")))
    assert not check.ok, check.summary


@pytest.mark.nvcc
def test_every_no_switch_the_toolkit_reads_is_compared_and_reserved():
    include = real_nvcc(find_toolchain().nvcc).parent.parent / "include"
    read = {m for header in include.rglob("*.h*") if header.is_file()
            for m in re.findall(r"\b__CUDA_NO_[A-Z0-9_]+__", header.read_text(errors="replace"))}
    assert read, "no switch found: the scan no longer reads the toolkit"
    every_at_once = max((set(b.flags) for b in other_builds(())), key=len)
    assert not read - set(policy.BUILD_SWITCHES), sorted(read - set(policy.BUILD_SWITCHES))
    assert not {f"-D{name}" for name in read} - every_at_once, sorted({f"-D{name}" for name in read} - every_at_once)


@pytest.mark.nvcc
def test_a_part_leaning_on_the_legacy_default_streams_order_is_refused():
    check = check_static_files(BASE, CASE / "per_thread_default_stream" / "cand.cu",
                               Settings(cache_dir=shared_cache_dir(), verify=VerifySettings(arch="sm_90")))
    assert not check.ok and "default-stream" in {v.rule for v in check.violations}, check.summary


@pytest.mark.nvcc
def test_a_baseline_with_blocking_streams_is_verified_and_its_candidates_must_create_theirs_non_blocking():
    # The baseline's own blocking stream is no reason to refuse it (it hands nothing back); the same
    # code as a candidate is refused, since a rewrite may lean on the order where the baseline joined.
    program = CASE / "per_thread_default_stream" / "cand.cu"
    check = check_static_files(program, program, Settings(cache_dir=shared_cache_dir(),
                                                          verify=VerifySettings(arch="sm_90")))
    assert not check.ok and {v.rule for v in check.violations} == {"default-stream"}, check.summary


_STREAM = """
void launch(float* x, int n, unsigned flags, int priority) {
  static cudaStream_t s = nullptr;
  if (s == nullptr) CUDA_CHECK(%s);
  k<<<(n + 255) / 256, 256, 0, s>>>(x, n);
  CUDA_CHECK(cudaStreamSynchronize(s));
}
"""


@pytest.mark.nvcc
@pytest.mark.parametrize("creation, blocking", [
    ("cudaStreamCreate(&s)", True),
    ("cudaStreamCreateWithFlags(&s, cudaStreamDefault)", True),
    ("cudaStreamCreateWithFlags(&s, flags)", True),  # whatever the caller passes: not a constant
    ("cudaStreamCreateWithFlags(&s, flags | cudaStreamNonBlocking)", True),  # computed: the scan reads constants only
    ("cudaStreamCreateWithPriority(&s, cudaStreamDefault, priority)", True),
    ("cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)", False),
    ("cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, priority)", False),
])
def test_a_stream_the_part_creates_is_non_blocking_by_a_constant(tmp_path, creation, blocking):
    rules = scan(tmp_path, _STREAM % creation)
    assert ("default-stream" in rules) == blocking, rules


def test_a_declared_default_stream_is_the_build_verified():
    assert default_stream_declared(("--default-stream=legacy",))
    assert default_stream_declared(("--default-stream", "per-thread"))
    assert default_stream_declared(("-default-stream=per-thread",))
    assert default_stream_declared(("-DCUDA_API_PER_THREAD_DEFAULT_STREAM=1",))
    assert not default_stream_declared(("-O3", "-lineinfo"))
    assert not default_stream_declared(("--default-streams=x",))
