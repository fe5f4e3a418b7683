"""`kernelloop verify --static`: every gate that needs no GPU, on its own.

The source policy, the include check, both builds (the candidate's editable part with the
baseline's frozen harness), the object and program scans, and the precision-downgrade scan:
exactly what `verify` decides before it runs anything, so a candidate that passes here is one
`verify` would go on to run on a GPU.
"""

from __future__ import annotations

from pathlib import Path

from ..config import Settings
from ..errors import InputError
from ..program.split import candidate_editable_part, read_program, split_program
from ..tools.gpu import detect_gpus
from ..tools.nvcc import build_flags_notes, compiler_error, find_toolchain
from .gate import build_summary, static_gates
from .verdict import Reason, StaticCheck

# Without a GPU to ask, build for Ampere (A10/A40/RTX 30xx): it has every instruction class
# the precision scan looks for (fp16/bf16, tf32 and int8 tensor cores) and is the oldest
# architecture the bundled exemplars are written for.
DEFAULT_ARCH = "sm_86"


def choose_arch(settings: Settings) -> tuple[str, str]:
    """(arch, where it came from): --arch or the verify.arch setting, else the first visible
    GPU's, else DEFAULT_ARCH."""
    if settings.verify.arch:
        return settings.verify.arch, "--arch / verify.arch setting"
    gpus = detect_gpus()
    if gpus:
        return gpus[0].arch, f"the visible GPU ({gpus[0].name})"
    return DEFAULT_ARCH, "default (no GPU visible)"


def check_static_files(baseline: Path, candidate: Path, settings: Settings) -> StaticCheck:
    return check_static_sources(read_program(baseline), read_program(candidate), settings,
                                baseline_name=str(baseline), candidate_name=str(candidate))


def check_static_sources(baseline_text: str, candidate_text: str, settings: Settings, *, baseline_name: str,
                         candidate_name: str) -> StaticCheck:
    split = split_program(baseline_text, baseline_name)
    editable, notes = candidate_editable_part(candidate_text, split, candidate_name)
    if not editable.strip():
        raise InputError(f"{candidate_name}: the candidate's editable part is empty")
    toolchain = find_toolchain(build_flags=settings.verify.build_flags)
    notes += build_flags_notes(toolchain)
    arch, arch_source = choose_arch(settings)
    static = static_gates(split, editable, arch=arch, settings=settings, toolchain=toolchain,
                          baseline_name=baseline_name)
    cand = static.candidate
    reasons: list[Reason] = []
    if any(v.rule != "reduced_precision" for v in static.violations):
        reasons.append(Reason.policy)
    if any(v.rule == "reduced_precision" for v in static.violations):
        reasons.append(Reason.reduced_precision)
    if cand is not None and not cand.ok:
        reasons.append(Reason.compile)
    if settings.verify.allow_reduced_precision:
        notes.append("precision scan skipped: reduced precision allowed (--allow-reduced-precision)")
    if static.violations:
        first = static.violations[0]
        summary = (f"rejected: {len(static.violations)} violation(s); first: {first.describe()}")
    elif cand is None or not cand.ok:
        stage = cand.stage if cand is not None else "compile"
        last = compiler_error(cand.log) if cand else ""
        summary = f"rejected: does not build ({stage})" + (f": {last.strip()}" if last else "")
    else:
        scanned = (f", precision scan ({static.precision.source.upper()})" if static.precision is not None else "")
        summary = ("passes every static gate (policy, includes, compile, object and program scans"
                   f"{scanned}); `kernelloop verify` would go on to run it on a GPU")
    return StaticCheck(
        ok=not reasons, summary=summary, arch=arch, split_mode=split.mode, notes=notes,
        violations=static.violations, baseline_build=build_summary(static.baseline),
        candidate_build=build_summary(cand) if cand is not None else None, reasons=reasons,
        baseline_file=baseline_name, candidate_file=candidate_name, nvcc_version=toolchain.version,
        arch_source=arch_source, precision_source=static.precision.source if static.precision else "",
        allow_reduced_precision=settings.verify.allow_reduced_precision,
    )


def refuse_what_verify_refuses(program: str, name: str, settings: Settings) -> None:
    """Raise InputError when the static gate turns PROGRAM away against itself: `kernelloop init`
    never writes a program `verify` and `optimize` would refuse (kept-aside set 7: a launcher's own
    `fprintf` on a launch error, which only the frozen harness may do). The gate decides, every rule
    of it, not a list of init's own."""
    check = check_static_sources(program, program, settings, baseline_name=name, candidate_name=name)
    if not check.ok:
        # a launcher's own error report is the common case (kept-aside sets 7 and 9): the program's
        # helper functions stay frozen, so a print there is the user's, never a candidate's
        printing = any(v.rule == "printing" for v in check.violations)
        hint = ("move the printing into a helper function outside the launcher (helpers stay frozen and "
                "may print), or remove it; or wrap the kernel alone (--kernel, --grid, --block)" if printing else
                "change that code in your file, or wrap the kernel alone (--kernel, --grid, --block)")
        raise InputError(f"the generated program would not pass kernelloop verify against itself ({check.summary}): "
                         + hint)
