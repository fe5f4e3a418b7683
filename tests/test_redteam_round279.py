"""Red team round 279 (tests/fixtures/redteam/round279/REPORT.md), on round 278's scope lookup: ten classes of
frozen code in the timed call still read as the part's. A binding in a `#if` branch, a using-directive's names, a
generic lambda's template parameter and a statement C++ reads as a declaration (`Tap(tap) = hold.tap;`) now leave
the name unsettled or bound where the compiler binds it; `auto` is plain only from a plain value or one call of the
harness's size/input/output/inout/scratch; macros are those in force at the lambda in the harness's own unit (a
later `#define`, the editable part's, are not); called names resolve where they are called (a macro declaring a
local named like the launcher); an operator on anything but numbers and pointers is refused (a free operator of
a plain struct, through an alias); and no declaration of a called part function has a default argument that runs
code or a parameter of a frozen type that is not plain."""

from __future__ import annotations

import pytest

from kernelloop.errors import InputError
from kernelloop.program.split import split_program

from .conftest import FIXTURES

ROUND = FIXTURES / "redteam" / "round279"

WHY = {
    "v_aliasop.cu": "computes `++tap` on tap, whose operators are functions of the program",
    "v_autosize.cu": "h.run lambda",
    "v_deadif.cu": "h.run lambda",
    "v_declexpr.cu": "h.run lambda",
    "v_defaultarg.cu": "declared with a default argument (int tapped = tap_partials()) that runs code in every call",
    "v_defaultarg_edit.cu": "declared with a default argument (int tapped = tap_partials()) that runs code",
    "v_editmacro.cu": "names copy_back, a macro the editable part defines",
    "v_lambdatpl.cu": "h.run lambda",
    "v_latemacro.cu": "uses macros that cannot be read for sure",
    # round 281: the macro-declared local's own call of the part, outside the lambda, is found first
    "v_macrolauncher.cu": "names launch_reduce_sum outside its h.run lambda (::launch_reduce_sum)",
    "v_usingdir.cu": "h.run lambda",
}


@pytest.mark.parametrize("name", sorted(WHY))
def test_round279_frozen_work_in_the_timed_call_is_refused(name):
    with pytest.raises(InputError) as caught:
        split_program((ROUND / name).read_text(), name)
    assert WHY[name] in str(caught.value), str(caught.value)


@pytest.mark.parametrize("name", sorted(p.name for p in (ROUND / "read").glob("*.cu")))
def test_round279_a_name_bound_where_the_lookup_used_to_stop_early_is_not_plain(name):
    # the same binders with the frozen object read as an argument (its conversion runs the copy), not through an
    # operator: the lookup itself must find the compiler's binding
    with pytest.raises(InputError, match="reads tap, which is not a plain value"):
        split_program((ROUND / "read" / name).read_text(), name)


@pytest.mark.parametrize("path", sorted((ROUND / "honest").glob("*.cu")), ids=lambda p: p.name)
def test_round279_auto_from_the_harness_stays_a_program(path):
    # `auto* in = h.input<float>(...)`, `const auto count = n;`: refused by round 278, plain here
    assert split_program(path.read_text(), path.name).is_v2


def test_round279_a_frozen_conversion_at_the_launchers_parameter_is_refused():
    # written after the round, by class (F10's second half): the editable launcher takes a preamble type whose
    # converting constructor copies scratch; the harness's unit declares it so, and the lambda's `n` converts there
    name = "v_count_param.cu"
    with pytest.raises(InputError, match=r"whose parameter \(Count n\) is of a frozen type that is not plain"):
        split_program((ROUND / "own" / name).read_text(), name)
