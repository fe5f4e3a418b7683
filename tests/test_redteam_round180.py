"""Red team round 180 (tests/fixtures/redteam/round180/README.md), on round 179's renaming: (c1) a
placeholder followed by a digit read as another (`#N1` + `0` = `#N10`), so two registers became one;
(c2, c3) the anonymous-namespace span's length was read from the text and never held to the name it
sits in, so `1300_GLOBAL__N__` in an asm comment (c2) or in a device function's own name (c3) turned
the next 1300 characters, the kernel's loop among them, into one placeholder.

Closed by class (tools/code_identity): a placeholder is closed by `#` (`#N1#`), and a span is renamed
only inside a mangled name and wholly within it. Each candidate's two builds digest apart, and the
candidates are refused."""

from __future__ import annotations

import pytest

from kernelloop.config import Settings, VerifySettings
from kernelloop.tools.code_identity import device_fingerprints
from kernelloop.tools.ptx_module import read_ptx
from kernelloop.verify.static_check import check_static_files

from .conftest import FIXTURES, shared_cache_dir
from .test_redteam_round166 import BASE

CASE = FIXTURES / "redteam" / "round180"


@pytest.mark.parametrize("case", ["c1", "c2", "c3"])
def test_the_two_builds_of_each_candidate_are_other_code(case):
    a, b = ((CASE / case / f"{side}.ptx").read_text() for side in ("a", "b"))
    kernels = set(read_ptx(a).functions)
    assert device_fingerprints(a, kernels) != device_fingerprints(b, kernels)


@pytest.mark.nvcc
@pytest.mark.parametrize("case", ["c1", "c3"])
def test_the_red_teams_candidates_are_refused(case):
    check = check_static_files(BASE, CASE / case / "cand.cu",
                               Settings(cache_dir=shared_cache_dir(), verify=VerifySettings(arch="sm_90")))
    assert not check.ok, check.summary
