"""Red team round 297 (tests/fixtures/redteam/round297/REPORT.md), on 6e41641: a baseline's frozen code defined
the header's own code through qualified declarators, which round 295's `namespace kl` rule did not see: an explicit
specialization `template <> int kl::Harness::size<int>(...)` that recorded the verifier's size in the manifest and
ran every size at the default (a candidate hard-coding 2^26 passed every static gate), and an empty
`stress_with<float, kl::Uniform<float>>` that switched the stresses off; explicit specializations skip access
checks, so the header's private state was theirs too. Closed by class: frozen code may declare nothing whose scope
is the header's (`kl::...`, or a class of the header's brought in by a using-directive or -declaration), nor name
the header's namespace by another name."""

from __future__ import annotations

import pytest

from kernelloop.errors import InputError
from kernelloop.program.split import split_program

from .conftest import FIXTURES, ROOT

ROUND = FIXTURES / "redteam" / "round297"
SUM = (ROOT / "kernels" / "sum_reduction.cu").read_text()


def _with(frozen: str) -> str:
    return SUM.replace("#include <kernelloop_harness.cuh>", f"#include <kernelloop_harness.cuh>\n{frozen}")


def test_round297_a_specialization_of_the_harness_is_refused():
    with pytest.raises(InputError, match=r"declares kl::Harness::size<int>, a part of the harness header"):
        split_program((ROUND / "v_size_specialized.cu").read_text(), "v_size_specialized.cu")


@pytest.mark.parametrize("frozen, words", [
    ("template <> void kl::Harness::stress_with<float, kl::Uniform<float>>(const kl::Buffer&, uint64_t, uint64_t) {}",
     "declares kl::Harness::stress_with"),
    ("using namespace kl;\ntemplate <> int Harness::size<int>(std::initializer_list<int> o) { return o.begin()[0]; }",
     "declares Harness::size<int>"),
    ("using kl::Harness;\ntemplate <> int Harness::size<int>(std::initializer_list<int> o) { return o.begin()[0]; }",
     "declares Harness::size<int>"),
    ("template <> struct kl::DType<double> { static constexpr const char* name = \"float32\"; };",
     "declares kl::DType"),
    ("namespace K = kl;", "by another name"),
], ids=["private-member", "using-directive", "using-declaration", "trait", "alias"])
def test_frozen_code_declaring_into_the_header_is_refused(frozen, words):
    with pytest.raises(InputError, match=words):
        split_program(_with(frozen), "sum_reduction.cu")


def test_a_class_of_the_programs_own_named_like_one_of_the_headers_is_its_own():
    split_program(_with("struct Buffer { int f(); };\nint Buffer::f() { return 1; }"), "sum_reduction.cu")
