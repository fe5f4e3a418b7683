"""Red team round 285 (tests/fixtures/redteam/round285/REPORT.md), on round 284's checks: a frozen prototype of the
launcher's name in `namespace app`, reached by argument-dependent lookup through a plain `app::Tag` argument, had
parameter types written like the part's (`N_t`) that name other types there (`typedef int N_t;` in app, `long`
globally), and an asm label that gave it a frozen body: the lambda's second call picked it. Closed by class: a
frozen declaration of a called part function stands only where the editable part defines it (the same namespaces,
no class, block or template around it) and carries no asm label. own/block_prototype.cu: the prototype at block
scope in main (refused before by its parameters, now by its place)."""

from __future__ import annotations

import pytest

from kernelloop.errors import InputError
from kernelloop.program.split import split_program

from .conftest import FIXTURES

ROUND = FIXTURES / "redteam" / "round285"


@pytest.mark.parametrize("path", sorted([*ROUND.glob("v_*.cu"), *(ROUND / "controls").glob("*.cu"),
                                         *(ROUND / "own").glob("*.cu")]), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_round285_a_frozen_declaration_of_the_launcher_elsewhere_or_relabelled_is_refused(path):
    # round 287: an asm label anywhere in frozen code is refused before the lambda is read
    with pytest.raises(InputError, match="which the frozen code declares elsewhere than the editable part defines it, "
                                         "or under another symbol|its frozen code gives a symbol its own name"):
        split_program(path.read_text(), path.name)
