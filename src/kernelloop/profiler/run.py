"""Profile one launch of a program's hot kernel with Nsight Compute and diagnose it.

1. Build the program as it is (nvcc, sandboxed, cached).
2. Find the hot kernel: one run under the CUPTI tracer gives every kernel launch with its
   duration and launch configuration, so ncu profiles one launch of one kernel, not every launch.
3. Choose the launch that takes the time: a kernel launched with several configurations per
   call (a multi-pass reduction: a big pass, then a tiny one over the partial results) is
   profiled on the configuration with the most GPU time, at its second occurrence (the first is
   a warm-up); never on a short tail launch.
4. ncu --set full (or the fast set: exactly the sections the rules read) --clock-control none
   on that launch, one launch only; the .ncu-rep is kept.
5. Read the report with NVIDIA's ncu_report and diagnose it.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import time
from collections import defaultdict
from datetime import datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from ..config import Settings
from ..errors import EnvironmentProblem, InputError
from ..program.split import check_program
from ..tools.cupti import CuptiTrace, CuptiUnavailable, build_injection_library
from ..tools.gpu import detect_gpus
from ..tools.ncu_report_reader import read_report
from ..tools.nvcc import HARNESS_KERNEL_PREFIX, build_whole_program, compiler_error, find_toolchain
from ..tools.resources import KernelResources, Occupancy, gpu_limits, kernel_resources, occupancy
from ..tools.sandbox import Limits, private_workdir, run_sandboxed
from ..tools.toolkit import require_ncu
from ..verify.program_run import run_program
from .diagnosis import HEADLINE_KEYS, Diagnosis, diagnose
from .rules import rule_sections, sections_for

SectionSet = Literal["full", "fast"]
# Every section a rule, the key metrics and the roofline read (rules.METRIC_SECTION), plus the one
# NVIDIA's pipe-utilization rules read: what the full set would judge, at a fraction of its replay passes.
FAST_SECTIONS: tuple[str, ...] = tuple(sorted(
    rule_sections() | sections_for(HEADLINE_KEYS) | {"SpeedOfLight_RooflineChart", "ComputeWorkloadAnalysis"}))
PERMISSION_FIX = ("ncu has no permission to read the GPU performance counters (ERR_NVGPUCTRPERM): run as root, or set "
                  "NVreg_RestrictProfilingToAdminUsers=0 in /etc/modprobe.d (takes effect after a reboot); containers need "
                  "CAP_SYS_ADMIN; vGPU profiles strip counters from guests. `kernelloop doctor` checks this; "
                  "`kernelloop profile --report FILE.ncu-rep` diagnoses an existing report without a GPU")


class KernelLaunches(BaseModel):
    name: str
    launches: int
    total_ms: float
    profile_launch: int = -1  # which of its launches ncu profiles (0-based, in launch order); -1: unknown
    launch_ms: float | None = None  # that launch's GPU time in the traced run
    grid: tuple[int, int, int] | None = None  # that launch's configuration
    block: tuple[int, int, int] | None = None
    configurations: int = 1  # distinct launch configurations of this kernel


class ProfileTimings(BaseModel):
    compile_s: float = 0.0
    locate_s: float = 0.0  # the traced run that finds the hot kernel
    ncu_s: float = 0.0
    parse_s: float = 0.0
    total_s: float = 0.0


class ProfileResult(BaseModel):
    diagnosis: Diagnosis
    report_path: Path
    kernel: str
    kernels: list[KernelLaunches] = []
    launch: KernelLaunches | None = None  # the kernel and launch ncu profiled (None: no CUPTI trace to choose by)
    ncu_command: list[str] = []
    section_set: str
    clock_control: str
    resources: KernelResources | None = None  # ptxas's report for the profiled kernel
    occupancy: Occupancy | None = None  # theoretical, from those resources and the launch's block size
    timings: ProfileTimings


def diagnose_report(report: Path, *, kernel: str | None = None) -> Diagnosis:
    """Diagnose an existing .ncu-rep: needs no GPU."""
    return diagnose(read_report(report, kernel=kernel), report_path=str(report))


def _kernels_by_time(binary: Path, settings: Settings) -> list[KernelLaunches]:
    try:
        lib = build_injection_library(settings.cache_dir / "cupti")
    except CuptiUnavailable:
        return []
    run = run_program(binary, seed=20260528, limits=Limits(wall_timeout_s=settings.verify.run_timeout_s),
                      cupti_library=lib, want_dump=False)
    if run.trace is None:
        return []
    return kernels_from_trace(run.trace)


def kernels_from_trace(trace: CuptiTrace) -> list[KernelLaunches]:
    """Every kernel of a traced run, most GPU time first, each with the launch ncu should profile.

    ncu counts a kernel's launches in the order the program made them (`--launch-skip N` skips N
    of them), so launches are put in that order (CUPTI's correlation id). The launch chosen is of
    the configuration (grid, block, dynamic shared memory) with the most GPU time in all, at its
    second occurrence when it recurs (the first is a warm-up), else its first."""
    launches: dict[str, list] = defaultdict(list)
    for k in sorted(trace.kernels, key=lambda k: (k.corr, k.start)):
        if (k.name or "").startswith(HARNESS_KERNEL_PREFIX):
            continue  # the v2 harness's own work (input fill, sampling, probes) is never the hot kernel
        launches[k.name or "?"].append(k)
    out = []
    for name, records in launches.items():
        by_config: dict[tuple, list[int]] = defaultdict(list)  # config -> indices into records
        for i, k in enumerate(records):
            by_config[(k.grid, k.block, k.dyn_smem)].append(i)
        heaviest = max(by_config.values(), key=lambda idx: (sum(records[i].duration_ns for i in idx), -idx[0]))
        chosen = heaviest[1] if len(heaviest) > 1 else heaviest[0]
        out.append(KernelLaunches(
            name=name, launches=len(records), total_ms=sum(k.duration_ns for k in records) / 1e6,
            profile_launch=chosen, launch_ms=records[chosen].duration_ns / 1e6, grid=records[chosen].grid,
            block=records[chosen].block, configurations=len(by_config)))
    return sorted(out, key=lambda k: -k.total_ms)


def _pick_kernel(kernels: list[KernelLaunches], wanted: str | None) -> KernelLaunches | None:
    if wanted is None:
        return kernels[0] if kernels else None
    try:
        pattern = re.compile(wanted)
    except re.error:
        pattern = re.compile(re.escape(wanted))
    matches = [k for k in kernels if pattern.search(k.name)]
    if not matches and kernels:
        names = ", ".join(k.name for k in kernels[:8])
        raise InputError(f"no kernel matching {wanted!r}; the program launches: {names}")
    return matches[0] if matches else None


def ncu_command(ncu: Path, *, chosen: KernelLaunches | None, kernel: str | None, section_set: SectionSet,
                clock_control: str) -> list[str]:
    """The ncu invocation for one launch of one kernel (the program path is appended by the caller)."""
    sections = ["--set", "full"] if section_set == "full" else [a for s in FAST_SECTIONS for a in ("--section", s)]
    if chosen is not None:  # exact mangled name, and the launch that takes the time (kernels_from_trace)
        skip = chosen.profile_launch if chosen.profile_launch >= 0 else (1 if chosen.launches > 1 else 0)
        target = ["--kernel-name-base", "mangled", "-k", f"regex:^{re.escape(chosen.name)}$",
                  "--launch-skip", str(skip)]
    elif kernel is not None:
        target = ["-k", f"regex:{kernel}", "--launch-skip", "0"]
    else:
        target = ["--launch-skip", "1"]
    return [str(ncu), *sections, "--clock-control", clock_control, *target, "--launch-count", "1",
            "-f", "-o", "profile"]


def profile_file(path: Path, settings: Settings, *, kernel: str | None = None, section_set: SectionSet = "full",
                 clock_control: Literal["none", "base"] = "none", output_dir: Path | None = None,
                 timeout_s: float = 600.0) -> ProfileResult:
    started = time.monotonic()
    timings = ProfileTimings()
    source, _ = check_program(path)  # the contract first: one line, before the tools and the GPU
    ncu = require_ncu()
    gpus = detect_gpus()
    if not gpus:
        raise EnvironmentProblem("profile needs a CUDA GPU (`--report FILE.ncu-rep` diagnoses an existing report "
                                 "without one); run `kernelloop doctor`")
    arch = settings.verify.arch or gpus[0].arch
    t = time.monotonic()
    build = build_whole_program(source, arch=arch, cache_dir=settings.cache_dir, toolchain=find_toolchain(build_flags=settings.verify.build_flags))
    timings.compile_s = time.monotonic() - t
    if not build.ok or build.binary is None:
        raise InputError(f"{path}: does not compile: {compiler_error(build.log)}")

    t = time.monotonic()
    kernels = _kernels_by_time(build.binary, settings)
    chosen = _pick_kernel(kernels, kernel)
    timings.locate_s = time.monotonic() - t

    argv = ncu_command(ncu, chosen=chosen, kernel=kernel, section_set=section_set, clock_control=clock_control)
    t = time.monotonic()
    with private_workdir() as work:
        prog = work / "program"
        shutil.copy2(build.binary, prog)
        run = run_sandboxed([*argv, str(prog)], workdir=work, drop_privileges=False,
                            env={"KERNELLOOP_SEED": "20260528"},
                            limits=Limits(wall_timeout_s=timeout_s, memory_bytes=None, max_processes=1024,
                                          file_size_bytes=4 << 30))
        timings.ncu_s = time.monotonic() - t
        text = run.stdout + run.stderr
        if "ERR_NVGPUCTRPERM" in text or "permission" in text.lower() and "counter" in text.lower():
            raise EnvironmentProblem(PERMISSION_FIX)
        report = work / "profile.ncu-rep"
        if not report.exists():
            if "No kernels were profiled" in text:
                raise InputError(f"{path}: ncu profiled no kernel" + (f" matching {kernel!r}" if kernel else ""))
            first = next((ln for ln in text.splitlines() if "ERROR" in ln), run.failure() or text.strip()[-200:])
            raise EnvironmentProblem(f"ncu failed: {first.strip()}")
        kept = keep_report(report, output_dir or settings.data_dir / "profiles", path.stem)
    t = time.monotonic()
    profile = read_report(kept, kernel=f"^{re.escape(chosen.name)}$" if chosen else None)
    diagnosis = diagnose(profile, report_path=str(kept))
    timings.parse_s = time.monotonic() - t
    resources, occ = _resources_for(source, arch, profile.mangled_name or profile.kernel_name, profile.block)
    timings.total_s = time.monotonic() - started
    return ProfileResult(diagnosis=diagnosis, report_path=kept, kernel=profile.kernel_name, kernels=kernels,
                         launch=chosen, ncu_command=[*argv, "program"], section_set=section_set, clock_control=clock_control,
                         resources=resources, occupancy=occ, timings=timings)


def keep_report(report: Path, out_dir: Path, stem: str) -> Path:
    """Copy REPORT into OUT_DIR under a name no other profile takes: the folder is shared by every
    profile of this user, and jobs of one machine (an engine's workers, one per GPU) profile programs
    of the same name in the same second (two `baseline` reports: one job read the other's and failed,
    on two H200 through --engine ray). Created exclusively, then read back by this profile alone."""
    out_dir.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    fd, name = tempfile.mkstemp(prefix=f"{stem}-{stamp}-", suffix=".ncu-rep", dir=out_dir)
    os.close(fd)
    shutil.copyfile(report, name)
    return Path(name)


def _resources_for(source: str, arch: str, kernel: str, block: tuple[int, int, int] | None
                   ) -> tuple[KernelResources | None, Occupancy | None]:
    """ptxas's resource report for one kernel and its theoretical occupancy (best effort)."""
    try:
        found = [r for r in kernel_resources(source, arch=arch) if r.is_kernel and r.name == kernel]
    except InputError:
        return None, None
    if not found:
        return None, None
    res = found[0]
    occ = occupancy(res, block[0] * block[1] * block[2], gpu_limits(arch)) if block else None
    return res, occ
