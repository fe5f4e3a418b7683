"""Red team round 301 (tests/fixtures/redteam/round301/REPORT.md), on 0aa4767. (A1) Frozen code rewrote the text of
KERNELLOOP_CUPTI_FD in place (through getenv's pointer: no setenv) before the first CUDA call, so the tracer, which
read the variable when the driver started it, wrote its whole stream into a pipe of the program's own; a static
destructor relayed it to the verifier's pipe without the candidate's side-stream kernel and with a fresh end record.
Closed by class: the library is preloaded and reads its settings at load, before any code of the program's, and says
so in its meta line ("early"), which the sealed reader requires (tests/test_cupti_pipe.py shows the rewrite on the
host). (A2) Frozen code specialised `std::is_integral<int>` as false: the header's drawn sizes (and the integer
stresses) read that trait, so every drawn size ran at the default. Closed by class: frozen code declares nothing in
the standard library's namespaces, which the header reads, as nothing in kl (rounds 295, 297)."""

from __future__ import annotations

import pytest

from kernelloop.errors import InputError
from kernelloop.program.split import split_program

from .conftest import FIXTURES, ROOT

ROUND = FIXTURES / "redteam" / "round301"
SUM = (ROOT / "kernels" / "sum_reduction.cu").read_text()


def _with(frozen: str) -> str:
    return SUM.replace("#include <kernelloop_harness.cuh>", f"#include <kernelloop_harness.cuh>\n{frozen}")


def test_round301_a_specialized_standard_trait_is_refused():
    with pytest.raises(InputError, match=r"declares std::is_integral<int>, in the standard library"):
        split_program((ROUND / "v_std_trait_specialized.cu").read_text(), "v_std_trait_specialized.cu")


@pytest.mark.parametrize("frozen, words", [
    ("namespace std { template <> struct is_signed<int> : false_type {}; }", "declares in namespace std"),
    ("template <> struct std::numeric_limits<int> { static constexpr int max() { return 7; } };",
     "declares std::numeric_limits<int>"),
    ("namespace cuda { namespace std { } }", "declares in namespace cuda"),
], ids=["namespace-std", "qualified", "cuda"])
def test_frozen_code_declaring_into_the_standard_library_is_refused(frozen, words):
    with pytest.raises(InputError, match=words):
        split_program(_with(frozen), "sum_reduction.cu")


def test_frozen_code_using_the_standard_library_is_fine():
    split_program(_with("using namespace std;\nstatic std::vector<int> kept;\nint twice(int x) { return 2 * x; }"),
                  "sum_reduction.cu")
