"""tools.resources: ptxas resource usage (real nvcc) and occupancy arithmetic (checked against ncu)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelloop.errors import InputError
from kernelloop.program.split import candidate_editable_part, split_program
from kernelloop.tools.resources import (
    GPU_LIMITS,
    KernelResources,
    gpu_limits,
    kernel_resources,
    occupancy,
    occupancy_table,
    parse_ptxas_report,
)

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"
SM90 = GPU_LIMITS["sm_90"]


# ---------------------------------------------------------------------------------------------------
# ptxas report parsing (no compiler)

# CUDA 13.0, sm_86: cmem banks on the "Used" line, module-level gmem/cmem, a device function.
REPORT_13 = """\
ptxas warning : Value of threads per SM for entry _Z2spPfPKfi is out of range. .minnctapersm will be ignored
ptxas info    : 0 bytes gmem, 256 bytes cmem[3]
ptxas info    : Compiling entry function '_Z2spPfPKfi' for 'sm_86'
ptxas info    : Function properties for _Z2spPfPKfi
    656 bytes stack frame, 652 bytes spill stores, 2388 bytes spill loads
ptxas info    : Used 64 registers, used 0 barriers, 656 bytes cumulative stack size, 372 bytes cmem[0]
ptxas info    : Compile time = 142.971 ms
ptxas info    : Compiling entry function '_Z2tkILi128EEvPfi' for 'sm_86'
ptxas info    : Function properties for _Z2tkILi128EEvPfi
    128 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 34 registers, used 1 barriers, 128 bytes cumulative stack size, 512 bytes smem, 364 bytes cmem[0]
ptxas info    : Compile time = 5.780 ms
ptxas info    : Function properties for _Z6helperfi
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
"""

# Older ptxas (CUDA 10/11 style): no barriers item, lmem, several cmem banks.
REPORT_OLD = """\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function '_Z6kernelPf' for 'sm_70'
ptxas info    : Function properties for _Z6kernelPf
    8 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads
ptxas info    : Used 10 registers, 8 bytes lmem, 368 bytes cmem[0], 4 bytes cmem[2]
"""


def test_parse_cuda13_report():
    entries = parse_ptxas_report(REPORT_13, arch="sm_86")
    assert [(e.name, e.is_kernel) for e in entries] == [
        ("_Z2spPfPKfi", True), ("_Z2tkILi128EEvPfi", True), ("_Z6helperfi", False)]
    sp, tk, helper = entries
    assert (sp.registers, sp.stack_frame_bytes, sp.spill_store_bytes, sp.spill_load_bytes) == (64, 656, 652, 2388)
    assert sp.cumulative_stack_bytes == 656 and sp.constant_bytes == 372 and sp.constant_banks == {0: 372}
    assert sp.spills and sp.notes and "out of range" in sp.notes[0]
    assert (tk.registers, tk.barriers, tk.static_shared_bytes, tk.constant_bytes) == (34, 1, 512, 364)
    assert tk.demangled == "void tk<128>(float*, int)" and tk.arch == "sm_86"
    assert helper.registers is None and helper.demangled == "helper(float, int)" and not helper.uses_local_memory


def test_parse_older_report():
    (k,) = parse_ptxas_report(REPORT_OLD)
    assert k.is_kernel and k.arch == "sm_70" and k.registers == 10 and k.barriers == 0
    assert k.local_bytes == 8 and k.constant_banks == {0: 368, 2: 4} and k.constant_bytes == 372
    assert (k.stack_frame_bytes, k.spill_store_bytes, k.spill_load_bytes) == (8, 4, 4)


def test_parse_empty_report():
    assert parse_ptxas_report("") == []


# ---------------------------------------------------------------------------------------------------
# Real compiles (nvcc, in the sandbox)

def _matmul_split():
    return split_program((ROOT / "kernels" / "naive_matmul.cu").read_text(), "naive_matmul.cu")


@pytest.mark.nvcc
def test_naive_matmul_resources():
    entries = kernel_resources(_matmul_split().editable_unit(), arch="sm_90")
    kernels = [e for e in entries if e.is_kernel]
    assert len(kernels) == 1
    (k,) = kernels
    assert k.name == "_Z19naive_matmul_kernelPKfS0_Pfi"
    assert k.demangled.startswith("naive_matmul_kernel(")
    assert k.arch == "sm_90" and k.registers and k.registers > 0
    assert not k.spills and k.static_shared_bytes == 0
    occ = occupancy(k, 256, SM90)  # the harness launches 16x16 blocks
    assert occ.theoretical_occupancy_pct == 100.0


@pytest.mark.nvcc
def test_tiled32_static_shared_memory():
    split = _matmul_split()
    editable, _ = candidate_editable_part((ROOT / "src" / "kernelloop" / "exemplars" / "matmul_smem_tiling.cu").read_text(), split)
    (k,) = [e for e in kernel_resources(split.editable_unit(editable), arch="sm_90") if e.is_kernel]
    assert k.demangled.startswith("tiled_matmul_kernel(")
    assert k.static_shared_bytes == 2 * 32 * 32 * 4 == 8192
    assert k.barriers >= 1


SPILLER = r"""
__global__ void __launch_bounds__(1024, 2) spiller(float* out, const float* in, const int* idx, int n) {
  float v[96];
#pragma unroll
  for (int k = 0; k < 96; ++k) v[k] = in[k * n + threadIdx.x];
  float acc = 0.0f;
#pragma unroll
  for (int k = 0; k < 96; ++k)
#pragma unroll
    for (int j = 0; j < 96; j += 7) acc += v[k] * v[(k + j) % 96] - v[j];
  float local[256];
  for (int k = 0; k < 256; ++k) local[k] = in[k + threadIdx.x] * acc;
  out[threadIdx.x] = acc + local[idx[threadIdx.x] & 255];
}

