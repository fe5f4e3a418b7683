"""Red team round 275 (tests/fixtures/redteam/round275/): round 274's lambda rule read the lambda's
text as written and only where it was written in place, so frozen code still ran in every timed call
through twelve spellings: a lambda kept in a variable, `(h.run)(...)`, `.run` inside a macro, a
frozen `fz::launch` named like the part's launcher, macros renaming the launcher, `cudaMemset` or
`cudaMemcpyDeviceToDevice`, the copy's kind anywhere among its arguments, an editable variable named
like a frozen helper, and code C++ runs on its own (an `auto` copy's destructor, an overloaded
operator, a conversion operator). The lambda is now read as compiled: macros expanded, `.run` only
with its lambda in place, names the frozen code defines never the part's, the kind at its position,
no frozen object that runs code of its own, no arithmetic where the frozen code overloads operators;
and the part is called inside the lambda only (a call before the run computed on inputs the verifier
does not draw, and printed what nothing compares)."""

from __future__ import annotations

import pytest

from kernelloop.errors import InputError
from kernelloop.program.split import split_program

from .conftest import FIXTURES

ROUND = FIXTURES / "redteam" / "round275"

WHY = {
    "v_0.cu": "calls copy_back, which the frozen code declares itself",
    "v_A.cu": "its run() is not called with its lambda written in place",
    "v_B.cu": "its run() is not called with its lambda written in place",
    # round 281: its wrapper's own call of the part, outside the lambda, is found first
    "v_C.cu": "names launch_reduce_sum outside its h.run lambda (::launch_reduce_sum)",
    "v_D.cu": "names launch_reduce_sum outside its h.run lambda",  # the macro's own body
    "v_E.cu": "calls copy_back, which the frozen code declares itself",
    "v_F.cu": "uses macros that cannot be read for sure",
    "v_G.cu": "calls cudaMemcpy",
    "v_H.cu": "calls copy_back, which the frozen code declares itself",
    "v_I.cu": "declares auto t = tap",
    "v_J.cu": "computes `!tap` on tap, whose operators are functions of the program",
    "v_K.cu": "its run() is reached through a macro",
    "v_L.cu": "reads tap, which is not a plain value",
    # found while closing the round: the part called before h.run, its result copied back and printed (a run on
    # inputs the verifier does not draw, compared by nothing)
    "part_called_outside_run.cu": "its frozen code names launch_reduce_sum outside its h.run lambda",
}


@pytest.mark.parametrize("name", sorted(WHY))
def test_every_spelling_of_frozen_work_in_the_timed_call_is_refused(name):
    with pytest.raises(InputError) as caught:
        split_program((ROUND / name).read_text(), name)
    assert WHY[name] in str(caught.value), str(caught.value)


ROUND276 = FIXTURES / "redteam" / "round276"
WHY276 = {
    # a local lambda or function pointer in main named like the launcher hides the part's
    "v_M.cu": "calls launch_reduce_sum, which the editable part does not define (the frozen code defines one too)",
    # round 281: its wrapper's own call of the part, outside the lambda, is found first
    "v_M2.cu": "names launch_reduce_sum outside its h.run lambda (::launch_reduce_sum)",
    "v_Q.cu": "names launch_reduce_sum outside its h.run lambda",
    "v_Q2.cu": "names launch_reduce_sum outside its h.run lambda",
    # a frozen type whose constructor runs the copy, made by a cast
    "v_N.cu": "names Tap, a type of the frozen code's",
    "v_O.cu": "names Tap, a type of the frozen code's",
    # cudaMemset declared again with a default argument that runs the copy
    "v_P.cu": "calls cudaMemset, which the frozen code declares itself",
}


@pytest.mark.parametrize("name", sorted(WHY276))
def test_round276_spellings_are_refused(name):
    with pytest.raises(InputError) as caught:
        split_program((ROUND276 / name).read_text(), name)
    assert WHY276[name] in str(caught.value), str(caught.value)


@pytest.mark.parametrize("path", sorted((ROUND276 / "honest").glob("*.cu")), ids=lambda p: p.name)
def test_round276_honest_programs_stay_programs(path):
    # a shape struct with a member function passed by value; arithmetic in the lambda beside a header's float3
    # operators; a helper whose name holds "operator"
    assert split_program(path.read_text(), path.name).is_v2


ROUND277 = FIXTURES / "redteam" / "round277"


@pytest.mark.parametrize("name", sorted(p.name for p in ROUND277.glob("v_*.cu")))
def test_round277_frozen_types_reached_around_the_checks_are_refused(name):
    # an operator or conversion of a frozen object reached through a field, an `auto` reference or pointer, a
    # container, the preamble, a base class; a cast to a type inheriting a constructor: the lambda now reads plain
    # values only (numbers, pointers to numbers, dim3) and names no type of the frozen code's
    with pytest.raises(InputError, match="h.run lambda"):
        split_program((ROUND277 / name).read_text(), name)


@pytest.mark.parametrize("path", sorted((ROUND277 / "honest").glob("*.cu")), ids=lambda p: p.name)
def test_round277_honest_lambdas_stay_programs(path):
    assert split_program(path.read_text(), path.name).is_v2


ROUND278 = FIXTURES / "redteam" / "round278"


@pytest.mark.parametrize("name", sorted(p.name for p in ROUND278.glob("v_*.cu")))
def test_round278_a_frozen_object_bound_where_another_function_names_it_plain(name):
    # a range-for, a catch, a structured binding or an outer lambda's parameter binds `tap` to a frozen object whose
    # operator++ copies scratch, while an unrelated frozen helper's `int tap` parameter marks the name plain
    with pytest.raises(InputError, match="h.run lambda"):
        split_program((ROUND278 / name).read_text(), name)


@pytest.mark.parametrize("name", sorted(p.name for p in (ROUND278 / "own").glob("*.cu")))
def test_round278_every_binder_is_read_where_it_stands(name):
    # written after the round, by class: a frozen object or function reached through a binder a by-name check does not
    # see (an outer lambda's parameter or init-capture, the run lambda's own capture or parameter default, a local
    # lambda named cudaMemset, a local alias shadowing dim3 or a plain global alias, a macro declaring the name, a
    # using-declaration or directive, an if condition, a name read before a local of the same name, a struct whose
    # default member initializer copies): each name is judged by its nearest binding, types included
    with pytest.raises(InputError, match="h.run lambda"):
        split_program((ROUND278 / "own" / name).read_text(), name)


@pytest.mark.parametrize("path", sorted((ROUND278 / "honest").glob("*.cu")), ids=lambda p: p.name)
def test_round278_honest_scopes_stay_programs(path):
    # the run in a helper function (its parameters, a namespace's constant), a range-for over sizes, a plain local
    # named like a frozen object elsewhere: the nearest binding is plain
    assert split_program(path.read_text(), path.name).is_v2
