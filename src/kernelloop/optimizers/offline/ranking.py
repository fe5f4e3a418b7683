"""Ranking: which candidate to propose next.

Order = (level, -score, best-known first, label): deterministic.

* level 0: untouched templates; 1: a template measured not faster in this run (ordered by that
  speedup) or a configuration an earlier run rejected; 2: a template that failed to compile,
  broke correctness, crashed or tripped memcheck or the policy (every configuration of it).
* score = prior x fit x cost.
  prior: the speedup the template's exemplar measured over a naive baseline on an H200, scaled
    by a model of the configuration, x0.8 for a configuration no exemplar measured; a
    configuration an earlier run measured uses that speedup, a template measured not faster
    in this run at most its measured speedup.
  fit: 1 + 0.1 x the sum over the diagnosis's findings of severity x how much the template's
    techniques address that finding (RULE_TAGS).
  cost: how well the launch fills the GPU: the fraction of SMs with work when the grid is
    smaller than the GPU, else the fill of the last wave when there are fewer than 4 waves
    (blocks resident per SM from the occupancy calculator on ptxas's registers, or on an
    optimistic register estimate before ptxas has run); for memory-bound kernels also
    sqrt(theoretical occupancy / 50 %), capped at 1.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ...profiler.diagnosis import Diagnosis
from ...tools.resources import GpuLimits, occupancy
from ..base import FailedAttempt, OptimizeRequest
from .candidates import Candidate, source_fingerprint
from .families.base import Config

BROKEN_KINDS = frozenset(["compile", "correctness", "run_failed", "memcheck", "policy"])
SEVERITY = {"critical": 1.0, "major": 0.6, "minor": 0.3}
# Diagnosis rule -> technique tags that address it, with weights.
RULE_TAGS: dict[str, dict[str, float]] = {
    "l1-lsu-limited": {"register-blocking": 2.0, "smem-tiling": 1.0, "register-reuse": 1.0},
    "fma-bound": {"register-blocking": 1.0},
    "uncoalesced-global": {"coalescing": 2.0},
    "too-few-blocks": {"parallelism": 2.0},
    "memory-latency": {"parallelism": 1.0, "vectorized": 1.0},
    "issue-bound": {"warp-reduction": 2.0, "vectorized": 1.0},
    "atomic-contention": {"privatization": 2.0},
    "dram-bound": {"vectorized": 1.0, "single-pass": 1.0, "register-reuse": 1.0},
    "l2-bound": {"smem-tiling": 1.0, "register-reuse": 1.0},
    "shared-bank-conflicts": {"padding": 1.0},
    "shared-bank-conflicts-minor": {"padding": 0.5},
    "lg-throttle": {"vectorized": 1.0},
    "mio-throttle": {"register-blocking": 1.0},
}
# SMs per GPU for the wave count (by name; by arch when the name is unknown).
_SMS_BY_NAME = [("GH200", 132), ("H200", 132), ("H100 PCIe", 114), ("H100", 132), ("H800", 132), ("H20", 78),
                ("B200", 148), ("A100", 108), ("A800", 108), ("A10G", 80), ("A10", 72), ("A30", 56), ("L40", 142),
                ("L4", 58), ("4090", 128), ("3090", 82), ("V100", 80), ("T4", 40)]
_SMS_BY_ARCH = {"sm_70": 80, "sm_75": 40, "sm_80": 108, "sm_86": 84, "sm_87": 16, "sm_89": 128, "sm_90": 132,
                "sm_100": 148, "sm_120": 170}


def sm_count(gpu_name: str, arch: str) -> int:
    for key, sms in _SMS_BY_NAME:
        if key.lower() in gpu_name.lower():
            return sms
    return _SMS_BY_ARCH.get(arch.rstrip("af"), 132)


@dataclass
class History:
    """What this run (and earlier runs) already learned about the candidates."""

    tried: set[str] = field(default_factory=set)  # labels
    tried_sources: set[str] = field(default_factory=set)  # fingerprints
    broken: dict[str, str] = field(default_factory=dict)  # template -> the failure kind
    slow: dict[str, float] = field(default_factory=dict)  # template -> best measured speedup (not faster)
    past_rejected: set[str] = field(default_factory=set)  # labels an earlier run rejected
    past_accepted: dict[str, float] = field(default_factory=dict)  # label -> measured speedup
    notes: list[str] = field(default_factory=list)

    @classmethod
    def from_request(cls, request: OptimizeRequest, candidates: list[Candidate]) -> History:
        h = cls()
        by_label = {c.label: c for c in candidates}
        by_source = {c.fingerprint: c for c in candidates}

        def owner(label: str, source: str) -> Candidate | None:
            return by_label.get(label) or (by_source.get(source_fingerprint(source)) if source else None)

        for f in request.failed_attempts:
            h._failed(f, owner(f.approach, f.source))
        if request.compile_errors and request.previous_source:
            cand = by_source.get(source_fingerprint(request.previous_source))
            h.tried_sources.add(source_fingerprint(request.previous_source))
            if cand is not None:
                h.tried.add(cand.label)
                h.broken.setdefault(cand.template.name, "compile")
        if source_fingerprint(request.current_editable) != source_fingerprint(request.baseline_editable):
            h.tried_sources.add(source_fingerprint(request.current_editable))
        for past in request.memory:
            if past.approach not in by_label:
                continue
            if past.accepted and past.speedup:
                h.past_accepted[past.approach] = max(past.speedup, h.past_accepted.get(past.approach, 0.0))
            elif not past.accepted:
                h.past_rejected.add(past.approach)
        return h

    def _failed(self, f: FailedAttempt, cand: Candidate | None) -> None:
        self.tried.add(f.approach)
        if f.source:
            self.tried_sources.add(source_fingerprint(f.source))
        if cand is None:
            return
        self.tried.add(cand.label)
        name = cand.template.name
        if f.kind in BROKEN_KINDS:
            if name not in self.broken:
                self.broken[name] = f.kind
                self.notes.append(f"template {name} demoted: {cand.label} failed ({f.kind})")
        elif f.kind == "not_faster":
            measured = f.speedup if f.speedup is not None else cand.config.prior
            self.slow[name] = max(measured, self.slow.get(name, 0.0))

    def is_tried(self, cand: Candidate) -> bool:
        return cand.label in self.tried or cand.fingerprint in self.tried_sources


def diagnosis_fit(config: Config, diagnosis: Diagnosis | None) -> tuple[float, list[str]]:
    if diagnosis is None:
        return 1.0, []
    bonus, reasons = 0.0, []
    for finding in diagnosis.findings:
        tags = RULE_TAGS.get(finding.rule, {})
        hit = [t for t in tags if t in config.tags]
        if hit:
            bonus += SEVERITY.get(finding.severity, 0.3) * sum(tags[t] for t in hit)
            reasons.append(f"{finding.rule} ({finding.severity}) calls for {', '.join(hit)}")
    return 1.0 + 0.1 * bonus, reasons


TAIL_MAX_WAVES = 4.0  # past this many waves a partial last wave costs little (as the profiler's rule)
UNMEASURED = 0.8  # a configuration no exemplar measured on a GPU: its prior is only a model's


def utilization(blocks: int | None, sms: int, active_per_sm: int) -> float:
    """The fraction of SMs with work (small grids), or the fill of the last of a few waves."""
    if blocks is None or blocks <= 0:
        return 1.0
    if blocks < sms:
        return blocks / sms
    waves = blocks / (sms * max(active_per_sm, 1))
    if waves <= 1 or waves >= TAIL_MAX_WAVES:
        return 1.0
    return waves / math.ceil(waves)


@dataclass
class Cost:
    factor: float  # 0: cannot launch
    detail: str


def launch_cost(config: Config, registers: int, shared_bytes: int, limits: GpuLimits, sms: int) -> Cost:
    occ = occupancy((registers, shared_bytes), config.threads, limits)
    if not occ.fits:
        return Cost(0.0, f"cannot launch: {occ.problem}")
    util = utilization(config.blocks, sms, occ.active_blocks_per_sm)
    occ_factor = min(1.0, occ.theoretical_occupancy_pct / 50.0) ** 0.5 if config.memory_bound else 1.0
    grid = f"{config.blocks} blocks" if config.blocks is not None else "grid size unknown"
    detail = (f"{grid} on {sms} SMs, {occ.active_blocks_per_sm} blocks/SM "
              f"({occ.theoretical_occupancy_pct:.0f}% occupancy), fill {util:.2f}")
    return Cost(util * occ_factor, detail)


@dataclass
class Ranked:
    cand: Candidate
    level: int
    score: float
    reasons: list[str]
    probed: bool = False
    registers: int | None = None

    def key(self) -> tuple:
        return (self.level, -round(self.score, 9), 0 if self.cand.config.best_known else 1, self.cand.label)


def _prior(cfg: Config) -> float:
    return cfg.prior if cfg.best_known else cfg.prior * UNMEASURED


def rank(candidates: list[Candidate], history: History, diagnosis: Diagnosis | None, limits: GpuLimits,
         sms: int) -> list[Ranked]:
    out: list[Ranked] = []
    for cand in candidates:
        cfg = cand.config
        template = cand.template.name
        prior = _prior(cfg)
        reasons: list[str] = []
        if cand.label in history.past_accepted:
            prior = history.past_accepted[cand.label]
            reasons.append(f"an earlier run measured {prior:.2f}x")
        fit, fit_reasons = diagnosis_fit(cfg, diagnosis)
        cost = launch_cost(cfg, cfg.min_registers, cfg.smem_bytes, limits, sms)
        level = 0
        if template in history.broken:
            level = 2
            reasons.append(f"template demoted after a {history.broken[template]} failure")
        elif template in history.slow:
            level = 1
            prior = min(prior, history.slow[template])
            reasons.append(f"template measured not faster ({history.slow[template]:.2f}x)")
        elif cand.label in history.past_rejected:
            level = 1
            reasons.append("an earlier run rejected it")
        reasons += fit_reasons
        reasons.append(cost.detail)
        out.append(Ranked(cand, level, prior * fit * cost.factor, reasons))
    out.sort(key=Ranked.key)
    return out


def rescore(r: Ranked, registers: int, shared_bytes: int, diagnosis: Diagnosis | None, limits: GpuLimits,
            sms: int, history: History) -> None:
    """The score again with ptxas's registers and shared memory."""
    cfg = r.cand.config
    prior = history.past_accepted.get(r.cand.label, _prior(cfg))
    if r.cand.template.name in history.slow:
        prior = min(prior, history.slow[r.cand.template.name])
    fit, _ = diagnosis_fit(cfg, diagnosis)
    cost = launch_cost(cfg, registers, shared_bytes, limits, sms)
    r.score = prior * fit * cost.factor
    r.reasons = [x for x in r.reasons if "blocks/SM" not in x and "cannot launch" not in x] + [cost.detail]
    r.probed, r.registers = True, registers
