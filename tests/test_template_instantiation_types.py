"""A template kernel's type parameters are read as the types of the one instantiation the rewrites
change (kept-aside set 13's group norm: `static_cast<scalar_t>(group_numel)` in a PyTorch-style
template kernel read as a conversion to an unknown type, so no tier read it). The tiers rewrite
only the instantiation the harness's wrapper makes (`if constexpr`); a kernel launched with other
types anywhere, or through a launcher whose instantiation is unknown, keeps its parameters unknown."""

from __future__ import annotations

import pytest

from kernelloop.optimizers.offline.analysis import verified_type_arguments, without_narrowing
from kernelloop.optimizers.offline.launcher import read_editable
from kernelloop.program.init import InitSpec, generate
from kernelloop.program.split import split_program

KERNEL = r'''
#include <cstdint>
#include <cuda_runtime.h>
template <typename scalar_t>
__global__ void row_mean_kernel(const scalar_t* x, scalar_t* mean, int64_t rows, int64_t cols) {
  const int64_t r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  scalar_t sum = 0;
  for (int64_t c = 0; c < cols; ++c) sum += x[r * cols + c];
  mean[r] = sum / static_cast<scalar_t>(cols);
}
'''
TEMPLATE_LAUNCHER = KERNEL + r'''
template <typename scalar_t>
void row_mean(const scalar_t* x, scalar_t* mean, int64_t rows, int64_t cols, cudaStream_t stream) {
  row_mean_kernel<scalar_t><<<(unsigned)((rows + 127) / 128), 128, 0, stream>>>(x, mean, rows, cols);
}
template void row_mean<float>(const float*, float*, int64_t, int64_t, cudaStream_t);
template void row_mean<double>(const double*, double*, int64_t, int64_t, cudaStream_t);
'''
SPEC = InitSpec(template_args="float", values={"rows": ["4096", "1001"], "cols": ["1024", "333"]},
                counts={"x": "rows * cols", "mean": "rows"}, roles={"mean": "output"})


def _part(source: str, spec: InitSpec = SPEC):
    split = split_program(generate(source, spec, "row_mean.cu").program, "row_mean.cu")
    return read_editable(split.editable, split.harness, split.exported), split


def test_the_instantiation_the_wrapper_makes_gives_the_kernel_its_types():
    part, split = _part(TEMPLATE_LAUNCHER)
    assert verified_type_arguments(part) == {"row_mean_kernel": {"scalar_t": "float"}}
    kept = without_narrowing(part, split.editable, split.preamble)
    assert "row_mean_kernel" in kept.functions, kept.problems


@pytest.mark.parametrize("launch", [
    # two instantiations in the launcher the harness runs: which one a conversion means is not one type
    "row_mean_kernel<float><<<(unsigned)((rows + 127) / 128), 128>>>(x, mean, rows, cols);\n"
    "  row_mean_kernel<double><<<1, 1>>>((const double*)x, (double*)mean, 0, 0);",
    # an argument that is no built-in type
    "row_mean_kernel<acc_t><<<(unsigned)((rows + 127) / 128), 128>>>(x, mean, rows, cols);",
])
def test_a_kernel_launched_with_other_or_unknown_types_gets_none(launch):
    source = KERNEL + "using acc_t = float;\nvoid row_mean(const float* x, float* mean, int64_t rows, int64_t cols) {\n  " \
        + launch + "\n}\n"
    spec = InitSpec(values={"rows": ["4096", "1001"], "cols": ["1024", "333"]},
                    counts={"x": "rows * cols", "mean": "rows"}, roles={"mean": "output"})
    part, split = _part(source, spec)
    assert verified_type_arguments(part) == {}
    kept = without_narrowing(part, split.editable, split.preamble)
    assert "row_mean_kernel" not in kept.functions
