"""Running a built kernel program once: seed in, stdout/KERNEL_MS/output dump/trace out."""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import os
from pathlib import Path
from typing import NamedTuple

import numpy as np
from pydantic import BaseModel, ConfigDict

from ..tools.cupti import FD_ENV, PRELOAD_ENV, CuptiTrace, CuptiUnavailable, injection_env, parse_trace
from ..tools.sandbox import Limits, RunResult, private_workdir, run_sandboxed, stage_file
from .outputs import DumpError, KernelMs, parse_kernel_ms
from .records import OutputRecords, parse_header_records, read_records

OUTPUT_FILE_ENV = "KERNELLOOP_OUTPUT_FILE"  # a contract-v1 harness's output dump
OUTPUT_FD_ENV = "KERNELLOOP_OUTPUT_FD"  # the v2 header's records: a pipe the verifier reads as the program runs
# A literal only the v2 header holds: a binary carrying it writes its records to the pipe, never to a file
V2_HEADER_MARK = b"kernelloop-end 2 %llu"
STREAM_FD_ENV = "KERNELLOOP_STREAM_FD"  # the verifier's pipe: each timed call's key and stress bits, its sample positions
SIZE_INDEX_ENV = "KERNELLOOP_SIZE_INDEX"
SIZE_DRAW_ENV = "KERNELLOOP_SIZE_DRAW"  # the verifier's draw of a problem size nobody chose in advance
STREAM_BYTES = 8 * 8192  # a pipe's default buffer whole: 2 draws (key and stress, samples) per timed call, up to 4000 calls
GUARD_EXIT_CODE = 86  # kernelloop_harness.cuh: a guard zone around a buffer was overwritten
INPUT_WRITTEN_EXIT_CODE = 87  # kernelloop_harness.cuh: a call changed an input buffer
NONFINITE_ENV = "KERNELLOOP_NONFINITE"  # the non-finite experiment: which special values among stressed calls' spikes
EXACT_BUFFERS_ENV = "KERNELLOOP_EXACT_BUFFERS"  # every buffer its own exact-size allocation (a baseline memcheck run)
INPUT_SCALE_ENV = "KERNELLOOP_INPUT_SCALE"  # every floating-point input times 2^s (the scaled-input experiment)
NONFINITE_BUFFERS_ENV = "KERNELLOOP_NONFINITE_BUFFERS"  # which inputs get the special values (a mask of buffer indices)
WIDE_INTS_ENV = "KERNELLOOP_WIDE_INTS"  # guessed-range integer inputs drawn wide: 1, 2 bands per stretch (2: never negative), 3 one band
WIDE_INTS_BUFFERS_ENV = "KERNELLOOP_WIDE_INTS_BUFFERS"  # ... in these inputs (a mask of buffer indices)
WIDE_INTS_BITS_ENV = "KERNELLOOP_WIDE_INTS_BITS"  # ... mode 3's one band, [0, 2^bits)
WIDE_INTS_SHAPE_ENV = "KERNELLOOP_WIDE_INTS_SHAPE"  # ... mode 3's band as a bound: top:lo:shift:sorted:exact
WIDE_INTS_TOPS_ENV = "KERNELLOOP_WIDE_INTS_TOPS"  # ... a draw per buffer (inputs drawn wide together): i=top:mode:bits:lo,...
GUARD_BYTE_ENV = "KERNELLOOP_GUARD_BYTE"  # the byte in the inputs' guard zones (the guard contrast runs)
PART_FILL_ENV = "KERNELLOOP_PART_FILL"  # what memory the program allocates holds until written (those runs)
# "KEY:UNIT:FLIP": exact buffers at drawn offsets, in declaration order or (FLIP) the reverse (the caller-layout runs)
BUFFER_SHIFT_ENV = "KERNELLOOP_BUFFER_SHIFT"
# Bits of a call's stress draw (kernelloop_harness.cuh: kStressed, kStressHeavy).
STRESSED_BIT, HEAVY_BIT, FIXED_POISON_BIT, KEEP_OUTPUTS_BIT = 1, 2, 64, 128
WARM_INPUTS_BITS = 256 | 512  # kWarmInputs: both set, the call's inputs read into L2 after the flush


