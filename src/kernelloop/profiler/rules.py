"""The bottleneck rule table. Adding a rule is adding one `Rule(...)` entry.

Every rule reads the headline metrics of one profiled launch (`m`, keys from
kernelloop.tools.ncu_report_reader.HEADLINE_METRICS plus the derived ones below) and,
when its condition holds, contributes a finding with the evidence and the action to try.
A rule names the metrics its verdict rests on (`requires`): when one of them is missing
from the report (null: a section that was not collected, or a metric this GPU lacks) the
rule is not judged, and the diagnosis says which rule and which metric instead of reading
the gap as 0. Numbers a finding only mentions in passing are printed as "n/a" when absent.
Thresholds are named module constants so the tests can probe both sides of each edge.
`note` names the knowledge note the researcher retrieves for it (docs in knowledge/);
`nvidia` lists Nsight Compute's own rule ids that flag the same problem.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Literal

Metrics = dict[str, float | None]
Severity = Literal["critical", "major", "minor"]

# -- thresholds (percentages are of the peak the metric is relative to) ------------------
SATURATED_PCT = 80.0  # a unit this busy is the limiter
BUSY_PCT = 60.0  # Speed Of Light: above this a kernel is bound by that side
IDLE_DRAM_PCT = 20.0  # DRAM this idle while L1 is saturated: the data is re-read on chip
L1_REUSE_HIT_PCT = 50.0
# Coalescing is judged by how many bytes of each fetched 32-byte sector the threads use:
# sectors per request depend on the access width (4 for floats, 16 for float4, both ideal).
UNCOALESCED_BYTES_PER_SECTOR = 16.0  # half of every sector wasted, or worse
FEW_WAVES = 1.0  # fewer waves than this leaves SMs without a block
TAIL_MAX_WAVES = 4.0  # a partial last wave matters only when there are few waves
TAIL_MAX_FILL = 0.9
LOW_OCCUPANCY_PCT = 50.0
OCCUPANCY_GAP = 0.5  # achieved below half the theoretical
BANK_CONFLICTS_MAJOR = 0.10  # extra wavefronts per shared-memory wavefront
BANK_CONFLICTS_MINOR = 0.01
ISSUE_BOUND_PCT = 60.0
FMA_BOUND_PCT = 60.0
LOW_FP_UTILIZATION_PCT = 30.0
ATOMIC_HOT_SLICE_PCT = 50.0
ATOMIC_IMBALANCE = 5.0  # busiest L2 atomic unit vs the average
STALL_DOMINANT = 0.35  # one stall reason's share of all stall cycles
LONG_SCOREBOARD_CYCLES = 10.0
SHORT_KERNEL_NS = 10_000.0

STALL_REASONS = (
    "long_scoreboard", "short_scoreboard", "barrier", "membar", "mio_throttle", "lg_throttle", "tex_throttle",
    "math_pipe_throttle", "not_selected", "wait", "dispatch_stall", "branch_resolving", "drain", "sleeping",
    "imc_miss", "misc", "no_instruction",
)


# The Nsight Compute section (its identifier, as `ncu --section` takes it) that collects each
# headline metric the rules and the summary read. `--set fast` is built from this table
# (profiler/run.py), so a rule never waits on a section the fast set leaves out.
METRIC_SECTION: dict[str, str] = {
    **{k: "SpeedOfLight" for k in ("sm_throughput_pct", "memory_throughput_pct", "dram_throughput_pct",
                                   "l1tex_throughput_pct", "l2_throughput_pct", "duration_ns",
                                   "l2_atomic_busy_max_pct", "l2_atomic_busy_avg_pct")},
    **{k: "LaunchStats" for k in ("waves_per_sm", "grid_size", "block_size", "sm_count", "registers_per_thread",
                                  "shared_mem_allocated_per_block_bytes")},
    **{k: "Occupancy" for k in ("achieved_occupancy_pct", "theoretical_occupancy_pct", "occupancy_limit_registers",
                                "occupancy_limit_shared_mem", "occupancy_limit_warps", "occupancy_limit_blocks")},
    **{k: "MemoryWorkloadAnalysis" for k in ("l1_hit_rate_pct", "l2_hit_rate_pct", "local_spill_requests",
                                             "dram_bytes_per_s")},
    **{k: "MemoryWorkloadAnalysis_Tables" for k in (
        "global_load_bytes_per_sector", "global_store_bytes_per_sector", "global_load_requests",
        "global_store_requests", "global_load_sectors", "global_store_sectors", "global_load_sectors_per_request",
        "global_store_sectors_per_request", "shared_bank_conflicts", "shared_wavefronts", "global_red_instructions",
        "global_atom_instructions")},
    "issue_active_pct": "SchedulerStats",
    **{f"stall_{r}": "WarpStateStats" for r in STALL_REASONS},
    "instructions_executed": "InstructionStats",
    **{k: "SpeedOfLight_RooflineChart" for k in ("ffma_per_cycle", "fadd_per_cycle", "fmul_per_cycle",
                                                 "ffma_peak_per_cycle", "fp32_flops_per_s", "peak_fp32_flops_per_s")},
}

# Derived quantities (below) and the headline metrics each is computed from.
DERIVED_FROM: dict[str, tuple[str, ...]] = {
    "stall_total": tuple(f"stall_{r}" for r in STALL_REASONS),
    "top_stall_share": tuple(f"stall_{r}" for r in STALL_REASONS),
    "top_stall_index": tuple(f"stall_{r}" for r in STALL_REASONS),
    "fp32_pipe_pct": ("ffma_per_cycle", "fadd_per_cycle", "fmul_per_cycle", "ffma_peak_per_cycle"),
    "last_wave_fill": ("waves_per_sm",),
    "blocks_per_sm": ("grid_size", "sm_count"),
    "bank_conflict_ratio": ("shared_bank_conflicts", "shared_wavefronts"),
    "global_atomics": ("global_red_instructions", "global_atom_instructions"),
    "l2_atomic_imbalance": ("l2_atomic_busy_max_pct", "l2_atomic_busy_avg_pct"),
    "occupancy_limited_by_registers": ("occupancy_limit_registers", "occupancy_limit_shared_mem",
                                       "occupancy_limit_warps", "occupancy_limit_blocks"),
    "occupancy_limited_by_shared_mem": ("occupancy_limit_registers", "occupancy_limit_shared_mem",
                                        "occupancy_limit_warps", "occupancy_limit_blocks"),
    "worst_global_bytes_per_sector": ("global_load_bytes_per_sector", "global_store_bytes_per_sector",
                                      "global_load_requests", "global_store_requests"),
}


class MissingMetric(LookupError):
    """A rule read a metric it does not list in `requires` and the report lacks it."""


def _v(m: Metrics, key: str) -> float:
    """A metric a rule's verdict rests on. Never a default: a gap is not a zero."""
    value = m.get(key)
    if value is None:
        raise MissingMetric(key)
    return float(value)


