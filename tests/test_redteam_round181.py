"""Red team round 181 (tests/fixtures/redteam/round181/README.md), on the device digest's reading and
names: (c1) the PTX reader counted a brace inside `.pragma "}"` and ended the kernel there; (c2) the
comparison's `_INTERNAL_...` neutralisation made two helpers spelled like nvcc's internal names one;
(c3) two kernels in namespaces spelled like nvcc's anonymous one read as one, and only the never
launched one was digested.

Closed by class: strings are read as strings (tools/ptx_module._code); a unit whose text holds more
than one spelling of nvcc's internal names is compared as written (shipped._neutral_ptx), and names
that read alike once neutral are told apart as written, each with what it reaches
(code_identity.device_fingerprints). Each candidate's two builds differ, and the candidates are
refused."""

from __future__ import annotations

import pytest

from kernelloop.config import Settings, VerifySettings
from kernelloop.tools.code_identity import device_fingerprints
from kernelloop.tools.ptx_module import read_ptx
from kernelloop.verify.shipped import _neutral_ptx
from kernelloop.verify.static_check import check_static_files

from .conftest import FIXTURES, shared_cache_dir
from .test_redteam_round166 import BASE

CASE = FIXTURES / "redteam" / "round181"


@pytest.mark.parametrize("case", ["c1", "c2", "c3"])
def test_the_two_builds_of_each_candidate_are_other_code(case):
    (a, _), (b, _) = (_neutral_ptx((CASE / case / f"{side}.ptx").read_text()) for side in ("a", "b"))
    kernels = set(read_ptx(a).functions)
    assert device_fingerprints(a, kernels) != device_fingerprints(b, kernels)


def test_a_brace_in_a_string_ends_nothing():
    ptx = '.visible .entry k(\n)\n{\n\t.pragma "}";\n\tmov.u32 \t%r1, 7;\n\tret;\n}\n'
    assert any("mov.u32" in line for line in read_ptx(ptx).functions["k"].body)


@pytest.mark.nvcc
@pytest.mark.parametrize("case", ["c1", "c2", "c3"])
def test_the_red_teams_candidates_are_refused(case):
    check = check_static_files(BASE, CASE / case / "cand.cu",
                               Settings(cache_dir=shared_cache_dir(), verify=VerifySettings(arch="sm_90")))
    assert not check.ok, check.summary


def test_host_functions_alike_once_neutral_keep_each_digest():
    from kernelloop.verify.shipped import _by_neutral_name
    verified = {"_ZN17q14_GLOBAL__N__ab1fEv": "launched", "_ZN17q14_GLOBAL__N__cd1fEv": "same"}
    other = {"_ZN17q14_GLOBAL__N__ab1fEv": "changed", "_ZN17q14_GLOBAL__N__cd1fEv": "same"}
    assert len(_by_neutral_name(verified)) == 1 and _by_neutral_name(verified) != _by_neutral_name(other)
    assert _by_neutral_name({"_Z3foov": "d"}) == {"_Z3foov": "d"}
