"""What the verify gate returns: one Verdict with every gate's evidence."""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum
from typing import Literal

from pydantic import BaseModel

from ..config import VerifySettings
from ..tools.gpu import GpuInfo
from ..tools.sandbox import IsolationReport
from .audit import AuditReport
from .outputs import Comparison
from .policy import Violation
from .records import Manifest
from .regression import RegressionDecision
from .stats import SpeedupDecision


class Reason(str, Enum):
    """Why a candidate was rejected. Several can apply; all are reported."""

    policy = "policy"
    reduced_precision = "reduced_precision"  # half/bf16/tf32/int8 math or an fp64->fp32 downgrade the baseline lacks
    compile = "compile"
    run_failed = "run_failed"
    timeout = "timeout"
    output_flood = "output_flood"
    correctness = "correctness"
    memcheck = "memcheck"
    no_gpu_work = "no_gpu_work"
    inconsistent_work = "inconsistent_work"
    timer_escape = "timer_escape"
    kernel_ms_mismatch = "kernel_ms_mismatch"
    timing_unverified = "timing_unverified"
    reframed_timing = "reframed_timing"  # timing windows added, dropped or moved by the candidate
    not_faster = "not_faster"
    inconclusive = "inconclusive"
    slower = "slower"  # `bench check`: slower than the recorded reference beyond the regression threshold
    impossible_speed = "impossible_speed"  # faster than the bytes and FLOPs one call must move allow
    state_between_calls = "state_between_calls"  # remembers something from call to call (a call counter)
    runtime_error = "runtime_error"  # a CUDA runtime call failed in the candidate's runs only (its outputs unwritten)


GateName = Literal["policy", "compile", "correctness", "state", "memcheck", "independent timing", "speedup", "regression",
                   "other sizes", "wider values", "other magnitudes", "caller layouts", "speed of light", "process wall"]


class GateResult(BaseModel):
    gate: GateName
    status: Literal["pass", "fail", "skipped", "info"]
    baseline: str = ""
    candidate: str = ""
    detail: str = ""


class BuildSummary(BaseModel):
    ok: bool
    cached: bool
    seconds: float
    stage: str
    log_excerpt: str = ""
    flags: list[str] = []


class SeedCheck(BaseModel):
    seed: int
    comparison: Comparison
    phase: Literal["correctness", "size", "nonfinite", "wide_ints", "scaled", "timing", "drift"]
    secret: str = ""  # hex: a v2 harness's stream secret for this experiment (revealed after the run)
    size_index: int = 0  # a v2 harness's problem size (0: the default)
    size_draw: int | None = None  # size_index -1: the draw behind the size (KERNELLOOP_SIZE_DRAW)
    # SHA-256 of what each program produced on this seed (stdout, then every dumped array):
    # the reference outputs a proof certificate names.
    baseline_sha256: str = ""
    candidate_sha256: str = ""


class Progress(BaseModel):
    """One step of a verification, as it happens (the CLI and the MCP servers render it)."""

    stage: str
    message: str


ProgressCallback = Callable[[Progress], None]


class Durations(BaseModel):
    compile_s: float = 0.0
    correctness_s: float = 0.0
    wide_integers_s: float = 0.0  # of correctness_s: the wider-integer experiment (guessed integer ranges)
    scaled_inputs_s: float = 0.0  # of correctness_s: the scaled-input experiment (verify/magnitudes.py)
    memcheck_s: float = 0.0
    timing_s: float = 0.0
    confirm_s: float = 0.0  # of total_s: one-run slowdowns run again before they refuse (gate._confirm)
    total_s: float = 0.0
    program_runs_s: float = 0.0  # wall time spent inside program runs

    @property
    def overhead_s(self) -> float:
        """What the verifier itself added beyond compiling and running programs."""
        return max(0.0, self.total_s - self.compile_s - self.program_runs_s)


class WorkModel(BaseModel):
    """What one call of a v2 experiment must do (the harness's declared buffers and FLOPs) and this
    GPU's ceilings as the harness measured them: the data of a report's roofline placement."""

    bytes_read: int  # every input and in-out buffer but tables (Manifest.bytes_read)
    bytes_written: int  # every output and in-out buffer
    flops: float  # declared per call; 0: none declared
    copy_gbps: float  # measured copy bandwidth, read + write GB/s (the best across runs)
    fma_gflops: float  # measured FP32 FMA GFLOP/s (the best across runs)

    @classmethod
    def of(cls, manifests: list[Manifest]) -> "WorkModel":
        m = manifests[0]
        return cls(bytes_read=m.bytes_read(), bytes_written=m.bytes_written(), flops=m.flops,
                   copy_gbps=max(x.copy_gbps for x in manifests), fma_gflops=max(x.fma_gflops for x in manifests))


class Verdict(BaseModel):
    accepted: bool
    summary: str
    reasons: list[Reason] = []
    gates: list[GateResult] = []
    baseline_file: str
    candidate_file: str
    gpu: GpuInfo | None = None
    arch: str = ""
    nvcc_version: str = ""
    split_mode: str = ""
    seeds: list[int] = []
    size_draw: int | None = None  # the draw behind the size chosen at verify time (KERNELLOOP_SIZE_DRAW)
    checks: list[SeedCheck] = []
    policy: list[Violation] = []
    builds: dict[str, BuildSummary] = {}
    speed: SpeedupDecision | None = None
    regression: RegressionDecision | None = None  # `bench check` only: current (candidate) vs recorded reference
    work: WorkModel | None = None  # v2 harness, once timed: the declared work and measured ceilings (reports)
    baseline_kernel_ms: list[float] = []
    candidate_kernel_ms: list[float] = []
    baseline_wall_ms: list[float] = []
    candidate_wall_ms: list[float] = []
    # The baseline's own run-to-run noise on one experiment: max/min - 1 of two traced runs of it (each other
    # size's first experiment, the first timing pair's after the pairs)
    baseline_repeats: list[float] = []
    audit: AuditReport | None = None
    baseline_audit: AuditReport | None = None
    memcheck_excerpt: str = ""
    failure_excerpt: str = ""
    isolation: IsolationReport | None = None
    contract: int = 1  # the harness's contract version (2: kernelloop_harness.cuh)
    notes: list[str] = []
    durations: Durations = Durations()
    settings: VerifySettings

    def gate(self, name: str) -> GateResult | None:
        return next((g for g in self.gates if g.gate == name), None)


class StaticCheck(BaseModel):
    """What the verify gate decides before running anything."""

    ok: bool  # passes the policy and builds: verify would go on to run it
    summary: str
    arch: str
    split_mode: str  # how the baseline was split: "markers" | "default"
    notes: list[str] = []
    violations: list[Violation] = []
    baseline_build: BuildSummary
    candidate_build: BuildSummary | None = None  # None: not compiled (it failed the policy)
    # `kernelloop verify --static` (verify/static_check.py) fills these too
    reasons: list[Reason] = []  # policy, reduced_precision, compile: why it was rejected
    baseline_file: str = ""
    candidate_file: str = ""
    nvcc_version: str = ""
    arch_source: str = ""  # "--arch" / "setting" | "gpu" | "default (no GPU visible)"
    precision_source: str = ""  # "sass" | "ptx": how the precision scan read the device code; "" not scanned
    allow_reduced_precision: bool = False
