"""Pieces of the harness checked by host-only programs built with nvcc (no GPU needed): the
special-value group shapes and the samples aimed at them (red team round 57), the words a buffer's
hash reads, and the wider-integer draws (red team rounds 219-221)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from kernelloop.tools.nvcc import harness_include_dir

PROGRAMS = Path(__file__).parent / "harness"



def _host_check(name: str, tmp_path: Path) -> None:
    """Build tests/harness/NAME.cu for the host and run it: it prints `bad 0` where every check holds."""
    binary = tmp_path / name
    built = subprocess.run(["nvcc", "-std=c++17", "-I", str(harness_include_dir()), str(PROGRAMS / f"{name}.cu"),
                            "-o", str(binary)], capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr[-2000:]
    ran = subprocess.run([str(binary)], capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0 and " bad 0" in f" {ran.stdout}", ran.stdout + ran.stderr


@pytest.mark.nvcc
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_aimed_samples_lie_where_the_group_does(tmp_path):
    _host_check("group_shapes", tmp_path)


@pytest.mark.nvcc
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_a_buffer_hash_word_is_its_own_eight_bytes_at_any_address(tmp_path):
    _host_check("hash_words", tmp_path)


@pytest.mark.nvcc
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_wide_integer_draws_reach_every_bit_length_and_the_signs_asked_for(tmp_path):
    _host_check("wide_ints", tmp_path)
