"""Red team round 291 (tests/fixtures/redteam/round291/REPORT.md), open: a baseline's frozen code rewrites the
records file after the run (in main after `h.run`, or in a namespace-scope object's destructor), so a wrong
candidate matches. Recorded under Known limits in docs/verifier.md with the class fix (records to a descriptor the
verifier reads while the program runs, the header ending the process after its last record). These tests say what
holds today and fail, strictly, once the fix lands, so they are updated with it."""

from __future__ import annotations

import pytest

from kernelloop.errors import InputError
from kernelloop.program.split import split_program

from .conftest import FIXTURES

ROUND = FIXTURES / "redteam" / "round291"


@pytest.mark.xfail(strict=True, raises=AssertionError,
                   reason="open: frozen code after h.run can rewrite the records (docs/verifier.md, Known limits)")
@pytest.mark.parametrize("name", ["v_forge_after_run.cu", "v_forge_static_dtor.cu"])
def test_round291_a_baseline_forging_the_records_after_the_run_is_refused(name):
    try:
        split_program((ROUND / name).read_text(), name)
    except InputError:
        return
    raise AssertionError(f"{name} is accepted: its frozen code may rewrite the records after the run")
