"""Red team round 162 (tests/fixtures/redteam/round162/): round 161's code comparison checked one
other build (all six half and bfloat16 switches at once), the part alone, and only as the verifier
spells it. (1) Two switch-dependent facts XORed agree with all six switches set and differ with
PyTorch's four. (2) A fact of the build ANDed with a fact of what follows the part (ADL finding
`std::max_element` once the harness's <algorithm> follows) differs only in the whole file built
with the switches. (3) `--extended-lambda` makes cuda_runtime.h include <functional>, whose
`std::not_fn` ADL finds. (4) A `-std=c++20` build (`u8""` has another type; `#if __cplusplus >
201703L`). All passed every static gate. Fixed by class: the build a user ships can be declared
(verify.build_flags: every build kernelloop makes of both programs adds the flags, so the verdict
is for that build), and where it is not, the part is compared in each half switch alone, all of
them, PyTorch's set, --extended-lambda and the other dialect, and as one file with the harness
(round 163: every switch with every option at once; shipped.other_builds), each judged only where the baseline's part compiles alike."""

from __future__ import annotations

import pytest

from kernelloop.config import ConfigError, Settings, VerifySettings, load_settings
from kernelloop.tools.nvcc import Toolchain, language_flags
from kernelloop.verify.shipped import half_switches_reach, other_builds
from kernelloop.verify.static_check import check_static_files

from .conftest import FIXTURES, shared_cache_dir

CASE = FIXTURES / "redteam" / "round162" / "policy"
BASE = CASE / "base_kl.cu"


@pytest.fixture(scope="module")
def shared_cache():
    """The run's cache: the baseline's builds (keyed by their content) are made once."""
    return shared_cache_dir()


def _settings(cache, **verify) -> Settings:
    return Settings(cache_dir=cache, verify=VerifySettings(arch="sm_90", **verify))


@pytest.mark.nvcc
@pytest.mark.parametrize("candidate, says", [
    ("mask_cand.cu", "PyTorch's half and bfloat16 switches"),  # XOR of two facts: a subset of the switches
    ("inter_cand.cu", "as one file with the harness"),  # AND of a switch and the rest of the file
    ("lambda_cand.cu", "--extended-lambda"),
    ("cxx20_cand.cu", "c++20"),
    ("cxx20_macro_cand.cu", "c++20"),
])
def test_the_red_teams_candidates_are_refused(candidate, says, shared_cache):
    check = check_static_files(BASE, CASE / candidate, _settings(shared_cache))
    assert not check.ok and "build-context" in check.summary and says in check.summary, check.summary


@pytest.mark.nvcc
def test_the_base_passes_against_itself(shared_cache):
    check = check_static_files(BASE, BASE, _settings(shared_cache))
    assert check.ok, check.summary


@pytest.mark.nvcc
def test_with_the_shipped_build_declared_the_verdict_is_for_that_build(shared_cache):
    """PyTorch's flags declared: the verifier's own builds are that build, where round 162's XOR part
    computes half a row in the program verified, and notes say which build the verdict is for."""
    flags = ["-D__CUDA_NO_HALF_OPERATORS__", "-D__CUDA_NO_HALF_CONVERSIONS__",
             "-D__CUDA_NO_BFLOAT16_CONVERSIONS__", "-D__CUDA_NO_HALF2_OPERATORS__", "--expt-relaxed-constexpr"]
    check = check_static_files(BASE, BASE, _settings(shared_cache, build_flags=flags))
    assert check.ok, check.summary
    assert any("built with your build flags" in n and "--expt-relaxed-constexpr" in n for n in check.notes)
    assert all(f in check.baseline_build.flags for f in flags), check.baseline_build.flags


def test_build_flags_reach_every_build_and_a_std_replaces_the_dialect():
    tc = Toolchain(nvcc="nvcc", version="13.0", banner="b", build_flags=("-DX=1", "-std=c++20", "--extended-lambda"))
    assert language_flags(tc, "sm_90") == ["-std=c++20", "-arch=sm_90", "-DX=1", "--extended-lambda"]
    plain = Toolchain(nvcc="nvcc", version="13.0", banner="b")
    assert language_flags(plain, "sm_90") == ["-std=c++17", "-arch=sm_90"]
    assert language_flags(plain, "sm_90", iso_dialect=False) == ["-arch=sm_90"]


def test_other_builds_leave_out_what_the_shipped_build_already_is():
    names = [b.what for b in other_builds(())]
    assert any("PyTorch" in n for n in names) and any("--extended-lambda" in n for n in names)
    assert sum("alone" in n for n in names) == 6 and any("c++20" in n for n in names)
    declared = other_builds(("--extended-lambda", "--expt-relaxed-constexpr", "-std=c++20"))
    assert "a build with --extended-lambda" not in [b.what for b in declared]
    assert any("c++17" in b.what for b in declared)  # the other dialect, from the declared one


def test_the_half_switches_are_compared_only_where_a_header_reads_them():
    assert half_switches_reach({"__CUDA_FP16_H__": ""}) and half_switches_reach({"_CCCL_VERSION": "1"})
    assert not half_switches_reach({"__CUDART_H__": ""})


def test_build_flags_are_checked_and_taken_from_each_layer(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("KERNELLOOP_VERIFY_BUILD_FLAGS", "-DA=1 --extended-lambda")
    assert load_settings().verify.build_flags == ["-DA=1", "--extended-lambda"]
    assert load_settings({"build_flags": ["-std=c++20"]}).verify.build_flags == ["-std=c++20"]
    monkeypatch.delenv("KERNELLOOP_VERIFY_BUILD_FLAGS")
    (tmp_path / "kernelloop.toml").write_text('[verify]\nbuild_flags = ["-UNDEBUG"]\n')
    assert load_settings().verify.build_flags == ["-UNDEBUG"]
    for bad in ("-I/etc", "-o x", "-Xcompiler=-fplugin=x.so", "--compiler-bindir=/tmp", "-DA B"):
        with pytest.raises(ConfigError, match=r"--build-flag: .*not a build flag"):
            load_settings({"build_flags": [bad]})


def test_a_flag_kernelloop_does_not_take_is_one_line_and_exit_2(tmp_path):
    import subprocess
    import sys

    program = FIXTURES.parent.parent / "kernels" / "naive_matmul.cu"
    run = subprocess.run([sys.executable, "-m", "kernelloop", "verify", "--static", "--build-flag", "-I/etc",
                          str(program), str(program)], capture_output=True, text=True, cwd=tmp_path)
    assert run.returncode == 2 and "Traceback" not in run.stderr, run.stderr
    assert "--build-flag" in run.stderr and "'-I/etc' is not a build flag" in run.stderr
