"""Reading the records a harness wrote.

A contract-v1 harness writes only whole output buffers ("kernelloop-output 1" records) to the file
KERNELLOOP_OUTPUT_FILE names. A v2 harness (the bundled `kernelloop_harness.cuh`) writes to a pipe
the verifier reads while the program runs (KERNELLOOP_OUTPUT_FD): a manifest first, a sample of
every output after every timed call and of every warm-up call (and where a floating output held NaN or inf, over the whole
buffer), which outputs some calls left equal to an input, how much each input varied from call
to call, the whole outputs after the last call, and last a record of how many bytes came before it
(docs/contract.md). The candidate cannot write either (the policy leaves the editable part no file
API); frozen code can, so a v2 stream is read strictly: exactly the header's bytes, in its order
(red team round 291: frozen code rewrote a records file after the run).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .outputs import DumpError, dump_dtype

_OUTPUT = re.compile(rb"kernelloop-output 1 ([a-z0-9]+) (\d+)\n")
_SAMPLE = re.compile(rb"kernelloop-sample 2 (\d+) (\d+) ([a-z0-9]+) (\d+)\n")
_WARMUP_SAMPLE = re.compile(rb"kernelloop-warmup 2 (\d+) (\d+) ([a-z0-9]+) (\d+)\n")
_MANIFEST = re.compile(rb"kernelloop-manifest 2 (\d+)\n")
_IDENTICAL = re.compile(rb"kernelloop-identical 2 (\d+) (\d+) (\d+) (\d+)\n")
_FIXED = re.compile(rb"kernelloop-fixed 2 (\d+) (\d+) (\d+) (\d+)\n")
_CONSTANT = re.compile(rb"kernelloop-constant 2 (\d+) (\d+) (\d+)\n")
_NONFINITE = re.compile(rb"kernelloop-nonfinite 2 (\d+) (\d+) (\d+) (\d+)\n")
_STATE = re.compile(rb"kernelloop-state 2 ([01]) (\d+) (\d+) (\d+)(?: (\d+))?\n")
_END = re.compile(rb"kernelloop-end 2 (\d+)\n")
NONFINITE_MAP_MAX_BITS = 1 << 24
MANIFEST_MAX_BYTES = 1 << 20


class BufferSpec(BaseModel):
    name: str
    role: Literal["input", "output", "inout", "scratch"]
    dtype: str
    count: int = Field(ge=1)
    stressed: bool = False  # gets large values at secret positions in a secret half of the timed calls
    one_sign: bool = False  # mapped into one sign of its range in some stressed calls
    one_value: bool = False  # values it holds repeated in the stressed calls of correctness runs
    partial: bool = False  # an input read only in part (h.table_input: a lookup table): not a byte a call must read
    guessed_range: bool = False  # a kl::UniformInt input whose range nobody stated: the wider-integer experiment draws it wide

    @property
    def any_stress(self) -> bool:
        return self.stressed or self.one_sign or self.one_value

    @property
    def bytes(self) -> int:
        return self.count * dump_dtype(self.dtype).itemsize


class Manifest(BaseModel):
    """What a v2 harness declares about its experiment (trusted: the harness is frozen)."""

    model_config = ConfigDict(extra="ignore")

    contract: int
    warmup: int = Field(ge=1)
    calls: int = Field(ge=1)
    flops: float = Field(0.0, ge=0)
    size_index: int = 0  # -1: a size the verifier drew (KERNELLOOP_SIZE_DRAW)
    size_options: int = Field(1, ge=1)
    size_values: list[list[int]] = []  # each size() call's options (default first)
    sizes: list[int] = []  # what each size() call returned in this run (size_index -1: drawn)
    l2_flush_bytes: int = 0
    copy_gbps: float = 0.0  # measured by the harness before any launcher call: read + write bytes/s
    fma_gflops: float = 0.0  # measured FP32 FMA throughput
    samples_per_buffer: int = 0
    spikes_per_buffer: int = 0
    secret_fd: bool = False
    pageable_memory_access: bool = False  # kernels can reach pageable host memory (HMM/ATS)
    buffers: list[BufferSpec]

    def bytes_read(self) -> int:
        """Bytes one call must read: every input and in-out buffer (freshly written, L2 flushed),
        but tables (inputs the program declares read in part, h.table_input)."""
        return sum(b.bytes for b in self.buffers if b.role in ("input", "inout") and not b.partial)

    def bytes_written(self) -> int:
        return sum(b.bytes for b in self.buffers if b.role in ("output", "inout"))


class Sample(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)

    call: int
    buffer: int
    values: np.ndarray


class Identical(BaseModel):
    """An output buffer that some timed calls left equal to an input buffer (an in-out buffer:
    to itself as the harness filled it), byte for byte."""

    output: int  # buffer indices in the manifest
    input: int
    calls: int  # how many timed calls
    of: int  # of how many


class InputVariety(BaseModel):
    """How much an input (or in-out) buffer varied over the timed calls without stress, as the
    harness's generator filled it (the verifier's stress is no variety of the experiment's own)."""

    buffer: int  # index in the manifest
    same_calls: int  # plain calls whose contents were those of the first plain call (the first included)
    flat_calls: int  # plain calls in which every element was equal to the first
    of: int  # of how many timed calls without stress


