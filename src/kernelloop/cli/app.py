"""The `kernelloop` command line: parse, call the library, render. Nothing else."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

import typer

from .. import __version__
from ..config import load_settings, share_build_flags, share_include_dirs
from ..errors import KernelloopError
from .render import plain_console, styled

_HELP = {"help_option_names": ["-h", "--help"]}
app = typer.Typer(context_settings=_HELP, add_completion=False, no_args_is_help=True, rich_markup_mode=None,
                  help="Make CUDA kernels faster and prove it.")
out = plain_console()
err = plain_console(stderr=True, soft_wrap=True)  # an error stays one line, whatever the terminal width


def _print_version(value: bool) -> None:
    if value:
        out.print(f"kernelloop {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(version: bool = typer.Option(False, "--version", is_eager=True, callback=_print_version,
                                       help="Print the version and exit.")) -> None:
    """Make CUDA kernels faster and prove it."""


RTOL_HELP = ("Relative tolerance: RTOL for every floating-point output; NAME=RTOL for the output buffer of that name, "
             "integer outputs too "
             "(repeatable) [default: by output dtype: float32 2^-15 (3.1e-5), float64 2^-44, float16 2^-9, "
             "bfloat16 2^-6, integers exact; docs/verifier.md].")
ATOL_HELP = ("Absolute tolerance: ATOL for every floating-point output, NAME=ATOL for one output, integer outputs "
             "too (repeatable) [default: 0].")
PASS_THROUGH_HELP = ("Verify a baseline whose output equals one of its inputs in every timed call, for a kernel whose "
                     "job is a copy [default: refused: on such inputs the kernel's work does not show].")
FIXED_BUFFERS_HELP = ("Verify a baseline with an input that holds the same contents in every timed call (or one value "
                      "in all its elements), an output that is the same in every timed call, or an in-out buffer it "
                      "never changes, for a buffer constant by design [default: refused: a candidate may bake it in "
                      "or drop its writing].")
BUILD_FLAG_HELP = ("An nvcc flag your program ships with (repeat; e.g. --build-flag=-D__CUDA_NO_HALF_OPERATORS__, "
                   "--build-flag=--extended-lambda, --build-flag=-std=c++20): every build of baseline and candidate "
                   "adds it, so the verdict is for your build [default: none; KERNELLOOP_VERIFY_BUILD_FLAGS, "
                   "build_flags in kernelloop.toml].")
NONFINITE_HELP = ("Skip the special-value experiment (NaN, ±inf and zeros among the inputs of a correctness run; every "
                  "output the baseline keeps finite must match), for kernels that never see such values "
                  "[default: checked].")


@app.command()
def verify(
    baseline: Path = typer.Argument(..., help="The baseline program (follows docs/contract.md)."),
    candidate: Path = typer.Argument(..., help="The candidate: a whole program or only its editable part."),
    threshold: Optional[float] = typer.Option(None, help="Minimum speedup to accept [default: 1.2]."),
    seeds: Optional[int] = typer.Option(None, help="Fresh seeds for the correctness gate [default: 2]."),
    timing_pairs: Optional[int] = typer.Option(
        None, "--timing-pairs", "--runs",
        help="Timed runs per program, interleaved in (candidate, baseline) pairs [default: 7]."),
    max_timing_pairs: Optional[int] = typer.Option(
        None, "--max-timing-pairs", "--max-runs", help="Cap on timing pairs when the verdict is a coin toss [default: 15]."),
    rtol: Optional[list[str]] = typer.Option(None, metavar="[NAME=]RTOL", help=RTOL_HELP),
    atol: Optional[list[str]] = typer.Option(None, metavar="[NAME=]ATOL", help=ATOL_HELP),
    arch: Optional[str] = typer.Option(
        None, help="nvcc architecture, e.g. sm_90 [default: the GPU's; with --static and no GPU visible: sm_86]."),
    memcheck: Optional[str] = typer.Option(None, metavar="auto|on|off",
                                           help="compute-sanitizer memcheck [default: auto]."),
    independent_timing: Optional[str] = typer.Option(
        None, metavar="on|auto|off", help="CUPTI audit of KERNEL_MS [default: on; auto accepts without CUPTI]."),
    run_timeout: Optional[float] = typer.Option(None, help="Wall-clock cap on one run, seconds [default: 60]."),
    json_output: bool = typer.Option(False, "--json", help="Print the verdict as JSON."),
    static: bool = typer.Option(
        False, "--static", help="Run only the gates that need no GPU (policy, includes, compile, object and program "
                                "scans, precision scan). Exit 0: passes them all; 1: rejected."),
    allow_reduced_precision: bool = typer.Option(
        False, "--allow-reduced-precision",
        help="Accept fp16/bf16/tf32/int8 arithmetic, tensor-core MMA or an fp64->fp32 downgrade the baseline does not "
             "use [default: refused as reduced_precision]."),
    allow_pass_through: bool = typer.Option(
        False, "--allow-pass-through", help=PASS_THROUGH_HELP),
    allow_fixed_buffers: bool = typer.Option(
        False, "--allow-fixed-buffers", help=FIXED_BUFFERS_HELP),
    allow_nonfinite_differences: bool = typer.Option(
        False, "--allow-nonfinite-differences", help=NONFINITE_HELP),
    allow_pageable_memory_access: bool = typer.Option(
        False, "--allow-pageable-memory-access",
        help="Verify even on a GPU whose kernels can reach any host memory (HMM/ATS), where a candidate's kernel "
             "could rewrite the harness: only for candidates you trust [default: refused]."),
    include_dir: list[Path] = typer.Option(
        [], "--include-dir", help="A folder of your own headers that the program includes (repeat) [default: the "
                                  "program's own folder only]."),
    build_flag: list[str] = typer.Option(
        [], "--build-flag", metavar="FLAG", help=BUILD_FLAG_HELP),
) -> None:
    """Accept CANDIDATE only if it builds, matches BASELINE's results and is faster.

    Exit code 0: accepted (with --static: passes every static gate); 1: rejected; 2: a usage or
    environment problem.

    \b
    Examples:
      kernelloop verify kernels/naive_matmul.cu my_tiled_matmul.cu
      kernelloop verify --static baseline.cu candidate.cu       # no GPU needed
      kernelloop verify --rtol 1e-4 --rtol dbias=1e-3 --json baseline.cu candidate.cu"""
    from ..verify.gate import verify_files

    settings = load_settings({
        "threshold": threshold, "seeds": seeds, "timing_pairs": timing_pairs, "max_timing_pairs": max_timing_pairs,
        "rtol": rtol or None, "atol": atol or None,  # a number, or NAME=NUMBER (config.parse_tolerances)
        "arch": arch, "memcheck": memcheck, "independent_timing": independent_timing, "run_timeout_s": run_timeout,
        "allow_reduced_precision": True if allow_reduced_precision else None,
        "allow_pageable_memory_access": True if allow_pageable_memory_access else None,
        "allow_pass_through": True if allow_pass_through else None,
        "allow_fixed_buffers": True if allow_fixed_buffers else None,
        "allow_nonfinite_differences": True if allow_nonfinite_differences else None,
        "include_dirs": include_dir or None, "build_flags": build_flag or None,
    })
    share_include_dirs(settings.include_dirs)
    if static:
        from ..verify.static_check import check_static_files

        if json_output:
            check = check_static_files(baseline, candidate, settings)
            out.print_json(check.model_dump_json())
        else:
            with err.status("static gates: policy scan, nvcc, object scans…"):
                check = check_static_files(baseline, candidate, settings)
            _print_static_check(check)
        raise typer.Exit(0 if check.ok else 1)
    if json_output:
        verdict = verify_files(baseline, candidate, settings)
        out.print_json(verdict.model_dump_json())
    else:
        from .render import print_verdict

        with err.status("verifying…") as status:
            verdict = verify_files(baseline, candidate, settings,
                                   progress=lambda p: status.update(styled((p.stage, "bold"), f": {p.message}")))
        print_verdict(out, verdict)
    raise typer.Exit(0 if verdict.accepted else 1)


def _print_static_check(check) -> None:
    # the summary opens with its verdict ("passes every static gate ...", "rejected: ..."): coloured, not repeated
    word = "passes" if check.ok else "rejected"
    out.print(styled((word, "green" if check.ok else "red"), check.summary.removeprefix(word)))
    out.print(f"arch {check.arch} ({check.arch_source}), nvcc {check.nvcc_version}, split: {check.split_mode}"
              + (f", precision scan read {check.precision_source.upper()}" if check.precision_source else ""))
    for v in check.violations:
        out.print(styled("  ", ("✗", "red"), f" {v.describe()}"))
    build = check.candidate_build
    if build is not None and not build.ok:
        out.print(styled("  ", ("✗", "red"), f" compile ({build.stage}):"))
        out.print(build.log_excerpt)
    for note in check.notes:
        out.print(f"  note: {note}")


@app.command()
def profile(
    file: Optional[Path] = typer.Argument(None, help="The CUDA program to profile (its hottest kernel)."),
    report: Optional[Path] = typer.Option(None, "--report", help="Diagnose an existing .ncu-rep instead (no GPU needed)."),
    kernel: Optional[str] = typer.Option(None, help="Kernel to profile (regex on its name) [default: the hottest]."),
    section_set: str = typer.Option("full", "--set", metavar="full|fast",
                                    help="ncu sections: full, or fast (only the sections the rules read, quicker)."),
    clock_control: str = typer.Option("none", metavar="none|base",
                                      help="ncu --clock-control: none (clocks as the GPU runs them) or base."),
    arch: Optional[str] = typer.Option(None, help="nvcc architecture [default: the GPU's]."),
    output: Optional[Path] = typer.Option(None, help="Folder for the .ncu-rep [default: the user data folder]."),
    json_output: bool = typer.Option(False, "--json", help="Print the result as JSON."),
    include_dir: list[Path] = typer.Option(
        [], "--include-dir", help="A folder of your own headers that the program includes (repeat) [default: the "
                                  "program's own folder only]."),
) -> None:
    """Profile one launch of the hot kernel with Nsight Compute and diagnose its bottleneck.

    \b
    Examples:
      kernelloop profile kernels/naive_matmul.cu
      kernelloop profile kernels/sum_reduction.cu --set fast --json
      kernelloop profile --report run.ncu-rep          # no GPU needed"""
    from ..errors import InputError
    from ..profiler.run import diagnose_report, profile_file

    if (file is None) == (report is None):
        raise InputError("give a CUDA program to profile, or --report FILE.ncu-rep to diagnose (not both)")
    if section_set not in ("full", "fast"):
        raise InputError(f"--set {section_set!r}: use full or fast")
    if clock_control not in ("none", "base"):
        raise InputError(f"--clock-control {clock_control!r}: use none or base")
    settings = load_settings({"arch": arch, "include_dirs": include_dir or None})
    share_include_dirs(settings.include_dirs)
    if report is not None:
        diagnosis = diagnose_report(report, kernel=kernel)
        result = None
    else:
        assert file is not None
        with err.status("profiling…"):
            result = profile_file(file, settings, kernel=kernel, section_set=section_set,  # type: ignore[arg-type]
                                  clock_control=clock_control, output_dir=output)  # type: ignore[arg-type]
        diagnosis = result.diagnosis
    if json_output:
        out.print_json((result or diagnosis).model_dump_json())
        return
    from .render import print_diagnosis

    extra = ""
    if result is not None:
        t = result.timings
        extra = (f"\ntime: {t.total_s:.1f} s (compile {t.compile_s:.1f}, find hot kernel {t.locate_s:.1f}, "
                 f"ncu {t.ncu_s:.1f}, parse {t.parse_s:.2f}); {result.section_set} set, clock control {result.clock_control}")
        launch = result.launch
        if launch is not None and launch.profile_launch >= 0:
            extra += (f"\nprofiled launch {launch.profile_launch + 1} of {launch.launches}"
                      + (f" (grid {launch.grid}, {launch.launch_ms:.4f} ms in the traced run; the heaviest of "
                         f"{launch.configurations} launch configurations)" if launch.configurations > 1 else ""))
        if result.resources is not None:
            r, o = result.resources, result.occupancy
            extra += (f"\nptxas: {r.registers} registers, {r.static_shared_bytes} B shared, {r.stack_frame_bytes} B stack, "
                      f"spills {r.spill_store_bytes}/{r.spill_load_bytes} B"
                      + (f"; theoretical occupancy {o.theoretical_occupancy_pct:.0f}% "
                         f"(limited by {', '.join(o.limiting_factors)})" if o else ""))
    print_diagnosis(out, diagnosis, extra=extra)


