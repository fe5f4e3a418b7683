"""Anti-context: a rejected attempt turned into what the optimizer reads next round."""

from __future__ import annotations


from ..optimizers.base import FailedAttempt, FailureKind
from ..verify.verdict import Reason, StaticCheck, Verdict

EXCERPT_LINES = 12

_KIND_BY_REASON: dict[Reason, FailureKind] = {
    Reason.policy: "policy", Reason.compile: "compile", Reason.correctness: "correctness",
    Reason.memcheck: "memcheck", Reason.not_faster: "not_faster", Reason.inconclusive: "not_faster",
    Reason.run_failed: "run_failed", Reason.timeout: "run_failed", Reason.output_flood: "run_failed",
    Reason.no_gpu_work: "timing", Reason.inconsistent_work: "timing", Reason.timer_escape: "timing",
    Reason.kernel_ms_mismatch: "timing", Reason.timing_unverified: "timing",
    Reason.state_between_calls: "correctness",
}


def _tail(text: str, lines: int = EXCERPT_LINES) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def failure_from_verdict(verdict: Verdict, *, iteration: int, approach: str, source: str) -> FailedAttempt:
    """Why the verifier said no, with the evidence the optimizer needs to do better."""
    first = verdict.reasons[0] if verdict.reasons else None
    kind: FailureKind = _KIND_BY_REASON.get(first, "other") if first else "other"
    excerpt = ""
    if kind == "compile":
        build = verdict.builds.get("candidate")
        excerpt = _tail(build.log_excerpt) if build else ""
    elif kind == "policy":
        excerpt = "\n".join(v.describe() for v in verdict.policy[:5])
    elif kind == "correctness":
        bad = next((c for c in verdict.checks if not c.comparison.match), None)
        excerpt = f"seed {bad.seed}: {bad.comparison.describe()}" if bad else \
            next((g.detail for g in verdict.gates if g.status == "fail"), "")
    elif kind in ("run_failed", "memcheck"):
        excerpt = _tail(verdict.memcheck_excerpt or verdict.failure_excerpt)
    if verdict.speed is not None:
        excerpt = (excerpt + "\n" if excerpt else "") + f"measured speedup {verdict.speed.describe()}"
    return FailedAttempt(iteration=iteration, approach=approach, kind=kind, reason=verdict.summary,
                         excerpt=excerpt, speedup=verdict.speed.speedup if verdict.speed else None, source=source)


def failure_from_static(check: StaticCheck, *, iteration: int, approach: str, source: str) -> FailedAttempt:
    """A candidate that failed the policy, or still did not build after the compile-fix tries."""
    if check.violations:
        return FailedAttempt(iteration=iteration, approach=approach, kind="policy", reason=check.summary,
                             excerpt="\n".join(v.describe() for v in check.violations[:5]), source=source)
    return FailedAttempt(iteration=iteration, approach=approach, kind="compile", reason=check.summary,
                         excerpt=compile_errors(check), source=source)


def compile_errors(check: StaticCheck) -> str:
    """nvcc's messages for the candidate, as the compile-fix prompt shows them."""
    build = check.candidate_build
    return _tail(build.log_excerpt, 40) if build and build.log_excerpt else check.summary


def not_a_gain(verdict: Verdict, *, iteration: int, approach: str, source: str, best: float,
               min_gain: float) -> FailedAttempt:
    """Keep-going: accepted by the gate against the baseline, but no better than the best so far."""
    speed = verdict.speed.speedup if verdict.speed else 0.0
    return FailedAttempt(iteration=iteration, approach=approach, kind="not_faster",
                         reason=(f"correct and {speed:.2f}x faster than the baseline, but not {min_gain:.0%} better "
                                 f"than the best so far ({best:.2f}x)"),
                         excerpt=f"measured speedup {verdict.speed.describe()}" if verdict.speed else "",
                         speedup=speed, source=source)
