"""Resource usage (ptxas) and theoretical occupancy, without a GPU.

`kernel_resources` compiles one translation unit with nvcc in the sandbox, asks ptxas for its
report (`-Xptxas -v`) and returns, for every kernel and every non-inlined device function, the
registers, static shared memory, constant memory, stack frame, spill and barrier counts.

`occupancy` is NVIDIA's occupancy calculator arithmetic, as in the toolkit's own
`cuda_occupancy.h` (cudaOccMaxActiveBlocksPerMultiprocessor, CUDA 13.0):

* warps:     floor(max warps per SM / ceil(block size / 32))
* registers: registers of a warp = round_up(registers per thread x 32, 256); registers live in
             4 SM sub-partitions, so warps per SM = 4 x floor((registers per SM / 4) / registers
             of a warp), and blocks = floor(warps per SM / warps per block). A block whose
             registers exceed the per-block limit (checked with warps rounded up to a multiple of
             4, as the hardware does) or more than 255 registers per thread cannot launch.
* shared memory: per block = round_up(static + dynamic + reserved (1 KiB on sm_80+),
             allocation unit); blocks = floor(carveout / per block), where the carveout is the
             requested shared-memory configuration rounded up to one the SM supports (default:
             the largest), raised to the smallest one that holds one block when it does not.
* blocks:    the SM's resident block limit.
* barriers (sm_90+): block barriers per SM / barriers a block uses.

Active blocks are the minimum; the limiting factors are those equal to it. Theoretical
occupancy = active warps / max warps per SM.

ptxas report format handled (CUDA 13.0; older releases print the same items, some omitted):

    ptxas info    : 519 bytes gmem, 256 bytes cmem[3]                 (module: not per function)
    ptxas info    : Compiling entry function '_Z2tkILi128EEvPfi' for 'sm_90'      (a kernel)
    ptxas info    : Function properties for _Z2tkILi128EEvPfi       (kernels and device functions)
        128 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
    ptxas info    : Used 31 registers, used 1 barriers, 128 bytes cumulative stack size,
                    512 bytes smem, 372 bytes cmem[0]                 (one line; kernels only)
    ptxas info    : Compile time = 5.487 ms
    ptxas warning : ... entry _Z5spillPfPKii ...                      (kept as a note on that entry)

Items of the "Used" line are matched one by one: "N registers", "used N barriers", "N bytes smem",
"N bytes cmem[B]" (summed over banks, each bank kept), "N bytes lmem" (pre-CUDA-11 ptxas),
"N bytes cumulative stack size", "N textures/samplers/surfaces" (ignored).
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterable, Sequence
from typing import Literal

from pydantic import BaseModel

from ..errors import ConfigError, InputError
from .nvcc import HARNESS_KERNEL_PREFIX, Toolchain, find_toolchain, language_flags, stage_harness_header
from .sandbox import Limits, private_workdir, run_sandboxed
from .symbols import demangle

__all__ = [
    "GPU_LIMITS",
    "GpuLimits",
    "KernelResources",
    "Occupancy",
    "gpu_limits",
    "kernel_resources",
    "occupancy",
    "occupancy_table",
    "parse_ptxas_report",
]

# ---------------------------------------------------------------------------------------------------
# ptxas resource usage


class KernelResources(BaseModel):
    """What ptxas reports for one function of a translation unit."""

    name: str  # mangled, as ptxas prints it
    demangled: str
    is_kernel: bool  # a __global__ function (ptxas: "Compiling entry function")
    arch: str  # "sm_90", from ptxas ("for 'sm_90'") or the arch compiled for
    registers: int | None = None  # None: ptxas printed no "Used" line (device functions)
    static_shared_bytes: int = 0  # "N bytes smem"
    constant_bytes: int = 0  # sum of "N bytes cmem[B]" on the function's line
    constant_banks: dict[int, int] = {}  # bank -> bytes
    stack_frame_bytes: int = 0
    cumulative_stack_bytes: int = 0  # "N bytes cumulative stack size" (frame + callees)
    local_bytes: int = 0  # "N bytes lmem" (older ptxas)
    spill_store_bytes: int = 0
    spill_load_bytes: int = 0
    barriers: int = 0  # "used N barriers"
    notes: list[str] = []  # ptxas warnings naming this function

    @property
    def spills(self) -> bool:
        return self.spill_store_bytes > 0 or self.spill_load_bytes > 0

    @property
    def uses_local_memory(self) -> bool:
        """Spills, or a stack frame (a local array indexed at run time, a call)."""
        return self.spills or self.stack_frame_bytes > 0 or self.local_bytes > 0


_PTXAS_LINE = re.compile(r"^\s*ptxas\s+(info|warning|error|fatal)\s*:\s*(.*?)\s*$", re.I)
_ENTRY = re.compile(r"^Compiling entry function '([^']+)'(?: for '([^']+)')?")
_PROPS = re.compile(r"^Function properties for (\S+)")
_FRAME = re.compile(
    r"^\s*(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads\s*$"
)
_USED = re.compile(r"^Used (\d+) registers\b(.*)$")
_ITEM_BARRIERS = re.compile(r"^used (\d+) barriers?$")
_ITEM_SMEM = re.compile(r"^(\d+) bytes smem$")
_ITEM_CMEM = re.compile(r"^(\d+) bytes cmem\[(\d+)\]$")
_ITEM_LMEM = re.compile(r"^(\d+) bytes lmem$")
_ITEM_STACK = re.compile(r"^(\d+) bytes cumulative stack size$")


def parse_ptxas_report(text: str, *, arch: str = "") -> list[KernelResources]:
    """Every function in a `-Xptxas -v` report, kernels first, in report order.

    `arch` tags entries whose arch ptxas does not print (device functions)."""
    found: dict[tuple[str, str], dict] = {}
    order: list[tuple[str, str]] = []
    current: tuple[str, str] | None = None
    current_arch = arch
    warnings: list[str] = []

    def entry(name: str, arch_: str) -> tuple[str, str]:
        key = (name, arch_)
        if key not in found:
            found[key] = {"name": name, "arch": arch_, "is_kernel": False, "constant_banks": {}}
            order.append(key)
        return key

    for raw in text.splitlines():
        m = _PTXAS_LINE.match(raw)
        if m is None:
            frame = _FRAME.match(raw)
            if frame and current is not None:
                f = found[current]
                f["stack_frame_bytes"], f["spill_store_bytes"], f["spill_load_bytes"] = map(int, frame.groups())
            continue
        level, body = m.group(1).lower(), m.group(2)
        if level != "info":
            warnings.append(body)
            continue
        if em := _ENTRY.match(body):
            current_arch = em.group(2) or current_arch
            current = entry(em.group(1), current_arch)
            found[current]["is_kernel"] = True
        elif pm := _PROPS.match(body):
            current = entry(pm.group(1), current_arch)
        elif um := _USED.match(body):
            if current is None:
                continue
            f = found[current]
            f["registers"] = int(um.group(1))
            for item in (s.strip() for s in um.group(2).split(",")):
                if im := _ITEM_BARRIERS.match(item):
                    f["barriers"] = int(im.group(1))
                elif im := _ITEM_SMEM.match(item):
                    f["static_shared_bytes"] = int(im.group(1))
                elif im := _ITEM_CMEM.match(item):
                    f["constant_banks"][int(im.group(2))] = int(im.group(1))
                elif im := _ITEM_LMEM.match(item):
                    f["local_bytes"] = int(im.group(1))
                elif im := _ITEM_STACK.match(item):
                    f["cumulative_stack_bytes"] = int(im.group(1))
        elif body.startswith("Compile time"):
            continue
        # Module-level lines ("N bytes gmem, N bytes cmem[3]") belong to no function.

    names = [key[0] for key in order]
    demangled = demangle(names)
    results = []
    for key, pretty in zip(order, demangled):
        f = found[key]
        f["constant_bytes"] = sum(f["constant_banks"].values())
        f["notes"] = [w for w in warnings if re.search(rf"(?<![\w$.]){re.escape(key[0])}(?![\w$.])", w)]
        results.append(KernelResources(demangled=pretty, **f))
    return sorted(results, key=lambda r: not r.is_kernel)  # stable: report order within each group


_ERROR_LINE = re.compile(r"\berror\b|\bfatal\b", re.I)


def _first_error(text: str) -> str:
    for line in text.splitlines():
        if _ERROR_LINE.search(line) and not re.match(r"^\s*\d+ errors? detected", line):
            return " ".join(line.split())[:300]
    return ""


def kernel_resources(
    unit_source: str,
    *,
    arch: str,
    toolchain: Toolchain | None = None,
    limits: Limits | None = None,
    extra_flags: Sequence[str] = (),
) -> list[KernelResources]:
    """Compile one CUDA translation unit (in the sandbox) and return ptxas's per-function report.

    Raises InputError (one line, with the first compiler error) when it does not compile."""
    toolchain = toolchain or find_toolchain()
    try:
        flags = ["-O3", *language_flags(toolchain, arch), *extra_flags, "-Xptxas", "-v",
                 "-diag-suppress", "177,550"]
    except ConfigError as exc:
        raise InputError(str(exc)) from exc
    limits = limits or Limits(wall_timeout_s=300, memory_bytes=8 << 30, max_processes=512)
    with private_workdir() as work:
        (work / "unit.cu").write_text(unit_source)
        shutil.chown(work / "unit.cu", user=work.stat().st_uid, group=work.stat().st_gid)
        include = stage_harness_header(work)  # a whole v2 program includes the harness header
        run = run_sandboxed([str(toolchain.nvcc), *flags, *include, "-c", "unit.cu", "-o", "unit.o"],
                            workdir=work, limits=limits)
    text = run.stdout + "\n" + run.stderr
    if not run.ok:
        detail = _first_error(text) or run.failure() or "failed"
        raise InputError(f"the translation unit does not compile for {arch}: {detail}")
    # The v2 harness header's own kernels (input fill, sampling, probes) are not the program's.
    return [k for k in parse_ptxas_report(text, arch=arch) if not k.name.startswith(HARNESS_KERNEL_PREFIX)]


# ---------------------------------------------------------------------------------------------------
# Per compute capability limits

_SOURCES = (
    "CUDA C++ Programming Guide, 'Technical Specifications per Compute Capability'; "
    "CUDA 13.0 include/cuda_occupancy.h (allocation units, sub-partitions, blocks per SM, "
    "shared-memory configurations, barriers); CCCL libcudacxx cuda/__device/arch_traits.h "
    "(threads, blocks, shared memory per SM, reserved and opt-in per block)"
)


class GpuLimits(BaseModel):
    """What the occupancy calculator needs to know about one compute capability."""

    arch: str  # "sm_90"
    compute_capability: str  # "9.0"
    warp_size: int = 32
    max_threads_per_block: int = 1024
    max_threads_per_sm: int
    max_warps_per_sm: int
    max_blocks_per_sm: int
    registers_per_sm: int = 65536
    max_registers_per_block: int = 65536
    max_registers_per_thread: int = 255
    register_allocation_unit: int = 256  # registers, allocated per warp
    register_allocation_granularity: Literal["warp"] = "warp"
    register_sub_partitions: int = 4  # registers are split among the SM's 4 sub-partitions
    shared_memory_per_sm: int  # bytes, largest configurable carveout
    shared_memory_configs: list[int]  # bytes, the carveouts the SM supports
    max_shared_memory_per_block: int = 48 * 1024  # without opt-in
    max_shared_memory_per_block_optin: int  # with cudaFuncAttributeMaxDynamicSharedMemorySize
    shared_memory_allocation_unit: int  # bytes
    reserved_shared_memory_per_block: int  # bytes the driver reserves per block (sm_80+: 1 KiB)
    block_barriers_per_sm: int | None = None  # sm_90+: named barriers per SM (occupancy limit)
    source: str = _SOURCES

    @property
    def major(self) -> int:
        return int(self.compute_capability.split(".")[0])


_KB = 1024
_VOLTA_CONFIGS = [0, 8, 16, 32, 64, 96]
_GA100_CONFIGS = [0, 8, 16, 32, 64, 100, 132, 164]
_GA10X_CONFIGS = [0, 8, 16, 32, 64, 100]
_HOPPER_CONFIGS = [0, 8, 16, 32, 64, 100, 132, 164, 196, 228]


def _row(arch: str, cc: str, threads: int, blocks: int, smem_kb: int, configs_kb: list[int],
         unit: int, reserved: int, barriers_per_block_slot: int | None) -> GpuLimits:
    return GpuLimits(
        arch=arch, compute_capability=cc, max_threads_per_sm=threads, max_warps_per_sm=threads // 32,
        max_blocks_per_sm=blocks, shared_memory_per_sm=smem_kb * _KB,
        shared_memory_configs=[c * _KB for c in configs_kb],
        max_shared_memory_per_block_optin=smem_kb * _KB - reserved,
        shared_memory_allocation_unit=unit, reserved_shared_memory_per_block=reserved,
        block_barriers_per_sm=None if barriers_per_block_slot is None else barriers_per_block_slot * blocks,
    )


GPU_LIMITS: dict[str, GpuLimits] = {
    r.arch: r
    for r in [
        #     arch      cc     thr/SM blk/SM smem/SM carveouts        unit reserved barriers
        _row("sm_70", "7.0", 2048, 32, 96, _VOLTA_CONFIGS, 256, 0, None),
        _row("sm_75", "7.5", 1024, 16, 64, [32, 64], 256, 0, None),
        _row("sm_80", "8.0", 2048, 32, 164, _GA100_CONFIGS, 128, 1024, None),
        _row("sm_86", "8.6", 1536, 16, 100, _GA10X_CONFIGS, 128, 1024, None),
        _row("sm_87", "8.7", 1536, 16, 164, _GA100_CONFIGS, 128, 1024, None),
        _row("sm_89", "8.9", 1536, 24, 100, _GA10X_CONFIGS, 128, 1024, None),
        _row("sm_90", "9.0", 2048, 32, 228, _HOPPER_CONFIGS, 128, 1024, 2),
        _row("sm_100", "10.0", 2048, 32, 228, _HOPPER_CONFIGS, 128, 1024, 2),
        _row("sm_120", "12.0", 1536, 24, 100, _GA10X_CONFIGS, 128, 1024, 1),
    ]
}

_ARCH = re.compile(r"^(?:sm_|compute_)?(\d{2,3})([af]?)$")


def gpu_limits(arch: str) -> GpuLimits:
    """Limits for `sm_90` (also `sm_90a`, `90`, `compute_90`, `9.0`)."""
    text = arch.strip().lower()
    if re.fullmatch(r"\d+\.\d", text):
        text = text.replace(".", "")
    m = _ARCH.match(text)
    limits = GPU_LIMITS.get(f"sm_{m.group(1)}") if m else None
    if limits is None:
        raise InputError(f"no occupancy limits for arch {arch!r}; known: {', '.join(GPU_LIMITS)}")
    return limits


# ---------------------------------------------------------------------------------------------------
# Occupancy

Factor = Literal["warps", "blocks", "registers", "shared memory", "barriers"]


class Occupancy(BaseModel):
    """Theoretical occupancy of one launch configuration on one SM."""

    arch: str
    block_size: int
    registers_per_thread: int
    shared_bytes_per_block: int  # static + dynamic, as the kernel asks
    barriers: int = 0
    warps_per_block: int
    registers_per_warp: int  # allocated: rounded up to the allocation unit
    registers_per_block: int
    shared_allocated_per_block: int  # + reserved, rounded up to the allocation unit
    shared_memory_config_bytes: int  # the carveout the shared-memory limit was computed with
    block_limits: dict[str, int]  # factor -> blocks per SM it allows (barriers: capped at blocks/SM)
    active_blocks_per_sm: int
    active_warps_per_sm: int
    active_threads_per_sm: int
    max_warps_per_sm: int
    theoretical_occupancy_pct: float
    limiting_factors: list[Factor]
    problem: str | None = None  # why no block fits, when none does

    @property
    def fits(self) -> bool:
        return self.active_blocks_per_sm > 0


def _round_up(x: int, unit: int) -> int:
    return -(-x // unit) * unit


def _align_carveout(size: int, limits: GpuLimits) -> int | None:
    """The smallest supported shared-memory configuration >= size (None: larger than any)."""
    return next((c for c in sorted(limits.shared_memory_configs) if c >= size), None)


def occupancy(
    res: KernelResources | tuple[int, int] | tuple[int, int, int],
    block_size: int,
    limits: GpuLimits,
    dynamic_shared_bytes: int = 0,
    *,
    shared_memory_config_bytes: int | None = None,
) -> Occupancy:
    """Theoretical occupancy for `res` ((registers, static shared bytes[, barriers]) or a ptxas
    report entry) launched with `block_size` threads and `dynamic_shared_bytes`.

    `shared_memory_config_bytes` is the L1/shared carveout the driver runs the kernel with (ncu's
    launch__shared_mem_config_size); default the largest, as the occupancy calculator assumes.
    It changes only the shared-memory block limit, and only when that is not already binding
    (the driver picks a carveout that does not lower occupancy)."""
    if isinstance(res, KernelResources):
        if res.registers is None:
            raise InputError(f"{res.demangled}: ptxas reported no register count (not a kernel?)")
        registers, static_shared, barriers = res.registers, res.static_shared_bytes, res.barriers
    else:
        if len(res) not in (2, 3):
            raise InputError("resources must be (registers, shared bytes) or (registers, shared bytes, barriers)")
        registers, static_shared = int(res[0]), int(res[1])
        barriers = int(res[2]) if len(res) == 3 else 0
    if isinstance(block_size, bool) or not isinstance(block_size, int) or not 1 <= block_size <= 1024:
        raise InputError(f"block size {block_size!r} is not a thread count in 1..1024")
    if registers < 0 or static_shared < 0 or dynamic_shared_bytes < 0 or barriers < 0:
        raise InputError("registers, shared memory and barriers cannot be negative")

    L = limits
    problems: list[str] = []
    warps_per_block = -(-block_size // L.warp_size)

    # warps
    limit_warps = L.max_warps_per_sm // warps_per_block if block_size <= L.max_threads_per_block else 0
    if block_size > L.max_threads_per_block:
        problems.append(f"{block_size} threads exceed {L.max_threads_per_block} per block")

    # registers
    regs_per_warp = _round_up(registers * L.warp_size, L.register_allocation_unit)
    regs_per_block = regs_per_warp * warps_per_block
    regs_assumed = regs_per_warp * _round_up(warps_per_block, L.register_sub_partitions)
    if registers > L.max_registers_per_thread:
        limit_regs = 0
        problems.append(f"{registers} registers per thread exceed {L.max_registers_per_thread}")
    elif regs_assumed > L.max_registers_per_block or regs_per_block > L.max_registers_per_block:
        limit_regs = 0
        problems.append(f"{registers} registers x {block_size} threads exceed {L.max_registers_per_block} "
                        "registers per block")
    elif regs_per_warp == 0:
        limit_regs = None  # uses none: no limit
    else:
        per_partition = (L.registers_per_sm // L.register_sub_partitions) // regs_per_warp
        limit_regs = per_partition * L.register_sub_partitions // warps_per_block

    # shared memory
    requested = static_shared + dynamic_shared_bytes
    smem_per_block = _round_up(requested + L.reserved_shared_memory_per_block, L.shared_memory_allocation_unit)
    preference = L.shared_memory_per_sm if shared_memory_config_bytes is None else shared_memory_config_bytes
    carveout = _align_carveout(preference, L)
    if carveout is None:
        raise InputError(f"shared memory configuration {preference} bytes exceeds {L.arch}'s "
                         f"{L.shared_memory_per_sm} bytes per SM")
    if requested > L.max_shared_memory_per_block_optin:
        limit_smem = 0
        problems.append(f"{requested} bytes of shared memory per block exceed {L.arch}'s "
                        f"{L.max_shared_memory_per_block_optin} (opt-in maximum)")
    else:
        if carveout < smem_per_block:  # the driver raises the carveout until one block fits
            carveout = _align_carveout(smem_per_block, L) or L.shared_memory_per_sm
        limit_smem = carveout // smem_per_block if smem_per_block else None

    limit_blocks = L.max_blocks_per_sm

    uncapped = {"warps": limit_warps, "blocks": limit_blocks, "registers": limit_regs, "shared memory": limit_smem}
    bounded = {k: v for k, v in uncapped.items() if v is not None}
    active = min(bounded.values())
    factors: list[Factor] = [k for k, v in bounded.items() if v == active]  # type: ignore[misc]

    limit_bars: int | None = None
    if L.block_barriers_per_sm is not None and barriers > 0:
        limit_bars = L.block_barriers_per_sm // barriers
        if limit_bars < active:
            active = limit_bars
            factors = []
        if limit_bars == active:
            factors.append("barriers")

    block_limits = {k: (v if v is not None else limit_blocks) for k, v in uncapped.items()}
    block_limits["barriers"] = min(limit_bars, limit_blocks) if limit_bars is not None else limit_blocks

    active_warps = active * warps_per_block
    return Occupancy(
        arch=L.arch, block_size=block_size, registers_per_thread=registers, shared_bytes_per_block=requested,
        barriers=barriers, warps_per_block=warps_per_block, registers_per_warp=regs_per_warp,
        registers_per_block=regs_per_block, shared_allocated_per_block=smem_per_block,
        shared_memory_config_bytes=carveout, block_limits=block_limits, active_blocks_per_sm=active,
        active_warps_per_sm=active_warps, active_threads_per_sm=min(active * block_size, L.max_threads_per_sm),
        max_warps_per_sm=L.max_warps_per_sm,
        theoretical_occupancy_pct=100.0 * active_warps / L.max_warps_per_sm,
        limiting_factors=factors, problem="; ".join(problems) or None,
    )


def occupancy_table(
    res: KernelResources | tuple[int, int] | tuple[int, int, int],
    limits: GpuLimits,
    block_sizes: Iterable[int] = (64, 128, 256, 512, 1024),
    dynamic_shared_bytes: int = 0,
    *,
    shared_memory_config_bytes: int | None = None,
) -> list[Occupancy]:
    """`occupancy` for each block size: for when the launch configuration is unknown."""
    return [occupancy(res, b, limits, dynamic_shared_bytes, shared_memory_config_bytes=shared_memory_config_bytes)
            for b in block_sizes]


class KernelUsage(BaseModel):
    kernel: KernelResources
    occupancy: list[Occupancy]  # for block_size, or for 64..1024 threads when none was given


class ResourceUsage(BaseModel):
    """ptxas's resource report per kernel and the theoretical occupancy it allows."""

    arch: str
    block_size: int | None
    kernels: list[KernelUsage]
    device_functions: list[KernelResources] = []  # non-inlined __device__ functions
    limits: GpuLimits


def resource_usage(source: str, *, arch: str, block_size: int | None = None) -> ResourceUsage:
    """Every kernel's registers, shared memory, stack and spills (ptxas) and the occupancy they
    allow on ARCH, at BLOCK_SIZE threads or for each block size: `kernelloop resources` and the
    MCP resource_usage tool both render this."""
    limits = gpu_limits(arch)  # an unknown arch fails before compiling
    found = kernel_resources(source, arch=arch)
    kernels = [KernelUsage(kernel=k, occupancy=[occupancy(k, block_size, limits)] if block_size
                           else occupancy_table(k, limits)) for k in found if k.is_kernel]
    return ResourceUsage(arch=arch, block_size=block_size, kernels=kernels,
                         device_functions=[k for k in found if not k.is_kernel], limits=limits)