__device__ __noinline__ float helper(const float* p, int i) { return p[i] * 2.0f; }
__global__ void calls_helper(float* out, const float* in) { out[threadIdx.x] = helper(in, threadIdx.x); }
"""


@pytest.mark.nvcc
def test_register_pressure_spills():
    entries = {e.demangled.split("(")[0]: e for e in kernel_resources(SPILLER, arch="sm_90")}
    sp = entries["spiller"]
    assert sp.is_kernel
    assert sp.registers is not None and sp.registers <= 32  # 65536 / (1024 x 2)
    assert sp.stack_frame_bytes > 0 and sp.spill_store_bytes > 0 and sp.spill_load_bytes > 0
    assert sp.uses_local_memory and sp.spills
    assert entries["calls_helper"].is_kernel
    assert not entries["helper"].is_kernel and entries["helper"].registers is None


@pytest.mark.nvcc
def test_compile_error_is_one_line_input_error():
    with pytest.raises(InputError) as info:
        kernel_resources("__global__ void k(float* o) { o[0] = not_declared; }\n", arch="sm_90")
    message = str(info.value)
    assert "\n" not in message
    assert "sm_90" in message and "error" in message and "not_declared" in message


@pytest.mark.nvcc
def test_ptxas_error_is_input_error():
    too_big = "__global__ void k(float* o) { __shared__ float s[60000]; s[threadIdx.x] = 1; o[0] = s[1]; }\n"
    with pytest.raises(InputError, match="too much shared data"):
        kernel_resources(too_big, arch="sm_90")


def test_bad_arch_for_compile_is_input_error():
    with pytest.raises(InputError):
        kernel_resources("__global__ void k() {}\n", arch="hopper")


# ---------------------------------------------------------------------------------------------------
# Limits table

def test_gpu_limits_aliases_and_unknown():
    assert gpu_limits("sm_90a") is SM90 and gpu_limits("9.0") is SM90 and gpu_limits("compute_90") is SM90
    with pytest.raises(InputError) as info:
        gpu_limits("sm_61")
    assert "sm_90" in str(info.value) and "sm_120" in str(info.value)
    with pytest.raises(InputError):
        gpu_limits("volta")


@pytest.mark.parametrize("arch", sorted(GPU_LIMITS))
def test_gpu_limits_consistent(arch):
    L = GPU_LIMITS[arch]
    assert L.max_warps_per_sm * L.warp_size == L.max_threads_per_sm
    assert L.shared_memory_per_sm == max(L.shared_memory_configs)
    assert L.max_shared_memory_per_block_optin == L.shared_memory_per_sm - L.reserved_shared_memory_per_block
    assert L.reserved_shared_memory_per_block == (1024 if L.major >= 8 else 0)
    assert L.shared_memory_allocation_unit == (128 if L.major >= 8 else 256)


def test_documented_limits():
    assert (SM90.max_threads_per_sm, SM90.max_warps_per_sm, SM90.max_blocks_per_sm) == (2048, 64, 32)
    assert (SM90.registers_per_sm, SM90.max_registers_per_thread) == (65536, 255)
    # What the H200 itself reported (device__attribute_* in the ncu fixtures).
    assert SM90.shared_memory_per_sm == 233472 and SM90.max_shared_memory_per_block_optin == 232448
    sm86 = gpu_limits("sm_86")
    assert (sm86.max_threads_per_sm, sm86.max_warps_per_sm, sm86.max_blocks_per_sm) == (1536, 48, 16)
    assert (sm86.shared_memory_per_sm, sm86.max_shared_memory_per_block_optin) == (100 * 1024, 99 * 1024)


# ---------------------------------------------------------------------------------------------------
# Occupancy arithmetic, hand-computed

def _occ(regs, smem, block, limits=SM90, dyn=0, **kw):
    return occupancy((regs, smem), block, limits, dyn, **kw)


def test_reference_case_32_registers_256_threads():
    o = _occ(32, 0, 256)
    assert (o.active_blocks_per_sm, o.active_warps_per_sm, o.theoretical_occupancy_pct) == (8, 64, 100.0)
    assert o.limiting_factors == ["warps", "registers"]
    assert o.block_limits["warps"] == 8 and o.block_limits["registers"] == 8 and o.block_limits["blocks"] == 32
    assert o.shared_allocated_per_block == 1024  # the reserved KiB


def test_register_threshold():
    # 64 x 32 = 2048 registers a warp; 16384 per sub-partition -> 8 warps each, 32 a SM -> 4 blocks of 8 warps.
    assert _occ(64, 0, 256).active_blocks_per_sm == 4
    o = _occ(65, 0, 256)  # 2080 -> 2304 a warp; 7 warps a sub-partition, 28 a SM -> 3 blocks
    assert (o.registers_per_warp, o.active_blocks_per_sm, o.limiting_factors) == (2304, 3, ["registers"])
    assert o.theoretical_occupancy_pct == 37.5
    # Allocation unit: 33..40 registers all take 1280 a warp.
    assert _occ(33, 0, 256).registers_per_warp == _occ(40, 0, 256).registers_per_warp == 1280
    # Sub-partitions: 40 registers, 3-warp blocks: 12 warps a partition -> 48 -> 16 blocks (not 65536/1280=51 -> 17).
    assert _occ(40, 0, 96).block_limits["registers"] == 16
    # Too many for one block: 1024 threads x 65 registers > 65536.
    o = _occ(65, 0, 1024)
    assert o.active_blocks_per_sm == 0 and not o.fits and "registers" in o.problem
    assert _occ(64, 0, 1024).active_blocks_per_sm == 1
    assert _occ(256, 0, 32).active_blocks_per_sm == 0  # over 255 registers a thread


def test_shared_memory_threshold():
    o = _occ(16, 48 * 1024, 128)  # 48 KiB + 1 KiB reserved = 50176 a block; 233472 // 50176 = 4
    assert (o.shared_allocated_per_block, o.active_blocks_per_sm, o.limiting_factors) == (50176, 4, ["shared memory"])
    # Edge: 233472 / 5 = 46694.4 -> at most 46592 allocated (a multiple of 128) for 5 blocks.
    assert _occ(16, 46592 - 1024, 128).active_blocks_per_sm == 5
    assert _occ(16, 46592 - 1024 + 1, 128).active_blocks_per_sm == 4  # rounds up to 46720
    # Dynamic shared memory counts the same as static.
    assert _occ(16, 0, 128, dyn=48 * 1024).active_blocks_per_sm == 4
    # Opt-in maximum: 227 KiB fits one block, one byte more fits none.
    assert _occ(16, 227 * 1024, 128).active_blocks_per_sm == 1
    o = _occ(16, 227 * 1024 + 1, 128)
    assert o.active_blocks_per_sm == 0 and "shared memory" in o.problem and o.limiting_factors == ["shared memory"]


def test_warps_and_blocks_thresholds():
    o = _occ(32, 0, 1024)
    assert (o.active_blocks_per_sm, o.active_warps_per_sm) == (2, 64)
    assert "warps" in o.limiting_factors
    o = _occ(16, 0, 64)  # 2 warps a block: warps allow 32, blocks 32, registers 64
    assert o.active_blocks_per_sm == 32 and o.limiting_factors == ["warps", "blocks"]
    o = _occ(16, 0, 32)  # 1 warp a block: the 32-block limit leaves half the warp slots empty
    assert (o.active_blocks_per_sm, o.theoretical_occupancy_pct, o.limiting_factors) == (32, 50.0, ["blocks"])
    o = _occ(16, 0, 33)  # partial warps count as whole ones
    assert o.warps_per_block == 2 and o.active_warps_per_sm == 64
    o = _occ(32, 0, 768)  # 24 warps: 64 // 24 = 2 blocks, 48 warps
    assert (o.active_blocks_per_sm, o.theoretical_occupancy_pct) == (2, 75.0)


def test_other_architectures():
    sm86 = gpu_limits("sm_86")
    o = _occ(32, 0, 256, sm86)  # 48 warps -> 6 blocks (registers would allow 8)
    assert (o.active_blocks_per_sm, o.theoretical_occupancy_pct, o.limiting_factors) == (6, 100.0, ["warps"])
    assert _occ(16, 0, 64, sm86).limiting_factors == ["blocks"]  # 16 blocks x 2 warps = 32 of 48
    # 99 KiB + 1 KiB reserved fill sm_86's 100 KiB exactly.
    assert _occ(16, 99 * 1024, 128, sm86).active_blocks_per_sm == 1
    assert _occ(16, 99 * 1024 + 1, 128, sm86).active_blocks_per_sm == 0
    sm75 = gpu_limits("sm_75")  # no reserved memory, 256-byte unit, 32 warps
    o = _occ(32, 100, 256, sm75)
    assert o.shared_allocated_per_block == 256 and o.active_blocks_per_sm == 4
    o = _occ(32, 0, 256, gpu_limits("sm_70"))  # no shared memory at all: not a limit
    assert "shared memory" not in o.limiting_factors and o.active_blocks_per_sm == 8


def test_barrier_limit_on_hopper():
    # sm_90: 64 block barriers a SM; 16 barriers a block leave room for 4 blocks.
    o = occupancy((16, 0, 16), 64, SM90)
    assert o.active_blocks_per_sm == 4 and o.limiting_factors == ["barriers"] and o.block_limits["barriers"] == 4
    assert occupancy((16, 0, 1), 64, SM90).block_limits["barriers"] == 32  # capped at blocks/SM, as ncu shows


def test_shared_memory_carveout():
    # A carveout only changes the shared-memory limit; too small a one is raised to fit a block.
    o = _occ(16, 0, 256, shared_memory_config_bytes=32 * 1024)
    assert o.shared_memory_config_bytes == 32768 and o.block_limits["shared memory"] == 32
    o = _occ(16, 40 * 1024, 256, shared_memory_config_bytes=20 * 1024)  # 20 KiB -> 32 KiB, then 64 KiB
    assert o.shared_memory_config_bytes == 65536 and o.block_limits["shared memory"] == 1
    with pytest.raises(InputError):
        _occ(16, 0, 256, shared_memory_config_bytes=300 * 1024)


def test_occupancy_validates_input():
    for bad in (0, 1025, -1):
        with pytest.raises(InputError):
            _occ(32, 0, bad)
    with pytest.raises(InputError):
        _occ(32, -1, 128)
    device_function = KernelResources(name="_Z1fv", demangled="f()", is_kernel=False, arch="sm_90")
    with pytest.raises(InputError):
        occupancy(device_function, 128, SM90)


def test_occupancy_table():
    rows = occupancy_table((64, 0), SM90)
    assert [r.block_size for r in rows] == [64, 128, 256, 512, 1024]
    assert [r.theoretical_occupancy_pct for r in rows] == [50.0] * 5  # 64 registers: 32 warps whatever the shape
    assert [r.active_blocks_per_sm for r in rows] == [16, 8, 4, 2, 1]
    rows = occupancy_table((32, 0), SM90, block_sizes=(32, 96))
    assert [r.theoretical_occupancy_pct for r in rows] == [50.0, 98.4375]  # 32 blocks x 1 warp; 21 x 3 warps


# ---------------------------------------------------------------------------------------------------
# Agreement with Nsight Compute (H200, sm_90) on the bundled kernels

NCU_SUITE = sorted((FIXTURES / "ncu" / "suite").glob("*.ncu-rep"))


@pytest.mark.parametrize("report", NCU_SUITE, ids=[p.stem for p in NCU_SUITE])
def test_agrees_with_ncu(report):
    from kernelloop.tools.ncu_report_reader import NcuUnavailable, headline, read_report

    try:
        profile = read_report(report)
    except NcuUnavailable as exc:
        pytest.skip(str(exc))
    h = headline(profile)
    regs = int(h["registers_per_thread"])
    static = int(h["shared_mem_static_per_block_bytes"] or 0)
    dynamic = int(h["shared_mem_dynamic_per_block_bytes"] or 0)
    barriers = int(profile.value("launch__barrier_count") or 0)
    config = int(profile.value("launch__shared_mem_config_size"))
    block = int(h["block_size"])
    o = occupancy((regs, static, barriers), block, SM90, dynamic, shared_memory_config_bytes=config)
    assert o.theoretical_occupancy_pct == pytest.approx(h["theoretical_occupancy_pct"])
    assert o.block_limits["registers"] == h["occupancy_limit_registers"]
    assert o.block_limits["shared memory"] == h["occupancy_limit_shared_mem"]
    assert o.block_limits["warps"] == h["occupancy_limit_warps"]
    assert o.block_limits["blocks"] == h["occupancy_limit_blocks"]
    assert o.block_limits["barriers"] == profile.value("launch__occupancy_limit_barriers")
    assert o.shared_allocated_per_block == h["shared_mem_allocated_per_block_bytes"]
    # Without the driver's carveout (the calculator's default, the largest) only the shared-memory
    # block limit changes, never the occupancy.
    default = occupancy((regs, static, barriers), block, SM90, dynamic)
    assert default.theoretical_occupancy_pct == o.theoretical_occupancy_pct
    assert default.block_limits["shared memory"] >= o.block_limits["shared memory"]