@app.command()
def resources(
    file: Path = typer.Argument(..., help="A CUDA source file (no GPU needed)."),
    arch: Optional[str] = typer.Option(
        None, help="nvcc architecture to compile for [default: the GPU's; with no GPU visible: sm_86]."),
    block: Optional[int] = typer.Option(None, help="Threads per block; without it, a table of block sizes."),
    json_output: bool = typer.Option(False, "--json", help="Print the result as JSON."),
) -> None:
    """Registers, shared memory, stack and spills per kernel (ptxas), and theoretical occupancy.

    No GPU needed.

    \b
    Examples:
      kernelloop resources kernels/naive_matmul.cu
      kernelloop resources my_kernel.cu --arch sm_80 --block 256 --json"""
    from rich.table import Table

    from ..program.split import read_program, require_cuda
    from ..tools.resources import resource_usage
    from ..verify.static_check import choose_arch

    source = read_program(file)
    require_cuda(source, str(file))
    arch, _ = choose_arch(load_settings({"arch": arch}))  # --arch, the verify.arch setting, the GPU's, sm_86
    usage = resource_usage(source, arch=arch, block_size=block)
    rows = [(u.kernel, u.occupancy) for u in usage.kernels]
    if json_output:
        out.print_json(json.dumps([{"kernel": k.model_dump(), "occupancy": [o.model_dump() for o in occ]}
                                   for k, occ in rows]))
        return
    for k, occ in rows:
        out.print(styled((k.demangled or k.name, "bold"), f" ({arch}): {k.registers} registers, {k.static_shared_bytes} B shared, "
                         f"{k.stack_frame_bytes} B stack, spills {k.spill_store_bytes}/{k.spill_load_bytes} B (stores/loads)"))
        table = Table(show_header=True)
        for col in ("block", "blocks/SM", "warps/SM", "occupancy", "limited by"):
            table.add_column(col)
        for o in occ:
            table.add_row(str(o.block_size), str(o.active_blocks_per_sm), str(o.active_warps_per_sm),
                          f"{o.theoretical_occupancy_pct:.0f}%", ", ".join(o.limiting_factors))
        out.print(table)