class OutputConstancy(BaseModel):
    """How many timed calls left an output (or in-out) buffer byte for byte as the first did."""

    buffer: int  # index in the manifest
    same_calls: int  # the first included
    of: int


class NonfiniteMap(BaseModel):
    """Where a floating output held NaN or inf after one timed call, over the whole buffer: how
    many elements, and one bit per element at a position hashed from its index with a key drawn
    after the call (the same key in the baseline's and the candidate's run of one experiment).
    A call that left no such element writes no map."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    call: int
    buffer: int  # index in the manifest
    count: int
    bits: np.ndarray  # uint8, little-endian bit order within each 32-bit word


class PartStateRecord(BaseModel):
    """Whether the editable part's state (its writable data, what it allocated, its device and
    constant variables, kernel settings) was the same after untimed repeats of earlier timed calls'
    inputs as after those calls (kernelloop_harness.cuh, part_state)."""

    same: bool
    host_bytes: int
    device_bytes: int
    blocks: int  # allocations and variables recorded
    module_unread: int = 0  # objects of its module memory the harness could not locate (so not read)


class OutputRecords(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)

    manifest: Manifest | None = None  # None: a contract-v1 harness
    samples: list[Sample] = []
    warmup_samples: list[Sample] = []  # call: the warm-up call (0 first), sampled after the first timed call
    identical: list[Identical] = []
    variety: list[InputVariety] = []
    constancy: list[OutputConstancy] = []
    nonfinite_maps: list[NonfiniteMap] = []
    state: PartStateRecord | None = None  # None: a harness that does not repeat a call
    outputs: list[np.ndarray] = []

    @property
    def contract(self) -> int:
        return self.manifest.contract if self.manifest else 1

    def samples_of_call(self, call: int) -> list[np.ndarray]:
        return [s.values for s in self.samples if s.call == call]

    def samples_of_warmup_call(self, call: int) -> list[np.ndarray]:
        return [s.values for s in self.warmup_samples if s.call == call]


def _array(data: bytes, dtype_name: bytes, count: int, start: int) -> tuple[np.ndarray, int]:
    try:
        dtype = dump_dtype(dtype_name.decode())
    except (KeyError, ValueError) as exc:
        raise DumpError(f"unknown dtype {dtype_name.decode(errors='replace')!r} in the output file") from exc
    end = start + count * dtype.itemsize
    if end > len(data):
        raise DumpError(f"the output file ends inside a buffer ({count} {dtype_name.decode()} declared)")
    return np.frombuffer(data, dtype=dtype, count=count, offset=start), end


def parse_records(data: bytes, *, v1_only: bool = False) -> OutputRecords:
    """Every record in DATA, in order. `v1_only`: a v1 harness's file, whole outputs and nothing else
    (a manifest there would have the verifier trust what code without the header declares)."""
    records = OutputRecords()
    offset = 0
    while offset < len(data):
        if v1_only and not _OUTPUT.match(data, offset):
            raise DumpError(f"a record other than a whole output at byte {offset} of KERNELLOOP_OUTPUT_FILE: only "
                            "kernelloop_harness.cuh writes the others, and it writes them to the verifier's pipe")
        if m := _OUTPUT.match(data, offset):
            array, offset = _array(data, m.group(1), int(m.group(2)), m.end())
            records.outputs.append(array)
        elif m := _SAMPLE.match(data, offset):
            array, offset = _array(data, m.group(3), int(m.group(4)), m.end())
            records.samples.append(Sample(call=int(m.group(1)), buffer=int(m.group(2)), values=array))
        elif m := _WARMUP_SAMPLE.match(data, offset):
            array, offset = _array(data, m.group(3), int(m.group(4)), m.end())
            records.warmup_samples.append(Sample(call=int(m.group(1)), buffer=int(m.group(2)), values=array))
        elif m := _IDENTICAL.match(data, offset):
            records.identical.append(Identical(output=int(m.group(1)), input=int(m.group(2)),
                                               calls=int(m.group(3)), of=int(m.group(4))))
            offset = m.end()
        elif m := _FIXED.match(data, offset):
            records.variety.append(InputVariety(buffer=int(m.group(1)), same_calls=int(m.group(2)),
                                                flat_calls=int(m.group(3)), of=int(m.group(4))))
            offset = m.end()
        elif m := _CONSTANT.match(data, offset):
            records.constancy.append(OutputConstancy(buffer=int(m.group(1)), same_calls=int(m.group(2)),
                                                     of=int(m.group(3))))
            offset = m.end()
        elif m := _NONFINITE.match(data, offset):
            bits = int(m.group(4))
            if bits % 32 or not 0 < bits <= NONFINITE_MAP_MAX_BITS or m.end() + bits // 8 > len(data):
                raise DumpError(f"malformed non-finite map record at byte {offset}")
            records.nonfinite_maps.append(NonfiniteMap(
                call=int(m.group(1)), buffer=int(m.group(2)), count=int(m.group(3)),
                bits=np.frombuffer(data, dtype=np.uint8, count=bits // 8, offset=m.end())))
            offset = m.end() + bits // 8
        elif m := _STATE.match(data, offset):
            if records.state is not None:
                raise DumpError("repeated part-state record in the output file")
            records.state = PartStateRecord(same=m.group(1) == b"1", host_bytes=int(m.group(2)),
                                            device_bytes=int(m.group(3)), blocks=int(m.group(4)),
                                            module_unread=int(m.group(5) or 0))
            offset = m.end()
        elif m := _MANIFEST.match(data, offset):
            size = int(m.group(1))
            if records.manifest is not None or size > MANIFEST_MAX_BYTES or m.end() + size > len(data):
                raise DumpError("malformed or repeated manifest in the output file")
            try:
                records.manifest = Manifest.model_validate(json.loads(data[m.end():m.end() + size]))
            except (ValueError, ValidationError) as exc:
                raise DumpError(f"unreadable manifest in the output file: {exc}") from exc
            offset = m.end() + size
        else:
            raise DumpError(f"malformed output file record at byte {offset}")
    return records


def parse_header_records(data: bytes) -> OutputRecords:
    """The v2 header's stream, read strictly: its manifest first, its end record last, saying how many
    bytes came before it. Anything else in the pipe was written by other code of the program (frozen
    code before the harness, or after its run: red team round 291), and the run's records are void."""
    end = data.rfind(b"kernelloop-end 2 ")
    m = _END.fullmatch(data, end) if end >= 0 else None
    if m is None:
        raise DumpError("the harness's records end without its end record: the program stopped writing early, "
                        "or other code wrote after it")
    if int(m.group(1)) != end:
        raise DumpError(f"the harness's records hold {end} bytes before its end record, which counts "
                        f"{int(m.group(1))}: other code of the program wrote to the verifier's pipe")
    if not _MANIFEST.match(data):
        raise DumpError("the harness's records do not begin with its manifest: other code of the program wrote "
                        "to the verifier's pipe first")
    return parse_records(data[:end])


def read_records(path: Path, *, max_bytes: int = 4 << 30) -> OutputRecords:
    """A v1 harness's KERNELLOOP_OUTPUT_FILE: whole outputs only."""
    size = path.stat().st_size
    if size > max_bytes:
        raise DumpError(f"output file is {size} bytes, over the {max_bytes}-byte cap")
    return parse_records(path.read_bytes(), v1_only=True)
