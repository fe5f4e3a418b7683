"""`kernelloop verify-cert`: re-check a proof certificate on the current machine."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ..config import Settings
from ..errors import EnvironmentProblem, InputError
from ..program.split import read_program
from ..tools.gpu import detect_gpus
from ..verify.gate import verify_sources
from ..verify.reproduce import RecordedExperiment, reproduce_outputs
from .certificate import Certificate, CertificateCheck, Check, integrity_checks, read_certificate


def _programs(path: Path, cert: Certificate, baseline: Path | None, candidate: Path | None) -> tuple[Path, Path]:
    """The two programs: given explicitly, else the files the certificate names beside it."""
    base = baseline or path.parent / cert.baseline.file
    cand = candidate or path.parent / cert.candidate.file
    for label, p in (("baseline", base), ("candidate", cand)):
        if not p.is_file():
            raise InputError(f"{p}: the certified {label} program is missing; pass it with --{label}")
    return base, cand


def check_certificate(path: Path, settings: Settings, *, baseline: Path | None = None, candidate: Path | None = None,
                      static_only: bool = False, progress: Callable | None = None) -> CertificateCheck:
    cert = read_certificate(path)
    base_path, cand_path = _programs(path, cert, baseline, candidate)
    base_text, cand_text = read_program(base_path), read_program(cand_path)
    result = CertificateCheck(certificate=str(path), ok=False, checks=integrity_checks(cert, base_text, cand_text))
    if static_only:
        result.checks.append(Check(name="reference outputs", status="skipped", detail="--static: no GPU checks"))
        result.checks.append(Check(name="verify gate", status="skipped", detail="--static: no GPU checks"))
        result.ok = not result.failed()
        return result
    if result.failed():  # never spend GPU time on programs that are not the certified ones
        result.checks.append(Check(name="reference outputs", status="skipped", detail="integrity failed"))
        result.checks.append(Check(name="verify gate", status="skipped", detail="integrity failed"))
        return result
    gpus = detect_gpus()
    if not gpus:
        raise EnvironmentProblem("verify-cert needs a CUDA GPU to re-run the proof (--static checks the hashes "
                                 "only); run `kernelloop doctor`")
    gpu = gpus[0]
    result.checks.append(_reference_outputs(cert, base_text, str(base_path), settings, gpu.arch))
    vs = settings.verify.model_copy(update={"threshold": cert.threshold, "rtol": cert.rtol, "atol": cert.atol,
                                            "tolerances": dict(cert.tolerances)})
    verdict = verify_sources(base_text, cand_text, settings.model_copy(update={"verify": vs}),
                             baseline_name=str(base_path), candidate_name=str(cand_path), progress=progress, gpu=gpu)
    result.verdict = verdict
    same_gpu = gpu.name == cert.gpu
    where = "" if same_gpu else f" (certified on {cert.gpu}, re-checked on {gpu.name})"
    result.checks.append(Check(name="verify gate", status="pass" if verdict.accepted else "fail",
                               detail=verdict.summary + where))
    result.ok = not result.failed()
    return result


def _reference_outputs(cert: Certificate, base_text: str, base_name: str, settings: Settings, arch: str) -> Check:
    """Re-run the baseline on the certified seeds and compare its outputs' SHA-256."""
    if not cert.seeds:
        return Check(name="reference outputs", status="fail", detail="the certificate records no seeds")
    again = reproduce_outputs(base_text, base_name, [
        RecordedExperiment(seed=e.seed, secret=e.secret, size_index=e.size_index, size_draw=e.size_draw,
                           output_sha256=e.baseline_output_sha256) for e in cert.seeds], settings, arch)
    if again.problem:
        return Check(name="reference outputs", status="fail", detail=f"the baseline {again.problem.removeprefix('the program ')}")
    if again.reproduced:
        return Check(name="reference outputs", status="pass",
                     detail=f"the baseline reproduces the certified outputs bit for bit on {len(cert.seeds)} seed(s)")
    detail = f"the baseline's outputs differ from the certified ones on seed(s) {', '.join(map(str, again.differing))}"
    if arch != cert.arch:
        detail += f" (certified for {cert.arch}, rebuilt for {arch}: floating-point results may differ)"
    return Check(name="reference outputs", status="fail", detail=detail)
