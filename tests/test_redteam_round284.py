"""Red team round 284 (tests/fixtures/redteam/round284/REPORT.md), on round 283's checks: a namespace-scope
`thread_local` int read in the lambda (or declared `extern thread_local` in the preamble) runs its dynamic
initializer, frozen code, the first time the thread reads it: in a timed call the lambda's counter picks. Closed by
class: a value declared thread_local (`thread_local`, `__thread`, `_Thread_local`) is never plain, in the lambda,
its captures and a called part function's default arguments. own/ (gen.py --own; both accepted before): read as
the launcher's argument, and as a default argument of the launcher's declaration."""

from __future__ import annotations

import pytest

from kernelloop.errors import InputError
from kernelloop.program.split import split_program

from .conftest import FIXTURES

ROUND = FIXTURES / "redteam" / "round284"


@pytest.mark.parametrize("path", sorted([*ROUND.glob("v_*.cu"), *(ROUND / "own").glob("*.cu"),
                                         ROUND / "controls" / "c_direct_call.cu", ROUND / "controls" / "t_udl.cu"]),
                         ids=lambda p: f"{p.parent.name}/{p.name}")
def test_round284_a_thread_local_read_in_the_timed_call_is_refused(path):
    with pytest.raises(InputError, match="h.run lambda"):
        split_program(path.read_text(), path.name)


def test_round284_a_plain_static_read_stays_a_program():
    # the same int without thread_local: initialised before main, a plain load in the lambda
    path = ROUND / "controls" / "h_static_init.cu"
    assert split_program(path.read_text(), path.name).is_v2
