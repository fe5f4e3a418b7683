"""Red team round 172 (tests/fixtures/redteam/round172/), on round 171's fix: the toolkit has headers
with assertion macros of their own, empty unless a switch is set: cuda_pipeline_helpers.h's
`_CUDA_PIPELINE_ASSERT(x)` is `assert((x));` under _CUDA_PIPELINE_DEBUG, which `nvcc -G` turns on
through __CUDACC_DEBUG__. `nvcuda::experimental::memcpy_async(dst, src, pipe)` asserts on `&dst`, and
the part's type had its own `operator&` counting calls in shared memory: the kernel divided by the
count, 1 in every build the verifier compared, 2 in a device-debug build.

Closed by class (shipped._EVERY_ASSERTION, policy.BUILD_SWITCHES): every switch that turns such a macro
on is set in the reach build and the all-switches comparison, and __CUDACC_DEBUG__ (what `-G` defines)
is a build compared of its own; the part may not name them. Which macros those are is not a list kept
by hand: the test below finds every macro in the toolkit's headers that expands to `assert` in one
branch and checks the switches turn it on."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from kernelloop.config import Settings, VerifySettings
from kernelloop.tools.nvcc import find_toolchain
from kernelloop.tools.toolkit import real_nvcc
from kernelloop.verify.shipped import _EVERY_ASSERTION
from kernelloop.verify.static_check import check_static_files

from .conftest import FIXTURES, shared_cache_dir
from .test_redteam_round166 import BASE

CASE = FIXTURES / "redteam" / "round172"
_ASSERT_MACRO = re.compile(r"^[ \t]*#[ \t]*define[ \t]+(\w+)\(([^)]*)\)[ \t]+[^\n]*\bassert[ \t]*\(", re.M)


@pytest.mark.nvcc
def test_a_toolkit_headers_own_assertion_on_the_parts_operator_is_compared_in_a_device_debug_build():
    check = check_static_files(BASE, CASE / "pipeline_debug_operator_addr" / "cand.cu",
                               Settings(cache_dir=shared_cache_dir(), verify=VerifySettings(arch="sm_90")))
    assert not check.ok, check.summary
    assert any(v.rule == "assert-side-effect" for v in check.violations), check.violations


def _toolkit_assertion_macros() -> list[tuple[str, str, int]]:
    """(header relative to the toolkit's include folder, macro, its parameter count) for every macro a
    toolkit header defines as a plain assert (CCCL's own machinery excepted: its shim is separate)."""
    include = real_nvcc(find_toolchain().nvcc).parent.parent / "include"
    found = []
    for header in sorted(include.rglob("*.h*")):
        if "__cccl" in header.parts or not header.is_file():
            continue
        text = header.read_text(errors="replace")
        if "assert" not in text:
            continue
        for m in _ASSERT_MACRO.finditer(text):
            params = [p for p in m.group(2).split(",") if p.strip()]
            found.append((str(header.relative_to(include)), m.group(1), len(params)))
    return found


@pytest.mark.nvcc
def test_every_toolkit_assertion_macro_is_on_in_the_builds_compared(tmp_path):
    macros = _toolkit_assertion_macros()
    assert macros, "no assertion macro found: the scan no longer reads the toolkit"
    off = []
    for header, name, arity in macros:
        probe = tmp_path / "probe.cu"
        call = f"{name}({', '.join(['1'] * arity)})"
        probe.write_text(f"#include <cuda_runtime.h>\n#include <{header}>\nvoid kl_probe() {{ {call} }}\n")
        done = subprocess.run([shutil.which("nvcc") or "nvcc", "-std=c++17", "-arch=sm_90", "-E",
                               *(f"-D{switch}" for switch in _EVERY_ASSERTION), str(probe)],
                              capture_output=True, text=True, timeout=300, cwd=tmp_path)
        body = done.stdout.rsplit("kl_probe()", 1)[-1]
        if done.returncode != 0 or "__assert_fail" not in body:
            off.append(f"{header}: {name} ({done.stderr.strip()[-300:]})")
    assert not off, off
