"""Contract v2's per-experiment checks: every timed call's output, the guarantees a harness
gives, and the speed-of-light bound.

A v2 harness (kernelloop_harness.cuh) declares its buffers and the work of one call in a
manifest, writes a sample of every output after every timed call at positions drawn after
the call, and measures the GPU's copy bandwidth and FP32 throughput before any launcher call.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable

import numpy as np
from pydantic import BaseModel

from .outputs import Comparison, Tolerance, dtype_name
from .records import Manifest, OutputRecords, PartStateRecord
from .verdict import Reason

CompareCall = Callable[[list[np.ndarray], list[np.ndarray], int], Comparison]

V1_MISSING_GUARANTEES = (
    "contract v1 harness: these v2 guarantees do not hold — the timed calls share one set of inputs "
    "(work can be amortized across calls), only the last call's output is checked, L2 is not flushed "
    "between calls, the timed inputs' seed exists in the process before warm-up, no guard zones, "
    "one problem size, no speed-of-light bound (docs/contract.md, 'Contract v2')"
)


def coverage_notes(manifest: Manifest) -> list[str]:
    """What the harness's experiment leaves unchecked, in words for the verdict: one size only,
    sizes that all share a factor (a kernel that drops remainders of it passes), no stressed input."""
    notes: list[str] = []
    if manifest.size_options == 1:
        notes.append("checked at one size only: the harness declares no alternative problem size")
    else:
        shared = [(i, options, math.gcd(*options)) for i, options in enumerate(manifest.size_values, 1)
                  if len(options) > 1 and math.gcd(*options) > 1]
        if shared:
            parts = ", ".join(f"size() call {i} ({', '.join(map(str, options))}: multiples of {g})"
                              for i, options, g in shared)
            notes.append(f"checked sizes share a factor — {parts}: a kernel that ignores remainders of it is not "
                         "caught there; declare an alternative size with no common factor (an odd one)")
        ranges = [(min(o), max(o)) for o in manifest.size_values if len(o) > 1 and min(o) > 0]
        if ranges:
            spans = ", ".join(f"{max(1, lo // 2)}-{hi + hi // 4}" for lo, hi in ranges)
            notes.append(f"sizes are drawn between half the smallest and 1.25x the largest declared one ({spans}), "
                         "each on its own (where the baseline refuses such a size, keeping one relation every "
                         "declared option shows between two sizes): sizes outside that span are not checked")
    inputs = [b for b in manifest.buffers if b.role in ("input", "inout")]
    floats = [b for b in inputs if b.dtype.startswith(("float", "bfloat"))]
    if floats and not any(b.stressed for b in floats):
        notes.append("no floating-point input is stressed (each has a generator of its own): correctness is "
                     "checked on the declared input distribution only")
    unstressed = [b.name for b in inputs if not b.dtype.startswith(("float", "bfloat")) and not b.one_value]
    if unstressed:
        notes.append(f"integer inputs ({', '.join(unstressed)}) are checked on their generator's values only (a "
                     "generator of its own is never stressed unless it says `stressable`): declare the range and "
                     "mix your kernel must handle")
    # (a guessed range is also drawn wide: wide_ints.wide_integer_experiments says where the baseline refused that)
    stressed_ints = [b.name for b in inputs if not b.dtype.startswith(("float", "bfloat")) and b.one_value
                     and not b.guessed_range]
    if stressed_ints:
        notes.append(f"integer inputs ({', '.join(stressed_ints)}) are checked inside their declared range only "
                     "(spread out, and dominated by one value)")
    return notes


def inputs_reach_outputs(records: OutputRecords) -> bool:
    """Whether the outputs change with the inputs: every timed call gets new inputs, so outputs
    whose samples are the same in every call do not depend on anything the harness generates
    (a pointer the kernel reads declared as an output, poisoned the same way every call), and
    comparing them cannot tell a right candidate from a wrong one. True when unknown."""
    calls = sorted({s.call for s in records.samples})
    if len(calls) < 2:
        return True
    first = records.samples_of_call(calls[0])
    return any(len(other) != len(first) or any(a.tobytes() != b.tobytes() for a, b in zip(first, other))
               for other in (records.samples_of_call(c) for c in calls[1:]))


def outputs_computing_nan(records: OutputRecords, *, poison_byte: int | None = 0xFF,
                          kept_calls: frozenset[int] = frozenset()) -> list[str]:
    """Floating-point outputs the baseline leaves NaN on the harness's own (finite) inputs, in its
    last call's dump or any call's samples: it reads past a buffer (guard zones read as NaN), or its
    arithmetic makes NaN of these values (inf - inf, 0 * inf). An infinity is a value like any
    other (a causal mask's -inf), compared exactly. Elements holding `poison_byte` byte for byte
    (0xFF in the calibration run: never written) are not counted; None counts every NaN: in a
    run whose poison is not 0xFF, an all-0xFF NaN is a guard zone's bytes the kernel read and
    carried through (a double add with an |x| operand keeps a NaN operand's bits: kept-aside set
    16's column sums past the matrix). The samples of KEPT_CALLS (outputs left as the call before
    left them: an element never written holds an earlier call's poison) are not read."""
    manifest = records.manifest
    if manifest is None:
        return []
    compared = [(i, b.name) for i, b in enumerate(manifest.buffers) if b.role in ("output", "inout")]
    found: list[str] = []

    def computed_nonfinite(values: np.ndarray) -> bool:
        if values.dtype.kind != "f" and str(values.dtype) != "bfloat16":
            return False
        with np.errstate(invalid="ignore"):
            bad = np.isnan(values.astype(np.float32) if str(values.dtype) == "bfloat16" else values)
        if not bad.any():
            return False
        if poison_byte is None:
            return True
        raw = values[bad].view(np.uint8).reshape(-1, values.dtype.itemsize)
        return bool((raw != poison_byte).any())

    for n, (index, name) in enumerate(compared):  # the dump holds outputs in order; samples name the buffer
        arrays = ([records.outputs[n]] if n < len(records.outputs) else []) + \
            [s.values for s in records.samples if s.buffer == index and s.call not in kept_calls]
        if any(computed_nonfinite(np.ascontiguousarray(a).reshape(-1)) for a in arrays):
            found.append(name)
    return found


# How far beyond its tolerance an output must move between two runs of one experiment that differ
# only in the bytes past the buffers, to say the baseline reads there: far above any honest
# run-to-run variation (float atomics move a cancelling sum by a few times the tolerance), far below
# what a guard value of 1e7 (or -3e7) does to a result it reaches. Never more than a quarter of the
# value's own size: at float16's tolerance 1024x would allow any change at all (red team round 49).
GUARD_CONTRAST_FACTOR = 1024.0
GUARD_CONTRAST_MAX_RELATIVE = 0.25


def outputs_following_guards(first: OutputRecords, second: OutputRecords, tolerance: Tolerance) -> list[str]:
    """Outputs that differ between two runs of the same experiment (seed, stream, poison) whose
    input guard zones held different bytes (large finite values of either sign): the baseline reads
    past a buffer it is given and what it reads there reaches its results (red team rounds 46-48).
    A NaN in those zones can be swallowed (a max, a ReLU, a float-to-int conversion); these values
    cannot. Integers must be equal; floats within GUARD_CONTRAST_FACTOR x the tolerance."""
    manifest = first.manifest
    if manifest is None or second.manifest is None:
        return []
    compared = [(i, b.name) for i, b in enumerate(manifest.buffers) if b.role in ("output", "inout")]
    found: list[str] = []

    def moved(x: np.ndarray, y: np.ndarray, output: str) -> bool:
        if x.shape != y.shape or x.dtype != y.dtype:
            return True
        if x.tobytes() == y.tobytes():
            return False
        name = dtype_name(x.dtype)
        rtol, atol = tolerance.for_dtype(name, output)
        if rtol == 0 and atol == 0:
            return True  # integers: exact
        a, b = x.astype(np.float64), y.astype(np.float64)
        with np.errstate(invalid="ignore", over="ignore"):
            finite = np.isfinite(a)
            if not np.array_equal(finite, np.isfinite(b)) or not np.array_equal(a[~finite], b[~finite]):
                return True  # (a NaN never equals itself: any NaN there counts as moved)
            a, b = a[finite], b[finite]
            if a.size == 0:
                return False
            floor = float(np.sqrt(np.mean(np.square(a)))) if a.size else 0.0
            relative = min(GUARD_CONTRAST_FACTOR * rtol, GUARD_CONTRAST_MAX_RELATIVE)
            allowed = relative * np.maximum(np.maximum(np.abs(a), np.abs(b)), floor) + GUARD_CONTRAST_FACTOR * atol
            return bool(np.any(np.abs(a - b) > allowed))

    for n, (index, name) in enumerate(compared):
        pairs = [(first.outputs[n], second.outputs[n])] if n < len(first.outputs) and n < len(second.outputs) else []
        # every timed call's samples and every warm-up call's (a baseline that reads what it never wrote in its
        # first call only follows the contrast there alone)
        for mine, theirs in ((first.samples, second.samples), (first.warmup_samples, second.warmup_samples)):
            for call in sorted({s.call for s in mine if s.buffer == index}):
                x = next((s.values for s in mine if s.buffer == index and s.call == call), None)
                y = next((s.values for s in theirs if s.buffer == index and s.call == call), None)
                if x is not None and y is not None:
                    pairs.append((x, y))
        if any(moved(np.ascontiguousarray(x).reshape(-1), np.ascontiguousarray(y).reshape(-1), name)
               for x, y in pairs):
            found.append(name)
    return found


def outputs_all_nonfinite(records: OutputRecords) -> list[str]:
    """Floating-point outputs of which the dumped (last) call left not one element finite: in a
    special-value experiment, nothing of them was compared (red team round 49: one input's NaN
    reached every element through a sum, and another input's sanitiser went unchecked)."""
    if records.manifest is None:
        return []
    names = [b.name for b in records.manifest.buffers if b.role in ("output", "inout")]
    found = []
    for name, values in zip(names, records.outputs):
        if values.dtype.kind == "f" or str(values.dtype) == "bfloat16":
            with np.errstate(invalid="ignore"):
                if values.size and not np.isfinite(values.astype(np.float32)).any():
                    found.append(name)
    return found


def outputs_showing_no_work(records: OutputRecords) -> list[tuple[str, str]]:
    """When no compared buffer shows the kernel's work, (output, input) names saying why: each
    output was left byte-for-byte equal to an input, or each in-out buffer as the harness filled
    it, in every timed call. On such inputs any copy matches the baseline. Empty when at least
    one output differs from every input in some call: an in-out buffer the kernel only reads (a
    pointer without const) or an output saving a state's old value beside the updated state
    is then part of an experiment that does show work."""
    manifest = records.manifest
    if manifest is None:
        return []
    names = [b.name for b in manifest.buffers]
    compared = {n for n, b in enumerate(manifest.buffers) if b.role in ("output", "inout")}
    copied: dict[int, int] = {}
    for i in records.identical:
        if i.calls == i.of == manifest.calls and i.output in compared and i.input < len(names):
            copied.setdefault(i.output, i.input)
    if not compared or set(copied) != compared:
        return []
    return [(names[o], names[copied[o]]) for o in sorted(compared)]


def inout_left_as_filled(records: OutputRecords) -> list[str]:
    """In-out buffers the baseline left byte for byte as the harness filled them in every timed call.
    The kernel either only reads such a buffer (then it is an input, and the harness should check
    it stays as filled) or writes it only on inputs the harness never draws (a non-finite flag):
    either way nothing checks how it would be written, and a candidate that drops the writing
    matches (red team round 45)."""
    manifest = records.manifest
    if manifest is None:
        return []
    return [manifest.buffers[i.output].name for i in records.identical
            if i.output == i.input and i.calls == i.of == manifest.calls and i.output < len(manifest.buffers)
            and manifest.buffers[i.output].role == "inout"]


def inputs_without_variety(records: OutputRecords) -> list[tuple[str, str]]:
    """(input name, how) for every input the harness gave no variety over the timed calls without
    stress: the same contents in every such call, or one value in every element of each. The
    verifier's stress does not count (round 40: a mask of ones everywhere, spiked to larger ones
    in stressed calls, looked varied and still never changed an output). Whatever the
    kernel computes from such an input, a candidate can compute from a constant it has baked
    in, or from one element, and match the baseline on every call the verifier makes, so the
    experiment says nothing about that input (red team round 39: `--range pad=0,1`, a half-open
    range holding one integer, let a kernel that ignores its padding mask be accepted)."""
    manifest = records.manifest
    if manifest is None:
        return []
    fixed: list[tuple[str, str]] = []
    for v in records.variety:
        if v.of < 2 or v.buffer >= len(manifest.buffers):
            continue
        name = manifest.buffers[v.buffer].name
        if v.same_calls == v.of:
            fixed.append((name, f"holds the same contents in all {v.of} timed calls without stress"))
        elif v.flat_calls == v.of:
            fixed.append((name, f"holds one value in all its elements in each of the {v.of} timed calls "
                                f"without stress"))
    return fixed


def outputs_never_varying(records: OutputRecords) -> list[str]:
    """Outputs the baseline left byte for byte the same in every timed call, although every call
    gets new inputs: whatever computes them is never put to the test, and a candidate that writes
    the constant matches (red team round 40: a per-row non-finite flag, 0 on every input the
    harness draws, would have been accepted from a rewrite that lost it). Empty when no output
    varies at all: `inputs_reach_outputs` says that more plainly."""
    manifest = records.manifest
    if manifest is None:
        return []
    constant = [c for c in records.constancy if c.of >= 2 and c.buffer < len(manifest.buffers)]
    fixed = [manifest.buffers[c.buffer].name for c in constant if c.same_calls == c.of]
    return fixed if len(fixed) < len(constant) else []


def compare_calls(base: OutputRecords, cand: OutputRecords, compare: CompareCall) -> Comparison | None:
    """The samples of every timed call, then of every warm-up call, the candidate's against the
    baseline's (same positions: both runs read the same stream; same warm-up inputs: both runs have
    the same seed); `compare` is told the call (a warm-up call as -1 - w: never stressed). A warm-up
    call is compared like a timed one: a part wrong in its first call only (a lazy start-up that
    reads memory it never wrote: red team round 315) is wrong. None when the baseline wrote no samples."""
    if base.manifest is None or not base.samples:
        return None
    if cand.manifest is None:
        return Comparison(match=False, baseline_count=len(base.samples), candidate_count=0, compared=0,
                          problem="the candidate run wrote no per-call samples")
    calls = sorted({s.call for s in base.samples})
    warmups = sorted({s.call for s in base.warmup_samples})
    rounds = [(f"timed call {c + 1} of {len(calls)}", base.samples_of_call(c), cand.samples_of_call(c), c)
              for c in calls]
    rounds += [(f"warm-up call {w + 1} of {len(warmups)} (the calls before the timed ones)",
                base.samples_of_warmup_call(w), cand.samples_of_warmup_call(w), -1 - w) for w in warmups]
    merged: Comparison | None = None
    for label, theirs, ours, call in rounds:
        result = compare(theirs, ours, call)
        if not result.match:
            return result.model_copy(update={"problem": f"{label}: {result.describe()}"})
        merged = result if merged is None else merged.merged(result)
    return merged


def compare_nonfinite_maps(base: OutputRecords, cand: OutputRecords) -> Comparison | None:
    """NaN and inf over every element of every timed call's outputs (the harness's non-finite
    maps), not only at the sampled positions: where the baseline's output is finite the
    candidate's must be too (the rule compare_dumps applies element by element), so the
    candidate may hold no more such elements than the baseline and none whose hashed position
    the baseline's map lacks. Sound whatever the collisions: an element in both sets sets the
    same bit in both maps. None when nothing is wrong."""
    if base.manifest is None or cand.manifest is None:
        return None
    names = {i: b.name for i, b in enumerate(base.manifest.buffers)}
    theirs = {(m.call, m.buffer): m for m in base.nonfinite_maps}
    for m in sorted(cand.nonfinite_maps, key=lambda m: (m.call, m.buffer)):
        ref = theirs.get((m.call, m.buffer))
        extra = m.bits if ref is None else (m.bits & ~ref.bits) if ref.bits.size == m.bits.size else m.bits
        base_count = ref.count if ref is not None else 0
        if m.count <= base_count and not extra.any():
            continue
        outside = int(np.unpackbits(extra).sum())
        name = names.get(m.buffer, f"buffer {m.buffer}")
        return Comparison(match=False, baseline_count=base_count, candidate_count=m.count, compared=0,
                          nonfinite=True,
                          problem=(f"timed call {m.call + 1}: output {name!r} holds {m.count} NaN or inf elements "
                                   f"(the baseline's {base_count}), "
                                   + (f"{outside} of them where the baseline's is finite" if outside else
                                      "more than the baseline's")
                                   + " (the whole output checked after every call, not only the sampled positions)"))
    return None


class SpeedOfLight(BaseModel):
    """The least time one call can take, from the bytes it must move and the FLOPs it must do."""

    bytes_read: int
    copy_gbps: float
    flops: float
    fma_gflops: float
    min_ms_bytes: float
    min_ms_flops: float
    margin: float

    @property
    def min_ms(self) -> float:
        return max(self.min_ms_bytes, self.min_ms_flops)

    def describe(self, ms: float) -> str:
        parts = []
        if self.bytes_read:
            parts.append(f"{self.bytes_read / (ms * 1e-3) / 1e12:.2f} TB/s read from {self.bytes_read / 1e6:.1f} MB of "
                         f"fresh inputs (measured copy bandwidth {self.copy_gbps / 1e3:.2f} TB/s)")
        if self.flops:
            parts.append(f"{self.flops / (ms * 1e-3) / 1e12:.1f} TFLOP/s (measured FP32 {self.fma_gflops / 1e3:.1f} TFLOP/s)")
        return "; ".join(parts)


def speed_of_light(manifests: list[Manifest], *, margin: float, count_flops: bool) -> SpeedOfLight | None:
    """The bound from the harness's own measurements (the best across runs: the most generous).
    Every input and in-out buffer is freshly written and L2 flushed before each call, so each
    byte must come from DRAM; `count_flops` is False when tensor-core or reduced-precision math
    is allowed (FP32 FMA throughput is then no bound)."""
    if not manifests:
        return None
    m = manifests[0]
    copy = max(x.copy_gbps for x in manifests)
    fma = max(x.fma_gflops for x in manifests)
    if copy <= 0:
        return None
    bytes_read = m.bytes_read()
    flops = m.flops if count_flops and fma > 0 else 0.0
    return SpeedOfLight(
        bytes_read=bytes_read, copy_gbps=copy, flops=flops, fma_gflops=fma, margin=margin,
        min_ms_bytes=bytes_read / (copy * 1e9 * margin) * 1e3,
        min_ms_flops=flops / (fma * 1e9 * margin) * 1e3 if flops else 0.0,
    )


def median_ms(values: list[float]) -> float:
    return statistics.median(values) if values else 0.0


def module_memory_unread(states: list[tuple[int, int, PartStateRecord | None]]) -> tuple[Reason, str] | None:
    """The first of a candidate's runs whose module memory the harness could not wholly locate, so did not read
    with its state (kernelloop_harness.cuh, note_module_memory): unjudged state, refused where the baseline's was
    read (fail closed; the static `device-static` reading is no proof that nothing there changes)."""
    for seed, size_index, state in states:
        if state is not None and state.module_unread:
            where = f"seed {seed}" + (f", size {size_index}" if size_index > 0 else ", a drawn size" if size_index < 0 else "")
            return Reason.state_between_calls, (
                f"{where}: {state.module_unread} object(s) of the candidate's module memory (its device variables, "
                "statics, string storage) could not be located at run time, so the verifier could not read whether "
                "a call changes them; the baseline's was read (the run's stderr names the object)")
    return None


def state_kept_between_calls(states: list[tuple[int, int, PartStateRecord | None]]) -> tuple[Reason, str] | None:
    """The first of a candidate's runs (seed, size index, its part-state record) whose state after
    an untimed repeat of a secret earlier timed call's inputs was not its state after that call: the
    candidate remembers something of the calls in between (a call counter, an accumulating
    workspace), so what it does depends on how many calls a process makes, and the verifier's
    fixed number of calls proves nothing about a program that makes more (red team round 65: a
    launcher that drops the tail from its 4097th call on). A run without a record (a harness that
    makes no repeat) is not judged here."""
    for seed, size_index, state in states:
        if state is not None and not state.same:
            where = f"seed {seed}" + (f", size {size_index}" if size_index > 0 else ", a drawn size" if size_index < 0 else "")
            return Reason.state_between_calls, (
                f"{where}: the candidate's state (its static data: {state.host_bytes} B on the host, "
                f"{state.device_bytes} B of device memory and variables, {state.blocks} allocation(s) and "
                "variable(s), the streams, events, graphs and texture or surface objects it holds) after a repeat "
                "of an earlier timed call's inputs differs from its state after that call, and the baseline's "
                "does not: it keeps something from call to call (a call counter, a value it accumulates), so its "
                "results could change after more calls than the verifier makes. Keep only what one call's inputs "
                "determine (a cached device property, a workspace each call rewrites, a counter the call resets, a "
                "stream or texture object created once or destroyed by the call that made it); what it frees "
                "counts too (the next allocation may get it back), so clear a workspace whose bytes vary from run "
                "to run (float atomics) before freeing it")
    return None