def _pairs(option: str, given: list[str]) -> dict[str, str]:
    from ..errors import InputError

    pairs: dict[str, str] = {}
    for text in given:
        name, sep, value = text.partition("=")
        if not sep or not name.strip() or not value.strip():
            raise InputError(f"{option} takes NAME=VALUE, got {text!r}")
        pairs[name.strip()] = value.strip()
    return pairs


@app.command()
def init(
    source: Path = typer.Argument(..., help="A .cu/.cuh file with your kernel (with or without its own main)."),
    output: Path = typer.Option(..., "--output", "-o", help="Where to write the contract-v2 program."),
    kernel: Optional[str] = typer.Option(None, help="The kernel to wrap, when the file defines several."),
    set_: list[str] = typer.Option([], "--set", help="A scalar argument's value: NAME=DEFAULT[,ALTERNATIVE] (repeat)."),
    count: list[str] = typer.Option([], "--count", help="A pointer's element count: NAME=C-EXPRESSION (repeat)."),
    role: list[str] = typer.Option([], "--role", help="A pointer's role: NAME=input|output|inout|scratch (repeat)."),
    range_: list[str] = typer.Option([], "--range", help="An input's values: NAME=LO,HI, drawn in [LO, HI) (repeat); an integer "
                                                    "input's bounds may follow the sizes (tokens=0,V) [default: "
                                                    "[-1, 1) for floating point, [0, 16) for integers]."),
    grid: Optional[str] = typer.Option(None, help="Launch grid, a C expression of the arguments [default: one thread per element]."),
    block: Optional[str] = typer.Option(None, help="Launch block, a C expression [default: 256]."),
    shared_memory: Optional[str] = typer.Option(
        None, "--shared-memory", help="Dynamic shared memory of the launch in bytes, a C expression (for a kernel "
                                      "with extern __shared__) [default: none]."),
    launcher: Optional[str] = typer.Option(
        None, help="Your host function that launches the kernel(s): the harness calls it with its parameters "
                   "[default: the one that launches the chosen kernel, if any]."),
    template_args: Optional[str] = typer.Option(
        None, "--template-args", help="Template arguments of a template kernel (or launcher), e.g. '32' or 'float, 128'."),
    include_dir: list[Path] = typer.Option(
        [], "--include-dir", help="A folder of your own headers that the file includes (repeat) [default: the "
                                  "file's own folder only]."),
    capture: bool = typer.Option(
        False, "--capture", help="Run your program once on the GPU (FILE's own main, or --capture-command) and take "
                                 "the launch configuration, sizes, scalar values and input ranges from the hottest "
                                 "launch of its kernel; --set/--count/... still override."),
    capture_command: Optional[str] = typer.Option(
        None, "--capture-command", help="With --capture: the command that runs your program, built your way "
                                        "(e.g. './app --steps 2'), instead of building FILE's main."),
    keep_state: list[str] = typer.Option(
        [], "--keep-state", help="A variable the kept launcher keeps for itself between calls (a cached workspace "
                                 "or device property), which init may keep as it is (repeat) [default: none: init "
                                 "refuses state the code it leaves out could set]."),
    trust_call: list[str] = typer.Option(
        [], "--trust-call", help="A call in the code init leaves out (main, helpers) that you know cannot change what "
                                 "the launcher and kernels compute, named as init's refusal names it (repeat) "
                                 "[default: none: init refuses calls it does not know]."),
    spec_file: Optional[Path] = typer.Option(
        None, "--spec", help="A TOML file with these options by the same names (kernel, launcher, [set], [count], "
                             "[role], [range], include_dirs, ...: README, 'Your own kernel'); flags given here win, key by key."),
    force: bool = typer.Option(False, "--force", help="Overwrite OUTPUT if it exists."),
) -> None:
    """Write a contract-v2 program around your own kernel, copied verbatim, ready for optimize.

    Every guess (roles, element counts, launch configuration, input ranges) is a GUESS comment
    at the top of the file; check them. The program is compiled once to make sure it builds.

    \b
    Examples:
      kernelloop init my_kernel.cu -o my_kernel_kl.cu --set n=16777216,16777215
      kernelloop init app.cu -o app_kl.cu --capture      # sizes from a run of app.cu's own main
      kernelloop init layernorm.cuh -o layernorm_kl.cu --spec layernorm.toml"""
    import math
    import re


    from ..errors import InputError
    from ..program.init import ROLES, InitSpec, generate, generated_build_hint
    from ..init_state import refuse_state_set_by_dropped_code
    from ..program.split import inline_user_headers, read_program, split_program
    from ..tools.nvcc import build_whole_program, compiler_error, find_toolchain

    if output.exists() and not force:
        raise InputError(f"{output} exists; choose another --output or add --force")
    if spec_file is not None:  # the file's options first: a flag given too replaces the file's value
        from ..program.init_spec_file import read_init_spec

        written = read_init_spec(spec_file)
        flags = written.as_flags()
        set_, count, role, range_ = (flags["set"] + set_, flags["count"] + count, flags["role"] + role,
                                     flags["range"] + range_)
        kernel, launcher, template_args = kernel or written.kernel, launcher or written.launcher, \
            template_args or written.template_args
        grid, block, shared_memory = grid or written.grid, block or written.block, \
            shared_memory or written.shared_memory
        capture_command = capture_command or written.capture_command
        include_dir = [*written.include_dirs, *include_dir]
        keep_state, trust_call = [*written.keep_state, *keep_state], [*written.trust_call, *trust_call]
    roles = _pairs("--role", role)
    for name, value in roles.items():
        if value not in ROLES:
            raise InputError(f"--role {name}={value}: the role is one of {', '.join(ROLES)}")
    ranges = {}
    for name, value in _pairs("--range", range_).items():
        bounds = [b.strip() for b in value.split(",")]
        number = r"-?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
        # an integer input's bound may be an expression of the sizes (`0,V`): init checks it at every size
        expression = r"[A-Za-z_0-9+\-*/() ]+"
        numbers = len(bounds) == 2 and all(re.fullmatch(number, b) for b in bounds)
        if len(bounds) != 2 or (numbers and (not math.isfinite(float(bounds[0])) or not math.isfinite(float(bounds[1]))
                                             or float(bounds[0]) >= float(bounds[1]))) \
                or (not numbers and not all(re.fullmatch(number, b) or re.fullmatch(expression, b) for b in bounds)):
            raise InputError(f"--range {name}={value}: give two numbers LO,HI with LO < HI (integers for an "
                             "integer input, or expressions of its integer arguments: 0,V)")
        ranges[name] = (bounds[0], bounds[1])
    spec = InitSpec(kernel=kernel, values={k: v.split(",") for k, v in _pairs("--set", set_).items()},
                    counts=_pairs("--count", count), roles=roles, ranges=ranges, grid=grid,
                    block=block, shared_memory=shared_memory, launcher=launcher,
                    template_args=template_args)  # type: ignore[arg-type]
    settings = load_settings({"include_dirs": include_dir or None})
    if capture_command is not None and not capture:
        raise InputError("--capture-command runs your program under capture: add --capture")
    if capture:
        import shlex

        from ..capture_init import init_from_capture
        from ..tools.capture import CaptureLimits
        from ..tools.gpu import detect_gpus

        gpus = detect_gpus()
        if not gpus:
            raise InputError("--capture runs your program on a GPU and none is visible here: give the sizes with "
                             "--set instead (and --count, --grid/--block where init cannot guess them)")
        limits = CaptureLimits(timeout_s=settings.init.capture_timeout_s,
                               max_launches=settings.init.capture_max_launches,
                               sample_bytes=settings.init.capture_sample_bytes)
        with err.status("building and running your program under capture…"):
            result, captured = init_from_capture(
                source, spec, cache_dir=settings.cache_dir, arch=settings.verify.arch or gpus[0].arch,
                limits=limits, command=shlex.split(capture_command) if capture_command else None,
                include_dirs=settings.include_dirs)
        total = sum(k.gpu_ns for k in captured.kernels) or 1
        err.print(f"captured {sum(k.launches for k in captured.kernels)} launch(es) of "
                  f"{len(captured.kernels)} kernel(s) on {gpus[0].name}"
                  + "".join(f"; {k.base_name} {k.gpu_ns / total:.0%} of GPU time"
                            for k in captured.kernels[:3]))
    else:
        result = generate(read_program(source), spec, source.name)
    from ..verify.static_check import choose_arch, refuse_what_verify_refuses

    arch, _ = choose_arch(settings)  # the verify.arch setting, the GPU's, else sm_86: as verify builds it
    copied = result.copied_from if result.copied_from is not None else read_program(source)
    refuse_state_set_by_dropped_code(inline_user_headers(copied, str(source), settings.include_dirs),
                                     result, arch=arch, cache_dir=settings.cache_dir,
                                     keep_state=keep_state, trust_calls=trust_call,
                                     generated=inline_user_headers(result.program, str(source), settings.include_dirs))
    build = build_whole_program(inline_user_headers(result.program, str(source), settings.include_dirs),
                                arch=arch, cache_dir=settings.cache_dir,
                                toolchain=find_toolchain(build_flags=settings.verify.build_flags))
    if not build.ok:
        last = compiler_error(build.log)
        raise InputError(f"the generated program does not compile: {last.strip()}; {generated_build_hint(last)}")
    with err.status("checking the program as verify will…"):
        refuse_what_verify_refuses(inline_user_headers(result.program, str(source), settings.include_dirs),
                                   str(output), settings)
    output.write_text(result.program)
    called = (f"launcher {result.launcher} (kernels {', '.join(result.kernels)})" if result.launcher
              else f"kernel {result.kernel}")
    err.print(f"wrote {output}: {called}, "
              + ", ".join(f"{k} {v}" for k, v in result.roles.items()))
    beside = split_program(result.program, str(output), []).headers
    needed = split_program(result.program, str(source), settings.include_dirs).headers
    for header in sorted(set(needed) - set(beside)):
        err.print(f"  check: {output} includes {header}, which is not beside it: give "
                  f"--include-dir {Path(header).parent} to verify, profile and optimize (or "
                  "include_dirs in kernelloop.toml)")
    for note in result.notes:
        err.print(f"  check: {note}")
    err.print(f"next: kernelloop verify --static {output} {output}; "
              f"then kernelloop optimize {output}")


