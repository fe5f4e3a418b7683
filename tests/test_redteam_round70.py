"""Red team round 70 (tests/fixtures/redteam/round70/REPORT.md), on the state check of 7b8ff14.
The static findings here; the dynamic ones (a kernel setting used as a counter, the repeat
recognised and the state rewound, a stream-ordered workspace) in tests/gpu/test_part_state_gpu.py."""

from __future__ import annotations

import pytest

from kernelloop.config import Settings
from kernelloop.program.split import split_program
from kernelloop.tools.nvcc import find_toolchain
from kernelloop.verify.gate import candidate_editable_part, static_gates
from kernelloop.verify.precision import classify_ptx, compare_profiles, device_heap_externs

from .conftest import FIXTURES, shared_cache_dir

ROUND = FIXTURES / "redteam" / "round70"


def _static(folder: str, candidate: str):
    split = split_program((ROUND / folder / "baseline.cu").read_text(), "baseline.cu")
    editable, _ = candidate_editable_part((ROUND / folder / candidate).read_text(), split)
    return static_gates(split, editable, arch="sm_86", settings=Settings(cache_dir=shared_cache_dir()),
                        toolchain=find_toolchain())


def test_device_malloc_is_a_class_of_its_own_against_the_baseline():
    heap = classify_ptx("call.uni (retval0),\n\tmalloc,\n\t(param0);\n")
    plain = classify_ptx("add.f32 %f1, %f2, %f3;\n")
    assert heap.classes["device_heap"] == ["malloc"]
    assert [v.rule for v in compare_profiles(plain, heap)] == ["device-heap"]
    assert compare_profiles(heap, heap) == []  # the baseline's own heap use allows the candidate's
    assert "device_heap" not in classify_ptx(".extern .func (.param .b64 func_retval0) malloc\n").classes


@pytest.mark.nvcc
def test_a_counter_on_the_device_heap_is_refused():
    result = _static("device_heap_counter", "candidate.cu")
    assert [v.rule for v in result.violations] == ["device-heap"], [v.describe() for v in result.violations]


@pytest.mark.nvcc
def test_cuda_func_attributes_at_the_top_of_the_frame_is_this_toolkits_size():
    result = _static("fr_func_attributes_size", "honest.cu")
    assert not result.violations, [v.describe() for v in result.violations]


def test_the_device_heap_is_read_from_a_cubins_externs_where_sass_names_no_callee():
    # `cuobjdump -elf` of the round's candidate on the H200 (nvcc 13.0): SASS shows only `CALL.REL.NOINC 0x2890`
    elf = ("  Attribute:\tEIATTR_EXTERNS\n\tFormat:\tEIFMT_SVAL\n\tValue:\texterns:\tmalloc(0x37)\t\n"
           " 0x37               0               0     0x12        0      0     malloc\n")
    assert device_heap_externs(elf) == ["malloc"]
    assert device_heap_externs("\tValue:\texterns:\tvprintf(0x12)\t\n") == []
