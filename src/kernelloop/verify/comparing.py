"""Comparing a candidate's run with the baseline's, as every experiment of the verify gate does:
fresh seeds and stream secrets, the baseline's own noise, the tolerance, the comparison of printed
numbers, the output dump and every timed call's samples, and a run's own failure."""

from __future__ import annotations

import math
import secrets

import numpy as np
from pydantic import BaseModel

from .experiment import compare_calls, compare_nonfinite_maps
from .outputs import Comparison, Tolerance, check_output_names, compare_dumps, compare_outputs, numbers_in, printed_dtype
from .program_run import ProgramRun, kept_output_calls, stressed_calls
from .records import Manifest
from .verdict import Reason

# The inputs' guard bytes of the contrast runs: the usual 0xFF (NaN), then 0x4B4B4B4B, 1.3e7 as a
# float32 (14.6 as float16, 1.3e7 as bfloat16, 1.26e9 as an int32), and 0xCBCBCBCB, -2.7e7 (and
# negative alike): finite, large, of both signs, so neither a max nor a min, a ReLU nor a conversion
# hides them, and a test for NaN past the buffer (isnan on padding) shows against the NaN run.
GUARD_CONTRAST_BYTES = (0xFF, 0x4B, 0xCB)
# What the memory a program allocates holds in those runs until it writes it (KERNELLOOP_PART_FILL), run by run:
# NaN, a large finite value and zero, so a test for zero, for a bit or against a bound moves with them as well
# as arithmetic (red team round 325: all three guard bytes are non-zero and share bits 0x4B).
PART_CONTRAST_BYTES = (0xFF, 0x4B, 0x00)


def log_tail(text: str, lines: int = 25) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def fresh_seeds(count: int, avoid: set[int]) -> list[int]:
    seeds: list[int] = []
    while len(seeds) < count:
        s = secrets.randbits(63)  # too many to brute-force from the inputs
        if s not in avoid and s not in seeds:
            seeds.append(s)
    avoid.update(seeds)
    return seeds


class BaselineNoise(BaseModel):
    """How far the baseline's own results move between two runs of one experiment (same seed,
    same secret): float atomics make sums order-dependent. The comparison allows the candidate
    `baseline_noise_factor` times this on top of the dtype tolerance: no candidate can be held
    closer to the baseline than the baseline holds to itself. Zero for a deterministic baseline."""

    printed: list[float] = []
    buffers: list[float] = []

    @property
    def any(self) -> bool:
        return any(self.printed) or any(self.buffers)


def baseline_noise(first: ProgramRun, again: ProgramRun, factor: float) -> BaselineNoise:
    a, b = numbers_in(first.result.stdout), numbers_in(again.result.stdout)
    printed = [factor * abs(x - y) if math.isfinite(x) and math.isfinite(y) else 0.0 for x, y in zip(a, b)] \
        if len(a) == len(b) else []
    def spread(x: np.ndarray, y: np.ndarray) -> float:
        if x.shape != y.shape or x.dtype != y.dtype or x.dtype.kind != "f" and str(x.dtype) != "bfloat16":
            return 0.0
        diff = np.abs(x.astype(np.float64) - y.astype(np.float64))
        finite = diff[np.isfinite(diff)]
        return float(np.max(finite)) if finite.size else 0.0

    # Every output buffer's largest difference, over the final dump and (v2) every timed call's
    # samples: 20 draws of the noise rather than one, so one lucky pair cannot set it near zero.
    buffers = [spread(x, y) for x, y in zip(first.dump or [], again.dump or [])]
    if first.records and again.records:
        for call in sorted({smp.call for smp in first.records.samples}):
            for n, (x, y) in enumerate(zip(first.records.samples_of_call(call), again.records.samples_of_call(call))):
                if n < len(buffers):
                    buffers[n] = max(buffers[n], spread(x, y))
    # Printed numbers are derived from the outputs: each also gets the outputs' largest relative
    # variation at its own magnitude (one printed pair alone is a single draw).
    scales = [float(np.max(np.abs(x.astype(np.float64)))) if x.size and x.dtype.kind == "f" else 0.0
              for x in first.dump or []]
    relative = max((b / m for b, m in zip(buffers, scales) if m > 0 and math.isfinite(m)), default=0.0)
    printed = [max(p, factor * relative * abs(x)) for p, x in zip(printed, a)] if printed else []
    return BaselineNoise(printed=printed, buffers=[factor * b for b in buffers])


def tolerance_for(vs, scale: float = 1.0) -> Tolerance:
    """The user's rtol/atol (every output, and per output by name) where set, else by dtype."""
    return Tolerance(rtol=vs.rtol, atol=vs.atol, outputs=vs.tolerances, scale=scale)


def output_names(manifest: Manifest | None) -> list[str] | None:
    """The names of the buffers the dump and the per-call samples hold, in order (the harness
    writes its output and in-out buffers in the order it declared them); None for a v1 harness."""
    return None if manifest is None else [b.name for b in manifest.buffers if b.role in ("output", "inout")]