@app.command("include-dir")
def include_dir() -> None:
    """Print the folder of kernelloop_harness.cuh (contract v2), for building a program by hand.

    Examples:
      kernelloop include-dir
      nvcc -O3 -arch=sm_90 -I "$(kernelloop include-dir)" my_kernel_kl.cu -o my_kernel"""
    from ..tools.nvcc import harness_include_dir

    typer.echo(str(harness_include_dir()))


@app.command()
def doctor(
    online: bool = typer.Option(False, "--online",
                                help="Also ask the LLM endpoint (GET <base-url>/models) whether it lists the model."),
    json_output: bool = typer.Option(False, "--json", help="Print the checks as a JSON list."),
) -> None:
    """Check what kernelloop needs on this machine, one line each with the fix.

    Exits 0 when everything `optimize` needs is there, 1 otherwise. The API key is
    shown only as its first 4 characters and its length.

    \b
    Examples:
      kernelloop doctor
      kernelloop doctor --online --json"""


    from ..doctor import exit_code, run_checks

    if json_output:
        checks = run_checks(online=online)
        out.print_json(json.dumps([c.model_dump() for c in checks]))
    else:
        with err.status("checking…"):
            checks = run_checks(online=online)
        for c in checks:
            mark = {"ok": ("✓", "green"), "warn": ("!", "yellow"), "fail": ("✗", "red")}[c.status]
            line = f"{c.name}: {c.detail}" + (f" — {c.fix}" if c.fix and c.status != "ok" else "")
            out.print(styled(mark, f" {line}"), soft_wrap=True)  # one line per check, piped or not
    raise typer.Exit(exit_code(checks))


ENGINE_HELP = ("Where the jobs run (one kernel each): local, one after another on this GPU; or ray, one job per GPU "
               "of a Ray cluster (pip install 'kernelloop[ray]'; docs/engine.md) [default: $KERNELLOOP_ENGINE, "
               "else local].")
ADDRESS_HELP = ("With --engine ray: the cluster's head, HOST:PORT (or auto, ray://…) [default: $RAY_ADDRESS, else a "
                "Ray started on this machine for this command].")
