"""Red team round 287 (tests/fixtures/redteam/round287/REPORT.md): the lambda was judged by C++ names, and the link
resolves symbols. The frozen code defined the launcher's symbol under another name (an asm label, an alias
attribute, a file-scope `.set`), so the harness's object defined what it should import, the build quietly kept
the part's own launcher local, and the timed call ran frozen code. Closed by class, twice: the frozen code may
not give a symbol its own name (an asm label or file-scope asm anywhere, macros expanded; alias-like attributes;
`#pragma redefine_extname`), and at the link the harness's object may define no symbol of a function the
editable part defines, whatever spelling made it (an `extern "C"` function named like the mangled symbol)."""

from __future__ import annotations

import pytest

from kernelloop.config import Settings
from kernelloop.errors import InputError
from kernelloop.program.split import split_program

from .conftest import FIXTURES, shared_cache_dir

ROUND = FIXTURES / "redteam" / "round287"
RENAMES = "its frozen code gives a symbol its own name or defines one in assembly"
ALIAS = "its frozen code declares a symbol with the attribute alias"
REFUSED_AT_SPLIT = {
    "v_asm_label_other_name.cu": RENAMES, "v_asm_label_other_name_onefile.cu": RENAMES,
    "v_alias_attribute.cu": RENAMES, "v_alias_attribute_onefile.cu": RENAMES,  # its frozen callee is labelled too
    "v_toplevel_asm_set.cu": RENAMES, "v_toplevel_asm_set_onefile.cu": RENAMES,
    "v_asm_label_call_outside.cu": RENAMES,
    "own/o_macro_label.cu": RENAMES,  # the label written by a macro of the harness: read expanded
    "own/o_gnu_alias_brackets.cu": ALIAS,
    "controls/c_asm_label_on_prototype.cu": RENAMES,
}


@pytest.mark.parametrize("name", sorted(REFUSED_AT_SPLIT))
def test_round287_frozen_code_naming_a_symbol_otherwise_is_refused(name):
    with pytest.raises(InputError) as caught:
        split_program((ROUND / name).read_text(), name)
    assert REFUSED_AT_SPLIT[name] in str(caught.value), str(caught.value)


def test_round287_an_attribute_alias_alone_is_refused_too():
    # v_alias_attribute without its labelled callee: the alias attribute itself is the finding
    text = (ROUND / "v_alias_attribute.cu").read_text()
    start = text.index("void kl_real(")
    text = text[:start] + text[text.index(";", start) + 1:]
    with pytest.raises(InputError) as caught:
        split_program(text, "alias_only.cu")
    assert "attribute alias" in str(caught.value) or RENAMES in str(caught.value), str(caught.value)


@pytest.mark.parametrize("name", ["controls/honest_two_functions.cu", "honest/h_inline_ptx_helpers.cu"])
def test_round287_honest_programs_and_inline_ptx_in_device_helpers_are_read(name):
    assert split_program((ROUND / name).read_text(), name).is_v2


def _static(name: str):
    from kernelloop.tools.nvcc import find_toolchain
    from kernelloop.verify.gate import static_gates

    split = split_program((ROUND / name).read_text(), name)
    return static_gates(split, split.editable, arch="sm_90", settings=Settings(cache_dir=shared_cache_dir()),
                        toolchain=find_toolchain())


def test_round287_a_harness_object_defining_the_parts_symbol_is_refused_at_the_link():
    # an extern "C" function whose name is the launcher's mangled symbol: no asm, no attribute (accepted before:
    # the part's launcher was localized and the lambda's call ran frozen code). Refused in the source since round
    # 289 (a linker name in frozen code), and in the objects whatever spelling made the symbol:
    with pytest.raises(InputError, match="its frozen code names _Z17launch_reduce_sumPKfPfS1_i, a symbol's linker"):
        split_program((ROUND / "own/o_extern_c_mangled.cu").read_text(), "o_extern_c_mangled.cu")
    from kernelloop.tools.nvcc import BuildResult, ObjectSymbols
    from kernelloop.verify.gate import frozen_link_problem

    symbol = "_Z17launch_reduce_sumPKfPfS1_i"
    build = BuildResult(ok=True, stage="done", log="", flags=[],
                        editable_symbols=ObjectSymbols(defined_global=[symbol], undefined=[]),
                        harness_symbols=ObjectSymbols(defined_global=["main", symbol], undefined=[]))
    assert "the frozen code defines launch_reduce_sum(float const*, float*, float*, int), a function of the " \
           "editable part's" in frozen_link_problem(build, ["launch_reduce_sum"])


@pytest.mark.nvcc
def test_round287_inline_ptx_in_the_preambles_device_helpers_passes_every_static_gate():
    result = _static("honest/h_inline_ptx_helpers.cu")
    assert result.candidate is not None and result.candidate.ok and result.violations == [], \
        [v.describe() for v in result.violations]


@pytest.mark.nvcc
def test_round287_a_harness_testing_a_macro_of_the_parts_headers_is_refused():
    # the open class round 287 named: `#ifndef _COOPERATIVE_GROUPS_H_` in the harness, which only the part's
    # `#include <cooperative_groups.h>` defines, reads one way in the verified harness unit and another in one file
    with pytest.raises(InputError, match="its harness tests _COOPERATIVE_GROUPS_H_, a macro a header the editable"):
        _static("header_guard/v_part_header_guard.cu")


@pytest.mark.nvcc
def test_round287_a_harness_testing_the_cuda_version_is_read():
    result = _static("header_guard/h_cuda_version_test.cu")
    assert result.candidate is not None and result.candidate.ok and result.violations == [], \
        [v.describe() for v in result.violations]
