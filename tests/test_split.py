"""The contract's editable/frozen split, and how candidate files are read."""

from __future__ import annotations

import pytest

from kernelloop.errors import InputError
from kernelloop.program.scanner import function_name, scan_items
from kernelloop.program.split import candidate_editable_part, check_program, split_program

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


LAUNCHER_PROGRAM = """#include <cstdio>
#include <cstdlib>
static void cuda_check(cudaError_t e, int line) { if (e != cudaSuccess) { fprintf(stderr, "%d\\\\n", line); exit(1); } }
#define cudaCheck(e) cuda_check((e), __LINE__)
__global__ void k1(float* y, const float* x, int n) { int i = threadIdx.x; if (i < n) y[i] = x[i]; }
__global__ void k2(float* y, int n) { int i = threadIdx.x; if (i < n) y[i] *= 2.0f; }
__global__ void k3(float* y) { y[0] = 0.0f; }
void launch_x(float* y, const float* x, int n, int block_size) {
  k1<<<(n + block_size - 1) / block_size, block_size>>>(y, x, n);
  cudaCheck(cudaGetLastError());
  void* args[] = {&y, &n};
  cudaCheck(cudaLaunchKernel((const void*)k2, dim3(1), dim3(block_size), args, 0, 0));
}
void reference(float* y, const float* x, int n) { for (int i = 0; i < n; i++) y[i] = 2 * x[i]; }
int main() {
  float* d; cudaMalloc(&d, 256); launch_x(d, d, 32, 32); k3<<<1, 1>>>(d);
  fprintf(stderr, "KERNEL_MS: 1\\\\n"); return 0;
}
"""


def test_a_launcher_without_markers_is_editable_with_its_kernels_and_the_split_says_so():
    s = split_program(LAUNCHER_PROGRAM, "p.cu")
    assert s.mode == "default"
    assert "void launch_x(" in s.editable and "cudaCheck(cudaGetLastError());" in s.editable
    assert "void launch_x(float* y, const float* x, int n, int block_size);" in s.exported
    assert "void launch_x" not in s.harness and "void reference(" in s.harness and "int main()" in s.harness
    assert "#define cudaCheck" in s.preamble  # the launcher's error check comes from the frozen preamble
    assert s.notes == ["no markers: the launcher launch_x and kernels k1, k2 are the editable part "
                       "(with k3, launched by the frozen harness with its own grid and block)"]
    plain = split_program(NO_MARKERS, "p")
    assert plain.notes == ["no markers: the kernel k is the editable part; the frozen harness launches them, "
                           "so grid and block stay as they are"]


def test_a_whole_program_candidate_without_markers_brings_its_own_launcher():
    s = split_program(LAUNCHER_PROGRAM, "p.cu")
    cand = LAUNCHER_PROGRAM.replace("(n + block_size - 1) / block_size, block_size", "(n + 255) / 256, 256")
    part, _ = candidate_editable_part(cand, s)
    assert "k1<<<(n + 255) / 256, 256>>>" in part and "int main" not in part and "void reference" not in part


def test_the_users_headers_are_inlined_into_the_frozen_code_and_a_candidate_may_only_repeat_them(tmp_path):
    from .conftest import FIXTURES
    include = FIXTURES / "outside" / "include"
    program = (ROOT / "kernels" / "naive_matmul.cu").read_text().replace(
        "#include <cuda_runtime.h>", '#include <cuda_runtime.h>\n#include "kl_check.h"', 1)
    path = tmp_path / "m.cu"
    path.write_text(program)
    s = split_program(program, str(path), include_dirs=[include])
    assert '#line 1 "kl_check.h"' in s.preamble and "#define checkCudaErrors" in s.preamble
    assert '#include "kl_check.h"' not in s.preamble and "#pragma once" not in s.preamble
    assert s.headers == [str((include / "kl_check.h").resolve())] and "kl_check.h is frozen" in s.notes[-1]
    # beside the file, no include folder is needed; without either, the include stays as written
    (tmp_path / "kl_check.h").write_text((include / "kl_check.h").read_text())
    assert split_program(program, str(path), include_dirs=[]).headers == [str(tmp_path / "kl_check.h")]
    assert '#include "kl_check.h"' in split_program(program, "elsewhere.cu", include_dirs=[]).preamble
    # a candidate repeating the baseline's include adds nothing; the whole program is noted unchanged
    part, notes = candidate_editable_part(program, s)
    assert notes == [] and "kl_check" not in part
    whole = program.replace("// kernelloop: editable begin\n", "").replace("// kernelloop: editable end\n", "")
    part, _ = candidate_editable_part(whole, s)
    assert '#include "kl_check.h"' not in part
    # check_program gives the text with the header inlined, so it builds and is copied on its own
    text, _ = check_program(path, [include])
    assert "#define checkCudaErrors" in text and '#include "kl_check.h"' not in text


