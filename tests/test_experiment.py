"""Contract v2's verifier side without a GPU: the records a harness writes, the stream both runs
of an experiment read, every call's samples compared, the speed-of-light floor, and the
baseline's own noise."""

from __future__ import annotations

import json

import numpy as np
import pytest

from kernelloop.tools.sandbox import IsolationReport, RunResult
from kernelloop.verify.experiment import compare_calls, speed_of_light
from kernelloop.verify.comparing import baseline_noise
from kernelloop.verify.outputs import DumpError, KernelMs, compare_dumps
from kernelloop.verify.records import Manifest, parse_records
from kernelloop.verify.program_run import STREAM_BYTES, ProgramRun, stream_for


def manifest(**kw) -> dict:
    base = {"contract": 2, "warmup": 2, "calls": 2, "flops": 2e9, "size_options": 2, "copy_gbps": 3000.0,
            "fma_gflops": 50000.0, "buffers": [{"name": "A", "role": "input", "dtype": "float32", "count": 1 << 20},
                                               {"name": "C", "role": "output", "dtype": "float32", "count": 4}]}
    base.update(kw)
    return base


def records_bytes(samples: list[list[float]], final: list[float], m: dict | None = None,
                  warmups: list[list[float]] = ()) -> bytes:
    text = json.dumps(m or manifest()).encode()
    out = b"kernelloop-manifest 2 %d\n" % len(text) + text
    for call, values in enumerate(samples):
        out += b"kernelloop-sample 2 %d 1 float32 %d\n" % (call, len(values)) + np.array(values, "<f4").tobytes()
        if call == 0:  # the harness samples the warm-up calls' kept outputs after the first timed call
            for w, kept in enumerate(warmups):
                out += b"kernelloop-warmup 2 %d 1 float32 %d\n" % (w, len(kept)) + np.array(kept, "<f4").tobytes()
    return out + b"kernelloop-output 1 float32 %d\n" % len(final) + np.array(final, "<f4").tobytes()


def test_records_round_trip_and_malformed_files_are_errors():
    r = parse_records(records_bytes([[1, 2, 3, 4], [5, 6, 7, 8]], [5, 6, 7, 8]))
    assert r.contract == 2 and r.manifest.calls == 2 and len(r.samples) == 2 and r.outputs[0].tolist() == [5, 6, 7, 8]
    assert r.manifest.bytes_read() == 4 << 20 and r.manifest.bytes_written() == 16
    with pytest.raises(DumpError):
        parse_records(b"kernelloop-sample 2 0 1 float32 4\n" + b"\0" * 8)  # cut short
    with pytest.raises(DumpError):
        parse_records(b"something else\n")
    assert parse_records(b"kernelloop-output 1 float32 1\n" + b"\0" * 4).contract == 1


def test_both_runs_of_an_experiment_read_the_same_stream_and_other_experiments_another():
    a, b = stream_for(b"x" * 32), stream_for(b"x" * 32)
    assert a == b and len(a) == STREAM_BYTES and stream_for(b"y" * 32) != a


def test_every_call_is_compared_and_the_failing_call_is_named():
    base = parse_records(records_bytes([[1, 2, 3, 4], [5, 6, 7, 8]], [5, 6, 7, 8]))
    good = parse_records(records_bytes([[1, 2, 3, 4], [5, 6, 7, 8]], [5, 6, 7, 8]))
    stale = parse_records(records_bytes([[1, 2, 3, 4], [1, 2, 3, 4]], [5, 6, 7, 8]))  # call 2 kept call 1's result
    compare = lambda b, c, call: compare_dumps(b, c)  # noqa: E731
    assert compare_calls(base, good, compare).match
    bad = compare_calls(base, stale, compare)
    assert not bad.match and "timed call 2 of 2" in bad.problem


