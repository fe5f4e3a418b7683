"""CUDA's vector constructors (`make_float4`) build a value from their arguments and nothing else:
a helper that returns one (llm.c's `add_float4`) is a pure helper the tiers may call (kept-aside set
20's encoder was refused as "calls add_float4"); a program that declares its own function of such a
name is read by the tiers' clash check, as for the math functions."""

from __future__ import annotations

from kernelloop.optimizers.offline.analysis import without_shadowed
from kernelloop.optimizers.offline.facts import SIDE_EFFECT_FREE, VECTOR_CONSTRUCTORS
from kernelloop.optimizers.offline.rowwarp import pure_helpers, read_editable

HELPER = """
__device__ inline float4 add_float4(const float4& a, const float4& b) {
  return make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
}
__device__ inline int2 swap_int2(int2 v) { return make_int2(v.y, v.x); }
__global__ void k(float4* out, const float4* a, const float4* b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = add_float4(a[i], b[i]);
}
"""


def test_every_vector_constructor_is_side_effect_free():
    assert {"make_float4", "make_uint2", "make_double2", "make_ulonglong1", "make_char3"} <= VECTOR_CONSTRUCTORS
    assert VECTOR_CONSTRUCTORS <= SIDE_EFFECT_FREE


def test_a_helper_built_on_a_vector_constructor_is_pure():
    part = read_editable(HELPER, "", [])
    assert {"add_float4", "swap_int2"} <= pure_helpers(list(part.functions.values()))


def test_a_helper_writing_memory_stays_impure_whatever_it_returns():
    text = HELPER.replace("return make_float4(", "g_calls[0] += 1;\n  return make_float4(").replace(
        "__device__ inline float4 add_float4", "__device__ int g_calls[1];\n__device__ inline float4 add_float4")
    part = read_editable(text, "", [])
    assert "add_float4" not in pure_helpers(list(part.functions.values()))


def test_a_program_declaring_its_own_vector_constructor_is_not_read_by_spelling():
    own = "__device__ int g_calls[1];\n__device__ float4 make_float4(float x, float y, float z, float w) " \
          "{ g_calls[0] += 1; float4 v; v.x = x; v.y = y; v.z = z; v.w = w; return v; }\n"
    text = own + HELPER
    part = without_shadowed(read_editable(text, "", []), text, "")
    assert "add_float4" not in part.functions
    assert any("make_float4" in p for p in part.problems)
