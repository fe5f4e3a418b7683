"""The bottleneck rule table. Adding a rule is adding one `Rule(...)` entry.

Every rule reads the headline metrics of one profiled launch (`m`, keys from
kernelloop.tools.ncu_report_reader.HEADLINE_METRICS plus the derived ones below) and,
when its condition holds, contributes a finding with the evidence and the action to try.
Thresholds are named module constants so the tests can probe both sides of each edge.
`note` names the knowledge note the researcher retrieves for it (docs in knowledge/);
`nvidia` lists Nsight Compute's own rule ids that flag the same problem.
"""

from __future__ import annotations

from collections.abc import Callable
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


def _v(m: Metrics, key: str, default: float = 0.0) -> float:
    value = m.get(key)
    return default if value is None else float(value)


def derived(m: Metrics) -> Metrics:
    """Quantities the rules share, computed once."""
    d: Metrics = dict(m)
    stalls = {r: _v(m, f"stall_{r}") for r in STALL_REASONS}
    total = sum(stalls.values())
    top = max(stalls, key=stalls.get) if total > 0 else None
    d["stall_total"] = total
    d["top_stall_share"] = stalls[top] / total if top else 0.0
    d["top_stall_index"] = float(STALL_REASONS.index(top)) if top else None
    peak = _v(m, "ffma_peak_per_cycle")
    fp = _v(m, "ffma_per_cycle") + 0.5 * (_v(m, "fadd_per_cycle") + _v(m, "fmul_per_cycle"))
    d["fp32_pipe_pct"] = 100.0 * fp / peak if peak else None
    waves = m.get("waves_per_sm")
    d["last_wave_fill"] = (waves - int(waves)) if waves is not None and waves >= 1 else None
    sm = m.get("sm_count")
    grid = m.get("grid_size")
    d["blocks_per_sm"] = grid / sm if grid is not None and sm else None
    wavefronts = _v(m, "shared_wavefronts")
    d["bank_conflict_ratio"] = _v(m, "shared_bank_conflicts") / wavefronts if wavefronts else 0.0
    d["global_atomics"] = _v(m, "global_red_instructions") + _v(m, "global_atom_instructions")
    avg = _v(m, "l2_atomic_busy_avg_pct")
    d["l2_atomic_imbalance"] = _v(m, "l2_atomic_busy_max_pct") / avg if avg > 0 else 0.0
    limits = {name: m.get(f"occupancy_limit_{name}") for name in ("registers", "shared_mem", "warps", "blocks")}
    known = {k: v for k, v in limits.items() if v is not None}
    if known:
        lowest = min(known.values())
        d["occupancy_limited_by_registers"] = 1.0 if known.get("registers") == lowest and lowest < known.get("warps", 1e9) else 0.0
        d["occupancy_limited_by_shared_mem"] = 1.0 if known.get("shared_mem") == lowest and lowest < known.get("warps", 1e9) else 0.0
    return d


def worst_bytes_per_sector(m: Metrics) -> float | None:
    """The lower of load/store bytes used per sector, counting only the kinds the kernel does."""
    used = [m.get(f"global_{kind}_bytes_per_sector") for kind in ("load", "store")
            if (m.get(f"global_{kind}_requests") or m.get(f"global_{kind}_sectors") or 0) > 0]
    used = [u for u in used if u is not None and u > 0]
    return min(used) if used else None


def top_stall(m: Metrics) -> str | None:
    index = m.get("top_stall_index")
    return None if index is None else STALL_REASONS[int(index)]


@dataclass(frozen=True)
class Rule:
    id: str
    severity: Severity
    title: str  # the subtype it names, e.g. "L1/load-store limited"
    condition: Callable[[Metrics], bool]
    finding: Callable[[Metrics], str]
    action: str
    note: str  # knowledge note id
    evidence: tuple[str, ...]  # metric keys shown with the finding
    nvidia: tuple[str, ...] = field(default=())  # Nsight Compute rule ids that agree