def _opt(m: Metrics, key: str, spec: str, scale: float = 1.0) -> str:
    """A number a finding mentions in passing: formatted, or "n/a" when the report lacks it."""
    value = m.get(key)
    return "n/a" if value is None else format(float(value) * scale, spec)


def _all_known(m: Metrics, keys: Iterable[str]) -> bool:
    return all(m.get(k) is not None for k in keys)


def _worst_bytes(m: Metrics) -> float | None:
    """The lower of load/store bytes used per 32-byte sector, counting only the kinds the kernel
    does (32 when it does neither); None when the report cannot tell."""
    used: list[float] = []
    for kind in ("load", "store"):
        amount = m.get(f"global_{kind}_requests")
        if amount is None:
            amount = m.get(f"global_{kind}_sectors")
        if amount is None:
            return None
        if amount > 0:
            ratio = m.get(f"global_{kind}_bytes_per_sector")
            if ratio is None:
                return None
            if ratio > 0:
                used.append(float(ratio))
    return min(used) if used else 32.0


def derived(m: Metrics) -> Metrics:
    """Quantities the rules share, computed once; None wherever an input is missing."""
    d: Metrics = dict(m)
    # A reason the report does not list is one this GPU does not have: no cycles spent in it.
    stalls = {r: float(m[f"stall_{r}"]) for r in STALL_REASONS if m.get(f"stall_{r}") is not None}  # type: ignore[arg-type]
    if stalls:
        total = sum(stalls.values())
        top = max(stalls, key=lambda r: stalls[r]) if total > 0 else None
        d["stall_total"] = total
        d["top_stall_share"] = stalls[top] / total if top else 0.0
        d["top_stall_index"] = float(STALL_REASONS.index(top)) if top else -1.0  # -1: no stall at all
    else:
        d["stall_total"] = d["top_stall_share"] = d["top_stall_index"] = None
    fp = DERIVED_FROM["fp32_pipe_pct"]
    if _all_known(m, fp) and m["ffma_peak_per_cycle"]:
        rate = _v(m, "ffma_per_cycle") + 0.5 * (_v(m, "fadd_per_cycle") + _v(m, "fmul_per_cycle"))
        d["fp32_pipe_pct"] = 100.0 * rate / _v(m, "ffma_peak_per_cycle")
    else:
        d["fp32_pipe_pct"] = None
    waves = m.get("waves_per_sm")
    d["last_wave_fill"] = waves - int(waves) if waves is not None else None
    sm, grid = m.get("sm_count"), m.get("grid_size")
    d["blocks_per_sm"] = grid / sm if grid is not None and sm else None
    conflicts, wavefronts = m.get("shared_bank_conflicts"), m.get("shared_wavefronts")
    d["bank_conflict_ratio"] = (None if conflicts is None or wavefronts is None
                                else conflicts / wavefronts if wavefronts else 0.0)
    red, atom = m.get("global_red_instructions"), m.get("global_atom_instructions")
    d["global_atomics"] = red + atom if red is not None and atom is not None else None
    top_busy, avg_busy = m.get("l2_atomic_busy_max_pct"), m.get("l2_atomic_busy_avg_pct")
    d["l2_atomic_imbalance"] = (None if top_busy is None or avg_busy is None
                                else top_busy / avg_busy if avg_busy > 0 else 0.0)
    limits = {name: m.get(f"occupancy_limit_{name}") for name in ("registers", "shared_mem", "warps", "blocks")}
    if all(v is not None for v in limits.values()):
        lowest = min(v for v in limits.values() if v is not None)
        warps = limits["warps"]
        d["occupancy_limited_by_registers"] = 1.0 if limits["registers"] == lowest and lowest < warps else 0.0
        d["occupancy_limited_by_shared_mem"] = 1.0 if limits["shared_mem"] == lowest and lowest < warps else 0.0
    else:
        d["occupancy_limited_by_registers"] = d["occupancy_limited_by_shared_mem"] = None
    d["worst_global_bytes_per_sector"] = _worst_bytes(m)
    return d


