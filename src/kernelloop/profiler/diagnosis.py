"""From one profiled launch's metrics to a structured Diagnosis.

The primary class comes from Speed Of Light (is the SM side or the memory side the
limiter, or neither?); the subtype from the most severe rule of the rule table that
fires (rules.py). A rule whose metrics the report lacks is not judged: it is listed in
`not_judged` with the missing metrics and the Nsight Compute section that collects them,
never read as if they were 0. NVIDIA's own rule results are kept beside ours, each marked
with the rules of ours it agrees with. The `summary` is the one line the optimizer receives.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from ..tools.ncu_report_reader import KernelProfile, headline
from .rules import (BUSY_PCT, FEW_WAVES, METRIC_SECTION, RULES, SEVERITY_ORDER, SHORT_KERNEL_NS, Metrics, Rule,
                    derived, raw_inputs)

# unknown: the report lacks the Speed Of Light throughputs the class is read from
Primary = Literal["memory-bound", "compute-bound", "latency-bound", "launch-bound", "unknown"]


class Evidence(BaseModel):
    key: str
    label: str
    value: float | None
    unit: str


class Finding(BaseModel):
    rule: str
    severity: Literal["critical", "major", "minor"]
    title: str
    finding: str
    action: str
    note: str
    evidence: list[Evidence]
    nvidia_agrees: list[str] = []  # NVIDIA rule ids that fired and flag the same problem


class NotJudged(BaseModel):
    """A rule that could not be judged: the report lacks metrics its verdict rests on."""

    rule: str
    title: str
    missing: list[str]  # the metrics (or derived quantities) the report lacks
    sections: list[str]  # the Nsight Compute sections that collect them (`ncu --section ID`)

    def describe(self) -> str:
        where = f" (ncu section {', '.join(self.sections)})" if self.sections else ""
        return f"could not judge {self.rule} ({self.title}): the report lacks {', '.join(self.missing)}{where}"


class NvidiaRule(BaseModel):
    rule_id: str
    kind: str
    message: str
    estimated_speedup_pct: float | None
    agrees_with: list[str] = []  # our rule ids


class Roofline(BaseModel):
    fp32_flops_per_s: float | None
    dram_bytes_per_s: float | None
    arithmetic_intensity: float | None  # FP32 FLOP per DRAM byte
    peak_fp32_flops_per_s: float | None
    peak_dram_bytes_per_s: float | None
    ridge_point: float | None  # intensity where the two roofs meet
    pct_of_compute_roof: float | None
    pct_of_memory_roof: float | None
    side: Literal["memory", "compute"] | None  # which roof limits at this intensity


class Diagnosis(BaseModel):
    kernel: str
    device: str | None
    duration_ms: float | None
    grid: tuple[int, int, int] | None
    block: tuple[int, int, int] | None
    primary: Primary
    subtype: str
    summary: str
    key_metrics: list[Evidence]
    findings: list[Finding]
    not_judged: list[NotJudged] = []  # rules the report lacks the metrics for
    nvidia: list[NvidiaRule]
    roofline: Roofline
    metrics_parsed: int
    report_path: str | None = None


# key -> (label, unit) for everything shown to a person
LABELS: dict[str, tuple[str, str]] = {
    "sm_throughput_pct": ("SM throughput", "%"), "memory_throughput_pct": ("memory throughput", "%"),
    "dram_throughput_pct": ("DRAM throughput", "%"), "l1tex_throughput_pct": ("L1/TEX throughput", "%"),
    "l2_throughput_pct": ("L2 throughput", "%"), "l1_hit_rate_pct": ("L1 hit rate", "%"),
    "l2_hit_rate_pct": ("L2 hit rate", "%"), "achieved_occupancy_pct": ("achieved occupancy", "%"),
    "theoretical_occupancy_pct": ("theoretical occupancy", "%"), "waves_per_sm": ("waves per SM", ""),
    "issue_active_pct": ("issue slots busy", "%"), "fp32_pipe_pct": ("FP32 pipe use", "% of peak"),
    "registers_per_thread": ("registers per thread", ""), "duration_ns": ("duration", "ns"),
    "grid_size": ("grid", "blocks"), "block_size": ("block", "threads"), "sm_count": ("SMs", ""),
    "global_load_sectors_per_request": ("global load sectors/request", ""),
    "global_store_sectors_per_request": ("global store sectors/request", ""),
    "global_load_bytes_per_sector": ("bytes used per load sector", "of 32"),
    "global_store_bytes_per_sector": ("bytes used per store sector", "of 32"),
    "shared_bank_conflicts": ("shared bank conflicts", ""), "shared_wavefronts": ("shared wavefronts", ""),
    "global_atomics": ("global atomic instructions", ""), "l2_atomic_busy_max_pct": ("busiest L2 atomic unit", "%"),
    "l2_atomic_busy_avg_pct": ("average L2 atomic unit", "%"), "instructions_executed": ("instructions", ""),
    "stall_long_scoreboard": ("long-scoreboard stall", "cycles/issue"), "stall_lg_throttle": ("LG-throttle stall", "cycles/issue"),
    "stall_mio_throttle": ("MIO-throttle stall", "cycles/issue"), "stall_barrier": ("barrier stall", "cycles/issue"),
    "local_spill_requests": ("local spill requests", ""), "dram_bytes": ("DRAM bytes", "B"),
    "dram_bytes_per_s": ("DRAM bandwidth", "B/s"), "fp32_flops_per_s": ("FP32 rate", "FLOP/s"),
    "peak_fp32_flops_per_s": ("FP32 peak", "FLOP/s"), "shared_mem_allocated_per_block_bytes": ("shared memory per block", "B"),
    "occupancy_limit_registers": ("block limit by registers", "blocks"),
}
HEADLINE_KEYS = ("sm_throughput_pct", "memory_throughput_pct", "l1tex_throughput_pct", "l2_throughput_pct",
                 "dram_throughput_pct", "l1_hit_rate_pct", "achieved_occupancy_pct", "waves_per_sm",
                 "issue_active_pct", "fp32_pipe_pct", "registers_per_thread", "duration_ns")


def _evidence(m: Metrics, key: str) -> Evidence:
    label, unit = LABELS.get(key, (key.replace("_", " "), ""))
    return Evidence(key=key, label=label, value=m.get(key), unit=unit)


def classify(m: Metrics) -> Primary:
    """Speed Of Light first: a side at least BUSY_PCT busy is the limiter. Without both
    throughputs there is nothing to read the class from: unknown."""
    sm, mem = m.get("sm_throughput_pct"), m.get("memory_throughput_pct")
    if sm is None or mem is None:
        return "unknown"
    if max(sm, mem) >= BUSY_PCT:
        return "memory-bound" if mem >= sm else "compute-bound"
    duration, waves = m.get("duration_ns"), m.get("waves_per_sm")
    if duration is not None and waves is not None and duration < SHORT_KERNEL_NS and waves < FEW_WAVES:
        return "launch-bound"
    return "latency-bound"


def roofline(m: Metrics) -> Roofline:
    flops, bw = m.get("fp32_flops_per_s"), m.get("dram_bytes_per_s")
    peak_f, peak_b = m.get("peak_fp32_flops_per_s"), m.get("peak_dram_bytes_per_s")
    ai = m.get("fp32_flops_per_dram_byte")
    ridge = peak_f / peak_b if peak_f and peak_b else None
    side = None if ai is None or ridge is None else ("memory" if ai < ridge else "compute")
    return Roofline(
        fp32_flops_per_s=flops, dram_bytes_per_s=bw, arithmetic_intensity=ai, peak_fp32_flops_per_s=peak_f,
        peak_dram_bytes_per_s=peak_b, ridge_point=ridge,
        pct_of_compute_roof=100 * flops / peak_f if flops is not None and peak_f else None,
        pct_of_memory_roof=100 * bw / peak_b if bw is not None and peak_b else None, side=side,
    )


def fired_rules(m: Metrics, rules: list[Rule] | None = None) -> list[Finding]:
    """Every rule that can be judged and whose condition holds, most severe first (table order
    within a severity)."""
    out = []
    for order, rule in enumerate(rules if rules is not None else RULES):
        if rule.missing(m):
            continue
        if rule.condition(m):
            out.append((SEVERITY_ORDER[rule.severity], order, Finding(
                rule=rule.id, severity=rule.severity, title=rule.title, finding=rule.finding(m), action=rule.action,
                note=rule.note, evidence=[_evidence(m, k) for k in rule.evidence])))
    return [f for _, _, f in sorted(out, key=lambda t: (t[0], t[1]))]


# how a missing derived quantity is named to a person (the rest by their metric key)
_MISSING_NAME = {"top_stall_index": "the warp stall reasons", "top_stall_share": "the warp stall reasons",
                 "worst_global_bytes_per_sector": "the global load/store bytes per sector",
                 "global_atomics": "the global atomic instruction counts"}


def not_judged(m: Metrics, rules: list[Rule] | None = None) -> list[NotJudged]:
    """Every rule whose required metrics `m` lacks, with what is missing and where ncu collects it."""
    out = []
    for rule in rules if rules is not None else RULES:
        lacking = rule.missing(m)
        if not lacking:
            continue
        raw = [k for k in raw_inputs(lacking) if m.get(k) is None] or lacking
        sections = sorted({METRIC_SECTION[k] for k in raw if k in METRIC_SECTION})
        names = list(dict.fromkeys(_MISSING_NAME.get(k, k) for k in lacking))
        out.append(NotJudged(rule=rule.id, title=rule.title, missing=names, sections=sections))
    return out


def _short(message: str, limit: int = 240) -> str:
    text = " ".join(message.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def diagnose(profile: KernelProfile, *, report_path: str | None = None, rules: list[Rule] | None = None) -> Diagnosis:
    m = derived(headline(profile))
    primary = classify(m)
    findings = fired_rules(m, rules)
    unjudged = not_judged(m, rules)
    table = {r.id: r for r in (rules if rules is not None else RULES)}
    nvidia: list[NvidiaRule] = []
    for r in profile.rules:
        if r.kind not in ("OPT", "WRN"):
            continue
        agrees = [f.rule for f in findings if r.rule_id in table[f.rule].nvidia]
        nvidia.append(NvidiaRule(rule_id=r.rule_id, kind=r.kind, message=_short(r.message),
                                 estimated_speedup_pct=r.estimated_speedup_pct, agrees_with=agrees))
    for f in findings:
        f.nvidia_agrees = sorted({n.rule_id for n in nvidia if f.rule in n.agrees_with})
    subtype = findings[0].title if findings else (
        "no dominant bottleneck found" if not unjudged else "no bottleneck found among the rules that could be judged")
    duration_ms = (m["duration_ns"] / 1e6) if m.get("duration_ns") else None
    return Diagnosis(
        kernel=profile.kernel_name, device=profile.device_name, duration_ms=duration_ms, grid=profile.grid,
        block=profile.block, primary=primary, subtype=subtype, summary=summary_line(primary, m, findings, unjudged),
        key_metrics=[_evidence(m, k) for k in HEADLINE_KEYS], findings=findings, not_judged=unjudged, nvidia=nvidia,
        roofline=roofline(m), metrics_parsed=len(profile.metrics), report_path=report_path,
    )


def _pct(m: Metrics, key: str, spec: str = ".0f") -> str:
    value = m.get(key)
    return "n/a" if value is None else f"{value:{spec}}%"


def summary_line(primary: Primary, m: Metrics, findings: list[Finding],
                 unjudged: list[NotJudged] | None = None) -> str:
    """The one line the optimizer receives: verdict, the numbers behind it, the fix. A number
    the report lacks reads "n/a", never 0."""
    sol = (f"SM {_pct(m, 'sm_throughput_pct')}, memory {_pct(m, 'memory_throughput_pct')} "
           f"(L1 {_pct(m, 'l1tex_throughput_pct')}, L2 {_pct(m, 'l2_throughput_pct')}, "
           f"DRAM {_pct(m, 'dram_throughput_pct', '.1f')})")
    gaps = f"; {len(unjudged)} rule(s) not judged for want of metrics" if unjudged else ""
    if not findings:
        return f"{primary}: {sol}; no single bottleneck stands out{gaps}"
    top = findings[0]
    also = "; also " + ", ".join(f.title for f in findings[1:3]) if len(findings) > 1 else ""
    return f"{primary} — {top.title}: {sol}; {top.finding}{also}{gaps}. Fix: {top.action}."
