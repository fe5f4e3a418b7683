"""The verify gate end to end on a real GPU: every candidate fixture meets its fate.

Positives are accepted with their speedup; every adversarial candidate is rejected for the
reason its manifest names (other reasons may be reported beside it); A/A is ~1.00x and
rejected. Set KERNELLOOP_GPU_REPORT=path.json to keep every verdict's summary.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from kernelloop.config import Settings, VerifySettings
from kernelloop.verify.gate import verify_files
from kernelloop.verify.verdict import Reason

from ..conftest import FIXTURES, ROOT
from ..test_candidates_static import SUITE, cases

pytestmark = pytest.mark.gpu
REPORT: list[dict] = []


@pytest.fixture(scope="module")
def settings(tmp_path_factory):
    return Settings(cache_dir=tmp_path_factory.mktemp("gpu-cache"), verify=VerifySettings())


def record(name: str, v) -> None:
    REPORT.append({
        "case": name, "accepted": v.accepted, "reasons": [r.value for r in v.reasons], "summary": v.summary,
        "gpu": v.gpu.name if v.gpu else None, "driver": v.gpu.driver_version if v.gpu else None,
        "speedup": v.speed.speedup if v.speed else None,
        "baseline_ms": v.speed.baseline.median if v.speed else None,
        "candidate_ms": v.speed.candidate.median if v.speed else None,
        "audit_first_to_timed": v.audit.first_to_timed_ratio if v.audit else None,
        "baseline_first_to_timed": v.baseline_audit.first_to_timed_ratio if v.baseline_audit else None,
        "durations": v.durations.model_dump(), "isolation": v.isolation.summary() if v.isolation else None,
    })
    out = os.environ.get("KERNELLOOP_GPU_REPORT")
    if out:
        Path(out).write_text(json.dumps(REPORT, indent=1))


@pytest.mark.parametrize("baseline, candidate, expect", list(cases()))
def test_candidate_fate(baseline, candidate, expect, settings):
    manifest = candidate.parent / "manifest.json"
    entry = json.loads(manifest.read_text()).get(candidate.name, {}) if manifest.exists() else {}
    if entry.get("size_draw"):  # a fixture wrong at some sizes only: the draw that picks one of them
        settings = settings.model_copy(update={"verify": settings.verify.model_copy(
            update={"size_draw": entry["size_draw"]})})
    v = verify_files(ROOT / "kernels" / baseline, candidate, settings)
    record(f"{candidate.parent.name}/{candidate.name}", v)
    if expect == "accepted":
        assert v.accepted, v.summary
        assert v.speed.speedup >= settings.verify.threshold and v.speed.separated
        assert v.gate("independent timing").status == "pass"
        assert v.gate("memcheck").status == "pass"
        assert all(c.comparison.match for c in v.checks) and len(v.checks) >= 2 + settings.verify.runs
    else:
        assert not v.accepted
        if entry.get("compiler_specific") and Reason.policy not in v.reasons:
            return  # this host compiler does not produce the attack (the manifest says why): rejected all the same
        # "or": other reasons that are the same finding (an out-of-bounds read that faults before memcheck sees it)
        assert any(Reason(r) in v.reasons for r in [expect, *entry.get("or", [])]), (v.reasons, v.summary)


def test_a_program_against_itself_is_about_1x_and_rejected(settings):
    naive = ROOT / "kernels" / "naive_matmul.cu"
    v = verify_files(naive, naive, settings)
    record("matmul/A-A", v)
    assert not v.accepted and v.reasons == [Reason.not_faster]
    assert 0.97 <= v.speed.speedup <= 1.03


def test_the_sandbox_isolated_the_runs(settings):
    naive = ROOT / "kernels" / "naive_matmul.cu"
    v = verify_files(naive, ROOT / "src" / "kernelloop" / "exemplars" / "matmul_smem_tiling.cu", settings)
    assert v.isolation is not None and v.isolation.env_scrubbed and v.isolation.private_tmp
    if os.geteuid() == 0:  # the lent GPU machines run us as root
        assert v.isolation.network == "namespace" and v.isolation.user == "unprivileged"