def test_every_warm_up_call_is_compared_too_and_named():
    # red team round 315: a candidate that reads a fresh allocation in its first call only, before it writes it, is
    # wrong in a warm-up call alone; its timed calls and its final dump match
    timed, final = [[1, 2, 3, 4], [5, 6, 7, 8]], [5, 6, 7, 8]
    base = parse_records(records_bytes(timed, final, warmups=[[9, 9, 9, 9], [7, 7, 7, 7]]))
    assert [s.call for s in base.warmup_samples] == [0, 1] and base.samples_of_warmup_call(1)[0].tolist() == [7] * 4
    compare = lambda b, c, call: compare_dumps(b, c)  # noqa: E731
    same = parse_records(records_bytes(timed, final, warmups=[[9, 9, 9, 9], [7, 7, 7, 7]]))
    assert compare_calls(base, same, compare).match
    lazy = parse_records(records_bytes(timed, final, warmups=[[9, 9, 1e7, 9], [7, 7, 7, 7]]))
    bad = compare_calls(base, lazy, compare)
    assert not bad.match and "warm-up call 1 of 2" in bad.problem
    second = compare_calls(base, parse_records(records_bytes(timed, final, warmups=[[9, 9, 9, 9], [7, 0, 7, 7]])),
                           compare)
    assert not second.match and "warm-up call 2 of 2" in second.problem
    # a candidate run without them (never the frozen header's) is not passed for lack of evidence
    missing = compare_calls(base, parse_records(records_bytes(timed, final)), compare)
    assert not missing.match and "warm-up call 1" in missing.problem
    # the warm-up calls are told apart from the timed ones (never stressed: -1 - w)
    told: list[int] = []
    compare_calls(base, same, lambda b, c, call: told.append(call) or compare_dumps(b, c))
    assert told == [0, 1, -1, -2]


def test_the_speed_of_light_floor_comes_from_the_declared_work_and_measured_peaks():
    sol = speed_of_light([Manifest.model_validate(manifest())], margin=1.5, count_flops=True)
    assert sol.min_ms_bytes == pytest.approx((4 << 20) / (3000e9 * 1.5) * 1e3)
    assert sol.min_ms_flops == pytest.approx(2e9 / (50000e9 * 1.5) * 1e3)
    assert sol.min_ms == sol.min_ms_flops  # the matmul-like declaration is FLOP-bound here
    assert "TFLOP/s" in sol.describe(0.001)
    no_flops = speed_of_light([Manifest.model_validate(manifest())], margin=1.5, count_flops=False)
    assert no_flops.min_ms == no_flops.min_ms_bytes
    assert speed_of_light([], margin=1.5, count_flops=True) is None


def run_with(stdout: str, dump: list[np.ndarray]) -> ProgramRun:
    return ProgramRun(seed=1, result=RunResult(argv=["p"], returncode=0, stdout=stdout, isolation=IsolationReport()),
                      kernel_ms=KernelMs(value=1.0, count=1), dump=dump)


def test_a_deterministic_baseline_adds_no_noise_and_a_varying_one_widens_by_its_own_variation():
    same = baseline_noise(run_with("dot 10.5\n", [np.array([10.5], "<f4")]),
                           run_with("dot 10.5\n", [np.array([10.5], "<f4")]), 4.0)
    assert not same.any
    varying = baseline_noise(run_with("dot 10.5\n", [np.array([10.5], "<f4")]),
                              run_with("dot 10.25\n", [np.array([10.25], "<f4")]), 4.0)
    assert varying.buffers == [pytest.approx(1.0)] and varying.printed[0] >= 1.0
    # the widening lets the baseline's own spread pass, and no more than a few times it
    assert compare_dumps([np.array([10.5], "<f4")], [np.array([10.9], "<f4")], noise=varying.buffers).match
    assert not compare_dumps([np.array([10.5], "<f4")], [np.array([12.0], "<f4")], noise=varying.buffers).match


def _manifest(size_values, stressed=True, dtype="float32"):
    from kernelloop.verify.records import BufferSpec, Manifest
    return Manifest(contract=2, warmup=1, calls=2, size_options=len(size_values[0]), size_values=size_values,
                    buffers=[BufferSpec(name="x", role="input", dtype=dtype, count=4, stressed=stressed),
                             BufferSpec(name="y", role="output", dtype=dtype, count=4)])


def _span_free(notes):
    return [n for n in notes if not n.startswith("sizes are drawn")]


def test_coverage_notes_name_a_factor_every_checked_size_shares():
    from kernelloop.verify.experiment import coverage_notes
    notes = _span_free(coverage_notes(_manifest([[1024, 1000]])))
    assert len(notes) == 1 and "multiples of 8" in notes[0]
    assert _span_free(coverage_notes(_manifest([[1024, 1001]]))) == []
    # every dimension is judged on its own: rows covered, columns all multiples of 4
    notes = _span_free(coverage_notes(_manifest([[16384, 3001], [2048, 1500]])))
    assert len(notes) == 1 and "size() call 2 (2048, 1500: multiples of 4)" in notes[0]
    assert "one size only" in coverage_notes(_manifest([[1024]]))[0]


