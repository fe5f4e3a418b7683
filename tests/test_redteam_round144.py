"""Red team round 144 (tests/fixtures/redteam/round144/): (a) a function-like macro declared the
program's own `max` from its argument (`COMPAT_DECL(max) { ... }`, read as a definition of
COMPAT_DECL), which the declared names missed, and the row tier's `::max` chose it; (b, argued) an
alias at a statement's start, `value_t (t);`, declares `t`, which the alias reading turned into a
cast. Now every name handed to a function-like macro counts as declared, and an alias followed by
`(` where a statement starts leaves the function unread."""

from __future__ import annotations

import pytest

from kernelloop.optimizers.base import NoMoreCandidates
from kernelloop.optimizers.offline.analysis import macro_words

from .conftest import FIXTURES
from .test_kernel_aliases import _read
from .test_redteam_round109 import _first_proposal

ROUND = FIXTURES / "redteam" / "round144"


def test_a_name_handed_to_a_function_like_macro_counts_as_declared():
    code = "#define COMPAT_DECL(name) __device__ int name(short a, int b)\nCOMPAT_DECL(max) { return a < b ? a : b; }\n"
    assert "max" in macro_words(code)
    with pytest.raises(NoMoreCandidates, match="its code calls max, which the program declares itself"):
        _first_proposal((ROUND / "a_function_like_macro_declaration" / "baseline.cu").read_text())


@pytest.mark.parametrize("body", ["{ typedef float value_t; value_t (t); t = x[0]; y[0] = t; }",
                                  "{ typedef float value_t; if (n) value_t (t); y[0] = x[0]; }"])
def test_an_alias_where_a_statement_starts_is_not_read_as_a_cast(body):
    read = _read(body)
    assert isinstance(read, str) and "used where it may declare a name" in read, read
