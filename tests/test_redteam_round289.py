"""Red team round 289 (tests/fixtures/redteam/round289/REPORT.md), on round 288's checks. (A) A template launcher
the part never instantiates (or only weakly): the frozen code defined its mangled symbol as an `extern "C"`
function, which round 287's link check skipped (it compared strong definitions both objects hold), or called the
build's private name for the part's weak copy (`__kl_editable_0_...`). (B) `target_clones` made a frozen `log2f` or
`memset` an indirect function, a symbol kind (`i`) the object reader counted as neither defined nor undefined.
Closed by class: frozen code names no linker name (`_Z...`, `__kl_editable_...`) and no `target_clones`; in the
objects, any definition of the harness's named like a part function (weak, indirect, uninstantiated in the part)
is refused, as is a harness import of the part's private copies, and indirect and unique symbols count as
defined."""

from __future__ import annotations

import pytest

from kernelloop.errors import InputError
from kernelloop.program.split import split_program

from .conftest import FIXTURES

ROUND = FIXTURES / "redteam" / "round289"
LINKER_NAME = "a symbol's linker name"
WHY = {
    "v_template_uninstantiated.cu": LINKER_NAME,
    "v_template_frozen_around_part.cu": LINKER_NAME,
    "v_template_weak_instantiation.cu": LINKER_NAME,
    "controls/c_template_uninstantiated_no_extern.cu": LINKER_NAME,
    "v_ifunc_log2f.cu": "with the attribute target_clones",
    "v_ifunc_memset.cu": "with the attribute target_clones",
}


@pytest.mark.parametrize("name", sorted(WHY))
def test_round289_refused_in_the_source(name):
    with pytest.raises(InputError) as caught:
        split_program((ROUND / name).read_text(), name)
    assert WHY[name] in str(caught.value), str(caught.value)


def test_round289_an_honest_template_launcher_is_read():
    assert split_program((ROUND / "controls/honest_template_launcher.cu").read_text(), "honest.cu").is_v2


def test_round289_in_the_objects_any_harness_definition_of_a_part_function_and_private_copies_are_refused():
    from kernelloop.tools.nvcc import BuildResult, ObjectSymbols
    from kernelloop.verify.gate import frozen_link_problem

    template = "_Z17launch_reduce_sumILi256EEvPKfPfS2_i"
    build = BuildResult(ok=True, stage="done", log="", flags=[],  # the part never instantiates <256>
                        editable_symbols=ObjectSymbols(defined_global=["_Z17launch_reduce_sumILi128EEvPKfPfS2_i"],
                                                       undefined=[]),
                        harness_symbols=ObjectSymbols(defined_global=["main", template], undefined=[]))
    assert "a function of the editable part's" in frozen_link_problem(build, ["launch_reduce_sum"])
    build.harness_symbols = ObjectSymbols(defined_global=["main"], undefined=[f"__kl_editable_0_{template}"])
    assert "the part's own copy of a shared definition" in frozen_link_problem(build, ["launch_reduce_sum"])
    # a library's instantiation named like a part function is not the part's
    build.harness_symbols = ObjectSymbols(defined_global=["main", "_ZSt3maxIiERKT_S2_S2_"], undefined=[])
    assert frozen_link_problem(build, ["max"]) is None


def test_indirect_and_unique_symbols_count_as_defined(tmp_path):
    import shutil
    import subprocess

    from kernelloop.tools.nvcc import object_symbols

    if shutil.which("gcc") is None:
        pytest.skip("needs gcc")
    (tmp_path / "f.c").write_text('__attribute__((target_clones("default", "avx2"))) float log2f(float x) '
                                  '{ return x; }\n')
    subprocess.run(["gcc", "-O2", "-c", "f.c", "-o", "f.o"], cwd=tmp_path, check=True)
    assert "log2f" in object_symbols(tmp_path / "f.o").defined_global