def test_coverage_notes_say_which_sizes_the_draw_spans():
    from kernelloop.verify.experiment import coverage_notes
    notes = coverage_notes(_manifest([[16384, 3001], [2048, 1500]]))
    assert any("(1500-20480, 750-2560)" in n for n in notes), notes


def test_coverage_notes_say_when_no_float_input_is_stressed():
    from kernelloop.verify.experiment import coverage_notes
    assert any("stressed" in n for n in coverage_notes(_manifest([[7, 9]], stressed=False)))
    notes = _span_free(coverage_notes(_manifest([[7, 9]], stressed=False, dtype="int32")))
    assert len(notes) == 1 and "integer inputs (x) are checked on their generator's values only" in notes[0]


def test_the_verifier_knows_which_calls_the_harness_stresses():
    from kernelloop.verify.program_run import stressed_calls
    secret = b"s" * 32
    stream = stream_for(secret)
    draws = [int.from_bytes(stream[i:i + 8], "little") for i in range(0, 8 * 40, 8)]
    expected = {c for c in range(20) if draws[2 * c] & 1}  # per call: key and stress bits, then samples
    assert stressed_calls(secret, 20) == expected
    # Timing runs never get the "one value" stress; every other bit, and so which calls are
    # stressed, stays the same.
    from kernelloop.verify.program_run import heavy_calls
    light = stream_for(secret, heavy=False)
    assert len(light) == len(stream) and light != stream
    assert stressed_calls(secret, 20, heavy=False) == expected
    assert heavy_calls(secret, 20, heavy=False) == set()
    assert heavy_calls(secret, 20) == {c for c in expected if draws[2 * c] & 2} == expected  # every stressed call
    assert all(a == b for i, (a, b) in enumerate(zip(light, stream)) if i % 16)
    assert 0 < len(expected) < 20  # about half


def test_a_stressed_call_is_judged_at_the_stress_factor():
    from kernelloop.verify.outputs import Tolerance
    base = [np.array([1000.0], dtype=np.float32)]
    cand = [np.array([1000.2], dtype=np.float32)]  # 2e-4 relative: ~6.5x float32's rtol
    assert not compare_dumps(base, cand).match
    assert compare_dumps(base, cand, tolerance=Tolerance(scale=8.0)).match


def test_outputs_that_never_change_with_the_inputs_are_found():
    from kernelloop.verify.experiment import inputs_reach_outputs
    constant = parse_records(records_bytes([[32, 32, 32, 32], [32, 32, 32, 32], [32, 32, 32, 32]], [32, 32, 32, 32]))
    varying = parse_records(records_bytes([[1, 2, 3, 4], [1, 2, 3, 5], [1, 2, 3, 4]], [1, 2, 3, 4]))
    assert not inputs_reach_outputs(constant)
    assert inputs_reach_outputs(varying)


def test_an_experiment_whose_outputs_all_copy_an_input_in_every_call_is_found():
    from kernelloop.verify.experiment import outputs_showing_no_work
    m = manifest(calls=3, buffers=[{"name": "x", "role": "input", "dtype": "float32", "count": 4},
                                   {"name": "c", "role": "inout", "dtype": "float32", "count": 4},
                                   {"name": "y", "role": "output", "dtype": "float32", "count": 4}])
    body = records_bytes([[1, 2, 3, 4]] * 3, [1, 2, 3, 4], m)
    every = parse_records(body + b"kernelloop-identical 2 2 0 3 3\n" + b"kernelloop-identical 2 1 1 3 3\n")
    assert outputs_showing_no_work(every) == [("c", "c"), ("y", "x")]
    # one output does work: an in-out buffer the kernel only reads (a pointer without const) beside
    # it, or an output saving a state's old value beside the updated state, is honest
    reads_only = parse_records(body + b"kernelloop-identical 2 1 1 3 3\n")
    assert outputs_showing_no_work(reads_only) == []
    # equal in some calls only (a stressed call left the range the kernel passes through): checked as usual
    some = parse_records(body + b"kernelloop-identical 2 2 0 2 3\n" + b"kernelloop-identical 2 1 1 3 3\n")
    assert [(i.output, i.input, i.calls, i.of) for i in some.identical] == [(2, 0, 2, 3), (1, 1, 3, 3)]
    assert outputs_showing_no_work(some) == []
    assert outputs_showing_no_work(parse_records(body)) == []


