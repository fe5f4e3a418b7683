"""Red team round 98 (tests/fixtures/redteam/round98/): (a) a call typed from its argument without
C++'s promotion (`abs` of an int8_t is an int) let a narrow running max be split over lanes, in
test_valuetype_promotion.py; (b) `#if __has_include("tuning.h")` in the user's own text, answered
one way by the user's build beside its files and the other by every build kernelloop makes in a
private folder: now refused by name wherever a program's user text is read; (c) the qualified
build's exemption of assert's argument went by the argument's spelling: now by the whole body."""

from __future__ import annotations

import re

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


# Red team round 99 (tests/fixtures/redteam/round99/): the same test spelled past the first check
# (a line splice, a name pasted by the text's own macro, a library's macro), a header meant to be
# included twice or first included where `#if` left it out, and a launcher precondition whose
# `assert` is the program's own.
ROUND99 = FIXTURES / "redteam" / "round99"


@pytest.mark.parametrize("name, match", [("t.cu", r"t\.cu:5: __has_include tests whether tuning\.h"),
                                         ("t_paste.cu", r"t_paste\.cu:\d+: this #if builds a name by pasting")])
def test_a_file_test_however_spelled_is_refused(name, match):
    path = ROUND99 / "a_file_test_splice" / name
    with pytest.raises(InputError, match=match):
        inline_user_headers(read_program(path), str(path), [])


@pytest.mark.parametrize("condition", ["_CCCL_HAS_INCLUDE(<x.h>)", "KL_HAS(1)"])
def test_a_library_spelling_or_a_pasting_macro_in_a_condition_is_refused(condition, tmp_path):
    source = tmp_path / "k.cu"
    source.write_text(f"#define KL_HAS(x) __has_ ## include\n#if {condition}\n#define F 2\n#endif\n"
                      "__global__ void k(float* y) { y[0] = 1; }\n")
    with pytest.raises(InputError, match="exists"):
        inline_user_headers(read_program(source), str(source), [])


def test_pasting_macros_tested_only_for_being_defined_are_no_file_test(tmp_path):
    source = tmp_path / "k.cu"
    source.write_text("#define CAT(a, b) a ## b\n#if defined(CAT) && !defined NDEBUG\n#define F 2\n#endif\n"
                      "__global__ void k(float* y) { y[0] = 1; }\n")
    inline_user_headers(read_program(source), str(source), [])


def test_a_header_is_inlined_at_every_include_and_its_guard_decides(tmp_path):
    (tmp_path / "gen.h").write_text("inline KL_T twice(KL_T v) { return v + v; }\n")
    (tmp_path / "once.h").write_text("#pragma once\ninline int once_only() { return 1; }\n")
    source = tmp_path / "k.cu"
    source.write_text('#define KL_T float\n#include "gen.h"\n#undef KL_T\n#define KL_T int\n#include "gen.h"\n'
                      '#ifdef KL_NEVER\n#include "once.h"\n#endif\n#include "once.h"\n#include "once.h"\n')
    text = inline_user_headers(read_program(source), str(source), [])
    assert text.count("inline KL_T twice") == 2
    # the first include of once.h is where #if leaves it out: its guard lets the next one expand
    assert text.count("inline int once_only()") == 3 and text.count("#ifndef KL_PRAGMA_ONCE_") == 3


@pytest.mark.nvcc
def test_a_header_included_twice_builds_as_the_users_build_does(tmp_path):
    import subprocess
    from kernelloop.tools.nvcc import build_whole_object
    from .conftest import shared_cache_dir
    folder = ROUND99 / "c_header_included_twice"
    for name in ("t.cu", "t2.cu"):
        path = folder / name
        inlined = inline_user_headers(read_program(path), str(path), [])
        build = build_whole_object(inlined, arch="sm_90", cache_dir=shared_cache_dir(), optimised=True)
        assert build.ok, build.log[-2000:]
        ours = build.binary.with_name("program.ptx").read_text()
        theirs = tmp_path / f"{name}.ptx"
        done = subprocess.run(["nvcc", "-O3", "-arch=sm_90", "-ptx", str(path), "-o", str(theirs)],
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        constants = lambda ptx: sorted(set(re.findall(r"0f[0-9A-F]{8}", ptx)))  # noqa: E731
        assert constants(ours) == constants(theirs.read_text()), name


def test_a_program_defining_assert_keeps_the_launchers_asserts_where_they_are():
    # round 99 stopped the templates (they moved asserts to the top); since round 102 a template's
    # call takes the launch's place alone, so the program's own assert stays where it was
    from .test_launch_in_place import _assert_in_place
    from .test_redteam_round85 import _proposals
    path = ROUND99 / "b_precondition_program_assert" / "baseline.cu"
    for source in _proposals(path):
        _assert_in_place(path.read_text(), source, "launch_reduce_sum")


# Red team round 100 (tests/fixtures/redteam/round100/d_pragma_once_hard_link/): `#pragma once` made a
# guard keyed by the header's path, where GCC's preprocessor knows the file by size, time and contents
# (a hard link, or a `cp -p` copy, is the same file to it).
SCALE_H = ("#pragma once\n#ifdef KL_SCALE\n#undef KL_SCALE\n#define KL_SCALE 4.0f\n#else\n#define KL_SCALE 3.0f\n"
           "#endif\n")
SCALE_CU = ('#include "include/scale.h"\n#include "vendor/scale.h"\n'
            "__global__ void scale(float* out, const float* in, int n) {\n"
            "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    if (i < n) out[i] = in[i] * KL_SCALE;\n}\n")


@pytest.mark.nvcc
@pytest.mark.parametrize("how", ["hard link", "copy keeping its time", "copy made later"])
def test_pragma_once_knows_a_file_as_the_preprocessor_does(how, tmp_path):
    import os
    import shutil
    import subprocess
    from kernelloop.tools.nvcc import build_whole_object
    from .conftest import shared_cache_dir
    (tmp_path / "include").mkdir()
    (tmp_path / "vendor").mkdir()
    first = tmp_path / "include" / "scale.h"
    first.write_text(SCALE_H)
    os.utime(first, (1_700_000_000, 1_700_000_000))
    second = tmp_path / "vendor" / "scale.h"
    if how == "hard link":
        os.link(first, second)
    elif how == "copy keeping its time":
        shutil.copy2(first, second)
    else:
        shutil.copyfile(first, second)
        os.utime(second, (1_700_000_100, 1_700_000_100))
    source = tmp_path / "t.cu"
    source.write_text(SCALE_CU)
    inlined = inline_user_headers(read_program(source), str(source), [])
    build = build_whole_object(inlined, arch="sm_90", cache_dir=shared_cache_dir(), optimised=True)
    assert build.ok, build.log[-2000:]
    done = subprocess.run(["nvcc", "-O3", "-arch=sm_90", "-ptx", "t.cu", "-o", "user.ptx"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    constants = lambda ptx: sorted(set(re.findall(r"0f[0-9A-F]{8}", ptx)))  # noqa: E731
    ours, theirs = constants(build.binary.with_name("program.ptx").read_text()), constants((tmp_path / "user.ptx").read_text())
    assert ours == theirs, (how, ours, theirs)
