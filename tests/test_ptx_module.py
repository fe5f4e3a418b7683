"""The one PTX reader behind init's state and copy checks."""

from __future__ import annotations

import pytest

from kernelloop.tools.code_identity import device_fingerprints
from kernelloop.tools.ptx_module import read_ptx
from kernelloop.tools.state_refs import device_references

_PTX = """
.version 8.8
.target sm_90
.address_size 64

.extern .func  (.param .b32 func_retval0) vprintf
(
	.param .b64 vprintf_param_0,
	.param .b64 vprintf_param_1
)
;
.func  (.param .b32 func_retval0) _Z6helperf
(
	.param .b32 _Z6helperf_param_0
)
;
.global .align 4 .b8 table[16] = {1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4, 0, 0, 0};
.global .align 8 .u64 table_ptr = generic(table);

.visible .entry _Z6kernelPf(
	.param .u64 _Z6kernelPf_param_0
)
{
	.reg .b32 	%r<3>;
	ld.global.u64 	%rd1, [table_ptr];  // through the pointer
	{
	.param .b32 param0;
	call.uni (retval0), _Z6helperf, (param0);
	}
	ret;
}
.func  (.param .b32 func_retval0) _Z6helperf(
	.param .b32 _Z6helperf_param_0
)
{
	ret;
}
"""


def test_functions_declarations_and_variables_are_told_apart():
    module = read_ptx(_PTX)
    assert set(module.functions) == {"vprintf", "_Z6helperf", "_Z6kernelPf"}
    assert module.functions["vprintf"].extern and not module.functions["_Z6kernelPf"].extern
    # a variable after a forward declaration is a variable, not part of the declaration
    assert set(module.variables) == {"table", "table_ptr"}
    assert "call.uni (retval0), _Z6helperf, (param0);" in "\n".join(module.functions["_Z6kernelPf"].body)
    assert {"_Z6helperf", "table_ptr"} <= module.functions["_Z6kernelPf"].names_used()
    assert "through" not in module.functions["_Z6kernelPf"].names_used()  # comments are not names


def test_both_checks_read_the_same_module():
    assert device_references(_PTX)["_Z6kernelPf"] >= {"_Z6helperf", "table_ptr"}
    before = device_fingerprints(_PTX, {"_Z6kernelPf"})
    # a change in a table the kernel reaches through a pointer variable changes its fingerprint
    changed = device_fingerprints(_PTX.replace("{1, 0, 0, 0, 2", "{9, 0, 0, 0, 2"), {"_Z6kernelPf"})
    assert before["_Z6kernelPf"] != changed["_Z6kernelPf"]


# Two schedules of one straight-line run (from a kernel built with and without -DNDEBUG: the
# dropped assertion moved the lane's `and` past a load and a warp barrier).
_BUILT = """.visible .entry k(
\t.param .u64 k_param_0
)
{
\t.reg .b32 \t%r<5>;
\t.reg .b64 \t%rd<9>;
\tmov.u32 \t%r1, %tid.x;
{moved_here}\tcvta.to.global.u64 \t%rd7, %rd1;
\tld.global.nc.u64 \t%rd4, [%rd7];
\tbar.warp.sync \t-1;
{or_here}\tcvt.u64.u32 \t%rd6, %r2;
\tst.global.u64 \t[%rd4], %rd6;
\tret;
}
"""


def _kernel(text: str) -> str:
    return device_fingerprints(text, {"k"})["k"]


def _scheduled(instruction: str, early: bool, text: str = _BUILT) -> str:
    line = f"\t{instruction}\n"
    return text.replace("{moved_here}", line if early else "").replace("{or_here}", "" if early else line)


def test_the_same_instructions_scheduled_otherwise_are_the_same_code():
    assert _kernel(_scheduled("and.b32 \t%r2, %r1, 31;", True)) == _kernel(_scheduled("and.b32  %r2, %r1, 31;", False))


@pytest.mark.parametrize("instruction, text", [
    # it writes a register an instruction it passes reads, or reads one it writes
    ("and.b32 %r2, %r1, 31;", _BUILT.replace("cvta.to.global.u64 \t%rd7, %rd1;", "cvta.to.global.u64 \t%rd7, %rd1;\n\tcvt.u64.u32 %rd8, %r2;")),
    ("add.s64 %rd1, %rd1, 8;", _BUILT),
    ("add.s64 %rd7, %rd7, 8;", _BUILT),
    # a special register read (the clock) keeps its place among the ordered instructions
    ("mov.u32 %r2, %clock;", _BUILT),
    ("mov.u32 %r2, %envreg3;", _BUILT),
    # memory and other lanes: ordered among themselves
    ("ld.global.u32 %r2, [%rd7];", _BUILT),
    ("shfl.sync.bfly.b32 %r2, %r1, 1, 31, -1;", _BUILT),
])
def test_a_move_that_changes_what_is_computed_is_another_code(instruction, text):
    assert _kernel(_scheduled(instruction, True, text)) != _kernel(_scheduled(instruction, False, text))


