"""Round 51 F2: one output made wholly NaN by the special values (a norm of the raw input) must not
void the check of the outputs beside it. The red team's CPU emulation of an AMP unscale step
(baseline sanitises g, the candidate drops the sanitiser) drives the real special-value experiments."""
from __future__ import annotations

import importlib.util
import secrets
from pathlib import Path

from kernelloop.config import VerifySettings
from kernelloop.tools.sandbox import Limits
from kernelloop.verify import gate, special_values
from kernelloop.verify.comparing import baseline_noise
from kernelloop.verify.records import Manifest
from kernelloop.verify.verdict import Durations, Verdict

SIM = Path(__file__).parent / "fixtures/redteam/round51/nonfinite_scalar_voids/sim_nonfinite_scalar.py"


def _sim():
    spec = importlib.util.spec_from_file_location("sim_nonfinite_scalar", SIM)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _experiments(monkeypatch, candidate_role: str):
    sim = _sim()

    def fake_run_program(binary, *, seed, limits, secret=None, nonfinite_calls=None, nonfinite_kinds=15,
                         nonfinite_buffers=None, **_):
        role = "baseline" if str(binary) == "baseline" else candidate_role
        kinds = nonfinite_kinds if nonfinite_calls is not None else None
        return sim.program(role, seed, secret, kinds, nonfinite_buffers)

    monkeypatch.setattr(gate, "run_program", fake_run_program)
    monkeypatch.setattr(special_values, "run_program", fake_run_program)
    vs = VerifySettings()
    secret = secrets.token_bytes(32)
    noise = baseline_noise(sim.program("baseline", 7, secret, None), sim.program("baseline", 7, secret, None),
                                 vs.baseline_noise_factor)
    v = Verdict(accepted=False, summary="", baseline_file="b.cu", candidate_file="c.cu", settings=vs)
    limits = Limits(wall_timeout_s=60)
    failure, matched = special_values.special_value_experiments(v, "baseline", "candidate", limits, limits, None, set(),
        Manifest.model_validate(sim.manifest_dict()), noise,
        Durations(), lambda p: None)
    return v, failure, matched


def test_a_wholly_nan_norm_does_not_void_the_sanitised_output_beside_it(monkeypatch):
    v, failure, matched = _experiments(monkeypatch, "candidate")
    assert failure is None and not matched
    bad = [c for c in v.checks if c.phase == "nonfinite" and not c.comparison.match]
    assert bad and "holds NaN or inf" in bad[0].comparison.describe()


def test_the_baseline_against_itself_passes_and_names_what_stayed_unchecked(monkeypatch):
    v, failure, matched = _experiments(monkeypatch, "baseline")
    assert failure is None and matched
    # the norm is NaN or inf for every non-finite kind, so those kinds are said to be unchecked there
    assert any("special input values not checked everywhere" in n and "'norm_sq'" in n for n in v.notes), v.notes
