"""Red team round 161 (tests/fixtures/redteam/round161/): round 160's fix compared macros only, and
only for `-D` names. (1) `-D__CUDA_NO_HALF_OPERATORS__` (on the list) removes `__half`'s operators,
a declaration, not a macro: a template overload test on `__half + __half` made `cols` C or C / 2.
(2) `-rdc=true`, a compiler option, makes nvcc define `__CUDACC_RDC__`, and CUB then defines
`CUB_RDC_ENABLED` (empty): round 160's parameter trick again. (3) A parameter named `_CG_DEBUG`, a
reserved name that is a macro only in a `-G -DCG_DEBUG` build: the reserved-name rule read no
parameters. All three passed every static gate (certain). Fixed by class: the part's compiled code
is compared in the other builds where honest code compiles alike (a debug build, the half and
bfloat16 switches: shipped.other_build_differences, judged only where the baseline's part compiles
alike), the macro check also preprocesses with `-rdc=true`, and a parameter is a declaration."""

from __future__ import annotations

import pytest

from kernelloop.config import Settings, VerifySettings
from kernelloop.verify import policy
from kernelloop.verify.static_check import check_static_files

from .conftest import FIXTURES, shared_cache_dir

CASE = FIXTURES / "redteam" / "round161" / "policy"
BASE = CASE / "base_kl.cu"


def test_a_parameter_is_a_declaration_for_the_reserved_name_rule():
    assert "reserved-name" in {v.rule for v in policy.scan_source("static int f(int C, int _CG_DEBUG) { return C; }")}
    assert "reserved-name" in {v.rule for v in policy.scan_source("void g(float* __x = nullptr);")}
    assert policy.scan_source("static int f(int C, int n = 2) { return C - n; }") == []


@pytest.mark.nvcc
@pytest.mark.parametrize("candidate, rule, says", [
    ("half_cand.cu", "build-context", "half and bfloat16 switches"),
    ("rdc_cand.cu", "build-context", "CUB_RDC_ENABLED"),
    ("cg_cand.cu", "reserved-name", "_CG_DEBUG"),
])
def test_the_red_teams_candidates_are_refused(candidate, rule, says):
    check = check_static_files(BASE, CASE / candidate, Settings(cache_dir=shared_cache_dir(), verify=VerifySettings(arch="sm_90")))
    assert not check.ok and rule in check.summary and says in check.summary, check.summary
