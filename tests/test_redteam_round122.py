"""Red team round 122 (tests/fixtures/redteam/round122/): an `extern "C"` launcher's stack window
was read from part of its declaration. `int __attribute__((vector_size(16))) src` kept only `int`,
so two vectors passed in %xmm registers counted as integer slots, and a candidate declaring more
parameters read the harness's frame above its return address; a parameter's *name* that is a macro
expanding to the attribute did the same past round 121's macro check. Now a declaration holding
anything beyond type words, qualifiers, pointer/reference/array marks and names gives no window,
and a macro anywhere in the declaration gives none."""

from __future__ import annotations

import pytest

from kernelloop.program.cuda_tree import declared_signature

from .conftest import FIXTURES

ROUND = FIXTURES / "redteam" / "round122" / "a_extern_c_vector_attribute_window"


@pytest.mark.parametrize("declaration", [
    'extern "C" void f(int n, int __attribute__((vector_size(16))) src);',
    '__attribute__((ms_abi)) extern "C" void f(int a);',
    'extern "C" void f(int a = 3);',
    'extern "C" void f(struct S* p);',
    'extern "C" void f(int n, ...);',
    'extern "C" void f(void (*callback)(int));',
])
def test_a_declaration_with_more_than_types_and_names_gives_no_signature(declaration):
    assert declared_signature(declaration) is None


@pytest.mark.nvcc
@pytest.mark.parametrize("baseline, candidate", [
    ("baseline.cu", "proposal/candidate.cu"),
    ("variant_macro_name/baseline.cu", "variant_macro_name/candidate.cu"),
])
def test_a_candidate_reading_past_the_registers_an_attribute_hid_is_refused(baseline, candidate):
    from kernelloop.config import Settings
    from kernelloop.program.split import candidate_editable_part, split_program
    from kernelloop.tools.nvcc import find_toolchain
    from kernelloop.verify.gate import static_gates

    from .conftest import shared_cache_dir

    split = split_program((ROUND / baseline).read_text(), "baseline.cu")
    editable, _ = candidate_editable_part((ROUND / candidate).read_text(), split)
    result = static_gates(split, editable, arch="sm_90", settings=Settings(cache_dir=shared_cache_dir()),
                          toolchain=find_toolchain())
    assert any(v.rule == "foreign-load" and "swizzle_gpu" in v.detail for v in result.violations), \
        [v.describe() for v in result.violations]
