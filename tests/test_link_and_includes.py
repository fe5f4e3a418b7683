"""Link failures named by their cause (two translation units, real nvcc), and the user's own
headers (include_dirs): inlined into the frozen code, never includable by a candidate."""

from __future__ import annotations

import subprocess

import pytest

from kernelloop.config import INCLUDE_DIRS_ENV, Settings, include_dirs_setting, load_settings
from kernelloop.errors import ConfigError
from kernelloop.program.init import InitSpec, generate
from kernelloop.program.split import split_program
from kernelloop.tools.nvcc import build_program, explain_link_failure, find_toolchain

from .outside_specs import OUTSIDE

from .conftest import shared_cache_dir

INCLUDE = OUTSIDE / "include"

TEMPLATE_LAUNCHER = """#include <cstdio>
// kernelloop: editable begin
__global__ void k(float* x, int n) { if ((int)threadIdx.x < n) x[threadIdx.x] = 1.0f; }
template <typename T> void launch_x(T* x, int n) { k<<<1, 32>>>(x, n); }
// kernelloop: editable end
int main() { launch_x<float>(nullptr, 0); fprintf(stderr, "KERNEL_MS: 1\\n"); return 0; }
"""


@pytest.mark.nvcc
def test_a_template_launcher_the_harness_calls_fails_to_link_with_the_fix(tmp_path):
    split = split_program(TEMPLATE_LAUNCHER, "t.cu")
    build = build_program(split.editable_unit(), split.harness_unit(), arch="sm_90", cache_dir=tmp_path)
    assert not build.ok and build.stage == "link"
    assert build.log.splitlines()[-1] == (
        "[link] the harness calls void launch_x<float>(float*, int), a template defined in the editable part: "
        "instantiate it there (`template void launch_x<float>(float*, int);`) or make it a non-template")
    # instantiated there, it links
    fixed = split.editable + "template void launch_x<float>(float*, int);\n"
    assert build_program(split.editable_unit(fixed), split.harness_unit(), arch="sm_90", cache_dir=tmp_path).ok


@pytest.mark.nvcc
def test_a_helper_defined_in_both_units_is_named_with_the_fix(tmp_path):
    # What ld says when a preamble helper without static/inline is linked from both units.
    preamble = "int scale(int x) { return 2 * x; }\n"
    editable = preamble + "__global__ void k(int* y) { *y = 1; }\nvoid launch(int* y) { k<<<1, 1>>>(y); }\n"
    harness = preamble + "void launch(int* y);\nint main() { launch(nullptr); return scale(1); }\n"
    nvcc = str(find_toolchain().nvcc)
    for name, text in (("editable", editable), ("harness", harness)):
        (tmp_path / f"{name}.cu").write_text(text)
        subprocess.run([nvcc, "-arch=sm_90", "-c", f"{name}.cu", "-o", f"{name}.o"], cwd=tmp_path, check=True)
    link = subprocess.run([nvcc, "harness.o", "editable.o", "-o", "program"], cwd=tmp_path, capture_output=True,
                          text=True)
    assert link.returncode != 0
    cause = explain_link_failure(link.stdout + link.stderr, editable, harness)
    assert cause == ("multiple definition of scale(int): it is defined in code both translation units compile "
                     "(the frozen preamble, or one of your headers): give it `static inline` or move it below "
                     "the editable part")


def test_link_failures_fall_back_to_the_first_undefined_reference():
    log = ("/usr/bin/ld: harness.o: in function `main':\nh.cu:(.text+0x9): undefined reference to `launch(int*)'\n"
           "/usr/bin/ld: h.cu:(.text+0x19): undefined reference to `other()'\n"
           "collect2: error: ld returned 1 exit status")
    assert explain_link_failure(log, "", "") == "undefined reference to launch(int*): the editable part does not define it"
    static = "static void launch(int* y) { }\n"
    assert "which the editable part defines `static`" in explain_link_failure(log, static, "")
    assert explain_link_failure("collect2: error: ld returned 1 exit status", "", "") is None


@pytest.mark.nvcc
def test_a_program_with_its_own_header_passes_the_static_gates_and_a_candidate_cannot_include_by_path(tmp_path):
    from kernelloop.verify.gate import static_gates
    program = generate((OUTSIDE / "saxpy_header.cu").read_text(),
                       InitSpec(values={"n": ["1024", "1023"], "a": ["2"]}, roles={"y": "inout"}), "saxpy_header.cu")
    assert program.launcher == "saxpy_gpu" and '#include "kl_check.h"' in program.program
    path = tmp_path / "saxpy_kl.cu"
    path.write_text(program.program)
    split = split_program(program.program, str(path), include_dirs=[INCLUDE])
    settings = Settings(cache_dir=shared_cache_dir())
    result = static_gates(split, split.editable, arch="sm_90", settings=settings, toolchain=find_toolchain())
    assert result.candidate is not None and result.candidate.ok and result.violations == [], result.violations
    (tmp_path / "mine.h").write_text("#define MINE 1\n")
    sneaky = '#include "mine.h"\n' + split.editable
    refused = static_gates(split, sneaky, arch="sm_90", settings=settings, toolchain=find_toolchain())
    assert refused.candidate is None and [v.rule for v in refused.violations] == ["include"]


def test_include_dirs_follow_the_precedence_rule(tmp_path, monkeypatch):
    monkeypatch.delenv(INCLUDE_DIRS_ENV, raising=False)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "kernelloop.toml").write_text('include_dirs = ["a"]\n')
    assert load_settings(project_dir=tmp_path).include_dirs == [(tmp_path / "a").resolve()]
    monkeypatch.setenv(INCLUDE_DIRS_ENV, str(tmp_path / "b"))
    assert include_dirs_setting(project_dir=tmp_path) == [(tmp_path / "b").resolve()]
    assert load_settings({"include_dirs": [tmp_path / "a"]}, project_dir=tmp_path).include_dirs == [
        (tmp_path / "a").resolve()]
    with pytest.raises(ConfigError, match="is not a folder"):
        load_settings({"include_dirs": [tmp_path / "missing"]}, project_dir=tmp_path)


@pytest.mark.nvcc
def test_the_include_folders_of_a_settings_object_reach_the_gate(tmp_path, monkeypatch):
    # One settings channel: a Settings built in Python (kernelloop.verify_files) is used as given,
    # its include folders too, not the environment's or ./kernelloop.toml's.
    from kernelloop.tools.gpu import GpuInfo
    from kernelloop.verify import gate
    monkeypatch.delenv(INCLUDE_DIRS_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    program = generate((OUTSIDE / "saxpy_header.cu").read_text(),
                       InitSpec(values={"n": ["1024", "1023"], "a": ["2"]}, roles={"y": "inout"}), "saxpy_header.cu")

    class Ran(Exception):
        pass

    def stop(*a, **k):
        raise Ran  # the static gates passed: both units built with the header found

    monkeypatch.setattr(gate, "run_program", stop)
    settings = Settings(cache_dir=shared_cache_dir(), include_dirs=[INCLUDE])
    with pytest.raises(Ran):
        gate.verify_sources(program.program, program.program, settings, baseline_name="saxpy_kl.cu",
                            candidate_name="saxpy_kl.cu",
                            gpu=GpuInfo(index=0, name="fake (test)", compute_capability="9.0", driver_version="0"))
