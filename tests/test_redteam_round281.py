"""Red team round 281 (tests/fixtures/redteam/round281/REPORT.md), on round 280's checks: five baselines in two
classes ran frozen code in the timed call. (A) A name pasted together by a frozen macro (`a##b`) declared a frozen
function named like the launcher that neither the macro expander (it gave up on `##`) nor any walk of the written
text saw: the expander now pastes as the preprocessor does, every frozen top-level item that names a macro is read
expanded by the walks over the frozen code's declarations, and one that cannot be expanded for sure while one of
its macros pastes is refused. (B) The timed call spelled other than `h.run(` (`h.kl::Harness::run(...)`,
`h.template run<>(...)`, `(&h)->kl::Harness::run(...)`), whose lambda nothing read, while the backstop (the part
named outside a read lambda) was waived by an unrelated frozen parameter named like the launcher: every `run` the
frozen code names must be `h.run(...)` (or a variable's name), and the backstop judges each use by the binding C++
gives it there."""

from __future__ import annotations

import pytest

from kernelloop.errors import InputError
from kernelloop.program.split import split_program

from .conftest import FIXTURES

ROUND = FIXTURES / "redteam" / "round281"

WHY = {
    "v_paste_global_template.cu": "names launch_reduce_sum outside its h.run lambda (::launch_reduce_sum)",
    "v_paste_namespace.cu": "names launch_reduce_sum outside its h.run lambda (::launch_reduce_sum)",
    "v_run_arrow_qualified.cu": "names run as `Harness::run`",
    "v_run_qualified.cu": "names run as `Harness::run`",
    "v_run_template_keyword.cu": "names run as `run<>`",
}

# written after the round (gen.py --own); all seven were accepted before
OWN = {
    "paste_in_ifndef.cu": "calls launch_reduce_sum, which the editable part does not define (the frozen code defines",
    "paste_indirect.cu": "calls launch_reduce_sum, which the editable part does not define (the frozen code defines",
    "paste_overload.cu": "calls launch_reduce_sum, which the editable part does not define (the frozen code defines",
    "paste_prototype.cu": "its frozen code gives a symbol its own name",  # round 287: its asm label (285: its place)
    "paste_uncertain.cu": "pastes names together in macros that cannot be read for sure",
    "run_derived.cu": "names run as `run(f, o)`",
    "run_member_pointer.cu": "names run as `run<decltype(timed)>`",
}


@pytest.mark.parametrize("name", sorted(WHY))
def test_round281_frozen_work_in_the_timed_call_is_refused(name):
    with pytest.raises(InputError) as caught:
        split_program((ROUND / name).read_text(), name)
    assert WHY[name] in str(caught.value), str(caught.value)


@pytest.mark.parametrize("name", sorted(OWN))
def test_round281_own_variants_of_each_class_are_refused(name):
    with pytest.raises(InputError) as caught:
        split_program((ROUND / "own" / name).read_text(), name)
    assert OWN[name] in str(caught.value), str(caught.value)


def test_round281_every_variant_is_listed():
    assert sorted(p.name for p in ROUND.glob("v_*.cu")) == sorted(WHY)
    assert sorted(p.name for p in (ROUND / "own").glob("*.cu")) == sorted(OWN)


@pytest.mark.parametrize("path", sorted((ROUND / "controls").glob("*.cu")), ids=lambda p: p.name)
def test_round281_controls_are_refused(path):
    with pytest.raises(InputError, match="h.run lambda|names run as"):
        split_program(path.read_text(), path.name)


@pytest.mark.parametrize("path", sorted((ROUND / "honest").glob("*.cu")), ids=lambda p: p.name)
def test_round281_honest_spellings_stay_programs(path):
    # a loop variable named run; a frozen macro that pastes a local's name (refused before: `##` was not read)
    assert split_program(path.read_text(), path.name).is_v2