def check_tolerance_names(vs, manifest: Manifest | None) -> None:
    """A per-output tolerance must name an output of the program: InputError (one line) otherwise."""
    inputs = [b.name for b in manifest.buffers if b.role not in ("output", "inout")] if manifest else []
    check_output_names(tolerance_for(vs), output_names(manifest), inputs)


def compare_runs(base: ProgramRun, cand: ProgramRun, vs, noise: BaselineNoise | None = None,
                  scale: float = 1.0) -> Comparison:
    """Printed numbers, and every element of the output dump when the harness writes one.
    The tolerance is the user's rtol/atol where set (per output by name, else for every output),
    else by dtype (docs/verifier.md, "Tolerance model"); printed numbers take the dump's loosest
    floating dtype (float32 without one), widened to the loosest per-output setting."""
    tolerance = tolerance_for(vs, scale)
    printed = compare_outputs(base.result.stdout, cand.result.stdout, tolerance=tolerance,
                              dtype=printed_dtype(base.dump), noise=noise.printed if noise else None)
    # A contract-v2 program's printed numbers come from its frozen harness, after every element of
    # every output was dumped and compared (with the buffer's RMS as floor): a checksum printed from
    # them only adds honest rounding noise, amplified by cancellation in a zero-crossing output's
    # sum (an honest reordered reduction was refused at 4.8x the allowance on `y sum` alone). They
    # decide only where nothing else is compared (v1).
    v2 = base.records is not None and base.records.manifest is not None
    if base.dump is None or (not printed.match and not v2):
        return printed
    if cand.dump is None:
        return printed.model_copy(update={"match": False, "problem": cand.dump_problem
                                          or "the candidate run wrote no output dump"})
    full = compare_dumps(base.dump, cand.dump, tolerance=tolerance, noise=noise.buffers if noise else None,
                         names=output_names(base.records.manifest if base.records else None),
                         nonfinite_inputs=base.nonfinite)
    if not full.match or not printed.match:
        return full
    return printed.merged(full)


def experiment_secret() -> bytes:
    """A v2 experiment's stream secret: independent of the seed, so the seed predicts nothing."""
    return secrets.token_bytes(32)


def compare_experiment(base: ProgramRun, cand: ProgramRun, vs, noise: BaselineNoise | None = None) -> Comparison:
    """The whole result (printed numbers, full dump), then every timed call's samples (v2)."""
    manifest = base.records.manifest if base.records else None
    stressed: set[int] = set()
    if manifest is not None and base.secret and any(b.any_stress for b in manifest.buffers):
        stressed = stressed_calls(bytes.fromhex(base.secret), manifest.calls, heavy=base.heavy,
                                  nonfinite=base.nonfinite)

    def scale(call: int) -> float:  # stressed inputs make honest sums worse conditioned
        return vs.stress_tolerance_factor if call in stressed else 1.0

    whole = compare_runs(base, cand, vs, noise, scale(manifest.calls - 1) if manifest else 1.0)
    if not whole.match or base.records is None:
        return whole
    calls = compare_calls(base.records, cand.records or base.records.model_copy(update={"manifest": None}),
                          lambda b, c, call: compare_dumps(
                              b, c, tolerance=tolerance_for(vs, scale(call)),
                              noise=noise.buffers if noise else None, names=output_names(manifest),
                              nonfinite_inputs=base.nonfinite))
    if calls is not None and not calls.match:
        return calls
    if cand.records is not None and (specials := compare_nonfinite_maps(base.records, cand.records)) is not None:
        return specials
    return whole if calls is None else whole.merged(calls)


def size_words(size_index: int) -> str:
    return "" if size_index == 0 else " (a size drawn at verify time)" if size_index < 0 else f" (size {size_index})"


def run_failure(run: ProgramRun) -> tuple[Reason, str] | None:
    r = run.result
    if run.guard_tripped:
        return Reason.memcheck, log_tail(r.stderr, 1) or "out-of-bounds write into a guard zone"
    if run.input_written:  # a result written where nothing compares it
        return Reason.correctness, log_tail(r.stderr, 1) or "a call changed an input buffer"
    if r.timed_out:
        return Reason.timeout, r.failure() or "timed out"
    if r.flooded:
        return Reason.output_flood, r.failure() or "output flood"
    if not r.ok:
        return Reason.run_failed, r.failure() or "failed"
    if run.kernel_ms.value is None:
        return Reason.run_failed, run.kernel_ms.problem or "no KERNEL_MS"
    if run.dump_problem:  # records nobody can read, or not the harness's alone, decide nothing
        return Reason.run_failed, f"its records: {run.dump_problem}"
    return None


def calls_kept_as_before(run: ProgramRun) -> frozenset[int]:
    """The calls of RUN whose outputs the harness left as the call before left them."""
    records = run.records
    if run.secret is None or records is None or records.manifest is None:
        return frozenset()
    return frozenset(kept_output_calls(bytes.fromhex(run.secret), records.manifest.calls, heavy=run.heavy))
