"""The verifier's model of the harness's secret stream, checked against a real harness run: which
timed calls are stressed (runs.stressed_calls) must be the calls whose inputs really carried the
stress. The verifier judges each call (and the last call's whole dump) at the stress factor or
not by that model; when the harness read one draw more than the model (the repeat's draw before
the last call) the dumped call's verdict was at random: an honest warp-per-row layernorm was
refused at 1.36x the plain allowance on a stressed last call (H200, 2026-12-01)."""

from __future__ import annotations

import numpy as np
import pytest

from kernelloop.program.split import split_program
from kernelloop.tools.gpu import detect_gpus
from kernelloop.tools.nvcc import build_program
from kernelloop.tools.sandbox import Limits
from kernelloop.verify.program_run import run_program, stressed_calls

pytestmark = pytest.mark.gpu

# Each call's output is twice its input: a spike ((|v| + 1) x 2^16) in the inputs shows in the
# dumped outputs of that call, and nothing else can make a value larger than 2.
PROBE = """\
#include <cstdio>
#include <cuda_runtime.h>
// kernelloop: editable begin
__global__ void twice(const float* in, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = 2.0f * in[i];
}
void run_twice(const float* in, float* out, int n) { twice<<<(n + 255) / 256, 256>>>(in, out, n); }
// kernelloop: editable end
#include <kernelloop_harness.cuh>
int main() {
  kl::Harness h;
  const int n = h.size<int>({4096, 1000});
  float* out = h.output<float>("out", (size_t)n);
  const float* in = h.input<float>("in", (size_t)n, kl::Uniform<float>{-1.0f, 1.0f});
  h.run([&] { run_twice(in, out, n); }, {.warmup = 1, .calls = CALLS});
  printf("done\\n");
  return 0;
}
"""


@pytest.mark.parametrize("calls", [1, 2, 5])
def test_the_dumped_call_is_stressed_exactly_when_the_verifier_says_so(calls, tmp_path):
    gpus = detect_gpus()
    if not gpus:
        pytest.skip("no GPU visible")
    split = split_program(PROBE.replace("CALLS", str(calls)), "stream_probe.cu")
    build = build_program(split.editable_unit(), split.harness_unit(), arch=gpus[0].arch, cache_dir=tmp_path)
    assert build.ok and build.binary, build.log[-2000:]
    seen = set()
    for k in range(12):
        secret = bytes([k + 1]) * 32
        for heavy in (True, False):  # correctness runs and timing runs read differently masked streams
            run = run_program(build.binary, seed=2 * k + 1, limits=Limits(wall_timeout_s=60), secret=secret,
                              heavy=heavy)
            assert run.result.ok and run.dump is not None, run.result.stderr[-2000:]
            spiked = float(np.abs(run.dump[0]).max()) > 2.0
            said = calls - 1 in stressed_calls(secret, calls, heavy=heavy)
            assert spiked == said, (k, heavy, calls)
            seen.add(spiked)
    assert seen == {True, False}  # both cases came up, so the check could fail
