"""A suite score for `kernelloop optimize` over several kernels, as KernelBench reports one.

Per kernel, from its run (a summary.json dict, or a RunRecord of the run store):

* **correct**: the run produced a candidate that passed every gate of the verifier but speed.
  That is an accepted run, or an exhausted run with an attempt rejected only for speed: its
  outcome is "rejected: not_faster", the kind the loop gives a verdict whose reason is
  not_faster or inconclusive. The verifier times a candidate only after every other gate
  passed (policy, build, correctness, the timing audit, memcheck), and adds no later reason to
  a verdict with one, so such an attempt was correct and has a measured speedup.
  A run that errored, was interrupted or is unfinished is not correct.
* **correct_speedup**: the measured speedup (median baseline time / median candidate time, the
  verifier's interleaved pairs) of that correct candidate: the accepted one's; in an exhausted
  run the best of the attempts rejected only for speed. None when there is no correct candidate.
* **speedup**: what the user keeps: the accepted candidate's speedup, 1.0 when none was
  accepted (the baseline stays), errored runs included.

Over the suite of n kernels:

* **fast_p** = (kernels with a correct candidate whose correct_speedup >= p) / n, for
  p = 1.0, 1.2, 2 by default (KernelBench's fast_p; it writes "> p", which measured speedups
  make no different in practice). The share of correct kernels is fast_0.
* **geomean_speedup** = the geometric mean of `speedup` over all n kernels: the speedup the
  suite delivers, a kernel without an accepted candidate counting 1.0.

n = 0 gives no shares and no mean (None), never a division by zero.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel

from ..errors import InputError
from .store import RunRecord, RunStore

FAST_P = (1.0, 1.2, 2.0)
SPEED_ONLY = "rejected: not_faster"  # the outcome of an attempt whose verdict failed only the speed gate
FINISHED = ("accepted", "exhausted")


class KernelScore(BaseModel):
    kernel: str
    run_id: str = ""
    status: str  # the run's: accepted | exhausted | error | interrupted | running | unknown
    correct: bool
    correct_speedup: float | None = None  # the correct candidate's measured speedup
    speedup: float = 1.0  # delivered: the accepted candidate's, else 1.0
    basis: str  # in words: where correct_speedup comes from, or why there is none


class FastShare(BaseModel):
    p: float
    kernels: int  # correct and correct_speedup >= p
    share: float | None  # kernels / n; None when n is 0


class SuiteScore(BaseModel):
    kernels: list[KernelScore]
    n: int
    correct: int
    correct_share: float | None  # fast_0
    fast: list[FastShare]
    geomean_speedup: float | None

    def fast_p(self, p: float) -> float | None:
        return next(f.share for f in self.fast if f.p == p)


def _speedup(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise InputError(f"{where}: no valid speedup ({value!r}) in an accepted run's summary")
    return float(value)


def score_summary(summary: dict[str, Any], *, kernel: str | None = None, status: str | None = None) -> KernelScore:
    """One kernel's score from its run's summary.json (or what `kernelloop optimize --json`
    prints: {"status": "error", ...} when the run failed). `status` overrides the summary's
    (the run store's word is the last); `kernel` names a summary that has none."""
    name = kernel or str(summary.get("kernel") or "")
    if not name:
        raise InputError("a run summary without a kernel name: give the kernel")
    status = status or str(summary.get("status") or "unknown")
    run_id = str(summary.get("run_id") or "")
    if status == "accepted":
        verify = summary.get("verify") or {}
        speed = _speedup(verify.get("speedup"), f"run {run_id or name}")
        return KernelScore(kernel=name, run_id=run_id, status=status, correct=True, correct_speedup=speed,
                           speedup=speed, basis=f"accepted at iteration {verify.get('iteration_accepted')}")
    if status == "exhausted":
        timed = [a for a in summary.get("attempts") or [] if a.get("outcome") == SPEED_ONLY
                 and isinstance(a.get("speedup"), (int, float)) and a["speedup"] > 0]
        if timed:
            best = max(timed, key=lambda a: a["speedup"])
            return KernelScore(kernel=name, run_id=run_id, status=status, correct=True,
                               correct_speedup=float(best["speedup"]),
                               basis=f"correct but rejected for speed at iteration {best.get('iteration')}")
        return KernelScore(kernel=name, run_id=run_id, status=status, correct=False,
                           basis="no candidate passed the gates before speed")
    error = str(summary.get("error") or "").strip()
    return KernelScore(kernel=name, run_id=run_id, status=status, correct=False,
                       basis=f"the run did not finish ({status})" + (f": {error}" if error else ""))


def score_record(record: RunRecord) -> KernelScore:
    """One kernel's score from the run store: a finished run by its summary, any other as not correct."""
    if record.status in FINISHED and record.summary:
        return score_summary({**record.summary, "run_id": record.run_id}, kernel=record.kernel, status=record.status)
    why = str(getattr(record, "reason", "") or "")  # the run log's one line on why it ended, where it keeps one
    return KernelScore(kernel=record.kernel, run_id=record.run_id, status=record.status, correct=False,
                       basis=f"the run did not finish ({record.status})" + (f": {why}" if why else ""))


def suite_score(kernels: Iterable[KernelScore], ps: Iterable[float] = FAST_P) -> SuiteScore:
    scored = list(kernels)
    n = len(scored)
    correct = [k for k in scored if k.correct and k.correct_speedup is not None]
    fast = [FastShare(p=p, kernels=(c := sum(k.correct_speedup >= p for k in correct)), share=c / n if n else None)
            for p in ps]
    geomean = math.exp(sum(math.log(k.speedup) for k in scored) / n) if n else None
    return SuiteScore(kernels=scored, n=n, correct=len(correct), correct_share=len(correct) / n if n else None,
                      fast=fast, geomean_speedup=geomean)


def latest_per_kernel(records: Iterable[RunRecord]) -> list[RunRecord]:
    """The newest run of each kernel (by its file's path), from records listed newest first."""
    latest: dict[str, RunRecord] = {}
    for record in records:
        latest.setdefault(record.kernel_path, record)
    return sorted(latest.values(), key=lambda r: (r.kernel, r.kernel_path))


def score_store(store: RunStore, run_ids: list[str] | None = None, ps: Iterable[float] = FAST_P) -> SuiteScore:
    """The suite score of the given runs (ids or unique prefixes; one per kernel), or of the
    latest run of every kernel in the run store."""
    if run_ids:
        records = [store.get_run(r) for r in run_ids]
        seen: dict[str, RunRecord] = {}
        for record in records:
            other = seen.setdefault(record.kernel_path, record)
            if other.run_id != record.run_id:
                raise InputError(f"runs {other.run_id} and {record.run_id} are both of {record.kernel_path}: "
                                 "a suite score takes one run per kernel")
        records = list(seen.values())
    else:
        records = latest_per_kernel(store.list_runs(limit=-1))
        if not records:
            raise InputError(f"no runs in {store.path} to score: run `kernelloop optimize KERNEL` first")
    return suite_score([score_record(r) for r in records], ps)


def _share(count: int, share: float | None, n: int) -> str:
    return f"{count}/{n}" + (f" ({share:.0%})" if share is not None else "")


def score_lines(score: SuiteScore) -> list[str]:
    """The suite's figures in words, one line each."""
    n = score.n
    lines = [f"correct: {_share(score.correct, score.correct_share, n)}"]
    lines += [f"fast_{f.p:g}: {_share(f.kernels, f.share, n)} correct and at least {f.p:g}x faster" for f in score.fast]
    lines.append(f"geomean speedup: {score.geomean_speedup:.3f}x over {n} kernel(s) (1.0 where none was accepted)"
                 if score.geomean_speedup is not None else "geomean speedup: - (no kernels)")
    return lines


def score_markdown(score: SuiteScore) -> str:
    """A Markdown table per kernel, then the suite's figures."""
    rows = ["| kernel | run | status | correct | correct speedup | kept speedup | basis |", "|---|---|---|---|---:|---:|---|"]
    for k in score.kernels:
        cells = [k.kernel, k.run_id or "-", k.status, "yes" if k.correct else "no",
                 f"{k.correct_speedup:.2f}x" if k.correct_speedup is not None else "-", f"{k.speedup:.2f}x", k.basis]
        rows.append("| " + " | ".join(c.replace("|", "\\|").replace("\n", " ") for c in cells) + " |")
    return "\n".join([*rows, "", *(f"- {line}" for line in score_lines(score))]) + "\n"
