"""Red team round 154 (tests/fixtures/redteam/round154/): the verifier's policy scan told a digit
separator from a character literal by looking back from the quote for the number's start, which
the compiler knows only by reading forward. `PICK(a.1'x'"', __LINE__, '"')` is the name `a`, the
number `.1'x`, the character '"' and `__LINE__` to g++ and nvcc; the scan read `'x'` as a
character and `"', __LINE__, '"` as a string, so a candidate reading `__LINE__` or `__TIME__`
passed every static gate (certain). Fixed by class: the source is read forward into preprocessing
tokens (scanner.number_quotes), and a quote is a number's only where a number token holds it."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from kernelloop.program.scanner import number_quotes
from kernelloop.verify.policy import scan_source

from .conftest import FIXTURES, shared_cache_dir

CASE = FIXTURES / "redteam" / "round154" / "policy"
_SPELLINGS = ["a.1'x'\"'", "'a'1'x'\"'", "e+1'x'\"'", "p.0x1'F'\"'", "1'x'\"'"]


@pytest.mark.parametrize("before", _SPELLINGS)
def test_a_build_value_behind_a_number_is_seen(before):
    source = f"#define PICK(a, b, c) b\n__global__ void k(int* y) {{ y[0] = PICK({before}, __LINE__, '\"'); }}\n"
    rules = {v.rule for v in scan_source(source)}
    assert "build-context" in rules, rules


@pytest.mark.parametrize("candidate", ["line_cand.cu", "time_cand.cu"])
def test_the_red_teams_candidates_are_refused(candidate):
    from kernelloop.config import Settings, VerifySettings
    from kernelloop.verify.static_check import check_static_files
    check = check_static_files(CASE / "base_kl.cu", CASE / candidate,
                               Settings(cache_dir=shared_cache_dir(), verify=VerifySettings(arch="sm_90")))
    assert not check.ok and "build-context" in check.summary, check.summary


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs the host compiler's preprocessor")
def test_the_number_quotes_are_the_compilers(tmp_path):
    # each spelling stringized by g++: where it reads a number, the quote is inside the number's text
    source = tmp_path / "q.cpp"
    cases = ["1'000", "0xFF'ff", ".1'x", "1e+'a", "1'('"]
    source.write_text("#define S(x) #x\n" + "".join(f"S({c})\n" for c in cases[:-1]))
    done = subprocess.run(["g++", "-E", "-P", "-std=c++17", str(source)], capture_output=True, text=True, check=True)
    assert done.stdout.split() == [f'"{c}"' for c in cases[:-1]]
    assert all(number_quotes(c) for c in cases[:-1]) and not number_quotes(cases[-1])
