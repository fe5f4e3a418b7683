"""Red team round 302 (tests/fixtures/redteam/round302/REPORT.md), on aa80ff8: frozen code ran before the code that
reads the verifier's settings. (A1, A2) `asm volatile(".pushsection .preinit_array ...")` inside a frozen function
put a frozen function where the dynamic loader runs it before every library's constructor, the preloaded tracer's
and the header's settings snapshot among them: it rewrote the tracer's pipe name (round 301 again) or the size draw
(every drawn size at the default). (A3, argued) the driver reads CUDA_INJECTION64_PATH at the first CUDA call, after
frozen code could point it at a library of its own writing a sealed trace. Closed by class: no code of the program's
runs before the libraries' constructors (frozen assembler may not place code or symbols for the loader; a baseline
program with a preinit array or an indirect function is refused), and the tracer opens its stream at load with a
start line and a random nonce that its end record repeats, so no other writer can close the stream."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from kernelloop.errors import InputError
from kernelloop.program.split import split_program
from kernelloop.verify.policy import code_before_the_libraries

from .conftest import FIXTURES, ROOT

ROUND = FIXTURES / "redteam" / "round302"
SUM = (ROOT / "kernels" / "sum_reduction.cu").read_text()


@pytest.mark.parametrize("name", ["v_preinit_divert.cu", "v_preinit_size_draw.cu"])
def test_round302_frozen_assembly_placing_code_for_the_loader_is_refused(name):
    with pytest.raises(InputError, match=r"assembly places code or symbols for the loader \(\.pushsection\)"):
        split_program((ROUND / name).read_text(), name)


@pytest.mark.parametrize("asm", [
    '".section .init_array,\\"aw\\"\\n.quad f\\n.previous"',
    '".type hook, @gnu_indirect_function"',
    '".symver memcpy, memcpy@GLIBC_2.2.5"',
    '".incbin \\"/etc/passwd\\""',
], ids=["init-array", "ifunc", "symver", "incbin"])
def test_every_loader_directive_in_frozen_assembly_is_refused(asm):
    frozen = f"static void hook() {{ asm volatile({asm}); }}"
    with pytest.raises(InputError, match="places code or symbols for the loader"):
        split_program(SUM.replace("#include <kernelloop_harness.cuh>", f"#include <kernelloop_harness.cuh>\n{frozen}"),
                      "sum_reduction.cu")


def test_inline_ptx_in_a_frozen_device_helper_is_fine():
    frozen = ('__device__ unsigned lane() { unsigned id; asm volatile("mov.u32 %0, %%laneid;" : "=r"(id)); '
              'return id; }')
    split_program(SUM.replace("#include <kernelloop_harness.cuh>", f"#include <kernelloop_harness.cuh>\n{frozen}"),
                  "sum_reduction.cu")


PREINIT = r"""
#include <stdio.h>
static void early(void) { puts("early"); }
__attribute__((section(".preinit_array"), used)) static void (*entry)(void) = early;
int main(void) { return 0; }
"""
IFUNC = r"""
static int one(void) { return 1; }
static int (*pick(void))(void) { return one; }
int chosen(void) __attribute__((ifunc("pick")));
int main(void) { return chosen() - 1; }
"""
PLAIN = "int main(void) { return 0; }\n"


@pytest.mark.parametrize("source, words", [(PREINIT, "preinit array"), (IFUNC, "indirect-function resolver"),
                                           (PLAIN, None)], ids=["preinit", "ifunc", "plain"])
def test_a_program_running_code_before_the_libraries_is_seen(tmp_path, source, words):
    """The program-level check the gate applies to the baseline's build (the candidate's is held to the baseline's
    counts): what the loader would run before the preloaded tracer's and the header's constructors."""
    if shutil.which("cc") is None or shutil.which("readelf") is None:
        pytest.skip("no C compiler or readelf")
    (tmp_path / "p.c").write_text(source)
    subprocess.run(["cc", "-O1", "-o", str(tmp_path / "p"), str(tmp_path / "p.c")], check=True, capture_output=True)
    found = code_before_the_libraries(tmp_path / "p")
    assert (found is None) if words is None else (words in (found or "")), found