JOB_TIMEOUT_HELP = "With --engine ray: a job not back after this many seconds is cancelled and marked failed [default: 7200]."
MAX_IN_FLIGHT_HELP = "With --engine ray: jobs submitted at once [default: the cluster's number of GPUs]."
ANY_GPU_MODEL_HELP = ("With --engine ray: run a kernel on any GPU model, not only on the model its reference was "
                      "recorded on [default: the same model, a gpu_model:<MODEL> resource the node declares].")


def _engine(engine: Optional[str], address: Optional[str], job_timeout: Optional[float],
            max_in_flight: Optional[int], any_gpu_model: bool = False):
    """The engine the flags name (None for the default local one); Ray is imported only for ray."""
    from ..engine import EngineSettings, make_engine

    settings = EngineSettings.from_environment(engine=engine, address=address, job_timeout_s=job_timeout,
                                               max_in_flight=max_in_flight,
                                               match_gpu_model=False if any_gpu_model else None)
    return None if settings.engine == "local" else make_engine(settings)


def _engine_line(event) -> str:
    """One status line: jobs done / running / failed, and per GPU."""
    c = event.counts
    line = f"{event.engine}: {c.done} done, {c.running} running, {c.failed} failed, {c.pending} waiting"
    if c.cancelled:
        line += f", {c.cancelled} cancelled"
    gpus = "; ".join(f"{gpu} {t.done} done" + (f" {t.failed} failed" if t.failed else "")
                     for gpu, t in sorted(event.per_gpu.items()))
    return line + (f" | {gpus}" if gpus else "")


@app.command()
def optimize(
    kernels: Optional[list[Path]] = typer.Argument(
        None, metavar="KERNEL", help="The CUDA program(s) to optimize (follow docs/contract.md); several: one "
                                          "run each, on the engine (--engine)."),
    optimizer: Optional[str] = typer.Option(
        None, metavar="auto|offline|nim|openai",
        help="Which optimizer [default: auto: an OpenAI-compatible endpoint when --base-url names one, else nim "
             "with a key, else offline]."),
    model: Optional[str] = typer.Option(None, help="LLM model name [default: nvidia/llama-3.3-nemotron-super-49b-v1]."),
    base_url: Optional[str] = typer.Option(None, help="OpenAI-compatible endpoint (self-hosted NIM, vLLM, Ollama, llama.cpp)."),
    api_key: Optional[str] = typer.Option(None, help="NVIDIA API key [default: $NVIDIA_API_KEY, then ./.env]."),
    max_iterations: Optional[int] = typer.Option(None, help="Rounds before giving up [default: 3]."),
    keep_going: Optional[bool] = typer.Option(None, "--keep-going/--stop-at-first",
                                              help="After an acceptance, go on from the new best [default: stop]."),
    patience: Optional[int] = typer.Option(None, help="With --keep-going: rounds without a 2% gain before stopping [default: 2]."),
    compile_fix_attempts: Optional[int] = typer.Option(None, help="nvcc errors handed back per round [default: 2]."),
    threshold: Optional[float] = typer.Option(None, help="Minimum speedup to accept [default: 1.2]."),
    rtol: Optional[list[str]] = typer.Option(None, metavar="[NAME=]RTOL", help=RTOL_HELP),
    atol: Optional[list[str]] = typer.Option(None, metavar="[NAME=]ATOL", help=ATOL_HELP),
    runs_dir: Optional[Path] = typer.Option(None, help="Where run folders go [default: ./runs]."),
    resume: Optional[str] = typer.Option(None, "--resume", help="Continue an interrupted run (its id, or a unique prefix)."),
    json_output: bool = typer.Option(False, "--json", help="Print the run's summary as JSON (and nothing else on stdout)."),
    include_dir: list[Path] = typer.Option(
        [], "--include-dir", help="A folder of your own headers that the program includes (repeat) [default: the "
                                  "program's own folder only]."),
    build_flag: list[str] = typer.Option(
        [], "--build-flag", metavar="FLAG", help=BUILD_FLAG_HELP),
    allow_pass_through: bool = typer.Option(
        False, "--allow-pass-through", help=PASS_THROUGH_HELP),
    allow_fixed_buffers: bool = typer.Option(
        False, "--allow-fixed-buffers", help=FIXED_BUFFERS_HELP),
    allow_nonfinite_differences: bool = typer.Option(
        False, "--allow-nonfinite-differences", help=NONFINITE_HELP),
    engine: Optional[str] = typer.Option(None, metavar="local|ray", help=ENGINE_HELP),
    address: Optional[str] = typer.Option(None, help=ADDRESS_HELP),
    job_timeout: Optional[float] = typer.Option(None, help=JOB_TIMEOUT_HELP),
    max_in_flight: Optional[int] = typer.Option(None, help=MAX_IN_FLIGHT_HELP),
) -> None:
    """Profile, research, rewrite and verify KERNEL until a rewrite is proven faster.

    Exit code 0: accepted (several kernels: every one); 3: no candidate cleared the bar; 2: a
    usage or environment problem (several kernels: a run that could not be made).

    \b
    Examples:
      kernelloop optimize kernels/naive_matmul.cu                 # no key: the offline optimizer
      kernelloop optimize k.cu --optimizer openai --base-url http://127.0.0.1:8000/v1 --model qwen2.5-coder
      kernelloop optimize k.cu --keep-going --patience 2 --json
      kernelloop optimize a.cu b.cu c.cu --engine ray --address head-node:6379
      kernelloop optimize --resume 20261121-1015"""
    import asyncio

    from ..errors import InputError
    from ..graph.inputs import check_inputs, require_gpu

    share_include_dirs(load_settings({"include_dirs": include_dir or None}).include_dirs)  # servers inherit it
    if (not kernels) == (resume is None):
        raise InputError("give the kernel to optimize, or --resume RUN_ID (not both)")
    kernel = kernels[0] if kernels else None
    from ..engine import EngineSettings

    # the engine as the fan-out will read it (the flag, else KERNELLOOP_ENGINE): one reading of it
    fan_out = len(kernels or []) > 1 or EngineSettings.from_environment(engine=engine).engine != "local"
    if fan_out and resume is not None:
        raise InputError("--resume continues one run, here: drop --engine ray")
    settings = load_settings({"max_iterations": max_iterations, "keep_going": keep_going, "patience": patience,
                              "compile_fix_attempts": compile_fix_attempts, "threshold": threshold,
                              "rtol": rtol or None, "atol": atol or None,
                              "runs_dir": runs_dir, "optimizer": optimizer,
                              "allow_pass_through": True if allow_pass_through else None,
                              "allow_fixed_buffers": True if allow_fixed_buffers else None,
                              "allow_nonfinite_differences": True if allow_nonfinite_differences else None,
                              "build_flags": build_flag or None})
    share_build_flags(settings.verify.build_flags)  # the profiler's server builds as the verifier does
    if fan_out:
        _optimize_many(kernels or [], settings, optimizer, model, base_url, api_key, json_output,
                       _engine(engine, address, job_timeout, max_in_flight))
    # The contract, then the GPU: one line each, before the agent loop (LangGraph, MCP) is even imported.
    checked = check_inputs(kernel, settings) if kernel is not None else None
    if checked is None:
        from ..runs.store import run_store

        run_store(settings).get_run(resume or "")  # a run id that names no run: said first
        require_gpu()
    for note in checked.split.notes if checked else []:  # what a split without markers made editable
        err.print(f"note: {note}")
    from ..graph.optimize import optimize as optimize_events
    from ..llm_config import resolve_llm_config
    from .loop_view import LoopView

    llm = resolve_llm_config(model, base_url, api_key)
    view = LoopView(err, quiet=json_output)

    async def drive() -> None:
        async for event in optimize_events(kernel, settings, llm, optimizer_kind=optimizer, resume=resume,
                                           checked=checked):
            view.handle(event)

    try:
        with view:
            asyncio.run(drive())
    except KeyboardInterrupt:
        hint = f"; continue with `kernelloop optimize --resume {view.run_id}`" if view.run_id else ""
        err.print(f"interrupted{hint}")
        raise typer.Exit(130) from None
    summary = view.summary()
    if json_output:
        out.print_json(json.dumps(summary))
    else:
        view.print_result(out, summary)
    raise typer.Exit(0 if summary.get("status") == "accepted" else 3)


