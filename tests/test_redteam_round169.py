"""Red team round 169 (tests/fixtures/redteam/round169/), on round 168's fix: the optimiser learns from
a real debug build's assertion, whose failure path never returns, that its condition held; the shims
the comparison builds with (failure path returning, no effect) teach it nothing. A part read that
knowledge with `__builtin_constant_p` in a template (`(size_t)C >> 40` is known to be 0 only after
cuda::std::array's or std::array's bounds assertion) and shifted the launch's column count in
-DDEBUG / -D_GLIBCXX_ASSERTIONS builds only.

Fixed by class at the source: what the optimiser knows about a value is no value of the code (it
follows the optimisation level, the inlining and every fact learned), so `__builtin_constant_p`,
`__builtin_object_size` and `__builtin_dynamic_object_size` are refused in the part, as written and
as the compiler reads it (rule optimizer-knowledge)."""

from __future__ import annotations

import pytest

from kernelloop.config import Settings, VerifySettings
from kernelloop.verify.policy import scan_source
from kernelloop.verify.static_check import check_static_files

from .conftest import FIXTURES, shared_cache_dir

PARTS = FIXTURES / "redteam" / "round169" / "parts"
BASE = FIXTURES / "redteam" / "round164" / "policy" / "base_kl.cu"


@pytest.mark.nvcc
@pytest.mark.parametrize("candidate", ["noreturn_fact_cand.cu", "noreturn_fact_glibcxx_cand.cu"])
def test_reading_what_the_optimiser_learned_from_an_assertion_is_refused(candidate):
    check = check_static_files(BASE, PARTS / candidate,
                               Settings(cache_dir=shared_cache_dir(), verify=VerifySettings(arch="sm_90")))
    assert not check.ok, check.summary
    assert any(v.rule == "optimizer-knowledge" for v in check.violations), check.violations


@pytest.mark.parametrize("code", [
    "template <class T> int known(T v) { return __builtin_constant_p(v); }",
    "size_t room = __builtin_object_size(p, 0);",
    "size_t room = __builtin_dynamic_object_size(p, 1);",
])
def test_each_reader_of_the_optimisers_knowledge_is_refused(code):
    assert "optimizer-knowledge" in {v.rule for v in scan_source(code)}