def stream_for(secret: bytes, *, heavy: bool = True, fixed_poison: bool = False) -> bytes:
    """The bytes a v2 harness reads from the pipe, expanded from a per-experiment secret:
    the baseline and candidate runs of one experiment read the same stream. Per timed call,
    two draws: the call's key and stress bits, then the positions sampled after it. Timing
    runs (`heavy=False`) never get the "one value" stress, which changes a kernel's speed
    (atomics on one address): it is a correctness check, not the workload timed; in correctness
    runs every stressed call gets it (its scale is drawn anew per call, so more draws leave
    less room for a fast path that is exact only on the scales a probe can see). With
    `fixed_poison` (the baseline's calibration run) every call's outputs are poisoned with the same
    byte, so outputs that depend on nothing but the poison show as the same in every call."""
    out = bytearray()
    counter = 0
    while len(out) < STREAM_BYTES:
        out += hashlib.sha256(secret + counter.to_bytes(8, "little")).digest()
        counter += 1
    for offset in range(0, STREAM_BYTES, 16):
        if not heavy:
            out[offset] &= 0xFF ^ HEAVY_BIT
        elif out[offset] & STRESSED_BIT:
            out[offset] |= HEAVY_BIT  # correctness runs: every stressed call gets "one value" too
        if fixed_poison:
            out[offset] |= FIXED_POISON_BIT
    return bytes(out[:STREAM_BYTES])