def _optimize_many(kernels: list[Path], settings, optimizer: Optional[str], model: Optional[str],
                   base_url: Optional[str], api_key: Optional[str], json_output: bool, engine) -> None:
    """`optimize a.cu b.cu …` or `--engine ray`: one run per kernel on the engine; a line per run."""
    from ..graph.fanout import optimize_kernels
    from ..llm_config import resolve_llm_config

    llm = resolve_llm_config(model, base_url, api_key)

    def one_run(r) -> None:
        where = f" on {r.ran_on.describe()}" if r.ran_on is not None and r.ran_on.engine != "local" else ""
        speed = f" {r.best_speedup:.2f}x" if r.best_speedup else ""
        line = f"{r.kernel}: {r.status.upper()}{speed} ({r.wall_s:.0f} s){where}"
        err.print(line + (f" run {r.run_id}" if r.run_id else "") + (f": {r.reason}" if r.reason else ""))

    try:
        if json_output:
            result = optimize_kernels(kernels, settings, llm, engine=engine, optimizer_kind=optimizer)
        else:
            with err.status("optimizing…") as status:
                result = optimize_kernels(kernels, settings, llm, engine=engine, optimizer_kind=optimizer,
                                          on_event=lambda e: status.update(_engine_line(e)), on_run=one_run)
    finally:
        if engine is not None:
            engine.close()
    if json_output:
        out.print_json(json.dumps({**result.model_dump(mode="json"), "exit_code": result.exit_code}))
    else:
        for r in result.runs:
            out.print(f"{r.kernel}: {r.status}" + (f", run {r.run_id} ({r.run_dir})" if r.run_id else "")
                      + (f": {r.reason}" if r.reason and not r.run_id else ""))
        out.print(f"{len(result.runs)} kernel(s) on {result.engine} in {result.wall_s:.0f} s; exit code "
                  f"{130 if result.interrupted else result.exit_code}")
    raise typer.Exit(130 if result.interrupted else result.exit_code)


@app.command("verify-cert")
def verify_cert(
    certificate: Path = typer.Argument(..., help="A certificate.json from a run folder."),
    baseline: Optional[Path] = typer.Option(None, help="The baseline program [default: the one beside the certificate]."),
    candidate: Optional[Path] = typer.Option(None, help="The certified program [default: the one beside the certificate]."),
    static: bool = typer.Option(False, "--static", help="Check the hashes only (no GPU)."),
    json_output: bool = typer.Option(False, "--json", help="Print the checks as JSON."),
) -> None:
    """Re-check a proof certificate on this machine: hashes, reference outputs, the verify gate.

    Exit code 0: every check passed; 1: a check failed; 2: a usage or environment problem.

    \b
    Examples:
      kernelloop verify-cert runs/naive_matmul/20261121-101502-3fa2/certificate.json
      kernelloop verify-cert --static certificate.json      # hashes only, no GPU"""
    from ..runs.recheck import check_certificate

    settings = load_settings()
    if json_output or static:
        result = check_certificate(certificate, settings, baseline=baseline, candidate=candidate, static_only=static)
    else:
        with err.status("re-checking…") as status:
            result = check_certificate(certificate, settings, baseline=baseline, candidate=candidate,
                                       progress=lambda p: status.update(styled((p.stage, "bold"), f": {p.message}")))
    if json_output:
        out.print_json(result.model_dump_json())
    else:
        from .render import print_certificate_check

        print_certificate_check(out, result)
    raise typer.Exit(0 if result.ok else 1)


bench_app = typer.Typer(context_settings=_HELP, no_args_is_help=True, rich_markup_mode=None,
                        help="A suite of kernels with recorded references: fail CI on a regression.")
app.add_typer(bench_app, name="bench")
KERNEL_NAMES_HELP = "Kernels of the suite ([[bench.kernels]] in kernelloop.toml) [default: all]."


@bench_app.command("record")
def bench_record(
    names: Optional[list[str]] = typer.Argument(None, help=KERNEL_NAMES_HELP),
    json_output: bool = typer.Option(False, "--json", help="Print the new references as JSON."),
) -> None:
    """Record each kernel's reference on this GPU: its program, outputs' SHA-256 and kernel time.

    The program is first verified against itself (every gate, then an A/A regression check).
    Exit code 0: recorded; 2: a usage or environment problem.

    Examples:
      kernelloop bench record
      kernelloop bench record naive_matmul --json"""
    from ..bench.reference import record_suite

    settings = load_settings()
    share_include_dirs(settings.include_dirs)
    if json_output:
        recorded = record_suite(settings, names=names)
        out.print_json(json.dumps([r.model_dump(mode="json") for r in recorded]))
        return
    from .render import print_recorded

    with err.status("recording…") as status:
        record_suite(settings, names=names,
                     progress=lambda p: status.update(styled((p.stage, "bold"), f": {p.message}")),
                     on_kernel=lambda r: print_recorded(out, r))


