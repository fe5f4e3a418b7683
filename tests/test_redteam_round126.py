"""Red team round 126 (tests/fixtures/redteam/round126/): code a kernel runs without naming it.
A helper's parameter built by a constructor, a helper's returned object converted, a default
argument, an object-like macro in a helper, a kernel parameter's class conversion and a global
object's conversion each read `blockIdx.x` where no tier looked, so the axis tier's renaming (and
the row tier's reading of the thread index) left it out; the harness's sizes could not tell.
Now where a kernel may run device code without naming it (a class's members, a function's head,
an initializer, an operator or out-of-class member), no built-in may be read, or no kernel is read;
and a kernel that names a helper or macro reading one is not read (thread_reads)."""

from __future__ import annotations

import pytest

from kernelloop.optimizers.base import NoMoreCandidates
from kernelloop.optimizers.offline.analysis import without_hidden_thread_reads
from kernelloop.optimizers.offline.launcher import read_editable
from kernelloop.optimizers.offline.thread_reads import thread_reads

from .conftest import FIXTURES
from .test_redteam_round109 import _first_proposal

ROUND = FIXTURES / "redteam" / "round126"
BASELINES = ["a_parameter_conversion_runs_code/baseline.cu",
             "a_parameter_conversion_runs_code/variant_return_conversion/baseline.cu",
             "b_default_argument_reads_builtin/baseline.cu",
             "b_default_argument_reads_builtin/variant_row_tier/baseline.cu",
             "c_object_macro_hides_builtin/baseline.cu",
             "d_parameter_class_conversion_in_kernel/baseline.cu",
             "d_parameter_class_conversion_in_kernel/variant_global_object/baseline.cu"]


def refused_as_reading_thread_place(message: str) -> bool:
    """Whether a refusal is round 126's rule, or round 130's spelling rule that runs before it
    (earlier rounds' baselines meet them before their own)."""
    return any(words in message for words in ("reads where its thread runs", "without calling it by name",
                                              "which code a kernel runs without calling it is not known",
                                              "so the code's words are not what the compiler reads",
                                              "which not every reader does"))


@pytest.mark.parametrize("baseline", BASELINES)
def test_a_kernel_running_code_it_does_not_name_gets_no_rewrite(baseline):
    with pytest.raises(NoMoreCandidates) as caught:
        _first_proposal((ROUND / baseline).read_text())
    assert refused_as_reading_thread_place(str(caught.value))


KERNEL = "__global__ void k(float* y, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = 0; }"


@pytest.mark.parametrize("code, implicit", [
    # where a kernel may run it without naming it: refused for every kernel
    ("struct R { int n; __device__ R(int m) : n(blockIdx.x ? m : 0) {} };", True),  # a constructor
    ("struct L { __device__ operator long() const { return gridDim.x; } };", True),  # a conversion
    ("__device__ int lim(int r, unsigned b = blockIdx.x) { return r; }", True),  # a default argument
    ("__device__ int lim(int r, unsigned b = where());\n__device__ unsigned where() { return threadIdx.y; }", True),
    ("struct S { __device__ int f(); };\n__device__ int S::f() { return blockDim.x; }", True),  # out of class
    ("struct V { float v; };\n__device__ V operator+(V a, V b) { return V{a.v + b.v + threadIdx.x}; }", True),
    ("struct T { int x = 0; __device__ int f() { return x; } };", False),  # a member reading nothing
    ("namespace cg = cooperative_groups;", False),  # an alias runs nothing
    ("#define TILE 32\n__device__ int twice(int v) { return 2 * v; }", False),
    ("void launch(float* y, int n) { dim3 blockDim(256); k<<<(n + 255) / 256, blockDim>>>(y, n); }", False),
    ("#ifdef __cplusplus\nextern \"C\" {\n#endif\n__device__ int twice(int v) { return 2 * v; }\n"
     "#ifdef __cplusplus\n}\n#endif", False),
])
def test_code_a_kernel_runs_unnamed_may_not_read_a_built_in(code, implicit):
    reads = thread_reads(f"{code}\n{KERNEL}\n")
    assert (reads.implicit is not None) is implicit, reads.implicit


@pytest.mark.parametrize("helper, kernel_read", [
    ("__device__ int row_of() { return blockIdx.y; }", False),
    ("#define ROW blockIdx.y\n__device__ int row_of() { return ROW; }", False),  # round 126 (c)
    ("#define PASTE(a) block##a\n__device__ int row_of() { return PASTE(Idx).y; }", False),  # pasted: any name
    ("__device__ int row_of() { return 7; }", True),
    ("__device__ int inner() { return threadIdx.x; }\n__device__ int row_of() { return inner() + 1; }", False),
])
def test_a_kernel_naming_a_helper_that_reads_a_built_in_is_not_read(helper, kernel_read):
    editable = (f"{helper}\n__global__ void k(float* y, int n) {{ int i = blockIdx.x * blockDim.x + threadIdx.x; "
                "if (i < n) y[i] = row_of(); }\n")
    part = without_hidden_thread_reads(read_editable(editable, "", []), editable, "")
    assert ("k" in part.functions) is kernel_read, part.problems


@pytest.mark.parametrize("call", ["scale<sizeof(float)>(a[threadIdx.x])", "scale<(4 > 2)>(a[threadIdx.x])",
                                  "scale<W<W<float>>>(a[threadIdx.x])"])
def test_a_template_helper_called_with_any_template_arguments_is_read(call):
    """Round 126's false refusals: a call's template arguments may hold parentheses, comparisons and
    any nesting of `<>`; it is still a plain call of the helper."""
    from kernelloop.optimizers.offline.analysis import without_shadowed

    editable = ("template <class T> struct W {};\ntemplate <int N> __device__ float scale(float x) { return x * N; }\n"
                f"__global__ void k(float* a) {{ a[threadIdx.x] = {call}; }}\n")
    part = without_shadowed(read_editable(editable, "", []), editable, "")
    assert "scale" in part.functions, part.problems
