"""`kernelloop init --spec FILE`: init's options from a TOML file, flags winning key by key (issue 10).

Tier 1: the file read and checked (names, roles, ranges, unknown keys with a suggestion, bad TOML:
one line each). Tier 2 (nvcc): init from the spec file writes the program the same flags write, and
a flag given beside the file replaces the file's value.
"""

from __future__ import annotations

import pytest

from kernelloop.errors import InputError
from kernelloop.program.init_spec_file import read_init_spec

from .conftest import ROOT
from .test_cli import kl, one_error_line

LAYERNORM = ROOT / "tests" / "fixtures" / "outside" / "layernorm_llmc.cu"
SPEC = """
launcher = "layernorm_forward"
include_dirs = ["inc"]
[set]
N = [8192, 1531]
C = [768, 333]
block_size = 256
eps = 1e-5
[count]
out = "N * C"
inp = "N * C"
weight = "C"
[role]
out = "output"
[range]
inp = [-4, 4.5]
"""


def test_a_spec_file_reads_as_the_flags_it_stands_for(tmp_path):
    path = tmp_path / "ln.toml"
    path.write_text(SPEC)
    spec = read_init_spec(path)
    assert spec.launcher == "layernorm_forward" and spec.include_dirs == [tmp_path / "inc"]
    assert spec.as_flags() == {
        "set": ["N=8192,1531", "C=768,333", "block_size=256", "eps=1e-05"],
        "count": ["out=N * C", "inp=N * C", "weight=C"],
        "role": ["out=output"],
        "range": ["inp=-4,4.5"],
    }


@pytest.mark.parametrize("text, message", [
    ("kernal = 'k'\n", "unknown key kernal (did you mean kernel?)"),
    ("[sett]\nn = 4\n", "unknown key sett (did you mean set?)"),
    ("[role]\nout = 'outptu'\n", "role.out = 'outptu': the role is one of"),
    ("[range]\nx = [1, 1]\n", "range.x: give two finite numbers [LO, HI] with LO < HI"),
    ("[range]\nx = [0, inf]\n", "range.x: give two finite numbers"),
    ("[set]\nn = [1, 2, 3]\n", "set.n: give one value or [DEFAULT, ALTERNATIVE]"),
    ("[set]\nn = {a = 1}\n", "set.n"),
    ("block = \n", "not valid TOML"),
])
def test_what_is_wrong_in_a_spec_file_is_one_line_naming_the_key(tmp_path, text, message):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(InputError) as info:
        read_init_spec(path)
    assert message in str(info.value) and str(path) in str(info.value) and "\n" not in str(info.value)


def test_a_missing_spec_file_is_one_line(tmp_path):
    with pytest.raises(InputError, match="no such spec file"):
        read_init_spec(tmp_path / "none.toml")


@pytest.mark.nvcc
def test_init_from_a_spec_file_writes_what_the_flags_write_and_a_flag_wins(tmp_path):
    cache = {"KERNELLOOP_CACHE_DIR": str(tmp_path / "cache")}
    spec = tmp_path / "ln.toml"
    spec.write_text(SPEC.replace('include_dirs = ["inc"]\n', "").replace("eps = 1e-5\n", ""))
    from_flags = kl("init", str(LAYERNORM), "-o", str(tmp_path / "flags.cu"), "--launcher", "layernorm_forward",
                    "--set", "N=8192,1531", "--set", "C=768,333", "--set", "block_size=256", "--count", "out=N * C",
                    "--count", "inp=N * C", "--count", "weight=C", "--role", "out=output", "--range", "inp=-4,4.5",
                    env=cache)
    assert from_flags.returncode == 0, from_flags.stderr
    from_file = kl("init", str(LAYERNORM), "-o", str(tmp_path / "file.cu"), "--spec", str(spec), env=cache)
    assert from_file.returncode == 0, from_file.stderr
    assert (tmp_path / "file.cu").read_text() == (tmp_path / "flags.cu").read_text()
    # a flag beside the file replaces the file's value of that key only
    both = kl("init", str(LAYERNORM), "-o", str(tmp_path / "both.cu"), "--spec", str(spec), "--set", "C=1024,333",
              env=cache)
    assert both.returncode == 0, both.stderr
    text = (tmp_path / "both.cu").read_text()
    assert "{1024, 333}" in text and "{8192, 1531}" in text
    bad = tmp_path / "bad.toml"
    bad.write_text("[sett]\nN = 4\n")
    r = kl("init", str(LAYERNORM), "-o", str(tmp_path / "bad.cu"), "--spec", str(bad), env=cache)
    assert r.returncode == 2 and "unknown key sett (did you mean set?)" in one_error_line(r)
