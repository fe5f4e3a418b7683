"""Red team round 148 (tests/fixtures/redteam/round148/): the column tier chose its NaN-passing
combine (fmaxf) by the accumulator type's spelling, so a float max declared `real m` (a typedef)
or `T m` (a template parameter) combined its partials with `if (m < p) m = p`, which keeps a NaN
partial that fmaxf would pass over: NaN where the baseline gives the column's maximum (certain:
host replay; the PTX compared instead of taking max.f32). Fixed by class: both tiers combine with
rowwarp.extreme_of, whose library call the compiler resolves by type (`::max` of a float is
fmaxf), with operands of the library overload's exact type."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from kernelloop.program.split import split_program

from .conftest import FIXTURES
from .test_redteam_round109 import _first_proposal

CASE = FIXTURES / "redteam" / "round148" / "colmax_alias_nan"


def _combine(source: str) -> str:
    line = re.search(r"for \(int kl_s = 0; kl_s < 32; \+\+kl_s\) \{[^\n]*", source)
    assert line, source
    return line.group(0)


@pytest.mark.parametrize("baseline", ["baseline_typedef.cu", "baseline_template.cu", "control_float_baseline.cu"])
def test_a_float_max_combines_as_fmaxf_whatever_its_spelling(baseline):
    proposal = _first_proposal((CASE / baseline).read_text())
    assert "column tier" in proposal.approach
    combine = _combine(proposal.source)
    assert "if (m < kl_p)" not in combine and re.search(r"m = ::(?:fmaxf|max)\(\(typename ::kl_lib<decltype\(m\)>", combine), combine


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
@pytest.mark.parametrize("baseline", ["baseline_typedef.cu", "baseline_template.cu"])
def test_the_compiled_combine_takes_the_library_max_of_floats(baseline, tmp_path):
    # The PTX of the rewritten kernel alone: its combine is max.f32 (NaN passed over), no float compare.
    text = (CASE / baseline).read_text()
    split = split_program(text, baseline)
    proposal = _first_proposal(text)
    source = tmp_path / "k.cu"
    source.write_text(split.preamble + "\n" + proposal.source)
    ptx = tmp_path / "k.ptx"
    done = subprocess.run(["nvcc", "-arch=sm_90", "-ptx", str(source), "-o", str(ptx)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    entry = ptx.read_text().split(".entry")
    body = next(e for e in entry[1:] if "kl_rewritten" in e.split("(")[0])
    assert "max.f32" in body and "setp.lt.f32" not in body and "setp.gt.f32" not in body, body[-3000:]
