"""Red team round 97 (tests/fixtures/redteam/round97/a_init_build_environment/): init compared the
user's file with the generated program only in kernelloop's own build setup (-std=c++17, its
harness header on the include path), where the user builds with nvcc's defaults, so a kernel that
tests the build (`__has_include(<kernelloop_harness.cuh>)`, `__STRICT_ANSI__`) computed twice the
user's result in the baseline. init now builds the file plainly too and compares the kept code.
(Finding b, the shift's promotion, is in test_valuetype_promotion.py.) nvcc."""

from __future__ import annotations

import pytest

from kernelloop.errors import InputError
from kernelloop.init_state import refuse_state_set_by_dropped_code
from kernelloop.program.init import InitSpec, generate

from .conftest import FIXTURES, shared_cache_dir

ROUND = FIXTURES / "redteam" / "round97" / "a_init_build_environment"
pytestmark = pytest.mark.nvcc

_DIALECT_TRAIT = """#include <type_traits>
template <typename T> __host__ __device__ constexpr float weight() { return std::is_integral<T>::value ? 2.0f : 1.0f; }

__global__ void scale(float* out, const float* in, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[i] * weight<__int128>();
}

int main() {
    float *out, *in;
    cudaMalloc(&out, 4096 * sizeof(float));
    cudaMalloc(&in, 4096 * sizeof(float));
    scale<<<16, 256>>>(out, in, 4096);
    cudaDeviceSynchronize();
    return 0;
}
"""


def _refuse(source: str, name: str) -> None:
    result = generate(source, InitSpec(values={"n": ["4096", "1000"]}), name)
    refuse_state_set_by_dropped_code(source, result, arch="sm_90", cache_dir=shared_cache_dir(),
                                     generated=result.program)


@pytest.mark.parametrize("name, why", [("k.cu", "tests whether kernelloop_harness.cuh exists"),  # round 98: by name
                                       ("d.cu", "plain nvcc build")])
def test_a_kernel_that_tests_how_it_is_built_is_refused(name, why):
    with pytest.raises(InputError, match=why):
        _refuse((ROUND / name).read_text(), name)


def test_the_same_kernels_with_the_tests_taken_out_are_wrapped():
    for name in ("k.cu", "d.cu"):
        source = (ROUND / name).read_text()
        plain = source.replace("__has_include(<kernelloop_harness.cuh>)", "0").replace("defined(__STRICT_ANSI__)", "0")
        plain = plain.replace("#ifdef __STRICT_ANSI__", "#if 0")
        assert plain != source
        _refuse(plain, name)


def test_a_dialect_difference_with_no_macro_at_all_is_refused_if_the_compiler_shows_one(tmp_path):
    # Whether libstdc++ counts __int128 integral differs by dialect in some versions; either way the
    # compiler decides: refused exactly when the plain build compiles the kernel otherwise.
    from kernelloop.tools.nvcc import build_whole_object
    builds = [build_whole_object(_DIALECT_TRAIT, arch="sm_90", cache_dir=shared_cache_dir(), optimised=True,
                                 iso_dialect=iso, harness_visible=iso) for iso in (True, False)]
    assert all(b.ok for b in builds)
    differs = (builds[0].binary.with_name("program.ptx").read_text()
               != builds[1].binary.with_name("program.ptx").read_text())
    if differs:
        with pytest.raises(InputError, match="plain nvcc build"):
            _refuse(_DIALECT_TRAIT, "t.cu")
    else:
        _refuse(_DIALECT_TRAIT, "t.cu")
