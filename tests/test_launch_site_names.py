"""A kernel's launch site is the tiers' only where nothing else uses the kernel: a name in a string
(an error message naming the kernel, `getLastCudaError("row_sum_kernel failed")`, the CUDA-samples
habit) is no use of it (kept-aside set 12: four launchers refused as "launched more than once")."""

from __future__ import annotations

import pytest

from kernelloop.optimizers.offline.launcher import read_editable
from kernelloop.optimizers.offline.rowwarp import LaunchSite, launch_sites
from kernelloop.program.init import InitSpec, generate
from kernelloop.program.split import split_program

SOURCE = r'''
#include <cstdio>
#include <cstdlib>
static void check_launch(const char* what) {
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) { fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(err)); exit(1); }
}
__global__ void row_sum_kernel(const float* x, float* y, int rows, int cols) {
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r < rows) {
    float s = 0.0f;
    for (int c = 0; c < cols; ++c) s += x[r * cols + c];
    y[r] = s;
  }
}
void row_sum(const float* x, float* y, int rows, int cols) {
  row_sum_kernel<<<(rows + 127) / 128, 128>>>(x, y, rows, cols);
  LAUNCH_TAIL
}
'''
SPEC = InitSpec(values={"rows": ["4096", "1001"], "cols": ["2048", "777"]},
                counts={"x": "rows * cols", "y": "rows"})


def _sites(tail: str):
    program = generate(SOURCE.replace("LAUNCH_TAIL", tail), SPEC, "row_sum.cu").program
    split = split_program(program, "row_sum.cu")
    return launch_sites(read_editable(split.editable, split.harness, split.exported), split.harness, split.preamble)


@pytest.mark.parametrize("tail", ['check_launch("row_sum_kernel failed");',
                                  'check_launch("row_sum_kernel<<<...>>> (x, y)");',
                                  "check_launch(\"row_sum\" \"_kernel\");"])
def test_a_message_naming_the_kernel_is_no_use_of_it(tail):
    (site,) = _sites(tail)
    assert isinstance(site, LaunchSite), site


def test_a_second_launch_is_a_second_site():
    # each launch a statement of its own: the tiers rewrite every launch at once, then each alone
    sites = _sites("row_sum_kernel<<<(rows + 127) / 128, 128>>>(x, y, rows, cols);")
    assert len(sites) == 2 and all(isinstance(s, LaunchSite) for s in sites), sites
    assert sites[0].stmt is not sites[1].stmt
