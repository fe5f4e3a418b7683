"""Settings, with one precedence rule: CLI flag > environment > project file > defaults.

Environment variables are named KERNELLOOP_<SECTION>_<FIELD> (e.g.
KERNELLOOP_VERIFY_THRESHOLD=1.5). The project file is ./kernelloop.toml, with one table
per section ([verify], [optimize]). Secrets never live here: they come only from the environment
or a .env file in the current directory.
"""

from __future__ import annotations

import difflib
import os
import re
import shlex
import tomllib
from pathlib import Path
from typing import Any, Literal

from platformdirs import user_cache_dir, user_data_dir
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from .errors import ConfigError

PROJECT_FILE = "kernelloop.toml"

# The nvcc flags a program's build may add (verify.build_flags): ones that change what the source
# means (macros, dialect, lambdas, floating-point modes), each one argv word. Nothing that names a
# file, a library, an output or the host compiler's options.
_BUILD_FLAG = re.compile(r"-D[A-Za-z_]\w*(?:=[^\s]*)?|-U[A-Za-z_]\w*|-std=(?:c|gnu)\+\+(?:17|20)"
                         r"|--(?:expt-)?extended-lambda|--expt-relaxed-constexpr|-?-use_fast_math"
                         r"|--(?:ftz|prec-div|prec-sqrt|fmad)=(?:true|false)|--default-stream=(?:legacy|null|per-thread)")


