"""Red team round 283 (tests/fixtures/redteam/round283/REPORT.md), on round 282's checks: a baseline whose launcher
returns `cudaError_t`, a name the preamble #defines as a frozen class (undone before the harness header), ran that
class's destructor at the end of the lambda's statement in every timed call. Closed by class: what a called part
function returns, in every declaration of it, names no macro of the program's, and is void, a number, a pointer, a
plain type or CUDA's own status (run_lambda._result_problem). own/ (gen.py --own): the class's other spellings (a
macro of another name, a typedef named like CUDA's status, a trailing return type), refused by the launcher's result
check in split.py too."""

from __future__ import annotations

import pytest

from kernelloop.errors import InputError
from kernelloop.program.split import split_program

from .conftest import FIXTURES

ROUND = FIXTURES / "redteam" / "round283"


def test_round283_a_result_type_the_preprocessor_reads_otherwise_is_refused():
    path = ROUND / "v_status_macro_destructor.cu"
    with pytest.raises(InputError, match="declared to return cudaError_t, which names cudaError_t, a macro of the "
                                         "program's"):
        split_program(path.read_text(), path.name)


@pytest.mark.parametrize("path", sorted([*(ROUND / "controls").glob("*.cu"), *(ROUND / "own").glob("*.cu")]),
                         ids=lambda p: f"{p.parent.name}/{p.name}")
def test_round283_controls_and_own_spellings_are_refused(path):
    with pytest.raises(InputError):
        split_program(path.read_text(), path.name)
