"""Red team round 179 (tests/fixtures/redteam/round179/README.md), on the PTX digest's names: every
rewriting of names before hashing that maps two spellings to one lets inline assembly spell both.
(c1, closed while the round ran) `__local_depot1` and `__local_depot2` became one `__local_depot`;
(c2) two registers spelled `_Z13_GLOBAL__N__a` / `..._b` became one anonymous-namespace name;
(c3) the one-to-one renaming's own output (`__local_depot_kl0`) could be spelled in the assembly.

Closed by class (tools/code_identity._renumbered): each position- or file-named spelling is renamed
in order of first appearance to a name holding `#`, which no PTX name can: a bijection onto names
nothing else spells. Each candidate's two builds digest apart, and the candidates are refused."""

from __future__ import annotations

import pytest

from kernelloop.config import Settings, VerifySettings
from kernelloop.tools.code_identity import device_fingerprints
from kernelloop.tools.ptx_module import read_ptx
from kernelloop.verify.static_check import check_static_files

from .conftest import FIXTURES, shared_cache_dir
from .test_redteam_round166 import BASE

CASE = FIXTURES / "redteam" / "round179"


@pytest.mark.parametrize("case", ["c2", "c3"])
def test_the_two_builds_of_each_candidate_are_other_code(case):
    a, b = ((CASE / case / f"{side}.ptx").read_text() for side in ("a", "b"))
    kernels = set(read_ptx(a).functions)
    assert device_fingerprints(a, kernels) != device_fingerprints(b, kernels)


def test_a_kernel_in_an_anonymous_namespace_reads_alike_from_another_file():
    def kernel(namespace: str) -> str:
        return f".visible .entry _ZN{len(namespace)}{namespace}6kernelEv(\n)\n{{\n\tret;\n}}\n"
    here, there = "_GLOBAL__N__1a2b3c4d_6_abc_cu_12345678", "_GLOBAL__N__9f8e7d6c_9_other_cu_87654321"
    prints = [device_fingerprints(kernel(n), {f"_ZN{len(n)}{n}6kernelEv"}) for n in (here, there)]
    assert prints[0] == prints[1] and len(prints[0]) == 1


@pytest.mark.nvcc
@pytest.mark.parametrize("case", ["c2", "c3"])
def test_the_red_teams_candidates_are_refused(case):
    check = check_static_files(BASE, CASE / case / "cand.cu",
                               Settings(cache_dir=shared_cache_dir(), verify=VerifySettings(arch="sm_90")))
    assert not check.ok, check.summary
