"""`kernelloop init` end to end on a GPU: each outside-style program, wrapped by init, is a
contract-v2 program the verifier runs against itself (A/A: about 1.00x, never accepted)."""

from __future__ import annotations

import pytest

from kernelloop.config import Settings, VerifySettings
from kernelloop.program.init import generate
from kernelloop.verify.gate import verify_files
from kernelloop.verify.verdict import Reason

from ..outside_specs import OUTSIDE, SPECS

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("name", sorted(SPECS))
def test_an_init_program_against_itself_is_about_1x_and_rejected(name, tmp_path):
    program = tmp_path / f"{name}.kl.cu"
    program.write_text(generate((OUTSIDE / name).read_text(), SPECS[name], name).program)
    v = verify_files(program, program, Settings(cache_dir=tmp_path / "cache", verify=VerifySettings()))
    assert not v.accepted and v.reasons == [Reason.not_faster], v.summary
    assert 0.9 <= v.speed.speedup <= 1.1
    assert v.contract == 2 and v.size_draw is not None
    assert all(c.comparison.match for c in v.checks)


def test_a_baseline_whose_outputs_ignore_the_inputs_is_refused(tmp_path):
    # Red team round 5: an older init guessed a read-only pointer without const as an output, so
    # the baseline computed on the same poison every call and a constant candidate matched it.
    from kernelloop.errors import InputError
    from ..conftest import FIXTURES
    folder = FIXTURES / "redteam" / "round5" / "init_roles"
    with pytest.raises(InputError, match="outputs are the same in every timed call"):
        verify_files(folder / "popcount_baseline.cu", folder / "rt5_init_role_guess_constant.cu",
                     Settings(cache_dir=tmp_path / "cache", verify=VerifySettings()))
