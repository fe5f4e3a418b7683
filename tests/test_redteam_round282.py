"""Red team round 282 (tests/fixtures/redteam/round282/REPORT.md), on round 281's checks: eight baselines ran a
frozen class's constructor and conversion in the timed call through a cast (`(app::Probe)n`, `static_cast`, a
nested class, `*(app::Probe*)p`, an `if` condition, a local's initializer, a memset's argument, and a class the
lookup could not find at all): a type the lambda named was looked up by its last part, and one not found passed.
Closed by class: every type the lambda names is judged whole (`app::Probe`, `Outer::Probe`, `Span<float>`), and one
the lookup cannot find is plain only as CUDA's own. (The same round's candidate finding, an input warm in L2 as
the verifier's sign, is tests/test_warm_inputs.py.)"""

from __future__ import annotations

import pytest

from kernelloop.errors import InputError
from kernelloop.program.split import split_program

from .conftest import FIXTURES

ROUND = FIXTURES / "redteam" / "round282"


@pytest.mark.parametrize("path", sorted([*ROUND.glob("v_*.cu"), *(ROUND / "controls").glob("*.cu"),
                                         *(ROUND / "own").glob("*.cu")]), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_round282_a_frozen_type_named_anywhere_in_the_lambda_is_refused(path):
    # own/: written after the round (gen.py --own), all four accepted before: a type two namespaces deep, casts in
    # a conditional, a cast of a sizeof, a class in an inline namespace
    with pytest.raises(InputError, match=r"h.run lambda names [\w:]*Probe, a type of the frozen code's"):
        split_program(path.read_text(), path.name)


def test_round282_every_variant_is_here():
    assert len(list(ROUND.glob("v_*.cu"))) == 8 and len(list((ROUND / "own").glob("*.cu"))) == 4


@pytest.mark.parametrize("path", sorted((ROUND / "honest").glob("*.cu")), ids=lambda p: p.name)
def test_round282_casts_to_plain_types_stay_programs(path):
    # (size_t), (const float*), static_cast<float*>, (float*)(void*), (std::size_t)(unsigned)
    assert split_program(path.read_text(), path.name).is_v2
