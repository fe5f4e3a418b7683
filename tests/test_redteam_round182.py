"""Red team round 182 (tests/fixtures/redteam/round182/README.md), on round 181's fixes: inline assembly
in a kernel never launched closed its own function (`ret; }`) and wrote module-scope PTX the reader,
reading line by line, dropped: a variable whose value (c1, c2) or whose `=` and value (c3) stood on the
next line, and a device function whose name stood on the line after `.func (...)` (c4). ptxas reads
PTX free-form and the launched kernel used that code; no digest held it.

Closed by class (tools/ptx_module.read_ptx): a module-scope statement is read to its `;`, or to the
`{` of a function's body, across lines, as ptxas reads it. Each candidate's two builds differ now, and
the candidates are refused."""

from __future__ import annotations

import pytest

from kernelloop.config import Settings, VerifySettings
from kernelloop.tools.code_identity import device_fingerprints
from kernelloop.tools.ptx_module import read_ptx
from kernelloop.verify.shipped import _neutral_ptx
from kernelloop.verify.static_check import check_static_files

from .conftest import FIXTURES, shared_cache_dir
from .test_redteam_round166 import BASE

CASE = FIXTURES / "redteam" / "round182"


@pytest.mark.parametrize("case", ["c1", "c2", "c3", "c4"])
def test_the_two_builds_of_each_candidate_are_other_code(case):
    (a, _), (b, _) = (_neutral_ptx((CASE / case / f"{side}.ptx").read_text()) for side in ("a", "b"))
    kernels = set(read_ptx(a).functions)
    assert device_fingerprints(a, kernels) != device_fingerprints(b, kernels)


def test_statements_across_lines_are_read_whole():
    ptx = (".version 8.8\n.target sm_90\n.address_size 64\n.global .f32 sign\n  = 0fBF800000;\n"
           ".global .align 4 .b8 t[2] = {1,\n 2};\n.func (.param .b32 rv)\nhelper()\n{\n\tret;\n}\n")
    module = read_ptx(ptx)
    assert module.variables["sign"].endswith("= 0fBF800000;") and "t" in module.variables
    assert set(module.functions) == {"helper"} and not module.unreadable
    # a variable after a function's body is nvcc's never (rounds 182-185): the module is read whole
    assert read_ptx(ptx + ".global .align 4 .b8 u[2] = {1,\n 2};\n").unreadable


@pytest.mark.nvcc
@pytest.mark.parametrize("case", ["c1", "c4"])
def test_the_red_teams_candidates_are_refused(case):
    check = check_static_files(BASE, CASE / case / "cand.cu",
                               Settings(cache_dir=shared_cache_dir(), verify=VerifySettings(arch="sm_90")))
    assert not check.ok, check.summary
