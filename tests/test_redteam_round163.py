"""Red team round 163 (tests/fixtures/redteam/round163/): round 162's fix compared more builds, but
each varied one axis of the real build space (the half/bf16 switches, the rest of the file,
--extended-lambda, the dialect), and only PyTorch's set was compared as one file with the harness.
A part whose code is the AND of one fact from two axes agreed in every build compared and halved
a row in a real one: bf16's operators gone AND <algorithm> after the part (one file, all six
switches), `u8""` being char8_t AND <algorithm> after it (one file, -std=c++20), `__half`'s operators
gone AND `std::not_fn` visible (PyTorch's set with --extended-lambda). Fixed by class as far as a
list goes: as one file with the harness the part is compared in every switch with every option
at once (an AND of facts that are all on there); the build a user ships is the one to declare
(verify.build_flags, round 162)."""

from __future__ import annotations

import pytest

from kernelloop.config import Settings, VerifySettings
from kernelloop.verify.static_check import check_static_files

from .conftest import FIXTURES, shared_cache_dir

CASE = FIXTURES / "redteam" / "round163" / "policy"
BASE = CASE / "base_kl.cu"


@pytest.fixture(scope="module")
def shared_cache():
    return shared_cache_dir()


@pytest.mark.nvcc
@pytest.mark.parametrize("candidate, says", [
    ("inter_bf16_cand.cu", "every half and bfloat16 switch, --extended-lambda and -std=c++20 as one file"),
    ("inter_cxx20_cand.cu", "every half and bfloat16 switch, --extended-lambda and -std=c++20 as one file"),
    ("torch_lambda_cand.cu", "every half and bfloat16 switch, --extended-lambda and -std=c++20 as one file"),
    # the single-fact controls, refused before too
    ("bf16_only_cand.cu", "bfloat16"),
    ("cxx20_only_cand.cu", "c++20"),
    ("lambda_only_cand.cu", "--extended-lambda"),
])
def test_the_red_teams_candidates_are_refused(candidate, says, shared_cache):
    check = check_static_files(BASE, CASE / candidate,
                               Settings(cache_dir=shared_cache, verify=VerifySettings(arch="sm_90")))
    assert not check.ok and "build-context" in check.summary and says in check.summary, check.summary