def _stress_draws(secret: bytes, calls: int, heavy: bool) -> list[int]:
    stream = stream_for(secret, heavy=heavy)
    return [int.from_bytes(stream[16 * c:16 * c + 8], "little") for c in range(min(calls, STREAM_BYTES // 16))]


def stressed_calls(secret: bytes, calls: int, *, heavy: bool = True, nonfinite: bool = False) -> set[int]:
    """The timed calls whose inputs a v2 harness stresses (bit 0 of the call's draw). In the
    non-finite experiment these, and always the last call (whose outputs are dumped whole), get
    NaN and +-inf among their spikes."""
    stressed = {c for c, d in enumerate(_stress_draws(secret, calls, heavy)) if d & STRESSED_BIT}
    return stressed | {calls - 1} if nonfinite and calls > 0 else stressed


def kept_output_calls(secret: bytes, calls: int, *, heavy: bool = True) -> set[int]:
    """The timed calls whose outputs and scratch a v2 harness leaves as the last call left them
    (kKeepOutputs: bit 7 of the call's draw, where bit 6, which asks for the 0xFF poison, is clear;
    never the last call, never in the calibration run):
    an element the kernel does not write holds what an earlier call put there."""
    return {c for c, d in enumerate(_stress_draws(secret, calls, heavy))
            if d & KEEP_OUTPUTS_BIT and not d & FIXED_POISON_BIT and c != calls - 1}


def warm_input_calls(secret: bytes, calls: int, *, heavy: bool = True) -> set[int]:
    """The timed calls whose inputs a v2 harness reads into L2 after the flush (kWarmInputs: bits 8 and 9 of the
    call's draw, one call in four), as the kernel that wrote them leaves them for a real caller."""
    return {c for c, d in enumerate(_stress_draws(secret, calls, heavy)) if d & WARM_INPUTS_BITS == WARM_INPUTS_BITS}


def heavy_calls(secret: bytes, calls: int, *, heavy: bool = True) -> set[int]:
    """The stressed calls that also get the "one value" stress (slower for some baselines)."""
    return {c for c, d in enumerate(_stress_draws(secret, calls, heavy)) if d & STRESSED_BIT and d & HEAVY_BIT}


class ProgramRun(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)

    seed: int
    result: RunResult
    kernel_ms: KernelMs
    trace: CuptiTrace | None = None
    trace_problem: str | None = None
    dump: list[np.ndarray] | None = None  # the full output, when the harness writes one
    dump_problem: str | None = None
    records: OutputRecords | None = None  # everything the harness wrote (v2: manifest, per-call samples)
    secret: str | None = None  # hex of the experiment's secret (v2), revealed once the run is over
    heavy: bool = True  # whether the stream allowed the "one value" stress (correctness runs)
    nonfinite: bool = False  # the non-finite experiment: NaN and +-inf among the stressed calls' spikes
    size_index: int = 0

    @property
    def guard_tripped(self) -> bool:
        return self.result.returncode == GUARD_EXIT_CODE

    @property
    def input_written(self) -> bool:
        return self.result.returncode == INPUT_WRITTEN_EXIT_CODE


class WideDraw(NamedTuple):
    """The wider-integer experiment's draw (kernelloop_harness.cuh, UniformInt): `mode` 1, 2 (bands per
    stretch), 3 (one band, [0, 2^bits), or [-2^bits, 0) for negative bits); with `top`, mode 3's band is
    [lo, lo + t) with t drawn per call in (top/2, top] (`exact`: t = top), its values multiples of
    2^shift, or non-decreasing in runs (`sorted`). `buffers`: a mask of the manifest's buffer indices.
    `tops`: (index, top, mode, bits, lo) per buffer, a draw of its own in place of the draw's (inputs
    drawn wide together, each as the baseline took it alone: in its stretches, below its bound, in a
    negative band, moved up by lo); mode 0 keeps the draw's mode, bits and lo with `top` as its own."""
    mode: int
    buffers: int
    bits: int = 0
    top: int = 0
    lo: int = 0
    shift: int = 0
    sorted: bool = False
    exact: bool = False
    tops: tuple[tuple[int, int, int, int, int], ...] = ()


def run_program(binary: Path, *, seed: int, limits: Limits, cupti_library: Path | None = None,
                wrapper: list[str] | None = None, want_dump: bool = True, secret: bytes | None = None,
                size_index: int = 0, size_draw: int | None = None, heavy: bool = True,
                fixed_poison: bool = False, nonfinite_calls: int | None = None, nonfinite_kinds: int = 15,
                nonfinite_buffers: int | None = None, exact_buffers: bool = False,
                guard_byte: int | None = None, part_fill: int | None = None,
                buffer_shift: tuple[int, int, int] | None = None,
                wide_ints: WideDraw | tuple[int, int, int] | None = None, input_scale: int = 0,
                input_factor: float = 1.0) -> ProgramRun:
    """One sandboxed run. `wrapper` prefixes the command (compute-sanitizer). `secret` feeds a
    v2 harness's stream pipe (a v1 harness ignores it); `size_index` picks a v2 harness's
    alternative problem size, or (-1, with `size_draw`) has it draw one; `nonfinite_calls` (its
    timed calls) makes it the non-finite experiment (stressed_calls), with the special values
    `nonfinite_kinds` names (bits: 1 NaN, 2 +inf, 4 -inf, 8 zero). `exact_buffers` has the harness
    allocate every buffer to its exact size, with no guard zones (a memcheck run of the baseline:
    any access past a buffer is then out of bounds); `nonfinite_buffers` (a mask of the manifest's
    buffer indices) limits the special values to those inputs; `guard_byte` fills the inputs'
    guard zones (default 0xFF, NaN); `part_fill` the memory the program allocates, until it writes it;
    `buffer_shift` (key, unit, flip), with `exact_buffers`, starts
    every buffer at an offset below 2 MiB drawn from the key, in multiples of `unit` bytes (0: the
    buffer's element size), where cudaMalloc's alignment would put none; `flip` 1: every offset bit
    the other way. `wide_ints` (mode, mask, bits): the inputs of the mask whose integer range nobody
    stated drawn wider (kernelloop_harness.cuh, UniformInt): in a band of its own per stretch of the
    buffer, up to every value of the type (mode 1) or every non-negative one (2), or all in one band
    [0, 2^bits) (3), or in the shape a WideDraw gives. `input_scale` s, `input_factor` F in [1, 2): every
    floating-point input (but fp16) times F (rounded once) and 2^s in every call (verify/magnitudes.py)."""
    with private_workdir() as work:
        program = stage_file(binary, work, "program")
        os.chmod(program, 0o755)
        env = {"KERNELLOOP_SEED": str(seed)}
        if nonfinite_calls is not None:
            env[NONFINITE_ENV] = str(nonfinite_kinds)
            if nonfinite_buffers is not None:
                env[NONFINITE_BUFFERS_ENV] = str(nonfinite_buffers)
        if guard_byte is not None:
            env[GUARD_BYTE_ENV] = str(guard_byte)
        if part_fill is not None:
            env[PART_FILL_ENV] = str(part_fill)
        if input_scale or input_factor != 1.0:
            env[INPUT_SCALE_ENV] = f"{input_scale}:{input_factor!r}"
        if wide_ints is not None:
            wide = WideDraw(*wide_ints)
            env[WIDE_INTS_ENV], env[WIDE_INTS_BUFFERS_ENV] = str(wide.mode), str(wide.buffers)
            env[WIDE_INTS_BITS_ENV] = str(wide.bits)
            if wide.top or wide.lo or wide.shift or wide.sorted or wide.exact:  # (exact: per-buffer tops too)
                env[WIDE_INTS_SHAPE_ENV] = f"{wide.top}:{wide.lo}:{wide.shift}:{int(wide.sorted)}:{int(wide.exact)}"
            if wide.tops:
                env[WIDE_INTS_TOPS_ENV] = ",".join(f"{index}={top}:{mode}:{bits}:{lo}" for index, top, mode, bits, lo
                                                   in wide.tops)
        if exact_buffers:
            env[EXACT_BUFFERS_ENV] = "1"
            if buffer_shift is not None:
                env[BUFFER_SHIFT_ENV] = ":".join(str(x) for x in buffer_shift)
        if size_index > 0:
            env[SIZE_INDEX_ENV] = str(size_index)
        if size_index < 0 and size_draw:
            env[SIZE_DRAW_ENV] = str(size_draw)
        dump_file = work / "output.bin"
        v2 = carries_v2_header(binary)
        if want_dump and not v2:
            env[OUTPUT_FILE_ENV] = str(dump_file)
        if cupti_library is not None:  # the trace comes through a pipe (FD_ENV), read while the program runs
            env.update(injection_env(stage_file(cupti_library, work, cupti_library.name)))
            if wrapper:  # compute-sanitizer: not preloaded into the tool itself; a memcheck run's trace is not read
                env.pop(PRELOAD_ENV, None)
        argv = [*(wrapper or []), str(program)]
        read_fd = write_fd = -1
        if secret is not None:
            # The pipe is filled and closed before the program starts: the stream lives in
            # the kernel's pipe buffer, not in the process, until the harness reads it.
            read_fd, write_fd = os.pipe()
            with contextlib.suppress(OSError):  # the default (64 KiB) holds the stream already
                fcntl.fcntl(write_fd, fcntl.F_SETPIPE_SZ, 2 * STREAM_BYTES)
            os.write(write_fd, stream_for(secret, heavy=heavy, fixed_poison=fixed_poison))
            os.close(write_fd)
            info = os.fstat(read_fd)  # the header checks the descriptor is still this pipe before every read
            env[STREAM_FD_ENV] = f"{read_fd}:{info.st_dev}:{info.st_ino}"
        try:
            pipes = ((OUTPUT_FD_ENV,) if want_dump and v2 else ()) + ((FD_ENV,) if cupti_library is not None else ())
            result = run_sandboxed(argv, workdir=work, limits=limits, env=env,
                                   pass_fds=(read_fd,) if read_fd >= 0 else (), pipes=pipes)
        finally:
            if read_fd >= 0:
                os.close(read_fd)
        run = ProgramRun(seed=seed, result=result, kernel_ms=parse_kernel_ms(result.stderr),
                         secret=secret.hex() if secret is not None else None, size_index=size_index, heavy=heavy,
                         nonfinite=nonfinite_calls is not None)
        if cupti_library is not None:
            try:
                run.trace = parse_trace(result.pipes[FD_ENV], sealed=True)
            except CuptiUnavailable as exc:
                run.trace_problem = str(exc)
        if want_dump and result.ok and (v2 or dump_file.exists()):
            try:
                run.records = parse_header_records(result.pipes[OUTPUT_FD_ENV]) if v2 else read_records(dump_file)
                run.dump = run.records.outputs or None
            except (DumpError, OSError) as exc:
                run.dump_problem = str(exc)
        return run


@functools.lru_cache(maxsize=64)
def _carries_mark(path: str, size: int, mtime_ns: int) -> bool:
    return V2_HEADER_MARK in Path(path).read_bytes()


def carries_v2_header(binary: Path) -> bool:
    """Whether BINARY holds kernelloop_harness.cuh (contract v2). Its records are then read from the pipe
    only, and must be the header's whole stream: code of the program's own that silenced the header
    (its variable unset, its descriptor closed) cannot hand the verifier a file in their place."""
    info = binary.stat()
    return _carries_mark(str(binary), info.st_size, info.st_mtime_ns)


def output_digest(run: ProgramRun) -> str:
    """SHA-256 of a run's results: its stdout, then each dumped array's dtype, shape and bytes."""
    digest = hashlib.sha256(run.result.stdout.encode("utf-8", "surrogateescape"))
    for array in run.dump or []:
        digest.update(f"\n{array.dtype.str} {array.shape}\n".encode())
        digest.update(np.ascontiguousarray(array).reshape(-1).view(np.uint8))  # its bytes where they lie, no copy
    return digest.hexdigest()
