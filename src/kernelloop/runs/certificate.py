"""Proof certificates: what an accepted kernel was proven against, in a form anyone can re-check.

A certificate names, by SHA-256, the baseline program and the candidate program (and its
editable part), the reference outputs the baseline produced on each fresh seed and the
candidate's outputs there, and records the GPU, driver, nvcc version and flags, the
tolerances, the timings with their spread and the threshold. Its own `digest` is the
SHA-256 of everything else in it (canonical JSON), so an edited certificate is detected.

`check_certificate` re-checks one on the current machine:

1. integrity: the digest, and the two programs' SHA-256 (the files beside the certificate,
   or the ones given);
2. reference outputs (GPU): the baseline is rebuilt and run on the certificate's seeds; its
   outputs' SHA-256 must be the recorded ones (bit-reproducible on the same GPU model and
   toolchain; elsewhere the difference is reported, not hidden);
3. the claim (GPU): the whole verify gate runs again, fresh seeds, same threshold and
   tolerances; the candidate must be accepted again.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from .. import __version__
from ..config import OutputTolerance
from ..errors import InputError
from ..verify.verdict import Verdict

FORMAT = "kernelloop-proof-certificate/1"


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class SourceDigest(BaseModel):
    file: str  # the file's name beside the certificate
    sha256: str


class SeedEvidence(BaseModel):
    seed: int
    secret: str = ""  # hex: the experiment's stream secret (contract v2), needed to reproduce its outputs
    size_index: int = 0
    size_draw: int | None = None  # size_index -1: the draw that chose the size
    baseline_output_sha256: str
    candidate_output_sha256: str
    compared: int  # numbers and elements compared
    max_rel_error: float


class TimingEvidence(BaseModel):
    runs: int
    median_ms: float
    min_ms: float
    max_ms: float
    relative_iqr: float
    all_ms: list[float]


class Certificate(BaseModel):
    format: str = FORMAT
    created_at: str
    kernelloop_version: str = __version__
    kernel: str
    baseline: SourceDigest
    candidate: SourceDigest
    candidate_editable_sha256: str
    seeds: list[SeedEvidence]
    gpu: str
    compute_capability: str
    driver: str
    arch: str
    nvcc_version: str
    nvcc_flags: list[str]
    rtol: float | None  # None: the dtype defaults of the tolerance model (docs/verifier.md)
    atol: float | None
    tolerances: dict[str, OutputTolerance] = {}  # per output buffer, by name (--rtol NAME=VALUE)
    threshold: float
    speedup: float
    speedup_interval: tuple[float, float]
    confidence: float
    baseline_kernel_ms: TimingEvidence
    candidate_kernel_ms: TimingEvidence
    gates: list[str]  # "gate: status" for every gate, in order
    isolation: str = ""
    digest: str = ""  # SHA-256 of the canonical JSON of every other field

    def canonical_digest(self) -> str:
        body = self.model_dump(mode="json", exclude={"digest"})
        if not body["tolerances"]:
            del body["tolerances"]  # a certificate from before per-output tolerances keeps its digest
        return sha256_text(json.dumps(body, sort_keys=True, separators=(",", ":")))


def _timing(values: list[float], relative_iqr: float) -> TimingEvidence:
    return TimingEvidence(runs=len(values), median_ms=sorted(values)[len(values) // 2] if values else 0.0,
                          min_ms=min(values, default=0.0), max_ms=max(values, default=0.0),
                          relative_iqr=relative_iqr, all_ms=values)


def build_certificate(verdict: Verdict, *, kernel: str, baseline_text: str, candidate_text: str,
                      candidate_editable: str, baseline_file: str = "baseline.cu",
                      candidate_file: str = "best.cu") -> Certificate:
    """The certificate of an accepted verdict (the programs as the files that will sit beside it)."""
    if not verdict.accepted or verdict.speed is None or verdict.gpu is None:
        raise InputError("a proof certificate is only issued for an accepted verdict")
    speed = verdict.speed
    flags = (verdict.builds.get("candidate") or verdict.builds["baseline"]).flags
    cert = Certificate(
        created_at=datetime.now(UTC).isoformat(timespec="seconds"),
        kernel=kernel,
        baseline=SourceDigest(file=baseline_file, sha256=sha256_text(baseline_text)),
        candidate=SourceDigest(file=candidate_file, sha256=sha256_text(candidate_text)),
        candidate_editable_sha256=sha256_text(candidate_editable),
        seeds=[SeedEvidence(seed=c.seed, secret=c.secret, size_index=c.size_index, size_draw=c.size_draw,
                            baseline_output_sha256=c.baseline_sha256,
                            candidate_output_sha256=c.candidate_sha256, compared=c.comparison.compared,
                            max_rel_error=c.comparison.max_rel_error)
               for c in verdict.checks if c.phase in ("correctness", "size")],
        gpu=verdict.gpu.name, compute_capability=verdict.gpu.compute_capability,
        driver=verdict.gpu.driver_version, arch=verdict.arch, nvcc_version=verdict.nvcc_version,
        nvcc_flags=flags, rtol=verdict.settings.rtol, atol=verdict.settings.atol,
        tolerances={name: own for name, own in verdict.settings.tolerances.items()
                    if own.rtol is not None or own.atol is not None},
        threshold=verdict.settings.threshold, speedup=speed.speedup, speedup_interval=(speed.lower, speed.upper),
        confidence=speed.confidence,
        baseline_kernel_ms=_timing(verdict.baseline_kernel_ms, speed.baseline.relative_iqr),
        candidate_kernel_ms=_timing(verdict.candidate_kernel_ms, speed.candidate.relative_iqr),
        gates=[f"{g.gate}: {g.status}" for g in verdict.gates],
        isolation=verdict.isolation.summary() if verdict.isolation else "",
    )
    cert.digest = cert.canonical_digest()
    return cert


def write_certificate(cert: Certificate, path: Path) -> None:
    path.write_text(cert.model_dump_json(indent=2) + "\n")


def read_certificate(path: Path) -> Certificate:
    if not path.is_file():
        raise InputError(f"{path}: no such certificate file")
    try:
        return Certificate.model_validate_json(path.read_text())
    except ValueError as exc:
        raise InputError(f"{path}: not a kernelloop proof certificate ({str(exc).splitlines()[0]})") from None


class Check(BaseModel):
    name: str
    status: Literal["pass", "fail", "skipped"]
    detail: str = ""


class CertificateCheck(BaseModel):
    certificate: str
    ok: bool  # every check that ran passed, and the GPU checks ran unless static-only was asked
    checks: list[Check] = Field(default_factory=list)
    verdict: Verdict | None = None  # the re-run of the verify gate

    def failed(self) -> list[Check]:
        return [c for c in self.checks if c.status == "fail"]


def integrity_checks(cert: Certificate, baseline_text: str, candidate_text: str) -> list[Check]:
    checks = [Check(name="digest", status="pass" if cert.digest == cert.canonical_digest() else "fail",
                    detail="the certificate is as issued" if cert.digest == cert.canonical_digest()
                    else "the certificate was edited after it was issued (its digest does not match)")]
    for label, digest, text in (("baseline", cert.baseline, baseline_text), ("candidate", cert.candidate, candidate_text)):
        actual = sha256_text(text)
        checks.append(Check(name=f"{label} source", status="pass" if actual == digest.sha256 else "fail",
                            detail=f"sha256 {actual[:16]}..." if actual == digest.sha256
                            else f"sha256 {actual[:16]}... differs from the certified {digest.sha256[:16]}..."))
    return checks