@pytest.mark.parametrize("head", ["template <typename T, int N>\nstruct alignas(sizeof(T) * N) aligned_vector",
                                  "struct __align__(16) packed", "template <int N> union alignas(8) bits",
                                  "template <typename T> struct __attribute__((aligned(16))) box"])
def test_a_type_with_parenthesized_attributes_keeps_its_semicolon(head):
    # set 9 (where_select_vec.cu): PyTorch's aligned_vector idiom inside a namespace; the `(` of
    # alignas read as a parameter list ended the item at `}`, and its `;` became an item of its own
    from kernelloop.program.scanner import scoped_items

    source = f"namespace elementwise {{\n{head} {{\n  float val[4];\n}};\n__device__ int f(int x) {{ return x; }}\n}}\n"
    items = [i for i in scoped_items(source) if i.kind == "code"]
    assert len(items) == 2 and items[0].text.endswith("};") and items[1].text.startswith("__device__"), items


@pytest.mark.parametrize("text, init", [
    ("__global__ void k(float* y) { y[0] = 1; }\n", "`kernelloop init file.cu -o file_kl.cu --set ARG=SIZE,ALT`"),
    ("__global__ void k(float* y, int n) { y[0] = n; }\nvoid launch_k(float* y, int n) { k<<<1, 1>>>(y, n); }\n",
     "`kernelloop init file.cu -o file_kl.cu --launcher launch_k --set ARG=SIZE,ALT`"),
])
def test_a_kernel_file_without_main_is_pointed_at_init(text, init):
    """A user's kernel file as it is (issue 10): one line saying what is missing and the init command
    that wraps it, naming its launcher when it has one."""
    with pytest.raises(InputError) as err:
        split_program(text, "file.cu")
    message = str(err.value)
    assert message.startswith("file.cu: not a kernelloop program yet: no main()") and init in message
    assert "\n" not in message and "(;" not in message


@pytest.mark.parametrize("include", ["#include <kernelloop_harness.cuh>", '#include "kernelloop_harness.cuh"'])
@pytest.mark.parametrize("markers", [False, True])
def test_the_harness_header_included_at_the_top_goes_to_the_harness_unit_only(include, markers):
    # with the other includes at the top, as people write them: the editable unit, built without the
    # harness's include folder, failed to find it (and must not see kl:: anyway)
    part = ("__global__ void scale(float* y, const float* x, int n) {\n"
            "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) y[i] = 2.0f * x[i];\n}\n"
            "void launch(float* y, const float* x, int n) { scale<<<(n + 255) / 256, 256>>>(y, x, n); }\n")
    harness = ("int main() {\n  kl::Harness h;\n  const int n = h.size<int>({1 << 20, 1000});\n"
               "  float* x = h.input<float>(\"x\", n, kl::Uniform<float>{-1.0f, 1.0f});\n"
               "  float* y = h.output<float>(\"y\", n);\n  h.run([&] { launch(y, x, n); }, {.warmup = 2, .calls = 20});\n"
               "  return 0;\n}\n")
    body = f"// kernelloop: editable begin\n{part}// kernelloop: editable end\n" if markers else part
    text = f"#include <cstdio>\n{include}\n{body}{harness}"
    split = split_program(text, "scale.cu")
    assert "kernelloop_harness" not in split.preamble and "kernelloop_harness" not in split.editable_unit()
    assert split.preamble.count("\n") == text[:text.index(body)].count("\n")  # line numbers kept
    unit = split.harness_unit()
    assert unit.index("#include <kernelloop_harness.cuh>") < unit.index("kl::Harness h;")
    assert split.whole_program().index("kernelloop_harness.cuh") > split.whole_program().index("editable end")
