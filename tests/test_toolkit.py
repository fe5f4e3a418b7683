"""One search for the CUDA toolkit and NVIDIA's tools: doctor, profile and verify find the same ncu."""

from __future__ import annotations

import os
import stat
import sys

import pytest

from kernelloop import doctor
from kernelloop.doctor import RunOutput
from kernelloop.errors import EnvironmentProblem
from kernelloop.profiler import run as prun
from kernelloop.tools import toolkit

from .conftest import ROOT


def _executable(path, text="#!/bin/sh\nexit 0\n"):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


@pytest.fixture
def fake_toolkit(tmp_path, monkeypatch):
    """A CUDA toolkit whose ncu lives only in nsight-compute-<ver>/ (not on PATH), reached through an
    nvcc wrapper script on PATH that `exec`s the toolkit's nvcc."""
    root = tmp_path / "cuda-13.0"
    _executable(root / "bin" / "nvcc", "#!/bin/sh\necho 'Cuda compilation tools, release 13.0, V13.0.88'\n")
    ncu = _executable(root / "nsight-compute-2025.3.1" / "ncu")
    _executable(root / "nsight-compute-2025.1.0" / "ncu")  # an older one beside it: never chosen
    wrapper = _executable(tmp_path / "wrappers" / "nvcc", f'#!/bin/sh\nexec {root}/bin/nvcc "$@"\n')
    monkeypatch.setenv("PATH", os.pathsep.join([str(wrapper.parent), os.path.dirname(sys.executable), "/bin",
                                                "/usr/bin"]))
    for var in ("CUDA_HOME", "CUDA_PATH"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr("kernelloop.toolkit_roots.DEFAULT_ROOT", tmp_path / "no-default-toolkit")
    monkeypatch.setattr(toolkit, "NSIGHT_COMPUTE_ROOT", tmp_path / "no-opt-nvidia")
    return wrapper, ncu


def test_doctor_and_profile_find_the_same_ncu_in_the_toolkit(fake_toolkit, monkeypatch):
    wrapper, ncu = fake_toolkit
    check, found = doctor.check_ncu(wrapper, lambda argv, timeout: RunOutput(0, "Version 2025.3.1.0 (build 1)"))
    assert check.status == "ok" and found == ncu
    assert toolkit.find_ncu() == ncu  # what profile asks (nvcc on PATH, followed through its wrapper)
    # profile gets past "no ncu" to the next thing this machine lacks
    monkeypatch.setattr(prun, "detect_gpus", lambda: [])
    from kernelloop.config import Settings

    with pytest.raises(EnvironmentProblem, match="profile needs a CUDA GPU"):
        prun.profile_file(ROOT / "kernels" / "naive_matmul.cu", Settings())


def test_cuda_home_is_searched_by_every_tool(tmp_path, monkeypatch):
    home = tmp_path / "toolkit"
    ncu = _executable(home / "bin" / "ncu")
    sanitizer = _executable(home / "bin" / "compute-sanitizer")
    monkeypatch.setenv("PATH", os.path.dirname(sys.executable))
    monkeypatch.setenv("CUDA_HOME", str(home))
    assert toolkit.find_ncu() == ncu and doctor.find_ncu() == ncu
    from kernelloop.tools.sanitizer import find_compute_sanitizer

    assert find_compute_sanitizer() == sanitizer
    assert toolkit.toolkit_roots()[0] == ("$CUDA_HOME", home)


def test_no_ncu_anywhere_is_one_line_for_profile_and_a_failed_check_for_doctor(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", os.path.dirname(sys.executable))
    for var in ("CUDA_HOME", "CUDA_PATH"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr("kernelloop.toolkit_roots.DEFAULT_ROOT", tmp_path / "none")
    monkeypatch.setattr(toolkit, "NSIGHT_COMPUTE_ROOT", tmp_path / "none")
    assert toolkit.find_ncu() is None
    with pytest.raises(EnvironmentProblem, match="ncu .*not found") as info:
        toolkit.require_ncu()
    assert "\n" not in str(info.value)
    check, found = doctor.check_ncu(None, lambda argv, timeout: RunOutput(0, ""))
    assert check.status == "fail" and found is None


def test_the_disassembler_is_found_by_the_toolkit_search_beside_the_nvcc_in_use(fake_toolkit, tmp_path, monkeypatch):
    # issue 12: the precision scan searched for cuobjdump its own way; now one search serves every tool
    from pathlib import Path

    from kernelloop.tools.nvcc import Toolchain
    from kernelloop.verify.precision import find_disassembler

    wrapper, _ = fake_toolkit
    root = tmp_path / "cuda-13.0"
    own = _executable(root / "bin" / "cuobjdump"), _executable(root / "bin" / "nvdisasm")
    _executable(tmp_path / "wrappers" / "cuobjdump")  # another toolkit's on PATH: not the nvcc's own
    tool = find_disassembler(Toolchain(nvcc=wrapper, version="13.0", banner=""))
    assert tool is not None and (tool.cuobjdump, tool.nvdisasm_dir) == (own[0], own[1].parent)
    # without them beside nvcc: PATH, then NVIDIA's wheels on sys.path
    for path in own:
        path.unlink()
    wheel = tmp_path / "site" / "nvidia" / "cuda_nvdisasm" / "bin"
    _executable(wheel / "nvdisasm")
    # first on sys.path: kernelloop's own dependency, the real wheels, is on it too (round 266)
    monkeypatch.setattr(sys, "path", [str(tmp_path / "site"), *sys.path])
    tool = find_disassembler(Toolchain(nvcc=wrapper, version="13.0", banner=""))
    assert tool is not None and tool.cuobjdump == tmp_path / "wrappers" / "cuobjdump" and tool.nvdisasm_dir == wheel
    assert toolkit.find_toolkit_program("cuobjdump", Path(wrapper)) == tmp_path / "wrappers" / "cuobjdump"
