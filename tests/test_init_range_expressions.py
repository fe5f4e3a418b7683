"""An integer input's range may follow a size (`--range targets=0,V`): token ids stay below a
vocabulary that the declared sizes vary (kept-aside set 21's writer could only give a fixed bound,
so V had to keep one value). Checked at every declared size; floats keep numeric bounds."""

from __future__ import annotations

import pytest

from kernelloop.errors import InputError
from kernelloop.program.init import InitSpec, generate

GATHER = """
__global__ void pick_logits(float* out, const int* targets, const float* logits, int rows, int V) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < rows) out[r] = logits[(size_t)r * V + targets[r]];
}
"""


def _spec(**changes) -> InitSpec:
    fields = dict(values={"rows": ["4096", "1001"], "V": ["50257", "777"]},
                  counts={"out": "rows", "targets": "rows", "logits": "rows * V"}, roles={"out": "output"},
                  ranges={"targets": ("0", "V")}, grid="(rows + 255) / 256", block="256")
    fields.update(changes)
    return InitSpec(**fields)


def test_a_bound_that_follows_a_size_is_written_as_the_size_variable():
    result = generate(GATHER, _spec(), "gather.cu")
    assert "kl::UniformInt<int32_t>{0, ((int64_t)(V))}" in result.program
    assert "const int32_t V = h.size<int32_t>({50257, 777});" in result.program
    assert "guessed" not in result.program.split("int main")[1]  # stated: no wide experiment
    assert "// GIVEN: targets holds integers in [0, V)" in result.program


@pytest.mark.parametrize("bounds, message", [
    (("0", "V - 776"), r"holds one integer \(0\) at a size"),  # 50257-776 is fine, 777-776 = 1 is not
    (("0", "rows * Q"), "expressions of the integer arguments"),  # no such argument
    (("0", "V ** 2"), "expressions of the integer arguments"),  # not an operator we take
    (("0", "V / 0"), "expressions of the integer arguments"),
    (("0", "V * V * V * V * V"), "expressions of the integer arguments"),  # past what int64_t holds
])
def test_a_bound_that_is_empty_at_some_size_or_not_an_expression_of_the_sizes_is_refused(bounds, message):
    with pytest.raises(InputError, match=message):
        generate(GATHER, _spec(ranges={"targets": bounds}), "gather.cu")


def test_a_float_input_keeps_numeric_bounds():
    with pytest.raises(InputError, match="give two numbers"):
        generate(GATHER, _spec(ranges={"targets": ("0", "V"), "logits": ("0", "V")}), "gather.cu")


def test_the_bound_is_computed_in_int64_in_c_from_the_expressions_tree():
    # red team round 222: `V*V*V*V/1024` in int32 wrapped in C while init checked it in Python; `//`
    # would have started a C comment
    from kernelloop.program.init import bound_in_c
    assert bound_in_c("V*V*V*V/1024") == \
        "((((((int64_t)(V)) * ((int64_t)(V))) * ((int64_t)(V))) * ((int64_t)(V))) / (int64_t)1024)"
    assert "//" not in bound_in_c("V // 2") and bound_in_c("-n + 3") == "((-((int64_t)(n))) + (int64_t)3)"
