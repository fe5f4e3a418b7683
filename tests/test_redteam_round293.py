"""Red team round 293 (tests/fixtures/redteam/round293/REPORT.md), on the records pipe: (A1) frozen code unset
the pipe's variable and named a file before `kl::Harness h;`, then relayed forged records; (A2) it wrote the
harness's state at its fixed address after construction; (A3) `using namespace kl; Harness h;` read as contract
v1, so no v2 check of frozen code ran; (A4, argued) the secret stream's descriptor was never checked; (A5, argued) a
program without the header that spells its records literal would be read as v2. Closed: the header takes its
settings in the program's first constructor into a read-only page; frozen code may not name the environment's
editors, memory mapping and protection, /proc/.../mem or the header's private pages, nor declare constructors;
the stream's descriptor is checked like the records'; a harness including the header is v2, and the gate holds
that reading to the build."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from kernelloop.errors import InputError
from kernelloop.program.split import split_program

from .conftest import FIXTURES, ROOT

ROUND = FIXTURES / "redteam" / "round293"
HEADER_DIR = ROOT / "src" / "kernelloop" / "harness"


@pytest.mark.parametrize("name, words", [
    ("v_env_divert.cu", "names unsetenv"),
    ("v_state_divert.cu", "names kStateAddress"),
    ("v_ns_frozen_fixup.cu", "calls frozen_reference_sum"),  # v2's checks run: the harness is read as v2
])
def test_round293_baselines_reaching_the_harness_settings_or_state_are_refused(name, words):
    with pytest.raises(InputError, match=words):
        split_program((ROUND / name).read_text(), name)


def test_a_harness_including_the_header_is_v2_however_it_names_the_harness():
    text = (ROOT / "kernels" / "sum_reduction.cu").read_text().replace("kl::Harness h;", "using namespace kl;\n  Harness h;")
    assert "kl::Harness" not in text.split("// kernelloop: editable end")[1]
    assert split_program(text, "sum_reduction.cu").is_v2


@pytest.mark.parametrize("frozen, words", [
    ('__attribute__((constructor)) static void early() { }', "attribute constructor"),
    ('static void early() { char* p = getenv("KERNELLOOP_SEED"); if (p) mprotect(p, 1, 3); }', "names mprotect"),
    ('static int peek() { FILE* f = fopen("/proc/self/mem", "r+"); return f != 0; }', "/proc/.../mem"),
    ('extern char** environ;', "names environ"),
])
def test_frozen_code_that_runs_first_or_reaches_memory_protections_is_refused(frozen, words):
    text = (ROOT / "kernels" / "sum_reduction.cu").read_text().replace(
        "#include <kernelloop_harness.cuh>", f"#include <kernelloop_harness.cuh>\n#include <sys/mman.h>\n{frozen}")
    with pytest.raises(InputError, match=words.replace(".", r"\.").replace("(", r"\(")):
        split_program(text, "sum_reduction.cu")


@pytest.mark.nvcc
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_the_header_reads_its_settings_before_the_program_can_change_them(tmp_path):
    # host code only (no CUDA call): runs without a GPU
    src = tmp_path / "snap.cu"
    src.write_text('#include <kernelloop_harness.cuh>\n#include <cstdio>\nint main() {\n'
                   '  setenv("KERNELLOOP_SEED", "999", 1);\n'
                   '  char* raw = getenv("KERNELLOOP_SIZE_INDEX"); if (raw) raw[0] = \'7\';\n'
                   '  printf("%s %s\\n", kl::setting("KERNELLOOP_SEED"), kl::setting("KERNELLOOP_SIZE_INDEX"));\n'
                   '  return 0;\n}\n')
    exe = tmp_path / "snap"
    subprocess.run(["nvcc", "-std=c++17", "-arch=sm_80", "-I", str(HEADER_DIR), str(src), "-o", str(exe)],
                   check=True, capture_output=True)
    env = {**os.environ, "KERNELLOOP_SEED": "5", "KERNELLOOP_SIZE_INDEX": "1"}
    out = subprocess.run([str(exe)], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.split() == ["5", "1"], (out.stdout, out.stderr)


V1_WITH_MARK = """#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>
// kernelloop: editable begin
__global__ void k(float* y, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = 2.0f * i; }
void launch(float* y, int n) { k<<<(n + 255) / 256, 256>>>(y, n); }
// kernelloop: editable end
int main() {
  const int n = 1 << 20;
  float* y; cudaMalloc(&y, n * sizeof(float));
  launch(y, n); cudaDeviceSynchronize();
  fprintf(stderr, "kernelloop-end 2 %llu\\n", 0ull);  // the v2 header's records literal, in a program without it
  fprintf(stderr, "KERNEL_MS: 1.0\\n");
  return 0;
}
"""


@pytest.mark.nvcc
def test_a_program_without_the_header_that_spells_its_literal_is_refused(tmp_path):
    from kernelloop.config import Settings
    from kernelloop.tools.nvcc import find_toolchain
    from kernelloop.verify.gate import static_gates

    from .conftest import shared_cache_dir

    split = split_program(V1_WITH_MARK, "v1_mark.cu")
    assert not split.is_v2
    with pytest.raises(InputError, match="does not read as contract v2"):
        static_gates(split, split.editable, arch="sm_86", settings=Settings(cache_dir=shared_cache_dir()),
                     toolchain=find_toolchain())


@pytest.mark.nvcc
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_the_header_knows_the_verifiers_pipe_by_its_inode_and_nothing_put_at_its_number(tmp_path):
    # the header's own pipe checks (records and secret stream), host code only: the spec the verifier passes is
    # read, the pipe itself passes, a pipe of the program's own dup2'd onto the number does not
    src = tmp_path / "pipes.cu"
    src.write_text('#include <kernelloop_harness.cuh>\n#include <cstdio>\nint main() {\n'
                   '  int fd; unsigned long long dev, ino;\n'
                   '  if (!kl::read_pipe_spec(getenv("SPEC"), &fd, &dev, &ino)) return 3;\n'
                   '  int before = kl::same_pipe(fd, dev, ino);\n'
                   '  int bad = kl::read_pipe_spec("7:1", &fd, &dev, &ino) || kl::read_pipe_spec("7:1:2x", &fd, &dev, &ino);\n'
                   '  kl::read_pipe_spec(getenv("SPEC"), &fd, &dev, &ino);\n'
                   '  int other[2]; if (pipe(other) != 0 || dup2(other[0], fd) < 0) return 4;\n'
                   '  printf("%d %d %d\\n", before, bad, kl::same_pipe(fd, dev, ino));\n  return 0;\n}\n')
    exe = tmp_path / "pipes"
    subprocess.run(["nvcc", "-std=c++17", "-arch=sm_80", "-I", str(HEADER_DIR), str(src), "-o", str(exe)],
                   check=True, capture_output=True)
    read_end, write_end = os.pipe()
    try:
        info = os.fstat(read_end)
        out = subprocess.run([str(exe)], env={**os.environ, "SPEC": f"{read_end}:{info.st_dev}:{info.st_ino}"},
                             pass_fds=(read_end,), capture_output=True, text=True, timeout=60)
    finally:
        os.close(read_end)
        os.close(write_end)
    assert out.returncode == 0 and out.stdout.split() == ["1", "0", "0"], (out.returncode, out.stdout, out.stderr)