def test_nothing_moves_across_a_label_or_a_branch():
    text = _BUILT.replace("\tbar.warp.sync \t-1;\n", "\tbar.warp.sync \t-1;\n$L__BB0_1:\n")
    assert _kernel(_scheduled("and.b32 %r2, %r1, 31;", True, text)) != _kernel(_scheduled("and.b32 %r2, %r1, 31;", False, text))
    guarded = _BUILT.replace("\tbar.warp.sync \t-1;\n", "\tbar.warp.sync \t-1;\n\t@%p1 bra \t$L__BB0_1;\n")
    assert _kernel(_scheduled("and.b32 %r2, %r1, 31;", True, guarded)) != _kernel(
        _scheduled("and.b32 %r2, %r1, 31;", False, guarded))


def test_a_predicate_and_the_instruction_it_guards_keep_their_order():
    a = _BUILT.replace("{moved_here}", "\tsetp.eq.s32 %p1, %r1, 0;\n\t@%p1 mov.u32 %r2, 1;\n").replace("{or_here}", "")
    b = _BUILT.replace("{moved_here}", "\t@%p1 mov.u32 %r2, 1;\n\tsetp.eq.s32 %p1, %r1, 0;\n").replace("{or_here}", "")
    assert _kernel(a) != _kernel(b)


def test_a_register_inline_assembly_declares_without_a_percent_sign_keeps_its_order():
    # `t` is a register only its `.reg` line names: an instruction that reads or writes it is ordered
    a = _BUILT.replace("{moved_here}", "\tmov.u32 t, 5;\n\tadd.u32 %r2, t, 1;\n\tmov.u32 t, 7;\n").replace("{or_here}", "")
    b = _BUILT.replace("{moved_here}", "\tmov.u32 t, 5;\n\tmov.u32 t, 7;\n\tadd.u32 %r2, t, 1;\n").replace("{or_here}", "")
    assert _kernel(a) != _kernel(b)


@pytest.mark.parametrize("first, second", [
    ("add.cc.u32 %r2, %r1, 1;", "add.cc.u32 %r3, 0, 0;"),  # which of two carries the addc reads
    ("sub.cc.u32 %r2, %r1, 1;", "mad.lo.cc.u32 %r3, %r1, %r1, 0;"),
])
def test_instructions_that_set_the_carry_flag_keep_their_order(first, second):
    def run(a: str, b: str) -> str:
        return _BUILT.replace("{moved_here}", f"\t{a}\n\t{b}\n\taddc.u32 %r4, 0, 0;\n").replace("{or_here}", "")
    assert _kernel(run(first, second)) != _kernel(run(second, first))


@pytest.mark.parametrize("first, second", [
    # a block comment opened on an instruction's line swallows whichever line follows it
    ("add.u32 %r2, %r2, 1; /* ;", "add.u32 %r3, %r3, 1;"),
    # a label before an instruction: what follows it is inside a loop that branches back to it
    ("KL_LOOP: add.u32 %r2, %r2, 1;", "add.u32 %r3, %r3, 1;"),
])
def test_a_line_ptxas_reads_otherwise_than_one_instruction_keeps_its_place(first, second):
    def run(a: str, b: str) -> str:
        return _BUILT.replace("{moved_here}", f"\t{a}\n\t{b}\n\t*/ add.u32 %r4, %r4, 1;\n").replace("{or_here}", "")
    assert _kernel(run(first, second)) != _kernel(run(second, first))


def test_a_function_with_inline_assembly_is_never_reordered():
    # anywhere in it: the assembly's own text could print a marker, so where it ends cannot be told
    def run(a: str, b: str) -> str:
        return _BUILT.replace("{moved_here}", f"\t// begin inline asm\n\t// end inline asm\n\t{a}\n\t{b}\n").replace(
            "{or_here}", "")
    assert _kernel(run("add.u32 %r2, %r2, 1;", "add.u32 %r3, %r3, 1;")) != _kernel(
        run("add.u32 %r3, %r3, 1;", "add.u32 %r2, %r2, 1;"))


def test_position_numbered_names_are_renamed_one_to_one():
    # the same code with its labels numbered for another place in the module reads alike...
    body = "\t@%p1 bra \t$L__BB{f}_2;\n\tmov.u32 \t%r2, 1;\n$L__BB{f}_2:\n"
    first = _BUILT.replace("{moved_here}", body.format(f=0)).replace("{or_here}", "")
    other = _BUILT.replace("{moved_here}", body.format(f=3)).replace("{or_here}", "")
    assert _kernel(first) == _kernel(other)
    # ...but a branch to a label another function's number spells (inline assembly's) is another target
    two = "\t@%p1 bra \t{target};\n\tmov.u32 \t%r2, 1;\n$L__BB0_2:\n\tmov.u32 \t%r3, 1;\n$L__BB7_2:\n"
    a = _BUILT.replace("{moved_here}", two.format(target="$L__BB0_2")).replace("{or_here}", "")
    b = _BUILT.replace("{moved_here}", two.format(target="$L__BB7_2")).replace("{or_here}", "")
    assert _kernel(a) != _kernel(b)
