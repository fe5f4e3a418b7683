"""A helper name defined more than once (overloads for float and double, as PyTorch-style code
writes `dev_exp`; or one definition in the editable part and one in the frozen code) is a pure
helper only where every definition is: a call may reach any of them (kept-aside set 20's
log_softmax was refused as "calls dev_exp")."""

from __future__ import annotations

from kernelloop.optimizers.offline.rowwarp import pure_helpers, read_editable

OVERLOADED = """
__device__ __forceinline__ float dev_exp(float x) { return expf(x); }
__device__ __forceinline__ double dev_exp(double x) { return exp(x); }
__global__ void k(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = dev_exp(x[i]);
}
"""


def _all_definitions(part):
    return list(part.functions.values()) + [f for fs in part.overloads.values() for f in fs]


def test_overloads_that_are_all_pure_make_a_pure_helper_and_no_tier_reads_one_for_another():
    part = read_editable(OVERLOADED, "", [])
    assert "dev_exp" not in part.functions and len(part.overloads["dev_exp"]) == 2
    assert "dev_exp" in pure_helpers(_all_definitions(part))


def test_one_impure_overload_makes_the_name_impure():
    text = OVERLOADED.replace("{ return exp(x); }", "{ g_seen[0] = 1; return exp(x); }").replace(
        "__device__ __forceinline__ double", "__device__ int g_seen[1];\n__device__ __forceinline__ double")
    assert "dev_exp" not in pure_helpers(_all_definitions(read_editable(text, "", [])))


def test_an_overload_that_is_not_read_leaves_the_name_out():
    text = OVERLOADED + "__device__ half dev_exp(half x) { return hexp(x) @@ ; }\n"
    part = read_editable(text, "", [])
    assert "dev_exp" not in part.overloads and "dev_exp" not in pure_helpers(_all_definitions(part))


def test_a_definition_in_the_frozen_code_counts_too_whatever_the_order():
    part = read_editable("__device__ float h(float x) { return x * 2.0f; }\n", "", [])
    frozen = read_editable("__device__ int g_calls[1];\n__device__ double h(double x) { g_calls[0] += 1; return x; }\n",
                           "", [])
    both = list(part.functions.values()) + list(frozen.functions.values())
    assert "h" not in pure_helpers(both) and "h" not in pure_helpers(both[::-1])
    assert "h" in pure_helpers(list(part.functions.values()))
