"""Reading builds compare code across the two C++ dialects (ISO for the verifier, GNU as a user's
nvcc builds): kernelloop init compares a user's file so, and the gate compares a candidate's unit
alone with the one-file build. A distribution's compiler may turn on the C library's fortified
wrappers by default (Ubuntu's gcc does, as on the lent H200 host), and under them `fprintf(stderr,
"...")` becomes `__fprintf_chk` in one dialect and `fwrite` in the other: kept-aside set 13's
polyval launcher was refused by init there, "compiles to other code in kernelloop's build", and then
by the gate's build identity. Every kernelloop build, the verified one and every reading of it, is
made without the wrappers (tools/nvcc.UNFORTIFIED); the test stands in for such a compiler with an
nvcc that turns them on first."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from kernelloop.tools.code_identity import host_fingerprints
from kernelloop.tools.nvcc import build_program, build_whole_object, find_toolchain
from kernelloop.tools.state_refs import state_references

SOURCE = r'''
#include <cstdio>
#include <cstdlib>
__global__ void twice(double* y, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] *= 2; }
void twice_all(double* y, int n) {
  if (n < 1) {
    fprintf(stderr, "twice_all: n must be >= 1\n");
    exit(EXIT_FAILURE);
  }
  twice<<<(n + 127) / 128, 128>>>(y, n);
}
'''


@pytest.mark.nvcc
def test_a_print_in_a_launcher_compiles_alike_in_both_dialects_under_a_fortifying_compiler(tmp_path):
    real = find_toolchain()
    folder = Path(tempfile.mkdtemp(prefix="kl-fortify-"))
    os.chmod(folder, 0o755)  # the sandbox's own user runs it
    wrapper = folder / "nvcc"
    wrapper.write_text(f'#!/bin/sh\nexec "{real.nvcc}" -Xcompiler -D_FORTIFY_SOURCE=2 "$@"\n')
    wrapper.chmod(0o755)
    fortifying = real.model_copy(update={"nvcc": wrapper, "banner": real.banner + " (fortifying)"})
    try:
        iso, gnu = (build_whole_object(SOURCE, arch="sm_90", cache_dir=tmp_path, toolchain=fortifying, optimised=True,
                                       iso_dialect=dialect, harness_visible=False) for dialect in (True, False))
        # the verified build: the part as a unit of its own, linked with a harness unit
        verified = build_program(SOURCE, "void twice_all(double*, int);\nint main() { return 0; }\n", arch="sm_90",
                                 cache_dir=tmp_path, toolchain=fortifying)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    assert iso.ok and gnu.ok and iso.binary and gnu.binary, iso.log + gnu.log
    names = state_references(iso.binary).functions & state_references(gnu.binary).functions
    launcher = next(n for n in names if "twice_all" in n)
    assert host_fingerprints(iso.binary, {launcher})[launcher] == host_fingerprints(gnu.binary, {launcher})[launcher]
    # the verified build is made as its readings are (red team round 127: a candidate can test for the
    # wrappers, so what is read must be what runs)
    assert "__fprintf_chk" not in state_references(iso.binary).imports
    assert verified.ok and verified.binary, verified.log[-2000:]
    assert "__fprintf_chk" not in verified.binary.read_bytes().decode("latin-1")
