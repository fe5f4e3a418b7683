"""A frozen check macro reached through another (`EXT_KERNEL_LAUNCH_CHECK()` defined as
`EXT_CUDA_CHECK(cudaGetLastError())`, ATen's spelling): the qualified build (verify/shipped.py)
expands the outer macro through the inner one before it qualifies names, so the message `#expr`
stringizes keeps the user's spelling and an honest part builds alike; and every name the inner
macro's body leaves to the part is qualified too, whichever way it is reached."""

from __future__ import annotations

import re

import pytest

from kernelloop.config import Settings
from kernelloop.program.init import generate
from kernelloop.program.split import split_program
from kernelloop.verify.policy import qualified_macro_definitions

from .conftest import shared_cache_dir
from .outside_specs import OUTSIDE, SPECS

CHECK = ('(expr) do { cudaError_t status_ = (expr); if (status_ != cudaSuccess) { fprintf(stderr, '
         '"%s:%d: %s failed: %s\\n", __FILE__, __LINE__, #expr, cudaGetErrorString(status_)); std::abort(); } } while (0)')
MACROS = {"EXT_CUDA_CHECK": CHECK, "EXT_KERNEL_LAUNCH_CHECK": "() EXT_CUDA_CHECK(cudaGetLastError())",
          "CK": "(x) EXT_CUDA_CHECK(x)", "AT_LINE": "(f) f(__LINE__)", "PASS_LINE": "() AT_LINE(note_line)",
          "PASTE": "(a) EXT_CUDA_CHECK(a ## _check())"}


def _definitions(use: str) -> dict[str, str]:
    text = qualified_macro_definitions(f"void f() {{ {use} }}", "", MACROS, {"stderr": " stderr"}, "NS")
    return {m.group(1): m.group(2) for m in re.finditer(r"^#define (\w+)(?:\([^)]*\))? (.*)$", text, re.M)}


def test_a_nested_check_keeps_the_users_message_and_qualifies_the_inner_names():
    body = _definitions("EXT_KERNEL_LAUNCH_CHECK();")["EXT_KERNEL_LAUNCH_CHECK"]
    assert '"cudaGetLastError()"' in body  # the message as the compiler spells it from the unqualified call
    assert "(::NS::cudaGetLastError())" in body  # the call itself is pinned
    assert "::NS::fprintf(::NS::stderr," in body and "::NS::cudaGetErrorString(status_)" in body
    assert "EXT_CUDA_CHECK" not in body


def test_a_line_handed_on_through_an_inner_macro_reaches_a_pinned_name():
    assert _definitions("PASS_LINE();")["PASS_LINE"].strip() == "::NS::note_line(__LINE__)"


@pytest.mark.parametrize("use", ["CK(cudaGetLastError());", "PASTE(cuda);"])
def test_a_body_that_cannot_be_expanded_alone_leaves_the_inner_macro_and_redefines_it_qualified(use):
    # CK's parameter reaches the inner `#expr` (the use site's spelling); PASTE pastes tokens
    definitions = _definitions(use)
    outer = use.split("(")[0]
    assert "EXT_CUDA_CHECK(" in definitions[outer]
    assert "::NS::fprintf(::NS::stderr," in definitions["EXT_CUDA_CHECK"] and "#expr" in definitions["EXT_CUDA_CHECK"]


@pytest.mark.nvcc
def test_the_aten_style_program_passes_every_static_gate_against_itself():
    from kernelloop.tools.nvcc import find_toolchain
    from kernelloop.verify.gate import static_gates
    name = "row_center_launch_check_ext.cu"
    program = generate((OUTSIDE / name).read_text(), SPECS[name], name).program
    split = split_program(program, "generated.cu")
    assert "EXT_KERNEL_LAUNCH_CHECK();" in split.editable
    settings = Settings(cache_dir=shared_cache_dir())
    honest = static_gates(split, split.editable, arch="sm_90", settings=settings, toolchain=find_toolchain())
    assert honest.violations == [], [v.describe() for v in honest.violations]


LINE_TAKING_CHECK = """#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <cuda_runtime.h>
inline void ext_check(cudaError_t status, const char* file, int line) {
  if (status != cudaSuccess) { fprintf(stderr, "%s:%d: %s\\n", file, line, cudaGetErrorString(status)); std::abort(); }
}
#define EXT_CUDA_CHECK(expr) ext_check((expr), __FILE__, __LINE__)
#define EXT_KERNEL_LAUNCH_CHECK() EXT_CUDA_CHECK(cudaGetLastError())
"""

# binds the name the inner macro hands the line to, and keys its work on the line it gets
CAPTURING = """namespace ext {
static int seen_line = 0;
static void ext_check(cudaError_t, const char*, int line) { seen_line = line; }
"""


@pytest.mark.nvcc
def test_a_part_binding_a_name_the_inner_macro_hands_the_line_to_is_refused():
    from kernelloop.tools.nvcc import find_toolchain
    from kernelloop.verify.gate import static_gates
    name = "row_center_launch_check_ext.cu"
    source = (OUTSIDE / name).read_text()
    head = source[:source.index("namespace ext {")]
    line_taking = LINE_TAKING_CHECK + source[source.index("namespace ext {"):]
    assert head != LINE_TAKING_CHECK
    program = generate(line_taking, SPECS[name], name).program
    split = split_program(program, "generated.cu")
    settings = Settings(cache_dir=shared_cache_dir())
    honest = static_gates(split, split.editable, arch="sm_90", settings=settings, toolchain=find_toolchain())
    assert honest.violations == [], [v.describe() for v in honest.violations]
    capturing = split.editable.replace("namespace ext {\n", CAPTURING, 1).replace(
        "const int threads = 128;", "const int threads = seen_line > 0 ? 128 : 64;")
    assert capturing.count("seen_line") == 3
    result = static_gates(split, capturing, arch="sm_90", settings=settings, toolchain=find_toolchain())
    assert {v.rule for v in result.violations} & {"build-identity", "macro-hygiene"}, \
        [v.describe() for v in result.violations]
