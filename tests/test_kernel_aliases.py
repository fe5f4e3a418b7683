"""Type aliases declared inside device code (`typedef double acc_t;`, `using value_t = float;`) are
read as the types they name, and a comment before a kernel's thread index no longer hides it: the
tiers read (and copy) the kernel with its aliases spelled out and its comments left out."""

from __future__ import annotations

import pytest

from kernelloop.optimizers.base import NoMoreCandidates
from kernelloop.optimizers.offline.analysis import verified_type_arguments
from kernelloop.optimizers.offline.cparse import parse_body
from kernelloop.optimizers.offline.launcher import read_editable, with_aliases_expanded
from kernelloop.program.scanner import Item

from .conftest import FIXTURES
from .test_redteam_round109 import _first_proposal

ALIASES = FIXTURES / "kernel_aliases"


def test_a_kernel_with_type_aliases_gets_the_row_tier_with_the_types_spelled_out():
    proposal = _first_proposal((ALIASES / "row_rms_alias_kl.cu").read_text())
    assert proposal.approach == "row tier: one warp per row of row_rms", proposal.approach
    rewritten = proposal.source.split("row_rms_kl_rewritten", 1)[1]
    assert "acc_t" not in rewritten and "value_t" not in rewritten
    assert "double sum = ((double)(0));" in rewritten  # acc_t(0): the functional cast as a cast
    assert "sum += (double)v * v;" in rewritten and "const float v = " in rewritten


def test_a_comment_before_the_thread_index_does_not_hide_it():
    proposal = _first_proposal((ALIASES / "row_rms_comment_kl.cu").read_text())
    assert proposal.approach == "row tier: one warp per row of row_rms", proposal.approach


def _read(body: str):
    head = "__global__ void k(const float* x, float* y, int n) "
    text = head + body
    return with_aliases_expanded(Item("code", text, 0, len(text), 1), head, parse_body(body), set())


@pytest.mark.parametrize("body, why", [
    ("{ typedef float* fp; fp p = (fp)x; y[0] = p[0]; }", "declares names inside device code (typedef float* fp;)"),
    ("{ using vp = const float*; vp p = x; y[0] = p[0]; }", "declares names inside device code (using vp"),
    ("{ using namespace std; y[0] = x[0]; }", "declares names inside device code (using namespace std;)"),
    ("{ using std::max; y[0] = max(x[0], 1.0f); }", "declares names inside device code (using std::max;)"),
    ("{ if (n) { typedef double t; y[0] = (t)x[0]; } }", "declares names inside device code (typedef double t;)"),
    ("{ typedef double t; using t = double; y[0] = x[0]; }", "more than once"),
    ("{ typedef double t; int t2 = 0; { float t = 1.0f; y[0] = t; } }", "a name of the same spelling"),
    ("{ y[0] = sizeof(t); typedef double t; }", "named before it or as a member"),
    ("{ typedef double t; y[0] = x[0]; y[1] = ::t(1); }", "named before it or as a member"),
    ("{ typedef double t; t v = t(); y[0] = v; }", "used as a constructor"),
    ("{ typedef double t; t v = t(1.0, 2.0); y[0] = v; }", "used as a constructor"),
    ("{ typedef struct { float a; } S; S s; s.a = 1; y[0] = s.a; }", "declares names inside device code"),
])
def test_an_alias_the_spelling_out_could_change_is_refused(body, why):
    read = _read(body)
    assert isinstance(read, str) and why in read, read


@pytest.mark.parametrize("body, expected", [
    ("{ typedef unsigned int u; u v = u(x[0]) + (u)1; y[0] = v; }",
     "{  unsigned int v = ((unsigned int)(x[0])) + (unsigned int)1; y[0] = v; }"),
    ("{ using acc = double; /* acc */ acc s = acc(acc(x[0]) * 2); y[0] = (float)s; }",
     "{  /* acc */ double s = ((double)(((double)(x[0])) * 2)); y[0] = (float)s; }"),
    ("{ typedef const float cf; cf a = x[0]; y[0] = a + sizeof(cf); }",
     "{  const float a = x[0]; y[0] = a + sizeof(const float); }"),
])
def test_an_alias_is_spelled_out_where_it_is_used(body, expected):
    read = _read(body)
    assert not isinstance(read, str), read
    item, _ = read
    assert item.text.split(") ", 1)[1] == expected


_TEMPLATE_PART = """
template <typename scalar_t, typename index_t>
__global__ void k(const scalar_t* x, scalar_t* y, index_t n) {
  const index_t i = static_cast<index_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i];
}
void launch_k(const float* x, float* y, long long n) {
  k<float, int64_t><<<(unsigned)((n + 255) / 256), 256>>>(x, y, n);
}
"""


def test_a_standard_integer_alias_is_a_verified_type_argument_unless_the_program_declares_it():
    part = read_editable(_TEMPLATE_PART, "launch_k(x, y, n);", ["void launch_k(const float* x, float* y, long long n)"])
    assert verified_type_arguments(part) == {"k": {"scalar_t": "float", "index_t": "int64_t"}}
    assert verified_type_arguments(part, {"int64_t"}) == {}


def test_a_kernel_whose_alias_cannot_be_spelled_out_says_why():
    text = (ALIASES / "row_rms_alias_kl.cu").read_text().replace("typedef double acc_t;", "typedef double* acc_p;")
    with pytest.raises(NoMoreCandidates, match=r"declares names inside device code \(typedef double\* acc_p;\)"):
        _first_proposal(text)