def raw_inputs(keys: Iterable[str]) -> set[str]:
    """The headline metrics behind `keys` (derived keys expanded to what they are computed from)."""
    out: set[str] = set()
    for key in keys:
        out |= raw_inputs(DERIVED_FROM[key]) if key in DERIVED_FROM else {key}
    return out


def sections_for(keys: Iterable[str]) -> set[str]:
    """The Nsight Compute sections that collect the metrics behind `keys`."""
    return {METRIC_SECTION[k] for k in raw_inputs(keys) if k in METRIC_SECTION}


def worst_bytes_per_sector(m: Metrics) -> float | None:
    """The lower of load/store bytes used per sector, counting only the kinds the kernel does."""
    return _worst_bytes(m)


def top_stall(m: Metrics) -> str | None:
    index = m.get("top_stall_index")
    return None if index is None or index < 0 else STALL_REASONS[int(index)]


@dataclass(frozen=True)
class Rule:
    id: str
    severity: Severity
    title: str  # the subtype it names, e.g. "L1/load-store limited"
    requires: tuple[str, ...]  # metrics the verdict rests on: any of them missing, the rule is not judged
    condition: Callable[[Metrics], bool]  # reads only `requires` (through _v)
    finding: Callable[[Metrics], str]  # `requires` through _v; anything else through _opt
    action: str
    note: str  # knowledge note id
    evidence: tuple[str, ...]  # metric keys shown with the finding
    nvidia: tuple[str, ...] = field(default=())  # Nsight Compute rule ids that agree

    def missing(self, m: Metrics) -> list[str]:
        """The required metrics `m` lacks (empty: the rule can be judged)."""
        return [k for k in self.requires if m.get(k) is None]


