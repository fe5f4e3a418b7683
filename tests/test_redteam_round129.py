"""Red team round 129 (tests/fixtures/redteam/round129/): (a) `#define signed Sat8` made a
keyword-spelled counter a class whose `++` stops at 255; (b) an empty `#define NAME // note`
left a line ending in blanks, which the grammar read as taking the next line (a helper whose
default argument reads blockIdx.x) for the macro's value; (c) `KL_R"(" ... ")"` read as a raw
string by the scanner, so the code between two plain strings (naming a macro that reads
blockIdx.x) was blanked. Now a program that defines a macro named like a keyword or CUDA's own
specifier has no kernel read, no line is read ending in blanks and a directive spanning lines
is not trusted, and a raw string's prefix is a token of its own."""

from __future__ import annotations

import pytest

from kernelloop.optimizers.base import NoMoreCandidates
from kernelloop.optimizers.offline.thread_reads import thread_reads
from kernelloop.program.scanner import without_literals

from .conftest import FIXTURES
from .test_redteam_round109 import _first_proposal
from .test_redteam_round126 import refused_as_reading_thread_place

ROUND = FIXTURES / "redteam" / "round129"


@pytest.mark.parametrize("baseline", ["a_keyword_macro_counter/baseline.cu",
                                      "b_empty_macro_swallows_helper_head/baseline.cu",
                                      "c_fake_raw_string_hides_macro/baseline.cu"])
def test_a_program_whose_words_are_not_the_compilers_gets_no_rewrite(baseline):
    try:
        proposal = _first_proposal((ROUND / baseline).read_text())
    except NoMoreCandidates as caught:
        # (a)'s count is of a type the program declares (`Sat8`), no built-in: round 133's rule refuses it too
        assert refused_as_reading_thread_place(str(caught)) or "a type not proven" in str(caught), str(caught)
        return
    assert "row tier" not in proposal.approach and "axis tier" not in proposal.approach, proposal.approach


@pytest.mark.parametrize("text, blanked", [
    ('x = R"(a)b)";', 'x = R"";'),
    ('KL_R"(" code ")"', 'KL_R"" code ""'),  # a name, then plain strings
    ('u8R"d(x)d" y', 'u8R"" y'),
    ('(LR"(x)")', '(LR"")'),
])
def test_a_raw_string_prefix_is_a_token_of_its_own(text, blanked):
    assert without_literals(text) == blanked


KERNEL = "__global__ void k(float* y, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = 0; }"


@pytest.mark.parametrize("code", [
    "#define KL_NOTE   \n__device__ int lim(int r, unsigned b = blockIdx.x) { return r; }",
    "#define signed Sat8\nstruct Sat8 { int v; };\n#undef signed",
    "#define __global__ __device__",
])
def test_what_the_compiler_reads_otherwise_is_not_read(code):
    assert thread_reads(f"{code}\n{KERNEL}\n").implicit is not None
