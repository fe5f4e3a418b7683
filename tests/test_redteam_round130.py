"""Red team round 130 (tests/fixtures/redteam/round130/): the compiler's translation phases read
a program otherwise than the optimizer's readers: (a) a line splice inside a name (`KL_\\` newline
`R"("`) made the readers see a raw string that swallowed a `break`; (b) a vertical tab between
`#define` and `signed` hid a keyword macro from the rule that looks for one; (c) a splice inside a
macro's name hid it from the rule that looks for names reading the thread's place. Now a program
is read only where the phases change nothing a reader sees (program.phases)."""

from __future__ import annotations

import pytest

from kernelloop.optimizers.base import NoMoreCandidates
from kernelloop.program.phases import unread_spelling

from .conftest import FIXTURES
from .test_redteam_round109 import _first_proposal

ROUND = FIXTURES / "redteam" / "round130"


@pytest.mark.parametrize("baseline", ["a_spliced_raw_prefix_hides_break/baseline.cu",
                                      "b_vertical_tab_define_keyword/baseline.cu",
                                      "c_spliced_macro_name_unnamed/baseline.cu"])
def test_a_program_the_phases_change_gets_no_rewrite(baseline):
    with pytest.raises(NoMoreCandidates) as caught:
        _first_proposal((ROUND / baseline).read_text())
    assert "which could not be read (the editable part's line" in str(caught.value), str(caught.value)


@pytest.mark.parametrize("code", [
    "int x = 1;\\\n int y;",                               # a splice outside a directive
    "int x = 1;\\  \n int y;",                             # gcc joins a backslash with blanks after it
    "#define A(x) foo\\\nbar(x)",                          # a splice inside a name
    "#define A(x) foo(x) // note \\\n + 1",                # a comment a splice continues
    "#define\vsigned Sat8",                                # a vertical tab in a directive
    "int x;\f int y;",                                     # a form feed beside code
    "int a??(1??);",                                       # trigraphs
    "int a<:1:>;",                                         # digraphs
    "%:define N 4",
    '#define S "a;\\\n b"',                               # a splice inside a string literal
])
def test_spellings_the_readers_may_read_otherwise_are_named(code):
    assert unread_spelling(code) is not None


@pytest.mark.parametrize("code", [
    "#define CHECK(call) do { \\\n  if ((call) != cudaSuccess) abort(); \\\n} while (0)\nint x;",
    "#define CHECK(call) do {\\\n  if ((call) != cudaSuccess) abort();\\\n} while (0)",
    "int x;\n\f\nint y;",                                 # a page break on a line of its own
    "std::vector<::ns::T> v; // ok <: in a comment\nconst char* s = \"<% %> ??\";",
    "int x = a ? b : c;\r\nint y;\r\n",
])
def test_honest_spellings_are_read(code):
    assert unread_spelling(code) is None