STALLS = ("top_stall_index", "top_stall_share")


def _stall_is(reason: str) -> Callable[[Metrics], bool]:
    return lambda m: top_stall(m) == reason and _v(m, "top_stall_share") >= STALL_DOMINANT


def _no_fma_limit(m: Metrics) -> str:
    pct = m.get("fp32_pipe_pct")
    return f"; the SMs are not limited by FMA (FP32 pipe {pct:.0f}%)" if pct is not None and pct < FMA_BOUND_PCT else ""


def _instruction_count(m: Metrics) -> str:
    count = m.get("instructions_executed")
    return f" ({count:.3g} in all)" if count is not None else ""


RULES: list[Rule] = [
    Rule(
        id="atomic-contention", severity="critical", title="global atomics contending for a few addresses",
        requires=("global_atomics", "l2_atomic_busy_max_pct", "l2_atomic_busy_avg_pct", "l2_atomic_imbalance"),
        condition=lambda m: _v(m, "global_atomics") > 0 and _v(m, "l2_atomic_busy_max_pct") >= ATOMIC_HOT_SLICE_PCT
        and _v(m, "l2_atomic_imbalance") >= ATOMIC_IMBALANCE,
        finding=lambda m: (f"{_v(m, 'global_atomics'):.3g} global atomic instructions pile onto few addresses: the busiest "
                           f"L2 atomic unit is {_v(m, 'l2_atomic_busy_max_pct'):.0f}% busy while the average is "
                           f"{_v(m, 'l2_atomic_busy_avg_pct'):.1f}%, and warps wait on them"),
        action="privatize: accumulate in shared memory (per block or per warp), then one global atomic per bin per block",
        note="atomic-contention", evidence=("global_atomics", "l2_atomic_busy_max_pct", "l2_atomic_busy_avg_pct"),
        nvidia=("CPIStall", "IssueSlotUtilization"),
    ),
    Rule(
        id="too-few-blocks", severity="critical", title="too little parallelism (the grid does not fill the GPU)",
        requires=("waves_per_sm", "grid_size", "sm_count"),
        condition=lambda m: _v(m, "waves_per_sm") < FEW_WAVES,
        finding=lambda m: (f"the grid of {_v(m, 'grid_size'):.0f} blocks fills {_v(m, 'waves_per_sm'):.2f} waves on "
                           f"{_v(m, 'sm_count'):.0f} SMs (achieved occupancy {_opt(m, 'achieved_occupancy_pct', '.1f')}%): "
                           "most of the GPU idles"),
        action="expose more parallelism: give each row/tile to a warp or a block instead of one thread, "
               "and launch enough blocks for several waves",
        note="low-parallelism", evidence=("grid_size", "block_size", "waves_per_sm", "achieved_occupancy_pct"),
        nvidia=("LaunchConfiguration", "AchievedOccupancy", "WorkloadImbalance"),
    ),
    Rule(
        id="uncoalesced-global", severity="critical", title="uncoalesced global memory access",
        requires=("worst_global_bytes_per_sector",),
        condition=lambda m: _v(m, "worst_global_bytes_per_sector") < UNCOALESCED_BYTES_PER_SECTOR,
        finding=lambda m: (f"threads use {_opt(m, 'global_load_bytes_per_sector', '.0f')} (loads) and "
                           f"{_opt(m, 'global_store_bytes_per_sector', '.0f')} (stores) of every 32 bytes fetched, at "
                           f"{_opt(m, 'global_load_sectors_per_request', '.1f')}/"
                           f"{_opt(m, 'global_store_sectors_per_request', '.1f')} "
                           "sectors per request: neighbouring threads touch addresses far apart"),
        action="make threadIdx.x walk the contiguous dimension; where reads and writes need different orders "
               "(transpose), stage a tile through shared memory (padded against bank conflicts)",
        note="uncoalesced-access",
        evidence=("global_load_sectors_per_request", "global_store_sectors_per_request", "global_load_bytes_per_sector",
                  "global_store_bytes_per_sector"),
        nvidia=("UncoalescedGlobalAccess", "MemoryCacheAccessPattern"),
    ),
    Rule(
        id="l1-lsu-limited", severity="critical", title="L1/load-store limited (data re-read, not reused)",
        requires=("l1tex_throughput_pct", "dram_throughput_pct", "l1_hit_rate_pct", "worst_global_bytes_per_sector"),
        condition=lambda m: _v(m, "l1tex_throughput_pct") >= SATURATED_PCT and _v(m, "dram_throughput_pct") < IDLE_DRAM_PCT
        and _v(m, "l1_hit_rate_pct") >= L1_REUSE_HIT_PCT
        and _v(m, "worst_global_bytes_per_sector") >= UNCOALESCED_BYTES_PER_SECTOR,
        finding=lambda m: (f"the L1/TEX path is {_v(m, 'l1tex_throughput_pct'):.0f}% busy while DRAM is "
                           f"{_v(m, 'dram_throughput_pct'):.1f}% busy and L1 hits {_v(m, 'l1_hit_rate_pct'):.0f}%: the "
                           "load/store unit re-reads the same data from L1 for every output instead of reusing it"
                           + _no_fma_limit(m)),
        action="tile through shared memory so each value loaded from global memory is reused by many threads, "
               "then register-block (several outputs per thread)",
        note="smem-tiling", evidence=("l1tex_throughput_pct", "dram_throughput_pct", "l1_hit_rate_pct", "sm_throughput_pct",
                                      "fp32_pipe_pct", "stall_lg_throttle"),
        nvidia=("MemoryCacheAccessPattern", "LaunchConfiguration"),
    ),
    Rule(
        id="issue-bound", severity="critical", title="instruction-issue limited (overhead instructions, not math)",
        requires=("issue_active_pct", "sm_throughput_pct", "fp32_pipe_pct"),
        condition=lambda m: _v(m, "issue_active_pct") >= ISSUE_BOUND_PCT and _v(m, "sm_throughput_pct") >= BUSY_PCT
        and _v(m, "fp32_pipe_pct") < LOW_FP_UTILIZATION_PCT,
        finding=lambda m: (f"the schedulers issue an instruction on {_v(m, 'issue_active_pct'):.0f}% of cycles but the "
                           f"FP32 pipe runs at {_v(m, 'fp32_pipe_pct'):.1f}% of its peak: the kernel executes many "
                           f"instructions per element{_instruction_count(m)} — index math, "
                           "divergent branches, shared-memory traffic"),
        action="cut instructions per element: warp shuffles instead of shared-memory trees, sequential addressing "
               "without modulo-divergent branches, each thread reducing many elements (grid-stride, vector loads) "
               "before any communication",
        note="instruction-overhead", evidence=("issue_active_pct", "sm_throughput_pct", "fp32_pipe_pct",
                                               "instructions_executed"),
        nvidia=("IssueSlotUtilization", "HighPipeUtilization", "FPInstructions"),
    ),
    Rule(
        id="fma-bound", severity="major", title="FP32 arithmetic limited",
        requires=("fp32_pipe_pct",),
        condition=lambda m: _v(m, "fp32_pipe_pct") >= FMA_BOUND_PCT,
        finding=lambda m: f"the FP32 pipe runs at {_v(m, 'fp32_pipe_pct'):.0f}% of its peak",
        action="use tensor cores (mma/wgmma on reduced precision where allowed) or do fewer floating-point operations",
        note="compute-bound-fma", evidence=("fp32_pipe_pct", "fp32_flops_per_s", "peak_fp32_flops_per_s"),
        nvidia=("HighPipeUtilization", "FPInstructions"),
    ),
    Rule(
        id="dram-bound", severity="major", title="DRAM bandwidth limited",
        requires=("dram_throughput_pct",),
        condition=lambda m: _v(m, "dram_throughput_pct") >= BUSY_PCT,
        finding=lambda m: (f"DRAM is {_v(m, 'dram_throughput_pct'):.0f}% busy ({_opt(m, 'dram_bytes_per_s', '.0f', 1e-9)} "
                           "GB/s): the kernel is near the memory roof"),
        action="move fewer bytes: fuse passes, reuse data on chip, narrower types; further gains need less traffic",
        note="dram-bandwidth", evidence=("dram_throughput_pct", "dram_bytes_per_s", "dram_bytes"),
        nvidia=("SOLBottleneck",),
    ),
    Rule(
        id="l2-bound", severity="major", title="L2 bandwidth limited",
        requires=("l2_throughput_pct", "dram_throughput_pct"),
        condition=lambda m: _v(m, "l2_throughput_pct") >= BUSY_PCT and _v(m, "dram_throughput_pct") < BUSY_PCT,
        finding=lambda m: (f"L2 is {_v(m, 'l2_throughput_pct'):.0f}% busy while DRAM is {_v(m, 'dram_throughput_pct'):.0f}%: "
                           "traffic between L1 and L2 is inflated (partially used sectors, repeated misses)"),
        action="improve locality between L1 and L2: coalesce, tile so each sector is fetched once",
        note="l2-bandwidth", evidence=("l2_throughput_pct", "l2_hit_rate_pct", "dram_throughput_pct"),
        nvidia=("MemoryCacheAccessPattern",),
    ),
    Rule(
        id="occupancy-registers", severity="major", title="occupancy limited by registers",
        requires=("occupancy_limited_by_registers", "theoretical_occupancy_pct"),
        condition=lambda m: _v(m, "occupancy_limited_by_registers") > 0 and _v(m, "theoretical_occupancy_pct") < 100,
        finding=lambda m: (f"{_opt(m, 'registers_per_thread', '.0f')} registers per thread cap occupancy at "
                           f"{_v(m, 'theoretical_occupancy_pct'):.0f}%"),
        action="reduce live registers (smaller per-thread tiles, __launch_bounds__ / -maxrregcount) if latency is exposed",
        note="occupancy-registers", evidence=("registers_per_thread", "theoretical_occupancy_pct", "occupancy_limit_registers"),
        nvidia=("TheoreticalOccupancy", "AchievedOccupancy"),
    ),
    Rule(
        id="occupancy-shared-memory", severity="major", title="occupancy limited by shared memory",
        requires=("occupancy_limited_by_shared_mem", "theoretical_occupancy_pct"),
        condition=lambda m: _v(m, "occupancy_limited_by_shared_mem") > 0 and _v(m, "theoretical_occupancy_pct") < 100,
        finding=lambda m: (f"{_opt(m, 'shared_mem_allocated_per_block_bytes', '.0f')} bytes of shared memory per block cap "
                           f"occupancy at {_v(m, 'theoretical_occupancy_pct'):.0f}%"),
        action="use less shared memory per block (smaller tiles, fewer stages) or raise the carveout",
        note="occupancy-shared-memory", evidence=("shared_mem_allocated_per_block_bytes", "theoretical_occupancy_pct"),
        nvidia=("TheoreticalOccupancy",),
    ),
    Rule(
        id="achieved-occupancy-gap", severity="minor", title="achieved occupancy far below theoretical",
        requires=("waves_per_sm", "theoretical_occupancy_pct", "achieved_occupancy_pct"),
        condition=lambda m: _v(m, "waves_per_sm") >= FEW_WAVES and _v(m, "theoretical_occupancy_pct") > 0
        and _v(m, "achieved_occupancy_pct") < OCCUPANCY_GAP * _v(m, "theoretical_occupancy_pct"),
        finding=lambda m: (f"achieved occupancy {_v(m, 'achieved_occupancy_pct'):.0f}% of a theoretical "
                           f"{_v(m, 'theoretical_occupancy_pct'):.0f}%: blocks finish unevenly or start slowly"),
        action="balance work across blocks; avoid long-running stragglers",
        note="low-parallelism", evidence=("achieved_occupancy_pct", "theoretical_occupancy_pct"),
        nvidia=("AchievedOccupancy", "WorkloadImbalance"),
    ),
    Rule(
        id="tail-effect", severity="minor", title="partial last wave (tail effect)",
        requires=("waves_per_sm", "last_wave_fill"),
        condition=lambda m: FEW_WAVES <= _v(m, "waves_per_sm") < TAIL_MAX_WAVES
        and 0 < _v(m, "last_wave_fill") < TAIL_MAX_FILL,
        finding=lambda m: (f"{_v(m, 'waves_per_sm'):.2f} waves: the last one keeps the GPU "
                           f"{_v(m, 'last_wave_fill'):.0%} busy"),
        action="size the grid to a whole number of waves (or use a persistent grid)",
        note="tail-effect", evidence=("waves_per_sm", "grid_size"), nvidia=("LaunchConfiguration",),
    ),
    Rule(
        id="shared-bank-conflicts", severity="major", title="shared-memory bank conflicts",
        requires=("bank_conflict_ratio", "shared_bank_conflicts"),
        condition=lambda m: _v(m, "bank_conflict_ratio") >= BANK_CONFLICTS_MAJOR,
        finding=lambda m: (f"{_v(m, 'shared_bank_conflicts'):.3g} bank conflicts add {_v(m, 'bank_conflict_ratio'):.0%} "
                           "extra shared-memory wavefronts"),
        action="pad shared arrays by one element per row (or swizzle) and use sequential addressing",
        note="bank-conflicts", evidence=("shared_bank_conflicts", "shared_wavefronts"),
        nvidia=("SharedMemoryConflicts", "MemorySharedBankConflicts"),
    ),
    Rule(
        id="shared-bank-conflicts-minor", severity="minor", title="some shared-memory bank conflicts",
        requires=("bank_conflict_ratio", "shared_bank_conflicts"),
        condition=lambda m: BANK_CONFLICTS_MINOR <= _v(m, "bank_conflict_ratio") < BANK_CONFLICTS_MAJOR,
        finding=lambda m: (f"{_v(m, 'shared_bank_conflicts'):.3g} bank conflicts ({_v(m, 'bank_conflict_ratio'):.1%} "
                           "extra wavefronts)"),
        action="pad or use sequential addressing where the conflicts are",
        note="bank-conflicts", evidence=("shared_bank_conflicts", "shared_wavefronts"),
        nvidia=("SharedMemoryConflicts",),
    ),
    Rule(
        id="memory-latency", severity="major", title="latency-bound on global memory (too few loads in flight)",
        requires=(*STALLS, "stall_long_scoreboard", "memory_throughput_pct"),
        condition=lambda m: top_stall(m) == "long_scoreboard" and _v(m, "top_stall_share") >= STALL_DOMINANT
        and _v(m, "stall_long_scoreboard") >= LONG_SCOREBOARD_CYCLES and _v(m, "memory_throughput_pct") < BUSY_PCT,
        finding=lambda m: (f"warps spend {_v(m, 'stall_long_scoreboard'):.0f} cycles per issued instruction waiting on "
                           f"global memory while memory is only {_v(m, 'memory_throughput_pct'):.0f}% busy"),
        action="keep more independent loads in flight: unroll, vector (16-byte) loads, more warps, or stage through "
               "shared memory asynchronously",
        note="memory-latency", evidence=("stall_long_scoreboard", "memory_throughput_pct", "achieved_occupancy_pct"),
        nvidia=("CPIStall",),
    ),
    Rule(
        id="barrier-stalls", severity="major", title="barrier stalls",
        requires=(*STALLS, "stall_barrier"),
        condition=_stall_is("barrier"),
        finding=lambda m: f"warps wait at __syncthreads ({_v(m, 'stall_barrier'):.1f} cycles per issued instruction)",
        action="do more work between barriers, use warp-level synchronization where a block barrier is not needed",
        note="barrier-stalls", evidence=("stall_barrier",), nvidia=("CPIStall",),
    ),
    Rule(
        id="mio-throttle", severity="major", title="shared-memory / special-function queue saturated (MIO throttle)",
        requires=(*STALLS, "stall_mio_throttle"),
        condition=_stall_is("mio_throttle"),
        finding=lambda m: f"warps wait on the MIO queue ({_v(m, 'stall_mio_throttle'):.1f} cycles per issued instruction)",
        action="fewer, wider shared-memory accesses; fewer special-function and shuffle instructions per element",
        note="mio-throttle", evidence=("stall_mio_throttle",), nvidia=("CPIStall",),
    ),
    Rule(
        id="lg-throttle", severity="minor", title="load/store queue saturated (LG throttle)",
        requires=(*STALLS, "stall_lg_throttle"),
        condition=_stall_is("lg_throttle"),
        finding=lambda m: f"warps wait on the global load/store queue ({_v(m, 'stall_lg_throttle'):.1f} cycles per issue)",
        action="issue fewer, wider memory instructions (vector loads) and reuse loaded data",
        note="smem-tiling", evidence=("stall_lg_throttle",), nvidia=("CPIStall",),
    ),
    Rule(
        id="register-spills", severity="major", title="register spills to local memory",
        requires=("local_spill_requests",),
        condition=lambda m: _v(m, "local_spill_requests") > 0,
        finding=lambda m: f"{_v(m, 'local_spill_requests'):.3g} local-memory requests from register spills",
        action="reduce register pressure (smaller unroll/tiles) or allow more registers (__launch_bounds__)",
        note="register-spills", evidence=("local_spill_requests", "registers_per_thread"), nvidia=(),
    ),
    Rule(
        id="launch-overhead", severity="minor", title="launch-bound (the kernel is too short)",
        requires=("duration_ns",),
        condition=lambda m: _v(m, "duration_ns") < SHORT_KERNEL_NS,
        finding=lambda m: f"one launch runs {_v(m, 'duration_ns') / 1e3:.1f} µs: launch overhead is a large share",
        action="fuse kernels, do more work per launch, or replay with CUDA graphs",
        note="launch-overhead", evidence=("duration_ns",), nvidia=(),
    ),
]

SEVERITY_ORDER = {"critical": 0, "major": 1, "minor": 2}


def rule_sections(rules: Iterable[Rule] | None = None) -> set[str]:
    """Every Nsight Compute section the rules read: their required metrics and their evidence."""
    return sections_for(k for r in (rules if rules is not None else RULES) for k in (*r.requires, *r.evidence))
