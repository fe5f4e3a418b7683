"""Red team round 280 (tests/fixtures/redteam/round280/REPORT.md), on round 279's checks: eight baselines in six
classes still ran frozen code in the timed call. Closed by class: a `name<...>` declarator (an explicit
specialization) binds its template's name, and a frozen declaration of a called part function must have the
editable definition's parameters and no template head (another overload, or a prototype whose body is frozen code
under an asm label, could be picked); every operand expression of an operator is typed (`*p`, `p[0]`, `*(p + i)`,
a conditional, a cast, `&x`: a number or a pointer, or the operator is a function of the program); a called part
function's parameter of a type the plain check cannot judge (a template's, an elaborated name, `decltype`) is
refused; a default argument is a literal, a signed number or a program's number; inline namespaces' names are found
in the namespace around them (and a qualified name may leave the inline one out)."""

from __future__ import annotations

import pytest

from kernelloop.errors import InputError
from kernelloop.program.split import split_program

from .conftest import FIXTURES

ROUND = FIXTURES / "redteam" / "round280"

WHY = {
    "v_derefop.cu": "computes `++*cp` on *cp, whose operators are functions of the program",
    "v_inlinens.cu": "computes `++tap` on tap",
    "v_paramdefaultop.cu": "declared with a default argument (int tapped = +tap) that runs code",
    "v_paramdefaultqual.cu": "declared with a default argument (int tapped = fz::guard) that runs code",
    "v_paramelaborated.cu": "whose parameter (struct Tapper partial) is of a type that is not plain",
    "v_paramtemplate.cu": "whose parameter (Span<float> partial) is of a type that is not plain",
    "v_specialize.cu": "calls launch_reduce_sum, which the editable part does not define (the frozen code defines",
    "v_subscriptop.cu": "computes `cp[0]++` on cp[0]",
}

# written after the round, one or more per class (own/gen.py writes them); eight of the eleven were accepted before
OWN = {
    "addressof.cu": "computes `&cursor` on cursor",
    "asm_label.cu": "its frozen code gives a symbol its own name",  # round 287: its asm label (285: its place)
    "cast.cu": "h.run lambda",
    "conditional.cu": "computes `++(n > 0 ? *cp : *cp)`",
    "default_macro.cu": "default argument (int tapped = KL_TAPPED)",
    "default_negate.cu": "default argument (int tapped = -tap)",
    "friend_template.cu": "h.run lambda calls launch_reduce_sum",
    "inline_nested.cu": "computes `++tap` on tap",
    "param_decltype.cu": "whose parameter (decltype(kl_tapper) partial) is of a type that is not plain",
    "param_template_reference.cu": "whose parameter (const Span<float>& partial) is of a type that is not plain",
    "pointer_arithmetic.cu": "computes `++*(cp + 0)`",
}


@pytest.mark.parametrize("name", sorted(WHY))
def test_round280_frozen_work_in_the_timed_call_is_refused(name):
    with pytest.raises(InputError) as caught:
        split_program((ROUND / name).read_text(), name)
    assert WHY[name] in str(caught.value), str(caught.value)


def test_round280_every_baseline_is_listed():
    assert sorted(p.name for p in ROUND.glob("v_*.cu")) == sorted(WHY)
    assert sorted(p.name for p in (ROUND / "own").glob("*.cu")) == sorted(OWN)


@pytest.mark.parametrize("name", sorted(OWN))
def test_round280_own_variants_of_each_class_are_refused(name):
    with pytest.raises(InputError) as caught:
        split_program((ROUND / "own" / name).read_text(), name)
    assert OWN[name] in str(caught.value), str(caught.value)


@pytest.mark.parametrize("path", sorted((ROUND / "honest").glob("*.cu")), ids=lambda p: p.name)
def test_round280_honest_spellings_stay_programs(path):
    # a matching prototype with other names and __restrict__, literal and named-number defaults; `*np`, `&partial[0]`,
    # `ins[0] + 0`, a cast to int and an inline namespace's constant in the lambda; an elaborated plain struct
    # parameter (operand_types.cu was refused before: its inline namespace's constant was not found)
    assert split_program(path.read_text(), path.name).is_v2
