"""Red team round 295 (tests/fixtures/redteam/round295/REPORT.md), on round 293's fix: frozen code declared its own
`write`, `getenv` and `fprintf` in namespace kl before the header's include, and the header's unqualified calls
bound to them: the records forged with a correct byte count, the settings snapshot fed by a frozen getenv,
KERNEL_MS halved. Closed by class: the v2 harness unit reads the header before any frozen code (what the header's
calls bind to is fixed before a frozen declaration or macro exists), and frozen code may not declare in the
header's namespace; the ways past round 293's names (adjacent literals, glibc-private names, shared memory) are
refused too."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from kernelloop.errors import InputError
from kernelloop.program.split import split_program

from .conftest import FIXTURES, ROOT

ROUND = FIXTURES / "redteam" / "round295"
SUM = (ROOT / "kernels" / "sum_reduction.cu").read_text()
HEADER_DIR = ROOT / "src" / "kernelloop" / "harness"


@pytest.mark.parametrize("name", ["v_kl_write.cu", "v_timing.cu"])
def test_round295_frozen_functions_in_the_headers_namespace_are_refused(name):
    with pytest.raises(InputError, match="declares in namespace kl"):
        split_program((ROUND / name).read_text(), name)


@pytest.mark.parametrize("frozen, words", [
    ('static int peek() { FILE* f = fopen("/proc/self/m" "em", "r+"); return f != 0; }', "memory file"),
    ('extern "C" void* __mmap(void*, unsigned long, int, int, int, long);', "names __mmap"),
    ('static void* grab(int id) { return shmat(id, 0, 0); }', "names shmat"),
])
def test_the_ways_past_round_293s_names_are_refused(frozen, words):
    text = SUM.replace("#include <kernelloop_harness.cuh>", f"#include <kernelloop_harness.cuh>\n{frozen}")
    with pytest.raises(InputError, match=words):
        split_program(text, "sum_reduction.cu")


@pytest.mark.nvcc
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_a_macro_the_frozen_code_defines_before_the_include_does_not_reach_the_header(tmp_path):
    # the harness unit the verifier builds reads the header first: a preamble macro renaming the header's `write`
    # (or any other name it uses) is defined only after the header's code was read
    text = SUM.replace("// kernelloop: editable begin", "#include <unistd.h>\n#define write(fd, p, n) forged_write(fd, p, n)\n"
                       "// kernelloop: editable begin", 1)
    split = split_program(text, "sum_reduction.cu")
    unit = tmp_path / "harness.cu"
    unit.write_text(split.harness_unit())
    out = subprocess.run(["nvcc", "-E", "-std=c++17", "-I", str(HEADER_DIR), str(unit)], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    header_part = out.stdout.split("forged_write")[0]  # everything before the macro is first used
    assert "write(s.output_fd, at, left)" in header_part
