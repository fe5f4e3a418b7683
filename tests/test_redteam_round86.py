"""Red team round 86 (tests/fixtures/redteam/round86/): the tiers read a call by its spelling
(`max`, `exp`) or a launch by its bare name while the program gives that name another meaning
(its own namespace's `max`, a namespace-scope using-declaration, its own `exp`, a template kernel
of the same name in the frozen part). CPU only."""

from __future__ import annotations

import pytest

from kernelloop.optimizers.offline.cparse import declared_names

from .conftest import FIXTURES
from .test_redteam_round85 import _proposals

ROUND = FIXTURES / "redteam" / "round86"


@pytest.mark.parametrize("path, words", [
    ("ns_max_helper/baseline.cu", "row_absmax_kernel: calls max, which the program declares itself"),
    ("ns_max_helper/baseline_using.cu", "row_absmax_kernel: calls max, which the program declares itself"),
    ("ns_exp_softmax/baseline.cu", "calls exp, which the program declares itself"),
    ("preamble_overload_kernel/baseline.cu", "the frozen part declares a function or name reduce_interleaved_kernel"),
])
def test_a_name_the_program_gives_its_own_meaning_is_not_read_by_its_spelling(path, words):
    from kernelloop.optimizers.offline.analysis import analyze
    from kernelloop.program.split import split_program

    split = split_program((ROUND / path).read_text(), "baseline.cu")
    analysis = analyze(split.editable, split.harness, split.exported, split.preamble)
    assert any(words in p for p in analysis.part.problems), analysis.part.problems
    assert _proposals(ROUND / path) == []


def test_declared_names_sees_every_kind_of_declaration():
    names = declared_names("""
#define exp(x) exp2f(x)
namespace l1 { __device__ float max(float a, float b) { return a + b; } }
using ::l1::max;
template <typename T> __global__ void k(const T* in, T* out, int n) {}
typedef float real; using idx = int; struct Acc { float v; };
float ns::helper(int q) { return 0; }
enum E { kA };
""")
    assert {"exp", "max", "k", "real", "idx", "Acc", "helper", "kA", "E"} <= names
