"""The harness's special-value group shapes and the samples aimed at them (red team round 57), checked
by a host-only program built with nvcc: no GPU needed."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from kernelloop.tools.nvcc import harness_include_dir

PROGRAM = Path(__file__).parent / "harness" / "group_shapes.cu"


@pytest.mark.nvcc
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_aimed_samples_lie_where_the_group_does(tmp_path):
    binary = tmp_path / "group_shapes"
    built = subprocess.run(["nvcc", "-std=c++17", "-I", str(harness_include_dir()), str(PROGRAM), "-o", str(binary)],
                           capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr[-2000:]
    ran = subprocess.run([str(binary)], capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0 and "bad 0" in ran.stdout, ran.stdout + ran.stderr


@pytest.mark.nvcc
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_a_buffer_hash_word_is_its_own_eight_bytes_at_any_address(tmp_path):
    program = Path(__file__).parent / "harness" / "hash_words.cu"
    binary = tmp_path / "hash_words"
    built = subprocess.run(["nvcc", "-std=c++17", "-I", str(harness_include_dir()), str(program), "-o", str(binary)],
                           capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr[-2000:]
    ran = subprocess.run([str(binary)], capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0 and " bad 0" in ran.stdout, ran.stdout + ran.stderr


@pytest.mark.nvcc
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_wide_integer_draws_reach_every_bit_length_and_the_signs_asked_for(tmp_path):
    program = Path(__file__).parent / "harness" / "wide_ints.cu"
    binary = tmp_path / "wide_ints"
    built = subprocess.run(["nvcc", "-std=c++17", "-I", str(harness_include_dir()), str(program), "-o", str(binary)],
                           capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr[-2000:]
    ran = subprocess.run([str(binary)], capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0 and "bad 0" in ran.stdout, ran.stdout + ran.stderr
