"""Red team round 290 (tests/fixtures/redteam/round290/REPORT.md), on rounds 288-289 and the host-code scan's new
bottom-closed rule. (A) A baseline whose frozen code carries a weak `memset` (`#pragma weak memset`, or an
`extern "C" inline` one whose address is taken): round 288 refused only strong definitions of library symbols, and
the trusted header's scrub calls memset before every call. (B) Two holes in the bottom-closed rule, on hand-written
assembly: a high byte (`add %ah,%al`) read as a bottom, and a shift by %cl (zero: no flag written) taken as ending
the flags' life. Closed by class: any frozen definition of a library's C symbol is refused whatever its binding
(mangled weak instances, templates' and inline functions', aside), `#pragma weak` is renaming; high-byte operands
are never narrowed, and only an instruction writing every status flag for sure (no shift or rotate, nothing left
undefined) ends the flags' life."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from kernelloop.config import Settings
from kernelloop.errors import InputError
from kernelloop.program.split import split_program
from kernelloop.verify.hostcode import scan_host_code

from .conftest import FIXTURES, shared_cache_dir
from .test_hostcode import _defined_functions

ROUND = FIXTURES / "redteam" / "round290"


def test_round290_a_pragma_weak_in_frozen_code_is_refused():
    with pytest.raises(InputError, match=r"makes a symbol weak \(#pragma weak\)"):
        split_program((ROUND / "v_pragma_weak_memset.cu").read_text(), "v_pragma_weak_memset.cu")


@pytest.mark.nvcc
def test_round290_an_inline_frozen_memset_is_refused_at_the_link():
    from kernelloop.tools.nvcc import find_toolchain
    from kernelloop.verify.gate import static_gates

    split = split_program((ROUND / "v_inline_memset.cu").read_text(), "v_inline_memset.cu")
    with pytest.raises(InputError, match="the frozen code defines memset, a function of the C, C"):
        static_gates(split, split.editable, arch="sm_90", settings=Settings(cache_dir=shared_cache_dir()),
                     toolchain=find_toolchain())


def test_round290_a_weak_library_symbol_is_refused_and_a_mangled_weak_instance_is_not():
    from kernelloop.tools.nvcc import BuildResult, ObjectSymbols
    from kernelloop.verify.gate import frozen_link_problem

    def harness(*defined: str, weak: tuple[str, ...] = ()) -> BuildResult:
        return BuildResult(ok=True, stage="done", log="", flags=[],
                           editable_symbols=ObjectSymbols(defined_global=["_Z6launchPf"], undefined=[]),
                           harness_symbols=ObjectSymbols(defined_global=["main", *defined], undefined=[],
                                                         defined_weak=list(weak)))
    string_create = "_ZNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEE9_M_createERmm"
    library = frozenset({"memset", "mprotect", string_create})
    assert "memset" in frozen_link_problem(harness("memset", weak=("memset",)), ["launch"], library)
    assert "mprotect" in frozen_link_problem(harness("mprotect", weak=("mprotect",)), ["launch"], library)
    assert frozen_link_problem(harness(string_create, weak=(string_create,)), ["launch"], library) is None


@pytest.mark.skipif(shutil.which("as") is None, reason="needs binutils' as")
@pytest.mark.parametrize("name", ["hi.s", "flags.s", "ctl.s"])
def test_round290_a_high_byte_or_a_flag_a_zero_shift_keeps_carries_nothing_between_calls(name, tmp_path):
    obj = tmp_path / "unit.o"
    subprocess.run(["as", str(ROUND / "asm" / name), "-o", str(obj)], check=True, capture_output=True)
    rules = {v.rule for v in scan_host_code(obj, _defined_functions(obj, ("launch",)))}
    assert "uninitialised-stack" in rules, rules
