"""The contract's editable/frozen split, and how candidate files are read."""

from __future__ import annotations

import pytest

from kernelloop.errors import InputError
from kernelloop.program.scanner import function_name, scan_items
from kernelloop.program.split import candidate_editable_part, split_program

from .conftest import ROOT

NAIVE = (ROOT / "kernels" / "naive_matmul.cu").read_text()

NO_MARKERS = """#include <cstdio>
#define SCALE 2.0f
static void check(cudaError_t e) { if (e) exit(1); }
__device__ float twice(float x) { return SCALE * x; }
template <int B> __global__ void k(float* out, int n) { int i = threadIdx.x; if (i < n) out[i] = twice(i); }
__constant__ float table[4] = {1, 2, 3, 4};
void helper_on_host(float* h) { h[0] = 0; }
int main() { float* d; cudaMalloc(&d, 64); k<16><<<1, 16>>>(d, 16); fprintf(stderr, "KERNEL_MS: 1\\n"); return 0; }
"""


def test_markers_split_naive_matmul():
    s = split_program(NAIVE, "naive")
    assert s.mode == "markers"
    assert "naive_matmul_kernel" in s.editable and "launch_matmul" in s.editable
    assert "int main()" in s.harness and "int main()" not in s.editable
    assert "#include <cuda_runtime.h>" in s.preamble
    assert s.exported_names == ["naive_matmul_kernel", "launch_matmul"]
    assert "void launch_matmul(const float* A, const float* B, float* C, int n);" in s.exported
    # line directives point compiler messages at the original file
    assert NAIVE.splitlines()[s.editable_line - 1].strip().startswith("__global__")
    assert f'#line {s.harness_line} "harness.cu"' in s.harness_unit()


def test_harness_unit_never_contains_editable_code():
    s = split_program(NAIVE)
    unit = s.harness_unit()
    assert "acc += A[row * n + k]" not in unit  # the kernel body stays in the other unit
    assert "__global__ void naive_matmul_kernel(const float* A, const float* B, float* C, int n);" in unit


def test_default_split_without_markers():
    s = split_program(NO_MARKERS, "p")
    assert s.mode == "default"
    assert "twice" in s.editable and "table" in s.editable and "template <int B>" in s.editable
    assert "helper_on_host" in s.harness and "int main()" in s.harness
    assert "static void check" in s.preamble and "helper_on_host" not in s.preamble
    assert "twice" not in s.harness.split("int main")[0]


@pytest.mark.parametrize(
    "text, message",
    [
        ("int main() { return 0; }", "not a CUDA program"),
        ("// kernelloop: editable begin\n__global__ void k() {}\n", "exactly one"),
        ("// kernelloop: editable begin\n__global__ void k() {}\n// kernelloop: editable end\n", "no main()"),
        ("// kernelloop: editable end\n__global__ void k(){}\n// kernelloop: editable begin\nint main(){}\n", "before"),
        ("__global__ void k() {}\n", "no main()"),
        ("// kernelloop: editable begin\nvoid f() {}\n// kernelloop: editable end\n__global__ void k(){}\nint main(){}\n",
         "no __global__"),
    ],
)
def test_split_errors_are_one_clear_line(text, message):
    with pytest.raises(InputError) as err:
        split_program(text, "file.cu")
    assert message in str(err.value) and "\n" not in str(err.value)


def test_candidate_with_markers_takes_the_region_and_notes_a_changed_harness():
    s = split_program(NAIVE)
    cand = NAIVE.replace("printf(\"checksum", "printf(\"CHECKSUM").replace("acc += A", "acc = acc + A")
    part, notes = candidate_editable_part(cand, s)
    assert "acc = acc + A" in part and "int main" not in part
    assert any("differs" in n for n in notes)


def test_candidate_without_main_is_all_editable_and_repeated_preamble_is_dropped():
    s = split_program(NAIVE)
    cand = "#include <cuda_runtime.h>\n[[maybe_unused]] static const int N = 1024;\n__global__ void k2() {}\nvoid launch_matmul(const float*, const float*, float*, int) {}\n"
    part, notes = candidate_editable_part(cand, s)
    assert "static const int N" not in part and "#include <cuda_runtime.h>" not in part
    assert "k2" in part and notes == []


def test_whole_program_candidate_without_markers_drops_main_and_shared_items():
    s = split_program(NAIVE)
    whole = NAIVE.replace("// kernelloop: editable begin\n", "").replace("// kernelloop: editable end\n", "")
    whole = whole.replace("acc += A", "acc = acc + A")
    part, notes = candidate_editable_part(whole, s)
    assert "acc = acc + A" in part
    assert "int main" not in part and "next_random" not in part and "#define CUDA_CHECK" not in part
    assert any("main() is ignored" in n for n in notes)


def test_scanner_handles_comments_strings_and_struct_semicolons():
    src = 'struct P { int a; };\nconst char* s = "}{;";\n/* } */ void f() { if (1) { } }\nint x[] = {1, 2};\n'
    items = scan_items(src)
    assert [i.text.split()[0] for i in items] == ["struct", "const", "void", "int"]
    assert function_name(items[2]) == "f" and function_name(items[0]) is None and function_name(items[3]) is None


def test_a_program_nothing_times_is_not_a_kernelloop_program():
    text = (ROOT / "tests" / "fixtures" / "outside" / "vector_add.cu").read_text()
    with pytest.raises(InputError) as err:
        split_program(text, "vector_add.cu")
    message = str(err.value)
    assert message.startswith("vector_add.cu: not a kernelloop program yet: nothing in it times the kernel")
    assert "Writing a v2 harness" in message and "\n" not in message
    # a v1 program (KERNEL_MS) and a v2 one (kl::Harness) are
    assert split_program(text.replace("printf(\"Done\\n\");", "fprintf(stderr, \"KERNEL_MS: 1\\n\");"))
