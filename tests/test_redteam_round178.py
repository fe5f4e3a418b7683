"""Red team round 178 (tests/fixtures/redteam/round178/README.md), on round 177's fix: the PTX reader
ended a function at the first body line starting with `}`, and nvcc copies an asm statement's text
as written, so `asm("{\\n}\\n...")` put a column-0 `}` inside the kernel and everything after it (a
`min` whose bound a half switch chose) was left out of every comparison of builds.

Closed by class (tools/ptx_module.read_ptx): a function's body ends where its braces close, counted
outside comments (`//`, `/* */` across lines), and a header is read only outside a body and outside
a comment; whatever inline assembly prints at the start of a line ends nothing."""

from __future__ import annotations

import pytest

from kernelloop.config import Settings, VerifySettings
from kernelloop.tools.code_identity import device_fingerprints
from kernelloop.tools.ptx_module import read_ptx
from kernelloop.verify.static_check import check_static_files

from .conftest import FIXTURES, shared_cache_dir
from .test_redteam_round166 import BASE

CASE = FIXTURES / "redteam" / "round178"


def test_the_two_builds_ptx_are_other_code():
    a, b = ((CASE / "c1" / f"{side}.ptx").read_text() for side in ("a", "b"))
    kernels = set(read_ptx(a).functions)
    assert device_fingerprints(a, kernels) != device_fingerprints(b, kernels)


def test_braces_and_headers_inside_comments_or_assembly_end_nothing():
    ptx = """.visible .entry k(
\t.param .u64 k_param_0
)
{
\t// begin inline asm
\t{
}
/* }
.visible .entry fake(
*/
\t// end inline asm
\tmov.u32 \t%r1, 7; // }
\tret;
}
.visible .entry after(
)
{
\tret;
}
"""
    module = read_ptx(ptx)
    assert set(module.functions) == {"k", "after"}
    assert any("mov.u32" in line for line in module.functions["k"].body)


@pytest.mark.nvcc
def test_the_red_teams_candidate_is_refused():
    check = check_static_files(BASE, CASE / "c1" / "cand.cu",
                               Settings(cache_dir=shared_cache_dir(), verify=VerifySettings(arch="sm_90")))
    assert not check.ok, check.summary
