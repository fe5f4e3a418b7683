"""Red team round 62 (tests/fixtures/redteam/round62/REPORT.md): no route; one false refusal. The
qualified build repeats its pinned macros after the part's last #include, found by a regex on the raw
text: a commented-out or `#if 0` include took the insertion (and its #line) with it, every later line
moved, and an honest part was refused. The place now comes from the preprocessor's own line markers."""

from __future__ import annotations

import pytest

from kernelloop.verify.shipped import _redefined_after_includes

from .conftest import FIXTURES, ROOT
from .test_shipped import _static

ROUND62 = FIXTURES / "redteam" / "round62" / "include_in_comment"


@pytest.mark.nvcc
@pytest.mark.parametrize("program", ["sum_reduction_commented_include.cu", "sum_reduction_if0_include.cu"])
def test_an_include_in_a_comment_or_skipped_group_is_no_include(program):
    from kernelloop.config import Settings
    from kernelloop.program.split import candidate_editable_part, split_program
    from kernelloop.tools.nvcc import find_toolchain
    from kernelloop.verify.gate import static_gates
    import tempfile
    from pathlib import Path
    text = (ROUND62 / program).read_text()
    split = split_program(text, program)
    editable, _ = candidate_editable_part(text, split, "candidate")
    result = static_gates(split, editable, arch="sm_90", settings=Settings(cache_dir=Path(tempfile.mkdtemp())),
                          toolchain=find_toolchain())
    assert result.violations == []


@pytest.mark.nvcc
def test_against_the_bundled_baseline_too():
    assert _static("sum_reduction.cu", ROUND62 / "sum_reduction_commented_include.cu").violations == []


def test_the_redefinitions_go_before_the_line_the_preprocessor_named():
    part = "#include <cassert>\n// #include <later>\nint a;\n"
    out = _redefined_after_includes(part, "namespace NS { using ::x; }\n#undef assert\n#define assert(e) e", 2)
    assert out.split("\n")[:4] == ["#include <cassert>", "#undef assert", "#define assert(e) e", '#line 2 "candidate.cu"']
    assert _redefined_after_includes(part, "#undef assert\n#define assert(e) e", None) == part
    assert ROOT  # the fixture tree is the repository's
