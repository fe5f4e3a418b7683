"""Red team round 309 (init's guard, after round 308's fix): code init leaves out, judged as kept.

Two ways past the guard, each closed by class, and two false refusals:
- What counted as kept was decided by the bare name: another overload of the launcher (a
  `std::vector` convenience `scale` that set flush-to-zero and then called the device `scale`), or a
  CPU reference `ref::scale`, shared the launcher's name, so the guard took it for kept code and never
  judged it; init left it out as a caller. Now the kept host functions are those the generated
  program's units define (`state_problems(kept_symbols=...)`); the others are left-out code.
- A function marked `__attribute__((constructor))` under a name like the compiler's (`__nv_...`) was
  taken for nvcc's own code and never judged. Now every function the loader runs before main
  (`.init_array`, `.preinit_array`, `.ctors`) is start-up code, nvcc's registration aside.
- False refusals: an honest overload that reads `getenv` was refused as kept code that reads the
  environment; and any `##` in a macro (which makes every name possibly declared) had the harness
  main's own lambda and cold part compared with the user's file.
Recorded, not closed: a launcher whose `cudaMalloc` succeeds or fails by the memory `main` took
first (docs/verifier.md, Known limits).
"""

from __future__ import annotations

import pytest

from kernelloop.errors import InputError
from kernelloop.init_state import refuse_state_set_by_dropped_code
from kernelloop.program.init import InitSpec, generate

from .conftest import FIXTURES, shared_cache_dir

pytestmark = pytest.mark.nvcc

ROUND = FIXTURES / "redteam" / "round309"
SPEC = InitSpec(values={"n": ["4096", "3001"]}, roles={"y": "output", "x": "input"}, launcher="scale")
REFUSED = {
    "k1_vector_overload.cu": "scale() runs a `ldmxcsr` instruction",
    "k2_cpu_reference_ns.cu": "scale() runs a `ldmxcsr` instruction",
    "c1_nv_constructor.cu": "__nv_app_warmup() runs a `ldmxcsr` instruction",
}


def _check(name: str) -> None:
    source = (ROUND / name).read_text()
    result = generate(source, SPEC, name)
    refuse_state_set_by_dropped_code(source, result, arch="sm_90", cache_dir=shared_cache_dir(),
                                     generated=result.program)


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_left_out_code_that_looked_kept_or_the_compilers_is_judged(name):
    with pytest.raises(InputError, match="the generated program could compute something other than yours") as caught:
        _check(name)
    assert REFUSED[name] in str(caught.value), str(caught.value)


@pytest.mark.parametrize("name", ["f1_overload_getenv.cu", "f3_token_paste_unused.cu"])
def test_honest_files_the_guard_refused_are_kept(name):
    _check(name)