@bench_app.command("check")
def bench_check(
    names: Optional[list[str]] = typer.Argument(None, help=KERNEL_NAMES_HELP),
    regression_threshold: Optional[float] = typer.Option(
        None, help="Slower than the reference by more than this fraction is a regression [default: 0.03]."),
    pairs: Optional[int] = typer.Option(None, help="Interleaved (current, reference) pairs per kernel [default: 9]."),
    max_pairs: Optional[int] = typer.Option(None, help="Cap on pairs while a verdict is AMBIGUOUS [default: 21]."),
    junit: Optional[Path] = typer.Option(None, help="Also write JUnit XML here (one test case per kernel)."),
    summary: Optional[Path] = typer.Option(
        None, help="Append a Markdown table here [default: $GITHUB_STEP_SUMMARY when set]."),
    html: Optional[Path] = typer.Option(
        None, "--html", help="Also write a self-contained HTML report here (figures inline; opens without network)."),
    json_output: bool = typer.Option(False, "--json", help="Print the results as JSON."),
    against: Optional[str] = typer.Option(
        None, help="A git revision (e.g. origin/main) to take the suite, its references and the [verify] and "
                   "[bench] settings from, so a change cannot re-record or loosen what it is checked against "
                   "[default: the working tree's]."),
    engine: Optional[str] = typer.Option(None, metavar="local|ray", help=ENGINE_HELP),
    address: Optional[str] = typer.Option(None, help=ADDRESS_HELP),
    job_timeout: Optional[float] = typer.Option(None, help=JOB_TIMEOUT_HELP),
    max_in_flight: Optional[int] = typer.Option(None, help=MAX_IN_FLIGHT_HELP),
    any_gpu_model: bool = typer.Option(False, "--any-gpu-model", help=ANY_GPU_MODEL_HELP),
) -> None:
    """Check each kernel against its recorded reference: correctness (every verify gate), then speed.

    Speed is measured interleaved with the reference program in this run, on this GPU; the verdict
    per kernel is SAME, FASTER, SLOWER or AMBIGUOUS (docs/bench.md). Exit code 0: no regression;
    1: a kernel SLOWER or failing a gate; 2: a usage or environment problem; 3: no regression
    found but a kernel AMBIGUOUS (noise, a disturbed GPU): a CI job may retry.

    \b
    Examples:
      kernelloop bench check
      kernelloop bench check softmax --junit bench.xml
      kernelloop bench check --engine ray --address head-node:6379"""
    import os

    from ..bench.check import check_suite
    from ..bench.ci_outputs import junit_xml, step_summary

    cli = {"regression_threshold": regression_threshold, "pairs": pairs, "max_pairs": max_pairs}
    settings = working = load_settings(cli)
    revision = None
    if against is not None:
        from ..bench.trusted import Revision, trusted_settings

        revision = Revision(against, Path.cwd())
        settings = trusted_settings(revision, cli)
    share_include_dirs(working.include_dirs)
    if html is not None and not html.resolve().parent.is_dir():  # before the GPU work, not after it
        from ..errors import InputError

        raise InputError(f"--html {html}: no folder {html.resolve().parent} to write the report into")
    chosen = _engine(engine, address, job_timeout, max_in_flight, any_gpu_model)
    on = {} if chosen is None else {"engine": chosen}  # the default: check_suite's own local engine
    try:
        if json_output:
            result = check_suite(settings, names=names, against=revision, working=working, **on)
        else:
            from .render import print_bench_check

            def kernel_line(k) -> None:
                where = f" on {k.ran_on.describe()}" if k.ran_on is not None else ""
                err.print(f"{k.name}: {k.status.upper()} ({k.wall_s:.0f} s){where}")

            with err.status("checking…") as status:
                if chosen is not None:
                    on["on_event"] = lambda e: status.update(_engine_line(e))
                result = check_suite(settings, names=names, against=revision, working=working,
                                     progress=lambda p: status.update(styled((p.stage, "bold"), f": {p.message}")),
                                     on_kernel=kernel_line, **on)
    finally:
        if chosen is not None:
            chosen.close()
    if junit is not None:
        junit.write_text(junit_xml(result))
    if html is not None:
        from ..bench.html_report import bench_html

        html.write_text(bench_html(result), encoding="utf-8")
    summary_file = summary or (Path(os.environ["GITHUB_STEP_SUMMARY"]) if os.environ.get("GITHUB_STEP_SUMMARY")
                               else None)
    if summary_file is not None:
        with summary_file.open("a") as handle:
            handle.write(step_summary(result))
    code = 130 if result.interrupted else result.exit_code  # Ctrl-C: what finished is reported, then 130
    if json_output:
        out.print_json(json.dumps({**result.model_dump(mode="json"), "exit_code": code}))
    else:
        print_bench_check(out, result)
        if result.interrupted:
            err.print("interrupted: the kernels not checked were cancelled")
    raise typer.Exit(code)


runs_app = typer.Typer(context_settings=_HELP, no_args_is_help=True, rich_markup_mode=None, help="The run log: every `kernelloop optimize` run.")
app.add_typer(runs_app, name="runs")


@runs_app.command("list")
def runs_list(kernel: Optional[str] = typer.Option(None, help="Only runs of this kernel (file stem)."),
              limit: int = typer.Option(20, help="How many runs, newest first."),
              json_output: bool = typer.Option(False, "--json")) -> None:
    """The latest runs, newest first.

    \b
    Examples:
      kernelloop runs list
      kernelloop runs list --kernel naive_matmul --limit 5 --json"""
    from ..runs.store import run_store  # the run log alone: never the agent loop
    from .render import runs_table

    runs = run_store(load_settings()).list_runs(kernel=kernel, limit=limit)
    if json_output:
        out.print_json(json.dumps([r.model_dump(mode="json", exclude={"options", "summary"}) for r in runs]))
    else:
        out.print(runs_table(runs))


@runs_app.command("show")
def runs_show(run_id: str = typer.Argument(..., help="A run id, or a unique prefix of one."),
              json_output: bool = typer.Option(False, "--json")) -> None:
    """One run: its outcome, every attempt and why it was accepted or rejected, its folder.

    Examples:
      kernelloop runs show 20261121-1015
      kernelloop runs show 2026112 --json          # a unique prefix"""
    from ..runs.store import run_store  # the run log alone: never the agent loop
    from .render import print_run

    store = run_store(load_settings())
    record = store.get_run(run_id)
    attempts = store.attempts(record.run_id)
    if json_output:
        out.print_json(json.dumps({**record.model_dump(mode="json", exclude={"options"}),
                                   "attempts": [a.model_dump(mode="json") for a in attempts]}))
    else:
        print_run(out, record, attempts)


@runs_app.command("score")
def runs_score(run_ids: Optional[list[str]] = typer.Argument(
                   None, help="Runs to score, one per kernel (ids or unique prefixes) [default: the latest run of "
                              "every kernel in the run log]."),
               json_output: bool = typer.Option(False, "--json", help="Print the score as JSON.")) -> None:
    """The suite score of optimize runs: the share of kernels correct and at least p times faster
    (KernelBench's fast_p, p = 1, 1.2, 2) and the geometric-mean speedup (docs/optimize.md).

    Examples:
      kernelloop runs score
      kernelloop runs score 20261121-1015 20261121-1102 --json"""
    from ..runs.store import run_store  # the run log alone: never the agent loop
    from ..runs.suite_score import score_store
    from .render import print_suite_score

    score = score_store(run_store(load_settings()), run_ids or None)
    if json_output:
        out.print_json(score.model_dump_json())
    else:
        print_suite_score(out, score)


