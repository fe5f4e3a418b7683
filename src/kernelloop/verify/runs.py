"""Running a built kernel program once: seed in, stdout/KERNEL_MS/output dump/trace out."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np
from pydantic import BaseModel, ConfigDict

from ..tools.cupti import CuptiTrace, CuptiUnavailable, injection_env, read_trace
from ..tools.sandbox import Limits, RunResult, private_workdir, run_sandboxed, stage_file
from .outputs import DumpError, KernelMs, parse_kernel_ms, read_dump

OUTPUT_FILE_ENV = "KERNELLOOP_OUTPUT_FILE"


class ProgramRun(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)

    seed: int
    result: RunResult
    kernel_ms: KernelMs
    trace: CuptiTrace | None = None
    trace_problem: str | None = None
    dump: list[np.ndarray] | None = None  # the full output, when the harness writes one
    dump_problem: str | None = None


def run_program(binary: Path, *, seed: int, limits: Limits, cupti_library: Path | None = None,
                wrapper: list[str] | None = None, want_dump: bool = True) -> ProgramRun:
    """One sandboxed run. `wrapper` prefixes the command (compute-sanitizer)."""
    with private_workdir() as work:
        program = stage_file(binary, work, "program")
        os.chmod(program, 0o755)
        env = {"KERNELLOOP_SEED": str(seed)}
        dump_file = work / "output.bin"
        if want_dump:
            env[OUTPUT_FILE_ENV] = str(dump_file)
        trace_file = work / "trace.jsonl"
        if cupti_library is not None:
            lib = stage_file(cupti_library, work, cupti_library.name)
            env.update(injection_env(lib, trace_file))
        argv = [*(wrapper or []), str(program)]
        result = run_sandboxed(argv, workdir=work, limits=limits, env=env)
        run = ProgramRun(seed=seed, result=result, kernel_ms=parse_kernel_ms(result.stderr))
        if cupti_library is not None:
            try:
                run.trace = read_trace(trace_file)
            except CuptiUnavailable as exc:
                run.trace_problem = str(exc)
        if want_dump and dump_file.exists() and result.ok:
            try:
                run.dump = read_dump(dump_file)
            except (DumpError, OSError) as exc:
                run.dump_problem = str(exc)
        return run


def output_digest(run: ProgramRun) -> str:
    """SHA-256 of a run's results: its stdout, then each dumped array's dtype, shape and bytes."""
    digest = hashlib.sha256(run.result.stdout.encode("utf-8", "surrogateescape"))
    for array in run.dump or []:
        digest.update(f"\n{array.dtype.str} {array.shape}\n".encode())
        digest.update(np.ascontiguousarray(array).tobytes())
    return digest.hexdigest()
