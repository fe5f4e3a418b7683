"""Test doubles for the agent loop's tools: a toolbox whose GPU tools (profile, verify) are
scripted, while the static check is the real one (nvcc, the policy) and the profile's
diagnosis comes from a real Nsight Compute capture (tests/fixtures/ncu/suite)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kernelloop.config import VerifySettings
from kernelloop.optimizers.base import NoMoreCandidates, Proposal
from kernelloop.profiler.diagnosis import Diagnosis
from kernelloop.profiler.run import ProfileResult, ProfileTimings, diagnose_report
from kernelloop.tools.gpu import GpuInfo
from kernelloop.verify.outputs import Comparison
from kernelloop.verify.policy import Violation
from kernelloop.verify.stats import Spread, SpeedupDecision
from kernelloop.verify.verdict import BuildSummary, GateResult, Reason, SeedCheck, StaticCheck, Verdict

from .conftest import FIXTURES

H200 = GpuInfo(index=0, name="NVIDIA H200", compute_capability="9.0", driver_version="580.159.04")
_DIAGNOSES: dict[str, Diagnosis] = {}


def fixture_diagnosis(kernel: str = "naive_matmul") -> Diagnosis:
    if kernel not in _DIAGNOSES:
        _DIAGNOSES[kernel] = diagnose_report(FIXTURES / "ncu" / "suite" / f"{kernel}.ncu-rep")
    return _DIAGNOSES[kernel]


def make_verdict(*, accepted: bool, speedup: float = 1.0, reason: Reason | None = None, detail: str = "",
                 baseline_ms: float = 0.416) -> Verdict:
    """A verdict as the verifier server returns it, for a scripted verify."""
    cand_ms = baseline_ms / speedup
    speed = SpeedupDecision(
        speedup=speedup, lower=speedup * 0.99, upper=speedup * 1.01, confidence=0.98, pairs=7,
        pair_ratios=[speedup] * 7, baseline=Spread.of([baseline_ms] * 7), candidate=Spread.of([cand_ms] * 7),
        outcome="faster" if speedup >= 1.2 else "not_faster", threshold=1.2, separated=speedup >= 1.2)
    checks = [SeedCheck(seed=s, phase="correctness", baseline_sha256=f"{s:064x}", candidate_sha256=f"{s + 1:064x}",
                        comparison=Comparison(match=reason is not Reason.correctness, baseline_count=1048580,
                                              candidate_count=1048580, compared=1048580,
                                              problem=detail if reason is Reason.correctness else None))
              for s in (1111, 2222)]
    gates = [GateResult(gate="policy", status="pass"),
             GateResult(gate="compile", status="pass", baseline="OK", candidate="OK"),
             GateResult(gate="correctness", status="fail" if reason is Reason.correctness else "pass",
                        detail=detail or "2 fresh seeds, rtol 0.001")]
    timed = reason in (None, Reason.not_faster)
    if timed:
        gates.append(GateResult(gate="speedup", status="pass" if accepted else "fail", detail=speed.describe()))
    summary = f"accepted: {speed.describe()}" if accepted else f"rejected: {detail or (reason.value if reason else '')}"
    return Verdict(accepted=accepted, summary=summary, reasons=[] if accepted else [reason or Reason.not_faster],
                   gates=gates, baseline_file="baseline.cu", candidate_file="candidate_source", gpu=H200, arch="sm_90",
                   nvcc_version="13.0", split_mode="markers", seeds=[1111, 2222], checks=checks,
                   builds={"baseline": BuildSummary(ok=True, cached=True, seconds=0.1, stage="done", flags=["-O3"]),
                           "candidate": BuildSummary(ok=True, cached=False, seconds=2.0, stage="done", flags=["-O3"])},
                   speed=speed if timed else None, baseline_kernel_ms=[baseline_ms] * 7 if timed else [],
                   candidate_kernel_ms=[cand_ms] * 7 if timed else [], settings=VerifySettings())


class FakeToolbox:
    """profile and verify scripted; static_check real (nvcc) unless `static` is given."""

    def __init__(self, verdicts: Callable[[str], Verdict] | list[Verdict], *, kernel: str = "naive_matmul",
                 static: Callable[[Path, str], StaticCheck] | None = None, hits: list[dict[str, Any]] | None = None,
                 fail_on: dict[str, BaseException] | None = None) -> None:
        self._verdicts = verdicts
        self.kernel = kernel
        self._static = static
        self.hits = hits if hits is not None else [
            {"title": "Shared-memory tiling", "source": "smem-tiling", "text": "Stage tiles of A and B in shared memory.",
             "score": 1.0}]
        self.fail_on = fail_on or {}
        self.calls: dict[str, list[Any]] = {"profile": [], "search_for_diagnosis": [], "static_check": [], "verify": []}

    def _maybe_fail(self, tool: str) -> None:
        exc = self.fail_on.pop(tool, None)
        if exc is not None:
            raise exc

    async def warm_up(self, baseline_path: Path, baseline_editable: str) -> None:
        self.calls.setdefault("warm_up", []).append(baseline_path)

    async def profile(self, path: Path, *, section_set: str = "fast", kernel: str | None = None,
                      progress: Any = None) -> ProfileResult:
        self.calls["profile"].append(path)
        self._maybe_fail("profile")
        if progress:
            progress("ncu: profiling")
        report = FIXTURES / "ncu" / "suite" / f"{self.kernel}.ncu-rep"
        kept = Path(tempfile.mkdtemp()) / f"{path.stem}.ncu-rep"
        shutil.copy2(report, kept)
        d = fixture_diagnosis(self.kernel)
        return ProfileResult(diagnosis=d, report_path=kept, kernel=d.kernel, section_set=section_set,
                             clock_control="none", timings=ProfileTimings(total_s=0.1))

    async def search_for_diagnosis(self, diagnosis: Diagnosis, limit: int) -> list[dict[str, Any]]:
        self.calls["search_for_diagnosis"].append(diagnosis.summary)
        return self.hits[:limit]

    async def static_check(self, baseline_path: Path, source: str, arch: str | None = None) -> StaticCheck:
        self.calls["static_check"].append(source)
        if self._static is not None:
            return self._static(baseline_path, source)
        from kernelloop.mcp.verifier import _static_check

        return _static_check(str(baseline_path), source, arch or "sm_90")

    async def verify(self, baseline_path: Path, source: str, *, threshold: float | None = None,
                     progress: Any = None) -> Verdict:
        self.calls["verify"].append(source)
        self._maybe_fail("verify")
        if progress:
            progress("timing: 7 interleaved runs each")
        if callable(self._verdicts):
            return self._verdicts(source)
        return self._verdicts.pop(0)


class Scripted:
    """Hands out the given answers in order: a source, or an exception to raise."""

    name = "offline"

    def __init__(self, answers: list[Any]) -> None:
        self.answers = list(answers)
        self.requests: list[Any] = []

    def propose(self, request):
        self.requests.append(request)
        if not self.answers:
            raise NoMoreCandidates("scripted: nothing left")
        answer = self.answers.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        return Proposal(source=answer, approach=f"candidate {len(self.requests)}", optimizer="offline")


def _build(ok: bool, log: str = "") -> BuildSummary:
    return BuildSummary(ok=ok, cached=False, seconds=0.1, stage="done" if ok else "compile", log_excerpt=log,
                        flags=["-O3", "-arch=sm_90"])


def static_ok(_path: Path, _source: str) -> StaticCheck:
    return StaticCheck(ok=True, summary="policy clean; both build", arch="sm_90", split_mode="markers",
                       baseline_build=_build(True), candidate_build=_build(True))


def static_broken(_path: Path, _source: str) -> StaticCheck:
    return StaticCheck(ok=False, summary="the candidate does not build", arch="sm_90", split_mode="markers",
                       baseline_build=_build(True), candidate_build=_build(False, 'k.cu(31): error: expected a ";"'))


def static_policy(_path: Path, _source: str) -> StaticCheck:
    return StaticCheck(ok=False, summary="policy: inline PTX", arch="sm_90", split_mode="markers",
                       violations=[Violation(rule="inline_asm", where="source line 3", detail="asm volatile")],
                       baseline_build=_build(True))