def test_an_in_out_buffer_never_written_in_any_timed_call_is_found():
    # Red team round 45: a found_inf flag in an in-out buffer, set only on non-finite gradients
    # (never drawn): left as filled in every call beside an output that does work; dropping it matched.
    from kernelloop.verify.experiment import inout_left_as_filled
    m = manifest(calls=3, buffers=[{"name": "g", "role": "input", "dtype": "float32", "count": 4},
                                   {"name": "found_inf", "role": "inout", "dtype": "float32", "count": 1},
                                   {"name": "out", "role": "output", "dtype": "float32", "count": 4}])
    body = records_bytes([[1, 2, 3, 4]] * 3, [1, 2, 3, 4], m)
    assert inout_left_as_filled(parse_records(body + b"kernelloop-identical 2 1 1 3 3\n")) == ["found_inf"]
    # written in some call, or an output equal to an input (another rule's business): nothing to say
    assert inout_left_as_filled(parse_records(body + b"kernelloop-identical 2 1 1 2 3\n")) == []
    assert inout_left_as_filled(parse_records(body + b"kernelloop-identical 2 2 0 3 3\n")) == []
    assert inout_left_as_filled(parse_records(body)) == []


def test_an_input_with_no_variety_over_the_timed_calls_is_found():
    # Red team round 39: an input the harness fills the same way in every call (a half-open range
    # of one integer), or with one value throughout each call, can be baked in by a candidate.
    from kernelloop.verify.experiment import inputs_without_variety
    m = manifest(calls=3, buffers=[{"name": "x", "role": "input", "dtype": "float32", "count": 4},
                                   {"name": "pad", "role": "input", "dtype": "int32", "count": 4},
                                   {"name": "acc", "role": "inout", "dtype": "float32", "count": 4},
                                   {"name": "y", "role": "output", "dtype": "float32", "count": 4}])
    body = records_bytes([[1, 2, 3, 4]] * 3, [1, 2, 3, 4], m)
    same = parse_records(body + b"kernelloop-fixed 2 0 1 0 3\n" + b"kernelloop-fixed 2 1 3 3 3\n"
                         + b"kernelloop-fixed 2 2 1 0 3\n")
    assert [(v.buffer, v.same_calls, v.flat_calls, v.of) for v in same.variety] == [(0, 1, 0, 3), (1, 3, 3, 3),
                                                                                   (2, 1, 0, 3)]
    assert inputs_without_variety(same) == [("pad", "holds the same contents in all 3 timed calls without stress")]
    flat = parse_records(body + b"kernelloop-fixed 2 1 2 3 3\n" + b"kernelloop-fixed 2 2 3 0 3\n")
    assert inputs_without_variety(flat) == [("pad", "holds one value in all its elements in each of the 3 timed calls without stress"),
                                            ("acc", "holds the same contents in all 3 timed calls without stress")]
    # varied in some call (a stressed call, another key): nothing to say
    assert inputs_without_variety(parse_records(body + b"kernelloop-fixed 2 1 2 2 3\n")) == []
    assert inputs_without_variety(parse_records(body)) == []


def test_an_output_the_same_in_every_call_is_found_when_another_varies():
    # Red team round 40: a per-row non-finite flag is 0 on every input the harness draws; a
    # rewrite that lost it matched. Its computation is never tested, so the baseline is refused.
    from kernelloop.verify.experiment import outputs_never_varying
    m = manifest(calls=3, buffers=[{"name": "x", "role": "input", "dtype": "float32", "count": 4},
                                   {"name": "norm", "role": "output", "dtype": "float32", "count": 4},
                                   {"name": "bad", "role": "output", "dtype": "int32", "count": 4}])
    body = records_bytes([[1, 2, 3, 4]] * 3, [1, 2, 3, 4], m)
    flag = parse_records(body + b"kernelloop-constant 2 1 1 3\n" + b"kernelloop-constant 2 2 3 3\n")
    assert [(c.buffer, c.same_calls, c.of) for c in flag.constancy] == [(1, 1, 3), (2, 3, 3)]
    assert outputs_never_varying(flag) == ["bad"]
    # every output constant: inputs_reach_outputs says so more plainly; all varying: nothing to say
    assert outputs_never_varying(parse_records(body + b"kernelloop-constant 2 1 3 3\n"
                                                      b"kernelloop-constant 2 2 3 3\n")) == []
    assert outputs_never_varying(parse_records(body + b"kernelloop-constant 2 1 1 3\n"
                                                      b"kernelloop-constant 2 2 2 3\n")) == []


