"""The harness's non-finite maps (kernelloop-nonfinite records): NaN and inf over every element of
every timed call, compared by verify.experiment.compare_nonfinite_maps.

Red team round 51's softmax without the fully-masked-row guard came back accepted at the final
harness on an H200 (round 52 took the special-value groups out of the one call dumped whole,
and a masked row's NaN is rare among the 256 sampled positions of the others). The emulation here
builds the maps as kl_nonfinite_map_kernel does, from the same kind of input, and shows that the
sampled positions miss what the maps catch, and that an honest rewrite passes."""

from __future__ import annotations

import numpy as np

from kernelloop.verify.experiment import compare_nonfinite_maps
from kernelloop.verify.records import BufferSpec, Manifest, OutputRecords, parse_records

MAP_BITS = 1 << 16
M64 = np.uint64(0xFFFFFFFFFFFFFFFF)


def mix64(z: np.ndarray) -> np.ndarray:
    """kernelloop_harness.cuh's mix64 (splitmix64's finalizer), on uint64 arrays."""
    with np.errstate(over="ignore"):
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def harness_map(values: np.ndarray, key: int) -> tuple[int, np.ndarray] | None:
    """What kl_nonfinite_map_kernel computes for one output: (count, the bitmap as bytes), or None
    where the output holds no NaN or inf (the harness then writes no record)."""
    special = np.flatnonzero(~np.isfinite(values)).astype(np.uint64)
    if special.size == 0:
        return None
    bins = mix64(np.uint64(key) ^ special) & np.uint64(MAP_BITS - 1)
    words = np.zeros(MAP_BITS // 32, dtype=np.uint32)
    np.bitwise_or.at(words, (bins >> np.uint64(5)).astype(np.int64), np.uint32(1) << (bins & np.uint64(31)).astype(np.uint32))
    return special.size, words.view(np.uint8)


def records_text(outputs_per_call: list[np.ndarray], keys: list[int]) -> bytes:
    manifest = Manifest(contract=2, warmup=1, calls=len(outputs_per_call),
                        buffers=[BufferSpec(name="att", role="output", dtype="float32", count=outputs_per_call[0].size),
                                 BufferSpec(name="preatt", role="input", dtype="float32",
                                            count=outputs_per_call[0].size)]).model_dump_json().encode()
    data = b"kernelloop-manifest 2 %d\n" % len(manifest) + manifest
    for call, (out, key) in enumerate(zip(outputs_per_call, keys)):
        found = harness_map(out, key)
        if found is not None:
            count, bits = found
            data += b"kernelloop-nonfinite 2 %d 0 %d %d\n" % (call, count, MAP_BITS) + bits.tobytes()
    return data


def causal_softmax(pre: np.ndarray, rows: int, T: int, guard: bool) -> np.ndarray:
    """Rows of T, row r using its first r % T + 1 entries; `guard`: a row whose used entries are all
    -inf comes out 0 (the baseline: its max starts from -FLT_MAX), else NaN (round 51's candidate)."""
    p = pre.reshape(rows, T).astype(np.float32)
    used = np.arange(T)[None, :] <= (np.arange(rows) % T)[:, None]
    with np.errstate(all="ignore"):
        hi = np.max(np.where(used, p, -np.inf), axis=1)
        if guard:
            hi = np.maximum(hi, np.float32(-3.4028235e38))
        e = np.where(used, np.exp(p - hi[:, None]), 0).astype(np.float32)
        total = e.sum(axis=1, dtype=np.float32)
        inv = (np.where(total == 0, 0, 1 / total) if guard else 1 / total).astype(np.float32)
        return np.where(used, e * inv[:, None], 0).astype(np.float32).reshape(-1)


def test_a_record_reads_back_as_written():
    out = np.array([1.0, np.nan, 2.0, np.inf], dtype=np.float32)
    records = parse_records(records_text([out], [7]))
    (m,) = records.nonfinite_maps
    assert (m.call, m.buffer, m.count, m.bits.size) == (0, 0, 2, MAP_BITS // 8)
    assert int(np.unpackbits(m.bits).sum()) in (1, 2)


def test_round51s_masked_row_is_missed_by_the_samples_and_caught_by_the_maps():
    rng = np.random.default_rng(51)
    T, rows = 64, 2 * 3 * 64
    keys = [int(k) for k in rng.integers(0, 2**63, 3)]
    pre_calls = []
    for call in range(3):
        pre = rng.uniform(-1, 1, rows * T).astype(np.float32)
        if call == 1:  # one call's -inf stretch masks whole rows at their start (a short one: few rows)
            first = 64 * T  # rows 64-66: t = 0, 1, 2
            pre[first:first + 3 * T] = -np.inf
        pre_calls.append(pre)
    base = [causal_softmax(p, rows, T, guard=True) for p in pre_calls]
    cand = [causal_softmax(p, rows, T, guard=False) for p in pre_calls]
    honest = [causal_softmax(p, rows, T, guard=True) for p in pre_calls]
    assert all(np.isfinite(b).all() for b in base)
    wrong = np.flatnonzero(~np.isfinite(cand[1]))
    assert 0 < wrong.size < 10  # rare among the rows x T elements
    sampled = rng.integers(0, rows * T, 256)
    assert np.isfinite(cand[1][sampled]).all()  # what the per-call samples see: nothing wrong

    base_records = parse_records(records_text(base, keys))
    verdict = compare_nonfinite_maps(base_records, parse_records(records_text(cand, keys)))
    assert verdict is not None and not verdict.match
    assert "timed call 2" in verdict.problem and "'att'" in verdict.problem
    assert compare_nonfinite_maps(base_records, parse_records(records_text(honest, keys))) is None


def test_specials_the_baseline_has_too_pass_and_fewer_pass():
    keys = [11]
    base = np.array([np.nan, 1.0, -np.inf, 2.0, np.nan], dtype=np.float32)
    same = np.array([np.nan, 1.5, np.inf, 2.0, 3.0], dtype=np.float32)  # a subset of the baseline's places
    base_records = parse_records(records_text([base], keys))
    assert compare_nonfinite_maps(base_records, parse_records(records_text([same], keys))) is None
    moved = np.array([1.0, np.nan, -np.inf, 2.0, np.nan], dtype=np.float32)  # one moved to a finite place
    verdict = compare_nonfinite_maps(base_records, parse_records(records_text([moved], keys)))
    assert verdict is not None and "where the baseline's is finite" in verdict.problem


def test_more_specials_than_the_baseline_fail_even_in_shared_bins():
    base = parse_records(records_text([np.array([np.nan, 1.0], dtype=np.float32)], [3]))
    cand = parse_records(records_text([np.array([np.nan, np.nan], dtype=np.float32)], [3]))
    cand.nonfinite_maps[0].bits = base.nonfinite_maps[0].bits  # as if both elements hashed to one bin
    verdict = compare_nonfinite_maps(base, cand)
    assert verdict is not None and "more than the baseline's" in verdict.problem


def test_no_maps_no_verdict():
    empty = OutputRecords()
    assert compare_nonfinite_maps(empty, empty) is None
