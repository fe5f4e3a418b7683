"""Red team round 98 (tests/fixtures/redteam/round98/): (a) a call typed from its argument without
C++'s promotion (`abs` of an int8_t is an int) let a narrow running max be split over lanes, in
test_valuetype_promotion.py; (b) `#if __has_include("tuning.h")` in the user's own text, answered
one way by the user's build beside its files and the other by every build kernelloop makes in a
private folder: now refused by name wherever a program's user text is read; (c) the qualified
build's exemption of assert's argument went by the argument's spelling: now by the whole body."""

from __future__ import annotations

import pytest

from kernelloop.errors import InputError
from kernelloop.program.split import inline_user_headers, read_program, split_program
from kernelloop.verify.policy import _message_only_arguments

from .conftest import FIXTURES

ROUND = FIXTURES / "redteam" / "round98"


def test_a_test_of_whether_a_user_header_exists_is_refused_with_its_line():
    path = ROUND / "b_has_include_user_header" / "t.cu"
    with pytest.raises(InputError, match=r"t\.cu:\d+: __has_include tests whether tuning\.h exists"):
        inline_user_headers(read_program(path), str(path), [])


@pytest.mark.parametrize("test", ['__has_include("tuning.h")', "__has_include_next(<tuning.h>)",
                                  "__has_include(TUNING_HEADER)", "__has_include(<kernelloop_harness.cuh>)",
                                  '__has_embed("table.bin")'])
def test_every_spelling_of_a_file_test_is_refused_in_a_program_too(test, tmp_path):
    program = (FIXTURES.parent.parent / "kernels" / "sum_reduction.cu").read_text()
    text = program.replace("#include <cstdint>\n", f"#include <cstdint>\n#if {test}\n#define KL_X 1\n#endif\n", 1)
    assert text != program
    with pytest.raises(InputError, match="exists"):
        split_program(text, str(tmp_path / "p.cu"), [])


def test_a_toolkit_header_test_is_refused_too(tmp_path):
    # which toolkit (and which -I folders) the user's build sees is theirs to know
    program = (FIXTURES.parent.parent / "kernels" / "sum_reduction.cu").read_text()
    text = program.replace("#include <cstdint>\n", "#include <cstdint>\n#if __has_include(<cuda_bf16.h>)\n"
                           "#include <cuda_bf16.h>\n#endif\n", 1)
    with pytest.raises(InputError, match="cuda_bf16.h exists"):
        split_program(text, str(tmp_path / "p.cu"), [])


def test_a_file_test_in_a_header_the_program_includes_is_refused(tmp_path):
    (tmp_path / "tuning.h").write_text('#pragma once\n#if __has_include("local.h")\n#define KL_F 2\n#endif\n')
    source = tmp_path / "k.cu"
    source.write_text('#include "tuning.h"\n__global__ void k(float* y) { y[0] = 1; }\n')
    with pytest.raises(InputError, match=r"tuning\.h:2: __has_include tests whether local\.h exists"):
        inline_user_headers(read_program(source), str(source), [])


def test_the_assert_exemption_goes_by_the_whole_body():
    reaching = {"assert", "CHECK"}
    honest = "(call) do { cudaError_t s_ = (call); assert(s_ == cudaSuccess && #call); } while (0)"
    start, end = _message_only_arguments(honest, reaching)[0]
    assert honest[start:end] == "s_ == cudaSuccess && #call"
    # a line kept in a local, then handed to a name in the condition: nothing exempt
    assert _message_only_arguments("(x) do { const int l_ = __LINE__; assert(ok(l_)); } while (0)", reaching) == []
    # a ')' in a character literal does not end the argument early, nor a '(' stretch it
    quoted = "(c) do { assert(c != '(' && ok(c)); use(c); } while (0)"
    start, end = _message_only_arguments(quoted, reaching)[0]
    assert quoted[start:end] == "c != '(' && ok(c)"