class OutputTolerance(BaseModel):
    """One output buffer's rtol/atol (`[verify.tolerances.<name>]`, `--rtol NAME=VALUE`); None: the
    value for every output (verify.rtol/atol), else the dtype's default."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    rtol: float | None = Field(None, ge=0)
    atol: float | None = Field(None, ge=0)


class VerifySettings(BaseModel):
    """Every cap and tolerance the verify gate uses, with its default."""

    model_config = ConfigDict(allow_inf_nan=False)  # rtol = inf would switch the correctness check off

    threshold: float = Field(1.2, description="minimum speedup (median baseline / median candidate)")
    seeds: int = Field(2, ge=1, le=32, description="fresh seeds for the correctness gate")
    timing_pairs: int = Field(7, ge=3, le=200, description="timed runs per program, interleaved in (candidate, baseline) pairs; 7 bounds A/A false accepts by 1/3432 (formerly `runs`)")
    max_timing_pairs: int = Field(15, ge=3, le=400, description="cap on timing pairs when the verdict is a coin toss (formerly `max_runs`)")
    confidence: float = Field(0.9, gt=0.5, lt=1.0, description="two-sided confidence of the speedup interval")
    rtol: float | None = Field(None, ge=0, description="relative tolerance on every compared number; None: by output "
                               "dtype (float32 2^-15, float64 2^-44, float16 2^-9, bfloat16 2^-6, integers exact; "
                               "docs/verifier.md 'Tolerance model')")
    atol: float | None = Field(None, ge=0, description="absolute tolerance on every compared number; None: by output "
                               "dtype (0 for every dtype)")
    tolerances: dict[str, OutputTolerance] = Field(
        default_factory=dict, description="per-output rtol/atol by the output buffer's name in the harness "
        "([verify.tolerances.out], --rtol out=1e-4); they win over rtol/atol for that output, and a name the "
        "program's outputs do not have is an error")
    arch: str | None = Field(None, description="nvcc -arch (default: the visible GPU's)")
    run_timeout_s: float = Field(60.0, gt=0, description="wall-clock cap on one program run")
    candidate_timeout_factor: float = Field(10.0, gt=1, description="candidate run cap = factor x baseline wall (>=10 s)")
    compile_timeout_s: float = Field(300.0, gt=0, description="wall-clock cap on one nvcc step")
    compile_memory_bytes: int = Field(8 << 30, gt=0, description="RLIMIT_DATA for nvcc and its children")
    build_jobs: int = Field(0, ge=0, le=256, description="nvcc builds the shipped-build checks run at once (the part built in other units, dialects and debug builds: dozens of them); 0: one per CPU core. Each takes up to compile_memory_bytes")
    memcheck: Literal["auto", "on", "off"] = Field("auto", description="compute-sanitizer memcheck on the candidate")
    memcheck_timeout_s: float = Field(300.0, gt=0)
    baseline_bounds: Literal["auto", "on", "off"] = Field("auto", description="compute-sanitizer memcheck on the baseline once, every buffer allocated to its exact size: a baseline reading or writing past a buffer its harness declares (a --count too small) is refused; auto: where compute-sanitizer is found")
    independent_timing: Literal["auto", "on", "off"] = Field("on", description="CUPTI/ncu audit of KERNEL_MS")
    escape_tolerance: float = Field(0.03, ge=0, description="GPU busy time of a timed window may exceed its events by this fraction (plus 2 us of timestamp granularity); work past it escaped the timer")
    agreement_tolerance: float = Field(0.25, ge=0, description="KERNEL_MS may undercut CUPTI time by this fraction")
    warmup_slowdown_limit: float = Field(1.5, gt=1, description="max first-launch/timed and max/median launch duration ratios, relative to the baseline's")
    baseline_drift_limit: float = Field(0.15, gt=0, description="max relative change of the baseline's time on the same experiment repeated after the timing pairs")
    allow_reduced_precision: bool = Field(False, description="accept half/bf16/tf32 arithmetic, tensor-core MMA or fp64->fp32 downgrades the baseline does not use (--allow-reduced-precision)")
    allow_pass_through: bool = Field(False, description="verify a baseline whose output equals one of its inputs in every timed call (a copy); refused otherwise, since on such inputs any copy matches it (--allow-pass-through)")
    allow_fixed_buffers: bool = Field(False, description="verify a baseline with an input the harness fills the same way in every timed call (or with one value throughout), an output the same in every timed call, or an in-out buffer it leaves as filled in every timed call; refused otherwise, since a candidate may bake such a buffer in (--allow-fixed-buffers)")
    allow_nonfinite_differences: bool = Field(False, description="skip the special-value experiment (NaN, +-inf and zeros among a correctness run's floating-point inputs, where every output the baseline keeps finite must match): for kernels whose inputs never hold such values, when a candidate may handle them differently (--allow-nonfinite-differences)")
    allow_pageable_memory_access: bool = Field(False, description="verify even where kernels can reach pageable host memory (HMM/ATS), which lets a candidate's kernel rewrite the harness; only for trusted candidates (--allow-pageable-memory-access)")
    baseline_noise_factor: float = Field(4.0, ge=0, description="multiple of the baseline's own run-to-run variation (same experiment) allowed on top of the tolerance")
    size_draw: int | None = Field(None, ge=1, description="the draw behind the problem size chosen at verify time (contract v2); None: a fresh random one (set it to reproduce a verdict)")
    size_draws: int = Field(2, ge=1, le=8, description="how many problem sizes are drawn at verify time (contract v2): a kernel wrong at a fraction f of sizes passes with probability (1 - f)^size_draws")
    round_size_draws: int = Field(3, ge=0, le=5, description="how many of the drawn sizes, beside size_draws, are round (a multiple of a large power of two, as callers' sizes mostly are, never a declared option; in the whole ratios the defaults show); the second and third keep a secret subset of the sizes, then its complement, at their defaults while the others move")
    single_size_draws: int = Field(8, ge=0, le=16, description="how many round drawn sizes more move one size() call alone, every other at its default (one per call with options, a secret choice where there are more), so a fast path keyed on any set of sizes at their defaults meets a size outside it moved; not among the wider-integer experiment's sizes")
    smallest_size_draws: int = Field(8, ge=0, le=16, description="how many drawn sizes more move one size() call alone to its smallest (its options' common factor: one token, one row, batch 1), every other at its default (one per call whose default is not that size, a secret choice where there are more); timed too: held to another size's limit with one launch's cost per call forgiven on top (as the baseline's run shows a launch costs, 5 us at most, where the candidate's busy time keeps within that limit), and all of them together to a geometric mean of their own")
    input_scale_draws: int = Field(6, ge=0, le=6, description="the scaled-input experiment: at how many powers of two (every floating-point input times 2^s, s drawn in secret in each of 6 bands from 2^-20 to 2^11) the candidate is compared, among the scales at which the baseline's own outputs scale exactly (probed first): every one taken by default, the smallest and the largest first, and always 2^0 times the experiment's secret factor; 0 turns it off")
    confirm_runs: int = Field(3, ge=1, le=9, description="a slowdown seen in one run pair outside the timing pairs (at another size, in a caller's layout, on wide integers, at another magnitude) is confirmed before it refuses: each such pair's experiment is made this many times more with fresh seeds (the candidate first, both programs traced and audited), and the median pair replaces the one run (an honest rewrite 1.34x faster was refused on one 1.35x pair of a few-microsecond call on an H100)")
    confirm_runs_most: int = Field(9, ge=1, le=25, description="a confirmed pair whose median is still over its gate's policy (1.2x at another size) is measured again up to this many fresh pairs in all before it refuses or passes on the noise a median of that many has: at 10 % run-to-run noise a median of three cannot tell 1.3x from parity (red team round 263)")
    confirm_rounds: int = Field(4, ge=1, le=8, description="how many times a speed gate confirms one-run pairs (confirm_draws) and is judged again, while it still fails or a mean is still within one standard error of its limit with members not yet confirmed (a mean that was unclear first may, once confirmed, leave another of the gate's means the slowest)")
    confirm_draws: int = Field(24, ge=0, le=64, description="how many one-run pairs a speed gate confirms (confirm_runs) where it fails or its mean is within one standard error of its limit: its pairs over their own limit, slowest first, and a secret random subset of up to this many of all its pairs (every one where it has no more), so that the mean is judged again on confirmed members, at their own noise, without being pulled down by confirming only its slowest; 0: a one-run slowdown refuses at once")
    size_redraws: int = Field(12, ge=0, le=32, description="how many more sizes are drawn, in all, where the baseline itself fails at a drawn size (a check of its own, such as C % group == 0, that the draw broke); past it, verify stops and asks for alternative sizes that show the program's relations")
    stress_tolerance_factor: float = Field(8.0, ge=1, description="timed calls on stressed inputs (large values at secret positions, contract v2) are judged at this multiple of the tolerance: they make honest sums worse conditioned, and the errors they exist to catch are 100x or more")
    speed_of_light_margin: float = Field(1.5, gt=1, description="a candidate may reach at most this multiple of the measured copy bandwidth and FP32 throughput (contract v2)")
    stdout_cap_bytes: int = Field(8 << 20, gt=0)
    output_dump_max_bytes: int = Field(2 << 30, gt=0, description="cap on the full output dump a run writes (RLIMIT_FSIZE)")
    memory_limit_bytes: int | None = Field(32 << 30, description="RLIMIT_DATA for program runs")
    build_flags: list[str] = Field(default_factory=list, description="the nvcc flags your program ships with "
                                   "(e.g. PyTorch's -D__CUDA_NO_HALF_OPERATORS__ ... --expt-relaxed-constexpr, "
                                   "--extended-lambda, -std=c++20): every build kernelloop makes of the baseline and "
                                   "the candidate adds them, so the verdict is for the build you ship (--build-flag, "
                                   "KERNELLOOP_VERIFY_BUILD_FLAGS separated by spaces, build_flags = [...])")

    @field_validator("build_flags", mode="before")
    @classmethod
    def _flags_from_text(cls, v: Any) -> Any:
        return shlex.split(v) if isinstance(v, str) else v

    @field_validator("build_flags")
    @classmethod
    def _flags_known(cls, v: list[str]) -> list[str]:
        for flag in v:
            if not _BUILD_FLAG.fullmatch(flag):
                raise ValueError(f"{flag!r} is not a build flag kernelloop takes; it takes -DNAME[=VALUE], -UNAME, "
                                 "-std=c++17|c++20|gnu++17|gnu++20, --extended-lambda, --expt-relaxed-constexpr, "
                                 "--use_fast_math, --ftz/--prec-div/--prec-sqrt/--fmad=true|false and "
                                 "--default-stream=legacy|null|per-thread, each one word")
        return v

    @field_validator("threshold")
    @classmethod
    def _threshold_above_one(cls, v: float) -> float:
        if v <= 1.0:
            raise ValueError("must be greater than 1.0 (a candidate must be faster, not merely as fast)")
        return v


class OptimizeSettings(BaseModel):
    """Every cap of the agent loop (`kernelloop optimize`), with its default."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    max_iterations: int = Field(3, ge=1, le=100, description="optimizer->verifier rounds before giving up (--max-iterations)")
    compile_fix_attempts: int = Field(2, ge=0, le=10, description="inner loop: times nvcc's errors go back to the optimizer per round")
    keep_going: bool = Field(False, description="after an acceptance, continue from the new best (--keep-going)")
    patience: int = Field(2, ge=1, le=50, description="with keep_going: stop after this many rounds without a gain >= min_gain")
    min_gain: float = Field(0.02, ge=0, le=1, description="with keep_going: the relative gain over the best that counts as progress")
    max_rounds: int = Field(12, ge=1, le=200, description="with keep_going: hard cap on rounds, whatever the patience")
    optimizer: Literal["auto", "offline", "nim", "openai"] = Field("auto", description="auto: nim when a key is configured, else offline")
    llm_timeout_s: float = Field(180.0, gt=0, description="one chat request's timeout")
    llm_retries: int = Field(4, ge=0, le=20, description="retries of a chat request on 429, 5xx, timeouts and connection errors")
    llm_backoff_s: float = Field(2.0, ge=0, description="first retry's wait; doubles each retry (with jitter)")
    llm_backoff_max_s: float = Field(30.0, ge=0, description="longest wait between retries")
    temperature: float = Field(0.2, ge=0, le=2)
    max_tokens: int = Field(8192, ge=256, le=131072, description="completion token cap per chat request")
    research_k: int = Field(4, ge=0, le=20, description="research notes given to the optimizer")
    profile_sections: Literal["full", "fast"] = Field("fast", description="Nsight Compute section set for the loop's profiles")
    reprofile_winner: bool = Field(True, description="profile the accepted kernel so the report shows before/after")
    runs_dir: Path = Field(Path("runs"), description="where run artifacts go: runs/<kernel>/<timestamp>/ (relative: to the current directory)")
    mcp_start_timeout_s: float = Field(60.0, gt=0, description="cap on starting one MCP server and its handshake")
    memory_attempts: int = Field(8, ge=0, le=100, description="past attempts of the same kernel shown to the optimizer")


