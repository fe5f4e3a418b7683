"""Red team round 286 (tests/fixtures/redteam/round286/REPORT.md), on round 285's checks: the lambda showed only the
launcher, and the launcher ran frozen code: a harness function it declared itself (or whose prototype the preamble
gave), or a preamble function pointer the harness pointed at its own code. Closed by class: the editable part names
no function the harness defines with external linkage at global scope (what the part's unit can link to), and
reads no function pointer the preamble declares. Left open (Known limits): a preamble helper of the user's own
called by the part (v_launcher_calls_preamble.cu), which is the part's own code in effect."""

from __future__ import annotations

import pytest

from kernelloop.errors import InputError
from kernelloop.program.split import split_program

from .conftest import FIXTURES

ROUND = FIXTURES / "redteam" / "round286"

WHY = {
    "v_launcher_calls_harness.cu": "its editable part names kl_tap_h, which the harness defines",
    "v_launcher_calls_harness_predecl.cu": "its editable part names kl_tap_h, which the harness defines",
    "v_launcher_calls_hook.cu": "its editable part reads kl_hook, a function pointer the frozen code declares",
    "v_editable_default_arg.cu": "declared with a default argument (int = kl_tap()) that runs code",
    "v_local_static.cu": "h.run lambda holds storage class specifier `static`",
}


@pytest.mark.parametrize("name", sorted(WHY))
def test_round286_the_part_reaching_the_harness_is_refused(name):
    with pytest.raises(InputError) as caught:
        split_program((ROUND / name).read_text(), name)
    assert WHY[name] in str(caught.value), str(caught.value)


def test_round286_a_preamble_helper_the_part_calls_is_still_the_users_own_code():
    # open, recorded under Known limits: the preamble is the user's trusted code, as the part itself is
    name = "v_launcher_calls_preamble.cu"
    assert split_program((ROUND / name).read_text(), name).is_v2
