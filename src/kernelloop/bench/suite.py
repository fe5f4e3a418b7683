"""The suite as kernelloop.toml declares it: each kernel's program and where its reference lives."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel

from ..config import PROJECT_FILE, BenchKernel, Settings
from ..errors import ConfigError, InputError

REFERENCE_PROGRAM = "program.cu"  # the reference's program text (user headers inlined)
REFERENCE_RECORD = "reference.json"


class SuiteEntry(BaseModel):
    """One kernel of the suite, its paths resolved against the project folder."""

    name: str
    program: Path
    program_as_given: str  # as the suite writes it (relative to the project folder, usually)
    reference_dir: Path
    regression_threshold: float

    @property
    def reference_program(self) -> Path:
        return self.reference_dir / REFERENCE_PROGRAM

    @property
    def reference_record(self) -> Path:
        return self.reference_dir / REFERENCE_RECORD


def _resolve(path: Path, project_dir: Path) -> Path:
    path = path.expanduser()
    return path if path.is_absolute() else project_dir / path


def suite_entries(settings: Settings, *, project_dir: Path | None = None, names: list[str] | None = None,
                  programs_must_exist: bool = True) -> list[SuiteEntry]:
    """The suite's kernels (all, or those named), each program an existing file (unless told
    otherwise: `bench check --against` reports a kernel whose program a change removed)."""
    base = project_dir or Path.cwd()
    bench = settings.bench
    kernels: list[BenchKernel] = bench.kernels
    if not kernels:
        raise ConfigError(f"no bench suite: list your kernels in {base / PROJECT_FILE} as [[bench.kernels]] tables "
                          "(name = \"...\", program = \"path/to/program.cu\"); docs/bench.md")
    seen: set[str] = set()
    for kernel in kernels:
        if kernel.name in seen:
            raise ConfigError(f"{base / PROJECT_FILE}: two [[bench.kernels]] are named {kernel.name!r}")
        seen.add(kernel.name)
    if names:
        unknown = [n for n in names if n not in seen]
        if unknown and programs_must_exist:
            raise InputError(f"no kernel named {', '.join(map(repr, unknown))} in the suite "
                             f"(it has {', '.join(sorted(seen))})")
        kernels = [k for k in kernels if k.name in names]
    references = _resolve(bench.references_dir, base)
    entries = []
    for kernel in kernels:
        program = _resolve(kernel.program, base)
        if programs_must_exist and not program.is_file():
            raise InputError(f"{program}: no such file (kernel {kernel.name!r} of [[bench.kernels]])")
        entries.append(SuiteEntry(name=kernel.name, program=program, program_as_given=str(kernel.program),
                                  reference_dir=references / kernel.name,
                                  regression_threshold=kernel.regression_threshold or bench.regression_threshold))
    return entries
