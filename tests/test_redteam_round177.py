"""Red team round 177 (tests/fixtures/redteam/round177/README.md), on the schedule-neutral comparison of
device code (rounds 175-176's session): it took every body line ending in `;` for one instruction,
but ptxas reads a block comment's `/*` and a label before an instruction on the same line. Two line
orders that read as one reordering ran different code: `add ...; /* ;` commented out whichever line
followed it (c1: chosen by a half switch; c2: by the dialect), and an instruction moved past
`KL_LOOP: add ...;` entered a loop (c3).

Closed by class (tools/ptx_module.py): only a line that is one plain instruction as ptxas reads it
moves; any other line (a label, a block comment's mark, a second `;`) is a place nothing moves
across; the program's own inline assembly is never reordered. Each candidate's two builds' PTX (as
the reviewer captured them) digest apart now, and the candidates are refused."""

from __future__ import annotations

import pytest

from kernelloop.config import Settings, VerifySettings
from kernelloop.tools.code_identity import device_fingerprints
from kernelloop.tools.ptx_module import read_ptx
from kernelloop.verify.static_check import check_static_files

from .conftest import FIXTURES, shared_cache_dir
from .test_redteam_round166 import BASE

CASE = FIXTURES / "redteam" / "round177"


@pytest.mark.parametrize("case", ["c1", "c2", "c3"])
def test_the_two_builds_of_each_candidate_are_other_code(case):
    a, b = ((CASE / case / f"{side}.ptx").read_text() for side in ("a", "b"))
    kernels = {name for name in read_ptx(a).functions}
    assert device_fingerprints(a, kernels) != device_fingerprints(b, kernels)


@pytest.mark.nvcc
@pytest.mark.parametrize("case", ["c1", "c3"])
def test_the_red_teams_candidates_are_refused(case):
    check = check_static_files(BASE, CASE / case / "cand.cu",
                               Settings(cache_dir=shared_cache_dir(), verify=VerifySettings(arch="sm_90")))
    assert not check.ok, check.summary
