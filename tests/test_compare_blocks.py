"""The output dump's comparison taken a block at a time, with the floor's RMS kept per frozen baseline buffer:
the same report as one pass over each chunk, whatever the blocks, and never a stale floor."""

from __future__ import annotations

import hashlib

import ml_dtypes
import numpy as np
import pytest

from kernelloop.tools.sandbox import IsolationReport, RunResult, _alive, _status_field
from kernelloop.verify import outputs
from kernelloop.verify.outputs import _BLOCK, _CHUNK, _judged_ulp, _ulp, compare_dumps, parse_kernel_ms
from kernelloop.verify.program_run import ProgramRun, output_digest


def frozen(values: np.ndarray) -> np.ndarray:
    """VALUES as a dump is read: an array over immutable bytes."""
    return np.frombuffer(values.tobytes(), dtype=values.dtype)


def test_a_frozen_baseline_keeps_its_floor_and_a_writable_one_does_not():
    rng = np.random.default_rng(1)
    base = rng.standard_normal(3 * _BLOCK + 5).astype(np.float32)
    cand = (base * (1 + 1e-6 * rng.standard_normal(base.size))).astype(np.float32)
    kept = frozen(base)
    first = compare_dumps([kept], [cand])
    assert compare_dumps([kept], [cand]).model_dump_json() == first.model_dump_json()  # the RMS kept
    assert compare_dumps([base], [cand]).model_dump_json() == first.model_dump_json()  # computed again
    base *= 1000  # a writable baseline changed in place: its floor moves with it
    cand *= 1000
    assert compare_dumps([base], [cand]).buffers[0].floor == pytest.approx(1000 * first.buffers[0].floor, rel=1e-6)


def test_the_largest_error_in_ulps_is_the_chunks_first_and_a_later_chunks_equal():
    rng = np.random.default_rng(2)
    n = _CHUNK + 2 * _BLOCK
    base = np.where(rng.random(n) < 0.8, 0, rng.uniform(1, 2, n)).astype(np.float32)  # the floor below 1
    base[_CHUNK] = 1.25
    cand = np.nextafter(base, np.float32(np.inf))  # 1 ulp everywhere in [1, 2), each with an allowance of its own
    got = compare_dumps([base], [cand]).buffers[0]
    assert got.max_ulps == 1.0
    # where it was seen: the first element of the last chunk with it (a later chunk's equal takes over)
    assert got.allowed_ulps == float(np.float32(2.0 ** -15) * cand[_CHUNK] / np.float32(2.0 ** -23))


def test_an_error_in_any_block_is_found_where_it_is():
    base = np.linspace(-3, 3, 2 * _BLOCK + 7, dtype=np.float32)
    for at in (0, _BLOCK - 1, _BLOCK, 2 * _BLOCK + 6):
        cand = base.copy()
        cand[at] += 1
        got = compare_dumps([base], [cand])
        assert not got.match and got.buffers[0].mismatches == 1 and got.first_mismatches[0].index == at


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float64"])
def test_the_ulp_read_off_the_exponent_bits_is_the_ulp(dtype):
    work = np.float64 if dtype == "float64" else np.float32
    smallest = 2.0 ** outputs._FLOAT_FORMATS[dtype][1]
    judged = (smallest * 2.0 ** np.random.default_rng(3).uniform(0, 60, 1000)).astype(work)
    judged = np.concatenate([judged, np.array([smallest, 1.0, 1.5, 3.0], dtype=work)])
    assert np.array_equal(_judged_ulp(judged, dtype), _ulp(judged, dtype))


def test_the_digest_hashes_each_buffers_bytes_as_laid_out_in_order():
    dump = [np.arange(12, dtype=np.float32).reshape(3, 4)[:, ::2], np.ones(3, dtype=ml_dtypes.bfloat16)]
    result = RunResult(argv=["program"], returncode=0, stdout="y 1\n", isolation=IsolationReport())
    run = ProgramRun(seed=1, result=result, kernel_ms=parse_kernel_ms(""), dump=dump)
    want = hashlib.sha256(b"y 1\n")
    for array in dump:
        want.update(f"\n{array.dtype.str} {array.shape}\n".encode() + np.ascontiguousarray(array).tobytes())
    assert output_digest(run) == want.hexdigest()


def test_a_status_line_is_read_whatever_the_process_name():
    status = b"Name:\tx\\nUid:\t0\nUmask:\t0022\nState:\tZ (zombie)\nUid:\t61001\t61001\t61001\t61001\nGid:\t1\n"
    assert _status_field(status, b"Uid").split()[0] == b"61001"  # the name's escaped newline forges nothing
    assert _status_field(status, b"State").strip().startswith(b"Z")
    assert _status_field(status, b"Groups") == b""


def test_a_read_only_array_with_a_writable_alias_gets_no_kept_floor():
    # red team round 259: a read-only array owning its memory was taken as frozen, and a writable alias made before
    # its flag was cleared changed it under a kept floor (10 values flushed to zero matched)
    values = np.random.default_rng(5).standard_normal(_BLOCK).astype(np.float32)
    owner = values.copy()
    alias = owner.view()
    owner.flags.writeable = False
    assert not outputs._frozen(owner)
    assert outputs._frozen(outputs.frozen(values.copy())) and outputs._frozen(frozen(values))
    cand = owner * np.float32(1 + 1e-7)
    compare_dumps([owner], [cand])
    alias[:] *= 1e-6  # the baseline's values moved: the floor must move with them
    cand = np.array(owner)
    cand[:10] = 0
    assert compare_dumps([owner], [cand]).match == compare_dumps([np.array(owner)], [cand]).match


def test_a_zombie_leader_with_live_threads_is_alive():
    # red team round 259: a main thread's exit(2) beside a running thread shows State Z; the process still runs
    status = b"Name:\tghost\nState:\tZ (zombie)\nTgid:\t7\nUid:\t61001\t61001\t61001\t61001\nThreads:\t2\n"
    assert _alive(status)
    assert not _alive(status.replace(b"Threads:\t2", b"Threads:\t1"))
    assert _alive(status.replace(b"Z (zombie)", b"S (sleeping)"))