def _stall_is(reason: str) -> Callable[[Metrics], bool]:
    return lambda m: top_stall(m) == reason and _v(m, "top_stall_share") >= STALL_DOMINANT


RULES: list[Rule] = [
    Rule(
        id="atomic-contention", severity="critical", title="global atomics contending for a few addresses",
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
        condition=lambda m: m.get("waves_per_sm") is not None and _v(m, "waves_per_sm") < FEW_WAVES,
        finding=lambda m: (f"the grid of {_v(m, 'grid_size'):.0f} blocks fills {_v(m, 'waves_per_sm'):.2f} waves on "
                           f"{_v(m, 'sm_count'):.0f} SMs (achieved occupancy {_v(m, 'achieved_occupancy_pct'):.1f}%): "
                           "most of the GPU idles"),
        action="expose more parallelism: give each row/tile to a warp or a block instead of one thread, "
               "and launch enough blocks for several waves",
        note="low-parallelism", evidence=("grid_size", "block_size", "waves_per_sm", "achieved_occupancy_pct"),
        nvidia=("LaunchConfiguration", "AchievedOccupancy", "WorkloadImbalance"),
    ),
    Rule(
        id="uncoalesced-global", severity="critical", title="uncoalesced global memory access",
        condition=lambda m: (worst_bytes_per_sector(m) or 32.0) < UNCOALESCED_BYTES_PER_SECTOR,
        finding=lambda m: (f"threads use {_v(m, 'global_load_bytes_per_sector'):.0f} (loads) and "
                           f"{_v(m, 'global_store_bytes_per_sector'):.0f} (stores) of every 32 bytes fetched, at "
                           f"{_v(m, 'global_load_sectors_per_request'):.1f}/{_v(m, 'global_store_sectors_per_request'):.1f} "
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
        condition=lambda m: _v(m, "l1tex_throughput_pct") >= SATURATED_PCT and _v(m, "dram_throughput_pct") < IDLE_DRAM_PCT
        and _v(m, "l1_hit_rate_pct") >= L1_REUSE_HIT_PCT
        and (worst_bytes_per_sector(m) or 32.0) >= UNCOALESCED_BYTES_PER_SECTOR,
        finding=lambda m: (f"the L1/TEX path is {_v(m, 'l1tex_throughput_pct'):.0f}% busy while DRAM is "
                           f"{_v(m, 'dram_throughput_pct'):.1f}% busy and L1 hits {_v(m, 'l1_hit_rate_pct'):.0f}%: the "
                           "load/store unit re-reads the same data from L1 for every output instead of reusing it; "
                           "the SMs are not limited by FMA"),
        action="tile through shared memory so each value loaded from global memory is reused by many threads, "
               "then register-block (several outputs per thread)",
        note="smem-tiling", evidence=("l1tex_throughput_pct", "dram_throughput_pct", "l1_hit_rate_pct", "sm_throughput_pct",
                                      "fp32_pipe_pct", "stall_lg_throttle"),
        nvidia=("MemoryCacheAccessPattern", "LaunchConfiguration"),
    ),
    Rule(
        id="issue-bound", severity="critical", title="instruction-issue limited (overhead instructions, not math)",
        condition=lambda m: _v(m, "issue_active_pct") >= ISSUE_BOUND_PCT and _v(m, "sm_throughput_pct") >= BUSY_PCT
        and _v(m, "fp32_pipe_pct") < LOW_FP_UTILIZATION_PCT,
        finding=lambda m: (f"the schedulers issue an instruction on {_v(m, 'issue_active_pct'):.0f}% of cycles but the "
                           f"FP32 pipe runs at {_v(m, 'fp32_pipe_pct'):.1f}% of its peak: the kernel executes many "
                           f"instructions per element ({_v(m, 'instructions_executed'):.3g} in all) — index math, "
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
        condition=lambda m: _v(m, "fp32_pipe_pct") >= FMA_BOUND_PCT,
        finding=lambda m: f"the FP32 pipe runs at {_v(m, 'fp32_pipe_pct'):.0f}% of its peak",
        action="use tensor cores (mma/wgmma on reduced precision where allowed) or do fewer floating-point operations",
        note="compute-bound-fma", evidence=("fp32_pipe_pct", "fp32_flops_per_s", "peak_fp32_flops_per_s"),
        nvidia=("HighPipeUtilization", "FPInstructions"),
    ),
    Rule(
        id="dram-bound", severity="major", title="DRAM bandwidth limited",
        condition=lambda m: _v(m, "dram_throughput_pct") >= BUSY_PCT,
        finding=lambda m: (f"DRAM is {_v(m, 'dram_throughput_pct'):.0f}% busy ({_v(m, 'dram_bytes_per_s') / 1e9:.0f} GB/s): "
                           "the kernel is near the memory roof"),
        action="move fewer bytes: fuse passes, reuse data on chip, narrower types; further gains need less traffic",
        note="dram-bandwidth", evidence=("dram_throughput_pct", "dram_bytes_per_s", "dram_bytes"),
        nvidia=("SOLBottleneck",),
    ),
    Rule(
        id="l2-bound", severity="major", title="L2 bandwidth limited",
        condition=lambda m: _v(m, "l2_throughput_pct") >= BUSY_PCT and _v(m, "dram_throughput_pct") < BUSY_PCT,
        finding=lambda m: (f"L2 is {_v(m, 'l2_throughput_pct'):.0f}% busy while DRAM is {_v(m, 'dram_throughput_pct'):.0f}%: "
                           "traffic between L1 and L2 is inflated (partially used sectors, repeated misses)"),
        action="improve locality between L1 and L2: coalesce, tile so each sector is fetched once",
        note="l2-bandwidth", evidence=("l2_throughput_pct", "l2_hit_rate_pct", "dram_throughput_pct"),
        nvidia=("MemoryCacheAccessPattern",),
    ),
    Rule(
        id="occupancy-registers", severity="major", title="occupancy limited by registers",
        condition=lambda m: _v(m, "occupancy_limited_by_registers") > 0 and _v(m, "theoretical_occupancy_pct", 100) < 100,
        finding=lambda m: (f"{_v(m, 'registers_per_thread'):.0f} registers per thread cap occupancy at "
                           f"{_v(m, 'theoretical_occupancy_pct'):.0f}%"),
        action="reduce live registers (smaller per-thread tiles, __launch_bounds__ / -maxrregcount) if latency is exposed",
        note="occupancy-registers", evidence=("registers_per_thread", "theoretical_occupancy_pct", "occupancy_limit_registers"),
        nvidia=("TheoreticalOccupancy", "AchievedOccupancy"),
    ),
    Rule(
        id="occupancy-shared-memory", severity="major", title="occupancy limited by shared memory",
        condition=lambda m: _v(m, "occupancy_limited_by_shared_mem") > 0 and _v(m, "theoretical_occupancy_pct", 100) < 100,
        finding=lambda m: (f"{_v(m, 'shared_mem_allocated_per_block_bytes'):.0f} bytes of shared memory per block cap "
                           f"occupancy at {_v(m, 'theoretical_occupancy_pct'):.0f}%"),
        action="use less shared memory per block (smaller tiles, fewer stages) or raise the carveout",
        note="occupancy-shared-memory", evidence=("shared_mem_allocated_per_block_bytes", "theoretical_occupancy_pct"),
        nvidia=("TheoreticalOccupancy",),
    ),
    Rule(
        id="achieved-occupancy-gap", severity="minor", title="achieved occupancy far below theoretical",
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
        condition=lambda m: m.get("last_wave_fill") is not None and FEW_WAVES <= _v(m, "waves_per_sm") < TAIL_MAX_WAVES
        and 0 < _v(m, "last_wave_fill") < TAIL_MAX_FILL,
        finding=lambda m: (f"{_v(m, 'waves_per_sm'):.2f} waves: the last one keeps the GPU "
                           f"{_v(m, 'last_wave_fill'):.0%} busy"),
        action="size the grid to a whole number of waves (or use a persistent grid)",
        note="tail-effect", evidence=("waves_per_sm", "grid_size"), nvidia=("LaunchConfiguration",),
    ),
    Rule(
        id="shared-bank-conflicts", severity="major", title="shared-memory bank conflicts",
        condition=lambda m: _v(m, "bank_conflict_ratio") >= BANK_CONFLICTS_MAJOR,
        finding=lambda m: (f"{_v(m, 'shared_bank_conflicts'):.3g} bank conflicts add {_v(m, 'bank_conflict_ratio'):.0%} "
                           "extra shared-memory wavefronts"),
        action="pad shared arrays by one element per row (or swizzle) and use sequential addressing",
        note="bank-conflicts", evidence=("shared_bank_conflicts", "shared_wavefronts"),
        nvidia=("SharedMemoryConflicts", "MemorySharedBankConflicts"),
    ),
    Rule(
        id="shared-bank-conflicts-minor", severity="minor", title="some shared-memory bank conflicts",
        condition=lambda m: BANK_CONFLICTS_MINOR <= _v(m, "bank_conflict_ratio") < BANK_CONFLICTS_MAJOR,
        finding=lambda m: (f"{_v(m, 'shared_bank_conflicts'):.3g} bank conflicts ({_v(m, 'bank_conflict_ratio'):.1%} "
                           "extra wavefronts)"),
        action="pad or use sequential addressing where the conflicts are",
        note="bank-conflicts", evidence=("shared_bank_conflicts", "shared_wavefronts"),
        nvidia=("SharedMemoryConflicts",),
    ),
    Rule(
        id="memory-latency", severity="major", title="latency-bound on global memory (too few loads in flight)",
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
        condition=_stall_is("barrier"),
        finding=lambda m: f"warps wait at __syncthreads ({_v(m, 'stall_barrier'):.1f} cycles per issued instruction)",
        action="do more work between barriers, use warp-level synchronization where a block barrier is not needed",
        note="barrier-stalls", evidence=("stall_barrier",), nvidia=("CPIStall",),
    ),
    Rule(
        id="mio-throttle", severity="major", title="shared-memory / special-function queue saturated (MIO throttle)",
        condition=_stall_is("mio_throttle"),
        finding=lambda m: f"warps wait on the MIO queue ({_v(m, 'stall_mio_throttle'):.1f} cycles per issued instruction)",
        action="fewer, wider shared-memory accesses; fewer special-function and shuffle instructions per element",
        note="mio-throttle", evidence=("stall_mio_throttle",), nvidia=("CPIStall",),
    ),
    Rule(
        id="lg-throttle", severity="minor", title="load/store queue saturated (LG throttle)",
        condition=_stall_is("lg_throttle"),
        finding=lambda m: f"warps wait on the global load/store queue ({_v(m, 'stall_lg_throttle'):.1f} cycles per issue)",
        action="issue fewer, wider memory instructions (vector loads) and reuse loaded data",
        note="smem-tiling", evidence=("stall_lg_throttle",), nvidia=("CPIStall",),
    ),
    Rule(
        id="register-spills", severity="major", title="register spills to local memory",
        condition=lambda m: _v(m, "local_spill_requests") > 0,
        finding=lambda m: f"{_v(m, 'local_spill_requests'):.3g} local-memory requests from register spills",
        action="reduce register pressure (smaller unroll/tiles) or allow more registers (__launch_bounds__)",
        note="register-spills", evidence=("local_spill_requests", "registers_per_thread"), nvidia=(),
    ),
    Rule(
        id="launch-overhead", severity="minor", title="launch-bound (the kernel is too short)",
        condition=lambda m: m.get("duration_ns") is not None and _v(m, "duration_ns") < SHORT_KERNEL_NS,
        finding=lambda m: f"one launch runs {_v(m, 'duration_ns') / 1e3:.1f} µs: launch overhead is a large share",
        action="fuse kernels, do more work per launch, or replay with CUDA graphs",
        note="launch-overhead", evidence=("duration_ns",), nvidia=(),
    ),
]

SEVERITY_ORDER = {"critical": 0, "major": 1, "minor": 2}
