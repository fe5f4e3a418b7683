"""Red team round 150 (tests/fixtures/redteam/round150/): the program's directives were read line by
line after comments were stripped with their newlines kept, so `#define WORDS(tag) C - (int)sizeof
"ab" /* ... */ #tag` written over two lines (one line to the compiler) read as ending at the
comment: the row tier wrote `c < (C - sizeof("ab"))` (C - 3) where the baseline loops to C - 5
(probable: the static gate stopped it only by chance). A backslash with trailing whitespace before
the newline (a splice to gcc and nvcc) was missed the same way. And the macro reader wrote a
stand-in string for `#tag`. Fixed by class: one reading of the program in the compiler's order
(scanner.preprocessed: splices, then each comment one space) for every reader of directives, and
stringizing that writes the argument's own spelling or refuses."""

from __future__ import annotations

import re

from kernelloop.program.macros import macro_body_words

from .conftest import FIXTURES
from .test_redteam_round109 import _first_proposal

CASE = FIXTURES / "redteam" / "round150" / "comment_spliced_macro"


def test_the_rewrites_loop_bound_is_the_macro_as_the_compiler_reads_it():
    proposal = _first_proposal((CASE / "strz_kl.cu").read_text())
    assert "row tier" in proposal.approach
    bound = re.search(r"c < \(C - \(\(int\)sizeof\((\"ab\"\s+\"xy\")\)\)\);", proposal.source)
    assert bound, re.findall(r"c < [^;]*;", proposal.source)


def test_a_macro_continued_by_a_comment_or_a_spaced_splice_names_its_words():
    assert "T" in macro_body_words("#define W \\  \n (sizeof(T) + 1)\n")
    assert "U" in macro_body_words("#define W(t) C /* the rest\n */ + sizeof(U)\n")
    assert "V" not in macro_body_words("#define W C // + V\n")
