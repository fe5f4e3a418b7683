"""Red team round 332 (tools.ptx_writes on round 331's fix): one class closed by class, two false refusals recorded.

Closed: undefined values joined through memory. A `__noinline__` helper stored two 32-bit registers nothing sets
into its own `.local` buffer, 4 bytes at a time, read the buffer back as one 64-bit value and wrote through it;
ptxas gave the pair the registers that held the caller's pointer into the static (`STL.64 [R1], R6`), so thread 0
counted calls in the static. Narrow stores of undefined values were not counted because honest code stores values
LLVM leaves undefined on a path the branches' correlation rules out (round 330). Now a stored value counts at every
width, and a value is judged on the paths the comparisons allow: an integer comparison of values fixed for the
call (or one predicate register set once) splits the paths, a `selp` keeps each value where its predicate says, a
predicated statement runs where its predicate holds (round 331's double false refusal goes with it).

False refusals recorded (round 331's rule: ptxas stores registers in local memory, and some function reads local
memory): a kernel with sinf (the exact argument reduction reads a local array at run-time indices and names the
toolkit's `__cudart_i2opi_f`) whose rewrite spills; a static table beside a run-time indexed local window in a
kernel that spills. Both are refused while the baseline does not spill.
"""

from __future__ import annotations

import subprocess

import pytest

from kernelloop.tools.nvcc import find_toolchain
from kernelloop.verify.precision import classify_ptx, compare_profiles

from .conftest import FIXTURES
from .redteam_statics import ptx_profile

pytestmark = pytest.mark.nvcc

ROUND = FIXTURES / "redteam" / "round332"
BASE = FIXTURES / "redteam" / "round331" / "table_base.cu"



def test_undefined_halves_joined_through_local_memory_are_refused(tmp_path):
    base, cand = ptx_profile(BASE, tmp_path), ptx_profile(ROUND / "halves_through_local.cu", tmp_path)
    assert [v.rule for v in compare_profiles(base, cand) if v.rule == "device-static"]


@pytest.mark.parametrize("base, honest", [(ROUND / "sin_base.cu", ROUND / "sin_spill_honest.cu"),
                                          (BASE, ROUND / "median_spill_honest.cu")])
def test_a_rewrite_that_spills_beside_a_local_read_is_still_refused(tmp_path, base, honest):
    # the recorded false refusals: if this starts passing, the docs' residual list must change with it
    assert [v.rule for v in compare_profiles(ptx_profile(base, tmp_path), ptx_profile(honest, tmp_path))
            if v.rule == "device-static"]


def _ptx(source, tmp_path) -> str:
    out = tmp_path / f"{source.stem}.ptx"
    subprocess.run([str(find_toolchain().nvcc), "-O3", "-std=c++17", "-ptx", "-arch=sm_90", "-o", str(out),
                    str(source)], check=True, capture_output=True, timeout=300)
    return out.read_text()


def _written(ptx: str, old: str | None = None, new: str = "") -> list[str] | None:
    if old is not None:
        assert old in ptx, old
        ptx = ptx.replace(old, new)
    return classify_ptx(ptx, register_saves=False).classes.get("device_static_written")


def test_a_selp_keeps_an_undefined_value_only_where_the_comparison_allows(tmp_path):
    # round 330's honest shape: `%f13` is set only where %r1 == 0 (`@%p2 bra` with %p2 = %r1 != 0), and the selp keeps
    # `%f13 + r` only where %p5 = (%r1 == 0)
    ptx = _ptx(FIXTURES / "redteam" / "round330" / "honest_corr.cu", tmp_path)
    assert "setp.eq.s32 \t%p5, %r1, 0;" in ptx and "selp.f32 \t%f10, %f9, %f15, %p5;" in ptx  # the shape read
    assert not _written(ptx)
    assert not _written(ptx, "setp.eq.s32 \t%p5, %r1, 0;", "setp.eq.s32 \t%p5, 0, %r1;")  # one comparison
    # another comparison, the opposite one, a floating-point one, the other value kept: undefined where it is kept
    assert _written(ptx, "setp.eq.s32 \t%p5, %r1, 0;", "setp.eq.s32 \t%p5, %r1, 1;")
    assert _written(ptx, "setp.eq.s32 \t%p5, %r1, 0;", "setp.ne.s32 \t%p5, %r1, 0;")
    assert _written(ptx, "setp.eq.s32 \t%p5, %r1, 0;", "setp.eq.f32 \t%p5, %f15, 0f00000000;")
    assert _written(ptx, "selp.f32 \t%f10, %f9, %f15, %p5;", "selp.f32 \t%f10, %f15, %f9, %p5;")


def test_two_branches_on_one_predicate_are_read_together(tmp_path):
    # round 331's honest double: `@%p1 bra` around the definition and `@%p1 bra` around the use
    ptx = _ptx(FIXTURES / "redteam" / "round331" / "honest_double_corr.cu", tmp_path)
    assert not _written(ptx)
    # the comparison's operand changing between the branches leaves the one predicate register one value
    assert not _written(ptx, "bar.sync \t0;", "bar.sync \t0;\n\tadd.s32 \t%r1, %r1, 1;")
    # the use where the definition was skipped, or the predicate set again between: undefined
    assert _written(ptx, "@%p1 bra \t$L__BB0_4;", "@!%p1 bra \t$L__BB0_4;")
    assert _written(ptx, "bar.sync \t0;", "bar.sync \t0;\n\tsetp.lt.s32 \t%p1, %r1, %r2;")
