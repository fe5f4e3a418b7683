"""Red team round 159 (tests/fixtures/redteam/round159/): the launcher named a toolkit header's
internal assert macro, `_CCCL_ASSERT((cols = C / 2) >= 0, "cols")`, from an allowed header. In the
verifier's build it expands to nothing; in a build with `-DDEBUG`, `-D_DEBUG` or
`-DCCCL_ENABLE_ASSERTIONS` it evaluates the assignment, so that build sums half of each row: what is
verified is not what ships (certain: every static gate passed). The assert check covers `assert`
only, and the build-value scan follows the macro to `((void)0)`. Fixed by class: a header's
internal macro (a reserved name) is not the part's to name; the CUDA language's keywords, which
the headers define as macros, are allowed."""

from __future__ import annotations

import pytest

from kernelloop.config import Settings, VerifySettings
from kernelloop.verify import policy
from kernelloop.verify.static_check import check_static_files

from .conftest import FIXTURES, shared_cache_dir

CASE = FIXTURES / "redteam" / "round159" / "policy"
BASE = CASE / "base_kl.cu"

HEADER_MACROS = {"_CCCL_ASSERT": "(void)0", "_LIBCUDACXX_DEBUG_ASSERT": "(void)0", "__launch_bounds__": "",
                 "__forceinline__": "", "__CUDA_INTERNAL_SWITCH": "1", "FLT_MAX": "3.4e38f"}


@pytest.mark.parametrize("use", ["_CCCL_ASSERT((n = 3) > 0, \"n\");", "_LIBCUDACXX_DEBUG_ASSERT(n++ > 0, \"\");",
                                 "int k = __CUDA_INTERNAL_SWITCH;", "#define CHECKED(e) _CCCL_ASSERT(e, \"\")"])
def test_a_headers_internal_macro_is_refused(use):
    part = f"void launch(int n) {{ {use} }}" if not use.startswith("#") else use + "\nvoid launch(int n) {}"
    assert "build-context" in {v.rule for v in policy.scan_preprocessed(part, part, HEADER_MACROS)}


def test_the_languages_own_keywords_and_public_macros_are_not_refused():
    part = ("__global__ void __launch_bounds__(256) k(float* __restrict__ x) { x[0] = FLT_MAX; }\n"
            "static __forceinline__ __device__ float g(float v) { return v; }\n"
            "#if defined(_CCCL_ASSERT)\n#endif\n")
    assert policy.scan_preprocessed(part, part, HEADER_MACROS) == []


def test_the_red_teams_candidate_is_refused_and_the_control_too():
    settings = Settings(cache_dir=shared_cache_dir(), verify=VerifySettings(arch="sm_90"))
    check = check_static_files(BASE, CASE / "ccclassert_cand.cu", settings)
    assert not check.ok and "build-context" in check.summary and "_CCCL_ASSERT" in check.summary, check.summary
    control = check_static_files(BASE, CASE / "assertC_cand.cu", settings)
    assert not control.ok and "assert-side-effect" in control.summary, control.summary
