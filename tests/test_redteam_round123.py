"""Red team round 123 (tests/fixtures/redteam/round123/): a `template <>` specialization of a pure
device helper, which the reader could not parse, was dropped without a trace; the helper's name
then meant the general template alone, read as pure, and the axis tier swapped a kernel whose
verified instantiation called the specialization, which reads `blockIdx.x` the swap does not rename.
Now a definition that is not read still claims its name: no function of that name is read."""

from __future__ import annotations

import pytest

from kernelloop.optimizers.base import NoMoreCandidates
from kernelloop.optimizers.offline.launcher import read_editable

from .conftest import FIXTURES
from .test_redteam_round109 import _first_proposal
from .test_redteam_round126 import refused_as_reading_thread_place

ROUND = FIXTURES / "redteam" / "round123" / "a_helper_specialization_builtin"


@pytest.mark.parametrize("baseline", ["baseline.cu", "variant_plain_launcher/baseline.cu"])
def test_a_helper_with_an_unread_specialization_gets_no_rewrite(baseline):
    with pytest.raises(NoMoreCandidates) as caught:
        _first_proposal((ROUND / baseline).read_text())
    assert "axis tier: kernel rank1_update_kernel calls row_limit" in str(caught.value) or refused_as_reading_thread_place(str(caught.value))


@pytest.mark.parametrize("unread", [
    # a head the reader does not parse
    "template <> __device__ int row_limit<float>(int rows) { return rows - (int)blockIdx.x * 0; }",
    # a body it does not read (a name declared inside device code)
    "__device__ int row_limit(long rows) { using namespace std; return (int)rows; }",
])
@pytest.mark.parametrize("first", [True, False])
def test_a_definition_not_read_still_claims_its_name(unread, first):
    pure = "template <typename T> __device__ int row_limit(int rows) { return rows; }"
    kernel = "__global__ void k(float* y, int n) { int i = threadIdx.x; if (i < row_limit<float>(n)) y[i] = 0; }"
    editable = "\n".join([unread, pure, kernel] if first else [pure, unread, kernel])
    part = read_editable(editable, "", [])
    assert "row_limit" not in part.functions and "k" in part.functions