class InitSettings(BaseModel):
    """The caps of `kernelloop init --capture` (running your own program once under capture)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    capture_timeout_s: float = Field(300.0, gt=0, description="wall-clock cap on the captured run of your program")
    capture_max_launches: int = Field(20000, ge=1, description="kernel launches recorded; later ones are not")
    capture_sample_bytes: int = Field(16384, ge=0, le=1 << 24, description="bytes read from each pointer argument at a kernel's first launch (value ranges of inputs)")


class BenchKernel(BaseModel):
    """One kernel program of the suite (`[[bench.kernels]]` in kernelloop.toml)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    name: str = Field(..., pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", max_length=100,
                      description="the kernel's name in reports, and its folder under references_dir")
    program: Path = Field(..., description="its contract program (relative: to kernelloop.toml's folder)")
    regression_threshold: float | None = Field(None, gt=0, lt=1, description="this kernel's own threshold "
                                               "[default: bench.regression_threshold]")


class BenchSettings(BaseModel):
    """The suite and the caps of `kernelloop bench record` / `bench check`."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    kernels: list[BenchKernel] = Field(default_factory=list, description="the suite ([[bench.kernels]] tables)")
    references_dir: Path = Field(Path("bench-references"), description="where references are recorded, one "
                                 "folder per kernel (relative: to kernelloop.toml's folder); commit it")
    regression_threshold: float = Field(0.03, gt=0, lt=1, description="slower than the reference by more than "
                                        "this fraction (with confidence) is a regression (--regression-threshold)")
    regression_confidence: float = Field(0.95, gt=0.5, lt=1.0, description="two-sided confidence of the interval "
                                         "the regression rule reads")
    pairs: int = Field(9, ge=3, le=200, description="interleaved (current, reference) timing pairs per kernel (--pairs)")
    max_pairs: int = Field(21, ge=3, le=400, description="cap on pairs while the verdict is AMBIGUOUS (--max-pairs)")
    record_runs: int = Field(9, ge=3, le=200, description="timed runs of the program when recording its reference")
    record_seeds: int = Field(2, ge=1, le=32, description="seeds whose outputs' SHA-256 a reference records")


class Settings(BaseModel):
    verify: VerifySettings = VerifySettings()
    optimize: OptimizeSettings = OptimizeSettings()
    init: InitSettings = InitSettings()
    bench: BenchSettings = BenchSettings()
    cache_dir: Path = Field(default_factory=lambda: Path(user_cache_dir("kernelloop")))
    data_dir: Path = Field(default_factory=lambda: Path(user_data_dir("kernelloop")))
    include_dirs: list[Path] = Field(default_factory=list, description="folders of your own headers (-I) that a "
                                     "program's frozen code includes (--include-dir, KERNELLOOP_INCLUDE_DIRS, "
                                     "include_dirs = [...] in kernelloop.toml); searched after the program's own folder")


# Every KERNELLOOP_* variable a user may set beyond the sections' KERNELLOOP_<SECTION>_<FIELD>,
# and what it sets: read only through environment_value, so no module reads one of its own and a
# misspelt one is reported (doctor: unknown_environment).
ENVIRONMENT = {
    "KERNELLOOP_CACHE_DIR": "the cache folder (cache_dir)",
    "KERNELLOOP_DATA_DIR": "the data folder: runs, reports (data_dir)",
    "KERNELLOOP_INCLUDE_DIRS": "folders of your own headers, separated by the path separator (include_dirs)",
    "KERNELLOOP_MODEL": "the LLM's model name",
    "KERNELLOOP_BASE_URL": "the LLM's OpenAI-compatible endpoint",
    "KERNELLOOP_EMBEDDINGS": "dense retrieval: auto, nvidia, local or off",
    "KERNELLOOP_CORPUS_DENSE": "0/off: keyword retrieval only",
    "KERNELLOOP_NIM_EMBED_MODEL": "the NVIDIA embedding model of dense retrieval",
    "KERNELLOOP_NIM_RERANK_MODEL": "the NVIDIA reranking model (off: none)",
    "KERNELLOOP_NIM_BASE_URL": "the NVIDIA retrieval endpoint",
    "KERNELLOOP_SANDBOX_UID_BASE": "the first of the sandbox's unused uids (61000)",
    "KERNELLOOP_ENGINE": "where verification jobs run: local or ray",
    "KERNELLOOP_MCP_LOG_LEVEL": "the MCP servers' log level (WARNING)",
}
ENVIRONMENT_PREFIXES = {
    "KERNELLOOP_MCP_TIMEOUT_": "one MCP tool's deadline in seconds (KERNELLOOP_MCP_TIMEOUT_VERIFY=900)",
}
# Set by kernelloop for its own child processes (the harness, capture, CUPTI, the verifier server),
# never by a user: not reported.
INTERNAL_ENVIRONMENT = frozenset([
    "KERNELLOOP_SEED", "KERNELLOOP_SIZE_INDEX", "KERNELLOOP_SIZE_DRAW", "KERNELLOOP_GUARD_BYTE", "KERNELLOOP_PART_FILL",
    "KERNELLOOP_EXACT_BUFFERS", "KERNELLOOP_NONFINITE", "KERNELLOOP_NONFINITE_BUFFERS", "KERNELLOOP_OUTPUT_FILE",
    "KERNELLOOP_OUTPUT_FD",
    "KERNELLOOP_STREAM_FD", "KERNELLOOP_CUPTI_OUT", "KERNELLOOP_CUPTI_FD", "KERNELLOOP_CAPTURE_OUT", "KERNELLOOP_CAPTURE_MAX_LAUNCHES",
    "KERNELLOOP_CAPTURE_SAMPLE_BYTES", "KERNELLOOP_RUN_VERIFY_SETTINGS", "KERNELLOOP_NCU_INPROCESS",
])
_SECTION_PREFIXES = ("KERNELLOOP_VERIFY_", "KERNELLOOP_OPTIMIZE_", "KERNELLOOP_INIT_", "KERNELLOOP_BENCH_")


def internal_value(name: str) -> str | None:
    """A variable kernelloop sets for its own child processes (INTERNAL_ENVIRONMENT); None when unset."""
    if name not in INTERNAL_ENVIRONMENT:
        raise KeyError(f"{name} is not one of kernelloop's internal variables (config.INTERNAL_ENVIRONMENT)")
    return os.environ.get(name)


def environment_value(name: str) -> str | None:
    """A user's KERNELLOOP_* variable (declared in ENVIRONMENT or ENVIRONMENT_PREFIXES), stripped;
    None when unset or empty."""
    if name not in ENVIRONMENT and not name.startswith(tuple(ENVIRONMENT_PREFIXES)):
        raise KeyError(f"{name} is not a declared kernelloop setting (config.ENVIRONMENT)")
    value = os.environ.get(name, "").strip()
    return value or None


def unknown_environment(environ: dict[str, str] | None = None) -> list[tuple[str, str | None]]:
    """KERNELLOOP_* variables set that kernelloop does not read, each with the closest one it does
    (a misspelt variable otherwise leaves the default in force unseen). The sections' variables are
    checked where the settings load (_from_env)."""
    env = os.environ if environ is None else environ
    known = [*ENVIRONMENT, *INTERNAL_ENVIRONMENT]
    found: list[tuple[str, str | None]] = []
    for name in sorted(env):
        if not name.startswith("KERNELLOOP_") or name in known or name.startswith(_SECTION_PREFIXES) or \
                name.startswith(tuple(ENVIRONMENT_PREFIXES)):
            continue
        close = difflib.get_close_matches(name, list(ENVIRONMENT), n=1, cutoff=0.8)
        found.append((name, close[0] if close else None))
    return found


def default_cache_dir() -> Path:
    """Where a component handed no Settings caches: KERNELLOOP_CACHE_DIR, else the platform's cache
    folder (a run passes its own settings' cache_dir, which kernelloop.toml may set)."""
    env = environment_value("KERNELLOOP_CACHE_DIR")
    return Path(env) if env else Path(user_cache_dir("kernelloop"))


INCLUDE_DIRS_ENV = "KERNELLOOP_INCLUDE_DIRS"  # folders separated by os.pathsep


def include_dirs_setting(cli: list[Path] | None = None, *, project_dir: Path | None = None,
                         file_values: dict[str, Any] | None = None) -> list[Path]:
    """The include_dirs setting: CLI > KERNELLOOP_INCLUDE_DIRS > kernelloop.toml > none, each an
    existing folder (absolute; the project file's relative to its folder)."""
    base = project_dir or Path.cwd()
    if cli:
        dirs, where = [Path(d) for d in cli], "--include-dir"
    elif os.environ.get(INCLUDE_DIRS_ENV):
        dirs, where = [Path(d) for d in os.environ[INCLUDE_DIRS_ENV].split(os.pathsep) if d], INCLUDE_DIRS_ENV
    else:
        if file_values is None:
            file_values = _project_values(base / PROJECT_FILE)
        raw = file_values.get("include_dirs", [])
        if isinstance(raw, str) or not isinstance(raw, list) or not all(isinstance(d, str) for d in raw):
            raise ConfigError(f"{base / PROJECT_FILE}: include_dirs is a list of folders, e.g. include_dirs = [\"include\"]")
        dirs, where = [Path(d) for d in raw], "include_dirs"
    found: list[Path] = []
    for folder in dirs:
        folder = (folder.expanduser() if folder.expanduser().is_absolute() else base / folder).resolve()
        if not folder.is_dir():
            raise ConfigError(f"setting include_dirs ({where}): {folder} is not a folder")
        found.append(folder)
    return found


def share_include_dirs(dirs: list[Path]) -> None:
    """Make the include folders this command was given the setting of every program split in this
    process and of the servers it starts (they inherit the environment)."""
    if dirs:
        os.environ[INCLUDE_DIRS_ENV] = os.pathsep.join(str(d) for d in dirs)


def share_build_flags(flags: list[str]) -> None:
    """Make the build flags this command was given (--build-flag) those of the servers it starts (the
    profiler's builds; they inherit the environment)."""
    if flags:
        os.environ["KERNELLOOP_VERIFY_BUILD_FLAGS"] = shlex.join(flags)


def _project_values(project_file: Path) -> dict[str, Any]:
    if not project_file.is_file():
        return {}
    try:
        return tomllib.loads(project_file.read_text())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{project_file}: not valid TOML ({exc})") from exc


def _from_env(model: type[BaseModel], prefix: str) -> dict[str, Any]:
    """A section's settings from KERNELLOOP_<SECTION>_<NAME> variables (a former name too: RENAMED_SETTINGS); a
    variable with the section's prefix that names no setting is an error, as an unknown key in kernelloop.toml is
    (a misspelt KERNELLOOP_VERIFY_THRESHHOLD would otherwise leave the default in force unseen)."""
    section = prefix.removeprefix("KERNELLOOP_").rstrip("_").lower()
    names = [*model.model_fields, *RENAMED_SETTINGS.get(section, {})]
    known = [f"{prefix}{name.upper()}" for name in names]
    for variable in sorted(os.environ):
        if variable.startswith(prefix) and variable not in known:
            raise _unknown("the environment", variable, known)
    values: dict[str, Any] = {}
    for name in names:
        raw = os.environ.get(f"{prefix}{name.upper()}")
        if raw is not None:
            values[name] = None if raw.lower() in ("", "none") and name in ("arch", "memory_limit_bytes") else raw
    return current_names(section, values, "the environment")


TOLERANCE_KEYS = ("rtol", "atol")


def parse_tolerances(raw: Any, source: str) -> tuple[float | None, dict[str, float]]:
    """A tolerance setting as a flag or variable gives it: a number for every output ("1e-4") or
    NAME=NUMBER for one output ("out=1e-4"); several items repeated (a list) or comma-separated.
    Returns (the value for every output or None, {output name: value}); the last of repeats wins.
    Numbers are checked by the settings model (>= 0)."""
    items = [raw] if isinstance(raw, str | int | float) else list(raw)
    every: float | None = None
    per_output: dict[str, float] = {}
    for item in items:
        if isinstance(item, int | float):
            every = float(item)
            continue
        for part in str(item).split(","):
            text = part.strip()
            name, eq, value = text.rpartition("=")
            name = name.strip()
            if not text or (eq and not name):
                raise ConfigError(f"{source} {str(item)!r}: give a number (every output) or NAME=NUMBER "
                                  "(the output buffer of that name in the harness)")
            try:
                number = float(value)
            except ValueError:
                raise ConfigError(f"{source} {text!r}: {value.strip()!r} is not a number") from None
            if eq:
                per_output[name] = number
            else:
                every = number
    return every, per_output


def _apply_tolerances(verify: dict[str, Any], key: str, raw: Any, source: str) -> None:
    """Layer one rtol/atol setting over `verify`: the every-output value replaces the one below,
    each per-output value replaces that output's (other outputs keep theirs)."""
    every, per_output = parse_tolerances(raw, source)
    if every is not None:
        verify[key] = every
    table = verify.setdefault("tolerances", {})
    if not isinstance(table, dict):
        return  # the project file's own mistake, reported by the model
    for name, value in per_output.items():
        entry = table.get(name)
        table[name] = {**(entry if isinstance(entry, dict) else {}), key: value}


RUN_VERIFY_SETTINGS_ENV = "KERNELLOOP_RUN_VERIFY_SETTINGS"  # the run's [verify] settings, as JSON, for its verifier server


def run_verify_settings() -> VerifySettings | None:
    """The [verify] settings `kernelloop optimize` started this process (its verifier MCP server) with;
    None where it was started otherwise (then its folder's and environment's settings apply)."""
    text = os.environ.get(RUN_VERIFY_SETTINGS_ENV)
    if not text:
        return None
    try:
        return VerifySettings.model_validate_json(text)
    except ValidationError as exc:
        raise ConfigError(f"{RUN_VERIFY_SETTINGS_ENV}: not kernelloop's verify settings ({exc.errors()[0]['msg']})") \
            from None


_TOP_KEYS = ("cache_dir", "data_dir", "include_dirs")

# Settings renamed, by section: the former name a user may still give (kernelloop.toml, KERNELLOOP_<SECTION>_<NAME>,
# the flag, an MCP argument) -> the name now ("runs" named four things: issue 12)
RENAMED_SETTINGS: dict[str, dict[str, str]] = {"verify": {"runs": "timing_pairs", "max_runs": "max_timing_pairs"}}


def current_names(section: str, values: dict[str, Any], where: str) -> dict[str, Any]:
    """VALUES (one section's settings, from WHERE) with every former name replaced by the name now; a setting
    given under both names is an error."""
    out = dict(values)
    for old, new in RENAMED_SETTINGS.get(section, {}).items():
        if old in out:
            if new in out:
                raise ConfigError(f"{where}: {old} is the former name of {new}; give {new} alone")
            out[new] = out.pop(old)
    return out


def _unknown(where: str, key: str, known: list[str]) -> ConfigError:
    close = difflib.get_close_matches(key, known, n=1)
    hint = f"did you mean {close[0]}?" if close else f"known: {', '.join(known)}"
    return ConfigError(f"{where}: unknown setting {key} ({hint})")


def _check_project_keys(project_file: Path, values: dict[str, Any]) -> None:
    """Every key of kernelloop.toml is one kernelloop reads, and every section is a table."""
    sections = {"verify": VerifySettings, "optimize": OptimizeSettings, "init": InitSettings,
                "bench": BenchSettings}
    for key, value in values.items():
        if key in sections:
            if not isinstance(value, dict):
                raise ConfigError(f"{project_file}: [{key}] must be a table of settings, not {value!r} "
                                  f"(e.g. [{key}] on its own line, then name = value lines)")
            known = sorted(sections[key].model_fields)
            for inner in value:
                if inner not in known and inner not in RENAMED_SETTINGS.get(key, {}):
                    raise _unknown(f"{project_file} [{key}]", inner, known)
        elif key not in _TOP_KEYS:
            raise _unknown(str(project_file), key, [f"[{s}]" for s in sections] + list(_TOP_KEYS))


def load_settings(cli: dict[str, Any] | None = None, *, project_dir: Path | None = None,
                  given_as: str = "--{}", project_text: tuple[str, str | None] | None = None) -> Settings:
    """Merge defaults < ./kernelloop.toml < environment < CLI flags (None = not given).
    `given_as` names a value of `cli` in errors: a flag (`--{}`), or an MCP tool's argument.
    `project_text` (where it comes from, its text or None for no file) stands in for the project
    file: `bench check --against REV` reads REV's kernelloop.toml from git."""
    project_file = (project_dir or Path.cwd()) / PROJECT_FILE
    file_values: dict[str, Any] = {}
    text: str | None = None
    if project_text is not None:
        project_file, text = Path(project_text[0]), project_text[1]
    elif project_file.is_file():
        try:
            text = project_file.read_text()
        except UnicodeDecodeError as exc:
            raise ConfigError(f"{project_file}: not valid TOML ({exc})") from exc
    if text is not None:
        try:
            file_values = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{project_file}: not valid TOML ({exc})") from exc
    _check_project_keys(project_file, file_values)
    verify: dict[str, Any] = current_names("verify", file_values.get("verify", {}), f"{project_file} [verify]")
    if isinstance(verify.get("tolerances"), dict):  # a copy: the layers above merge into it
        verify["tolerances"] = {k: dict(v) if isinstance(v, dict) else v for k, v in verify["tolerances"].items()}
    env = _from_env(VerifySettings, "KERNELLOOP_VERIFY_")
    if "tolerances" in env:
        raise ConfigError("KERNELLOOP_VERIFY_TOLERANCES is not read: set one output's tolerance with "
                          "KERNELLOOP_VERIFY_RTOL=NAME=VALUE (or _ATOL; comma-separated)")
    for key in TOLERANCE_KEYS:
        if key in env:
            _apply_tolerances(verify, key, env.pop(key), f"KERNELLOOP_VERIFY_{key.upper()}")
    verify.update(env)
    optimize: dict[str, Any] = dict(file_values.get("optimize", {}))
    optimize.update(_from_env(OptimizeSettings, "KERNELLOOP_OPTIMIZE_"))
    init: dict[str, Any] = dict(file_values.get("init", {}))
    init.update(_from_env(InitSettings, "KERNELLOOP_INIT_"))
    bench: dict[str, Any] = dict(file_values.get("bench", {}))
    bench_env = _from_env(BenchSettings, "KERNELLOOP_BENCH_")
    if "kernels" in bench_env:
        raise ConfigError("KERNELLOOP_BENCH_KERNELS is not read: list the suite's kernels as [[bench.kernels]] "
                          "tables in kernelloop.toml")
    bench.update(bench_env)
    cli = current_names("verify", {k: v for k, v in (cli or {}).items() if v is not None},
                        "the flags" if given_as.startswith("--") else "the arguments")
    for key, value in (cli or {}).items():
        if value is None or key == "include_dirs":
            continue
        if key in TOLERANCE_KEYS:  # a number, or NAME=NUMBER items (--rtol out=1e-4, repeatable)
            _apply_tolerances(verify, key, value, f"--{key}")
            continue
        # A flag names a field of one section; the sections' names never clash.
        (optimize if key in OptimizeSettings.model_fields else bench if key in BenchSettings.model_fields
         else verify)[key] = value
    top: dict[str, Any] = {k: v for k, v in file_values.items() if k in ("cache_dir", "data_dir")}
    for key in ("cache_dir", "data_dir"):
        if environment_value(f"KERNELLOOP_{key.upper()}"):
            top[key] = environment_value(f"KERNELLOOP_{key.upper()}")
    top["include_dirs"] = include_dirs_setting((cli or {}).get("include_dirs"), project_dir=project_dir,
                                               file_values=file_values)
    built: dict[str, BaseModel] = {}
    for section, model, values in (("verify", VerifySettings, verify), ("optimize", OptimizeSettings, optimize),
                                   ("init", InitSettings, init), ("bench", BenchSettings, bench)):
        try:
            built[section] = model(**values)
        except ValidationError as exc:
            first = exc.errors()[0]
            raise ConfigError(f"{_source_of((section, *first['loc']), cli or {}, project_file, given_as)}: "
                              f"{first['msg']}") from exc
    try:
        return Settings(**built, **top)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise ConfigError(f"{_source_of(first['loc'], cli or {}, project_file, given_as)}: {first['msg']}") from exc


# Settings whose command-line flag is not the field's name with dashes.
_FLAG_OF = {"run_timeout_s": "run-timeout", "build_flags": "build-flag"}


def _source_of(loc: tuple, cli: dict[str, Any], project_file: Path, given_as: str = "--{}") -> str:
    """Where a bad value came from, as the user gave it: the flag, the variable or the file's key
    (the highest layer that sets it: flag > environment > project file)."""
    names = [str(p) for p in loc]
    section, key = (names[0], names[1]) if len(names) > 1 and names[0] in ("verify", "optimize", "init", "bench") \
        else ("", names[0] if names else "")
    if section == "bench" and key == "kernels" and len(names) > 2:  # one [[bench.kernels]] table
        entry = int(names[2]) + 1 if names[2].isdigit() else names[2]
        return f"{project_file} [[bench.kernels]] number {entry}" + (f" {names[3]}" if len(names) > 3 else "")
    if key == "tolerances" and len(names) > 3:  # one output's rtol/atol: [verify.tolerances.NAME] KEY
        output, key = names[2], names[3]
        if cli.get(key) is not None:
            return f"{given_as.format(key)} (output {output})"
        variable = f"KERNELLOOP_VERIFY_{key.upper()}"
        if os.environ.get(variable) is not None:
            return f"{variable}={os.environ[variable]}"
        return f"{project_file} [verify.tolerances.{output}] {key}"
    if cli.get(key) is not None and key != "include_dirs":
        flag = key if key in ("rtol", "atol") else _FLAG_OF.get(key, key.replace("_", "-"))
        return given_as.format(flag if given_as.startswith("--") else key)
    if not section:
        variable = f"KERNELLOOP_{key.upper()}"
        return f"{variable}={os.environ[variable]}" if os.environ.get(variable) is not None else f"{project_file} {key}"
    # the name the user gave: the setting's, or its former one (RENAMED_SETTINGS)
    given = [key, *(old for old, new in RENAMED_SETTINGS.get(section, {}).items() if new == key)]
    for name in given:
        variable = f"KERNELLOOP_{section.upper()}_{name.upper()}"
        if os.environ.get(variable) is not None:
            return f"{variable}={os.environ[variable]}"
    file_key = next((n for n in given[1:] if n in _project_values(project_file).get(section, {})), key) \
        if project_file.is_file() else key
    return f"{project_file} [{section}] {file_key}"