def test_several_sizes_are_drawn_from_one_number():
    """Red-team round 9: with one drawn size, a kernel wrong at a fraction f of sizes passes with
    probability 1 - f; the verifier draws `size_draws` (default 2) from the verdict's one draw."""
    from kernelloop.config import VerifySettings
    from kernelloop.verify.size_draws import size_draws
    draws = size_draws(2, VerifySettings().size_draws)
    assert draws[0] == 2 and len(draws) == 2 == len(set(draws))
    assert size_draws(2, 4) == size_draws(2, 4) and size_draws(2, 4)[:2] == draws
    assert all(0 < d < 1 << 63 for d in size_draws(12345, 8))  # KERNELLOOP_SIZE_DRAW is parsed as unsigned


def test_only_the_calibration_stream_fixes_the_poison():
    from kernelloop.verify.program_run import FIXED_POISON_BIT, HEAVY_BIT, STRESSED_BIT, stream_for
    secret = b"\x01" * 32
    plain, fixed = stream_for(secret), stream_for(secret, fixed_poison=True)
    draws = range(0, 16 * 200, 16)
    assert all(fixed[o] & FIXED_POISON_BIT for o in draws)
    assert not all(plain[o] & FIXED_POISON_BIT for o in draws)  # otherwise drawn, like any bit
    # nothing else changes: the same keys, stresses and sample positions
    assert all(fixed[o] & ~FIXED_POISON_BIT & 0xFF == plain[o] & ~FIXED_POISON_BIT & 0xFF for o in draws)
    assert all(fixed[o + 1:o + 16] == plain[o + 1:o + 16] for o in draws)
    timing = stream_for(secret, heavy=False, fixed_poison=True)
    assert all(timing[o] & FIXED_POISON_BIT and not timing[o] & HEAVY_BIT for o in draws)
    assert any(plain[o] & STRESSED_BIT for o in draws)


def test_a_table_input_is_no_byte_a_call_must_read():
    # An embedding table read through indices: an honest kernel reads the rows the indices name,
    # not the table; the speed-of-light floor counts it as no byte a call must read.
    from kernelloop.verify.records import BufferSpec, Manifest
    buffers = [BufferSpec(name="idx", role="input", dtype="int32", count=1000),
               BufferSpec(name="wte", role="input", dtype="float32", count=10_000_000, partial=True),
               BufferSpec(name="out", role="output", dtype="float32", count=768_000)]
    m = Manifest(contract=2, warmup=1, calls=2, size_options=1, size_values=[[1]], buffers=buffers)
    assert m.bytes_read() == 4000
    assert Manifest(contract=2, warmup=1, calls=2, size_options=1, size_values=[[1]],
                    buffers=[b.model_copy(update={"partial": False}) for b in buffers]).bytes_read() == 40_004_000


def test_a_v2_programs_printed_checksum_does_not_decide_when_every_element_matches():
    # An honest reordered column reduction matched every element of a zero-crossing output, and its
    # printed `y sum` (10.38: the elements cancel) differed by 1.5e-3, 4.8x the allowance at its
    # own magnitude. In contract v2 the dump is compared element by element; the checksum the
    # frozen harness prints from it is not the verdict. In v1 printed numbers still decide.

    from kernelloop.config import VerifySettings
    from kernelloop.verify.comparing import compare_runs
    from kernelloop.verify.records import OutputRecords
    values = np.linspace(-20, 20, 64, dtype="<f4")
    base, cand = run_with("y sum 10.3845825\n", [values]), run_with("y sum 10.3861019\n", [values.copy()])
    vs = VerifySettings()
    assert not compare_runs(base, cand, vs).match  # v1: the printed number is the result
    v2 = OutputRecords(manifest=_manifest([[4]]))
    base2, cand2 = base.model_copy(update={"records": v2}), cand.model_copy(update={"records": v2})
    assert compare_runs(base2, cand2, vs).match
    wrong = cand2.model_copy(update={"dump": [values + np.float32(1.0)]})
    assert not compare_runs(base2, wrong, vs).match  # the elements still decide
