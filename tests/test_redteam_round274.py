"""Red team round 274 (tests/fixtures/redteam/round274/): round 273 closed `h.fetch` of scratch, but
the frozen code's `h.run` lambda could still read scratch inside every timed call (a frozen helper
wrapping cudaMemcpy, a frozen kernel condensing it into a `__device__` variable of its own) and
print what nothing compares. The class: in contract v2 the lambda calls the editable part's
functions and nothing else (a device-to-device copy between the harness's buffers aside), read from
the syntax tree, so no spelling of another call, launch, declaration or assignment gets through."""

from __future__ import annotations

import pytest

from kernelloop.errors import InputError
from kernelloop.program.run_lambda import run_lambda_problem
from kernelloop.program.split import split_program

from .conftest import FIXTURES, ROOT

ROUND = FIXTURES / "redteam" / "round274"


@pytest.mark.parametrize("baseline, why", [
    ("lambda_copy_baseline.cu", "calls copy_back, which the frozen code declares itself"),
    ("device_symbol_baseline.cu", "calls largest_kernel, which the frozen code declares itself"),
])
def test_the_round_s_baselines_are_refused_before_anything_is_built(baseline, why):
    with pytest.raises(InputError, match="h.run lambda") as caught:
        split_program((ROUND / baseline).read_text(), baseline)
    assert why in str(caught.value), str(caught.value)


PART = {"launch", "part_kernel"}


@pytest.mark.parametrize("body, problem", [
    ("launch(a, b, n);", None),
    ("ns::launch<float, 4>(a, b, (int)n * 2, sizeof(float));", None),
    ("(launch)(a, b, n);", None),
    ("cudaMemcpy(y, x, sizeof(float) * n, cudaMemcpyDeviceToDevice); launch(y, n);", None),
    ("if (n > 0) launch(a, b, n); else { for (int s = 0; s < 3; ++s) launch(b, a, n); }", None),
    ("launch(a, b, n); cudaMemcpy(host, b, 4, cudaMemcpyDeviceToHost);", "calls cudaMemcpy"),
    ("launch(a, b, n); cudaMemcpyAsync(host, b, 4, cudaMemcpyDefault, 0);", "calls cudaMemcpyAsync"),
    ("launch(a, b, n); helper(b);", "calls helper"),
    ("launch(a, b, n); k<<<1, 1>>>(b);", "calls k"),
    ("part_kernel<<<dim3((n + 255) / 256), 256>>>(a, b, n);", None),
    ("part_kernel<<<grid_of(n), 256>>>(a, b, n);", "calls grid_of"),
    ("launch(a, b, helper(n));", "calls helper"),
    ("launch(a, b, n); seen = b[0];", "assignment"),
    ("launch(a, b, n); Copier c(b);", "declares Copier c(b)"),
    ("launch(a, b, n); auto t = tap;", "declares auto t = tap"),
    ("dim3 block(32, 8); const dim3 grid((n + 31) / 32, 4); unsigned long long m = n; std::size_t k = m * 2; "
     "launch(a, b, static_cast<int>(k)); "
     "cudaMemsetAsync(b, 0, sizeof(float), 0); part_kernel<<<grid, block>>>(a, b, n);", None),
    ("dim3 block = make_block(32);", "calls make_block"),
    ("launch(a, b, n); [&] { helper(b); }();", "lambda"),
    ("launch(a, b, n); cudaDeviceSynchronize();", "calls cudaDeviceSynchronize"),
    ("launch(a, b, n); printf(\"%p\", b);", "calls printf"),
    ("launch(a, b, n); launch(b, a, (n += 1));", "assignment"),
])
def test_the_lambda_runs_the_part_and_device_copies_only(body, problem):
    harness = ("int main() { kl::Harness h; float *a = 0, *b = 0, *x = 0, *y = 0, *host = 0; int n = 4; float seen; "
               f"h.run([&] {{ {body} }}, {{.warmup = 2, .calls = 20}}); return 0; }}")
    found = run_lambda_problem(harness, PART)
    if problem is None:
        assert found is None, found
    else:
        assert found is not None and problem in found, found


def test_every_bundled_program_keeps_its_lambda():
    for path in sorted((ROOT / "kernels").glob("*.cu")):
        split_program(path.read_text(), path.name)
