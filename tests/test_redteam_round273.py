"""Red team round 273: in contract v2 the frozen code could print a result it read back from a
scratch buffer, which nothing compares (a candidate left it unwritten and passed). A scratch buffer
read back to the host by the frozen code (h.fetch, a cudaMemcpy) is refused before anything is
built; at run time the harness refuses fetch() of scratch and fills scratch with one fixed byte after
the last call, so a read the text hides (an alias) sees the same bytes in every program."""

from __future__ import annotations

import re

import pytest

from kernelloop.errors import InputError
from kernelloop.program.split import split_program

from .conftest import FIXTURES, ROOT

BASELINE = (FIXTURES / "redteam" / "round273" / "scratch_printed_baseline.cu").read_text()


def test_a_result_printed_from_a_scratch_buffer_is_refused_before_anything_is_built():
    with pytest.raises(InputError, match="reads the scratch buffer partial back to the host"):
        split_program(BASELINE, "scratch_printed_baseline.cu")


def test_a_copy_of_its_own_from_scratch_is_refused_too():
    text = BASELINE.replace("std::vector<float> parts = h.fetch(partial);",
                            "std::vector<float> parts((n + 255) / 256);\n"
                            "  cudaMemcpy(parts.data(), partial, parts.size() * sizeof(float), cudaMemcpyDeviceToHost);")
    assert "cudaMemcpy(parts.data(), partial" in text
    with pytest.raises(InputError, match="scratch buffer partial"):
        split_program(text, "p.cu")


def test_printing_an_output_and_declaring_scratch_stays_a_program():
    text = BASELINE.replace("std::vector<float> parts = h.fetch(partial);", "std::vector<float> parts(1, sum);")
    split = split_program(text, "p.cu")
    assert split.is_v2


def test_the_harness_refuses_fetch_of_scratch_and_retires_scratch_after_the_last_call():
    header = (ROOT / "src" / "kernelloop" / "harness" / "kernelloop_harness.cuh").read_text()
    fetch = header[header.index("std::vector<T> fetch(const T* device_ptr)"):]
    fetch = fetch[:fetch.index("\n  }\n")]
    assert re.search(r"if \(b\.role == Role::scratch\)\s*(?:kl::)?fail\(", fetch), fetch
    run_end = header[header.index("write_identical();\n    dump_outputs();"):][:200]
    assert "retire_scratch();" in run_end