corpus_app = typer.Typer(context_settings=_HELP, no_args_is_help=True, rich_markup_mode=None, help="The researcher's knowledge corpus: bundled notes and your documents.")
app.add_typer(corpus_app, name="corpus")


@corpus_app.command("add")
def corpus_add(path: Path = typer.Argument(..., help="A file or folder of Markdown, text, HTML or PDF."),
               json_output: bool = typer.Option(False, "--json")) -> None:
    """Index your own documents (e.g. a local copy of the CUDA C++ Best Practices Guide).

    Examples:
      kernelloop corpus add ~/docs/cuda-best-practices.pdf
      kernelloop corpus add ./team-notes/ --json"""
    from ..corpus import add_path
    from ..errors import InputError

    if not path.exists():
        raise InputError(f"{path}: no such file or folder")
    report = add_path(path, load_settings())
    if json_output:
        out.print_json(report.model_dump_json())
        return
    out.print(f"added {len(report.added)} document(s)" + (f", skipped {len(report.skipped)}" if report.skipped else ""))
    for skipped, why in report.skipped:
        err.print(styled(("skipped", "yellow"), f" {skipped}: {why}"))
    for warning in report.warnings:
        err.print(styled(("warning:", "yellow"), f" {warning}"))


@corpus_app.command("list")
def corpus_list(json_output: bool = typer.Option(False, "--json")) -> None:
    """The indexed documents (bundled notes, exemplars, yours).

    Examples:
      kernelloop corpus list
      kernelloop corpus list --json"""
    from rich.table import Table

    from ..corpus import list_documents

    docs = list_documents(load_settings())
    if json_output:

        out.print_json(json.dumps([d.model_dump() for d in docs], default=str))
        return
    table = Table()
    for col in ("id", "kind", "title", "chunks", "source"):
        table.add_column(col, overflow="fold")
    for d in docs:
        table.add_row(d.doc_id, d.kind, d.title, str(d.chunks), d.source)
    out.print(table)


@corpus_app.command("remove")
def corpus_remove(target: str = typer.Argument(..., help="A document id, file or folder you added.")) -> None:
    """Remove documents you added (bundled notes stay).

    Examples:
      kernelloop corpus remove ./team-notes/
      kernelloop corpus remove DOC_ID              # an id from `kernelloop corpus list`"""
    from ..corpus import remove_document
    from ..errors import InputError

    if not remove_document(target, load_settings()):
        raise InputError(f"{target}: no document you added matches; see `kernelloop corpus list`")
    out.print(f"removed {target}")


@corpus_app.command("search")
def corpus_search(query: str = typer.Argument(...),
                  limit: int = typer.Option(5, "--limit", help="How many hits."),
                  k: Optional[int] = typer.Option(None, "--k", hidden=True, help="Old name of --limit."),
                  mode: str = typer.Option("auto", metavar="auto|bm25|dense|hybrid",
                                           help="Retrieval: auto (hybrid when dense is installed, else bm25)."),
                  json_output: bool = typer.Option(False, "--json")) -> None:
    """Search the corpus the way the researcher does.

    \b
    Examples:
      kernelloop corpus search "threads read addresses far apart"
      kernelloop corpus search "bank conflicts" --limit 3 --mode bm25"""
    from ..corpus import search

    hits = search(query, k=limit if k is None else k, mode=mode, settings=load_settings())  # type: ignore[arg-type]
    if json_output:

        out.print_json(json.dumps([h.model_dump() for h in hits]))
        return
    if not hits:
        out.print("no research notes (the corpus is empty or nothing matched)")
    for i, h in enumerate(hits, 1):
        out.print(styled((f"{i}. {h.title}", "bold"), " ", (f"({h.doc_id}, {h.kind}, {h.retriever} {h.score:.3f})", "dim")))
        out.print("   " + " ".join(h.chunk.split())[:300])


@corpus_app.command("stats")
def corpus_statistics(json_output: bool = typer.Option(False, "--json")) -> None:
    """Documents, chunks, where the index lives, whether dense retrieval is on.

    Examples:
      kernelloop corpus stats
      kernelloop corpus stats --json"""
    from ..corpus import corpus_stats

    st = corpus_stats(load_settings())
    if json_output:
        out.print_json(st.model_dump_json())
        return
    out.print(f"{st.documents} documents, {st.chunks} chunks ({', '.join(f'{k}: {v}' for k, v in st.by_kind.items())}); "
              f"dense: {st.dense or 'off (install kernelloop[embeddings])'}; index: {st.index_path}")
    for w in getattr(st, "warnings", []) or []:
        err.print(styled(("warning:", "yellow"), f" {w}"))


mcp_app = typer.Typer(context_settings=_HELP, no_args_is_help=True, rich_markup_mode=None, help="MCP tool servers for agents (stdio).")
app.add_typer(mcp_app, name="mcp")


@mcp_app.command("serve")
def mcp_serve(
    # shown in the usage line and the text below, not as `SERVER <str>` (typer prints a plain argument's type; a
    # choice type would answer a wrong name with its three-line usage error, not the one line serve() gives)
    name: str = typer.Argument(..., metavar="SERVER", hidden=True),
) -> None:
    """Run one of kernelloop's MCP servers on stdio (stdout carries only the protocol).

    SERVER is profiler|verifier|researcher (sandbox and rag: the older names of verifier and researcher).

    Example: kernelloop mcp serve profiler"""
    from ..mcp import serve

    serve(name)


def main() -> None:
    try:
        code = app(standalone_mode=False)
        sys.exit(code if isinstance(code, int) else 0)
    except KernelloopError as exc:
        err.print(styled(("error:", "red"), f" {exc}"))
        sys.exit(2)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except OSError as exc:  # a path the user gave (or a folder the settings name) cannot be used
        where = f": {exc.filename}" if exc.filename else ""
        what = exc.strerror or str(exc)
        if isinstance(exc, (FileExistsError, NotADirectoryError)) and exc.filename:  # a file where a folder goes
            blocking = next((p for p in (Path(exc.filename), *Path(exc.filename).parents) if p.is_file()), None)
            if blocking is not None:
                what, where = f"{blocking} is a file, not a folder", ""
        err.print(styled(("error:", "red"), f" {what}{where} (check the path; for kernelloop's own "
                         "folders, KERNELLOOP_DATA_DIR / KERNELLOOP_CACHE_DIR or data_dir / cache_dir in kernelloop.toml)"))
        sys.exit(2)
    except KeyboardInterrupt:
        err.print("interrupted")
        sys.exit(130)
    except typer.Abort:
        err.print("aborted")
        sys.exit(130)
    except Exception as exc:
        # Usage errors from typer's bundled click: show them the way click would.
        if hasattr(exc, "show") and isinstance(getattr(exc, "exit_code", None), int):
            exc.show()
            sys.exit(exc.exit_code)
        raise
