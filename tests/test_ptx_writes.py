"""tools.ptx_writes: which `static` variables of device code the module's device code may write.

A variable only ever loaded (a `static const` table) keeps its initial value; one stored to, or
whose address goes anywhere the reading cannot follow, counts as written (red team round 310)."""

from __future__ import annotations

import pytest

from kernelloop.tools.ptx_module import read_ptx
from kernelloop.tools.ptx_writes import body_memory, device_statics, written_variables

_HEAD = """.version 8.8
.target sm_90
.address_size 64

.extern .func  (.param .b32 func_retval0) vprintf
(
\t.param .b64 vprintf_param_0,
\t.param .b64 vprintf_param_1
)
;
.global .align 4 .b8 _ZZ1fiE1t[16] = {0, 0, 128, 63, 0, 0, 0, 64, 0, 0, 64, 64, 0, 0, 128, 64};
.global .align 4 .f32 devvar;
.const .align 4 .b8 _ZZ1ciE1k[8];
.global .align 1 .b8 $str[4] = {104, 105, 10};
"""


# the value registers the bodies below store, defined first (a register read undefined counts every static
# written: red team round 327)
_VALUES = "".join(f"\tmov.f32 \t%f{i}, 0f00000000;\n\tmov.u32 \t%r{i}, 0;\n" for i in range(9))


def _module(body: str, extra_variables: str = ""):
    return read_ptx(_HEAD + extra_variables + ".visible .entry k(\n\t.param .u64 k_param_0\n)\n{\n"
                    "\t.reg .b64 \t%rd<20>;\n\t.reg .f32 \t%f<9>;\n\t.reg .b32 \t%r<9>;\n" + _VALUES + body
                    + "\tret;\n}\n")


def _written(body: str, extra_variables: str = "") -> bool:
    module = _module(body, extra_variables)
    return "_ZZ1fiE1t" in written_variables(module, device_statics(module, {"devvar"}))


def test_the_statics_are_the_module_variables_no_registration_names():
    module = _module("", ".extern .global .align 4 .f32 elsewhere;\n")
    # a function's static, an unregistered constant and a string literal's storage; not the
    # registered __device__ variable, nor one another module defines
    assert device_statics(module, {"devvar"}) == {"_ZZ1fiE1t", "_ZZ1ciE1k", "$str"}


@pytest.mark.parametrize("body", [
    "\tld.global.f32 \t%f1, [_ZZ1fiE1t+4];\n",
    "\tmov.u64 \t%rd1, _ZZ1fiE1t;\n\tadd.s64 \t%rd2, %rd1, 8;\n\tld.global.nc.f32 \t%f1, [%rd2];\n",
    "\tmov.u64 \t%rd1, _ZZ1fiE1t;\n\tld.global.L1::evict_last.f32 \t%f1, [%rd1];\n",
    # the loaded value is a value, not the address: storing it writes nothing of the table
    "\tld.global.f32 \t%f1, [_ZZ1fiE1t];\n\tld.param.u64 \t%rd3, [k_param_0];\n\tst.global.f32 \t[%rd3], %f1;\n",
    # the format string handed to vprintf is only read
    "\tmov.u64 \t%rd1, _ZZ1fiE1t;\n\tcvta.global.u64 \t%rd2, %rd1;\n\t{ // callseq 0, 0\n\t.param .b64 param0;\n"
    "\tst.param.b64 \t[param0+0], %rd2;\n\t.param .b64 param1;\n\tst.param.b64 \t[param1+0], 0;\n"
    "\t.param .b32 retval0;\n\tcall.uni (retval0), \n\tvprintf, \n\t(\n\tparam0, \n\tparam1\n\t);\n\t} // callseq 0\n",
])
def test_reads_leave_it_unwritten(body):
    assert not _written(body)


@pytest.mark.parametrize("body, extra", [
    ("\tst.global.f32 \t[_ZZ1fiE1t], %f1;\n", ""),
    ("\tmov.u64 \t%rd1, _ZZ1fiE1t;\n\tadd.s64 \t%rd2, %rd1, 4;\n\tst.global.f32 \t[%rd2], %f1;\n", ""),
    ("\tmov.u64 \t%rd1, _ZZ1fiE1t;\n\tatom.global.add.f32 \t%f2, [%rd1], %f1;\n", ""),
    ("\tmov.u64 \t%rd1, _ZZ1fiE1t;\n\tred.global.add.u32 \t[%rd1], 1;\n", ""),
    # through a register inline assembly declares, under a label
    ("\tmov.u64 \t%rd1, _ZZ1fiE1t;\n\t// begin inline asm\n\t{ .reg .b64 t; mov.b64 t, %rd1; \n$L0: st.global.f32 [t], %f1; }\n"
     "\t// end inline asm\n", ""),
    # through another lane, and through the 32-bit halves of the address
    ("\tmov.u64 \t%rd1, _ZZ1fiE1t;\n\tmov.b64 \t{%r3, %r4}, %rd1;\n\tshfl.sync.idx.b32 \t%r5, %r3, 0, 31, -1;\n"
     "\tmov.b64 \t%rd5, {%r5, %r4};\n\tst.global.f32 \t[%rd5], %f1;\n", ""),
    # its address escapes: stored as a value, handed to a function, returned, in another variable
    ("\tmov.u64 \t%rd1, _ZZ1fiE1t;\n\tld.param.u64 \t%rd3, [k_param_0];\n\tst.global.u64 \t[%rd3], %rd1;\n", ""),
    ("\tmov.u64 \t%rd1, _ZZ1fiE1t;\n\t{ // callseq 1, 0\n\t.param .b64 param0;\n\tst.param.b64 \t[param0+0], %rd1;\n"
     "\tcall.uni \n\tfill, \n\t(\n\tparam0\n\t);\n\t} // callseq 1\n", ""),
    ("\tmov.u64 \t%rd1, _ZZ1fiE1t;\n\tst.param.b64 \t[func_retval0+0], %rd1;\n", ""),
    ("", ".global .align 8 .u64 _ZZ1giE1p = generic(_ZZ1fiE1t);\n"),
])
def test_stores_and_escapes_count_as_writes(body, extra):
    assert _written(body, extra)


_PRINTF_ARGUMENT = ("\tmov.u64 \t%SPL, __local_depot0;\n\tcvta.local.u64 \t%SP, %SPL;\n"
                    "\tadd.u64 \t%rd21, %SP, 0;\n\tadd.u64 \t%rd22, %SPL, 0;\n\tmov.u64 \t%rd1, _ZZ1fiE1t;\n"
                    "\tcvta.global.u64 \t%rd2, %rd1;\n\tst.local.u64 \t[%rd22], %rd2;\n"
                    "\t{ // callseq 0, 0\n\t.param .b64 param0;\n\tst.param.b64 \t[param0+0], %rd2;\n"
                    "\t.param .b64 param1;\n\tst.param.b64 \t[param1+0], %rd21;\n\t.param .b32 retval0;\n"
                    "\tcall.uni (retval0), \n\tvprintf, \n\t(\n\tparam0, \n\tparam1\n\t);\n\t} // callseq 0\n")
_DEPOT = "\t.local .align 8 .b8 \t__local_depot0[8];\n\t.reg .b64 \t%SP;\n\t.reg .b64 \t%SPL;\n"


def test_printf_arguments_parked_in_the_local_buffer_are_only_read():
    assert not _written(_DEPOT + _PRINTF_ARGUMENT)


@pytest.mark.parametrize("after", [
    "\tld.local.u64 \t%rd9, [%rd22];\n\tst.global.f32 \t[%rd9], %f1;\n",  # read back from the buffer
    "\tld.u64 \t%rd9, [%rd21];\n",  # read back through the generic address
    "\tld.param.u64 \t%rd3, [k_param_0];\n\tst.global.u64 \t[%rd3], %rd21;\n",  # the buffer's address given away
])
def test_a_local_buffer_read_back_or_given_away_is_no_parking_place(after):
    assert _written(_DEPOT + _PRINTF_ARGUMENT + after)


@pytest.mark.parametrize("body", [
    # the address's bits read into a value (and the address rebuilt from a table's bytes: round 311)
    "\tmov.u64 \t%rd1, _ZZ1fiE1t;\n\tshr.u64 \t%rd2, %rd1, 8;\n",
    "\tmov.u64 \t%rd1, _ZZ1fiE1t;\n\tsetp.lt.u64 \t%p1, %rd1, 4096;\n",
    "\tmov.u64 \t%rd1, _ZZ1fiE1t;\n\tcvt.u32.u64 \t%r1, %rd1;\n",
    "\tmov.u64 \t%rd1, _ZZ1fiE1t;\n\tmad.lo.s64 \t%rd2, %rd1, 3, 0;\n",
    # an address as a load's index, not its place
    "\tmov.u64 \t%rd1, _ZZ1fiE1t;\n\tld.global.f32 \t%f1, [%rd1];\n\tmov.u64 \t%rd4, devvar;\n"
    "\tadd.s64 \t%rd5, %rd4, %rd1;\n\tld.global.f32 \t%f2, [%rd5];\n\tst.global.f32 \t[%rd5], %f2;\n",
])
def test_any_use_of_an_address_but_moving_offsetting_and_loading_counts(body):
    assert _written(body)


@pytest.mark.parametrize("body", [
    # a store behind `/* // */`: ptxas ends the comment at `*/` (round 312)
    "\tmov.u64 \t%rd1, _ZZ1fiE1t;\n\t// begin inline asm\n\t/* cs: evict-first // */ st.global.cs.f32 [%rd1], %f1;\n"
    "\t// end inline asm\n",
    # the address's bits through the carry flag (round 312)
    "\tmov.u64 \t%rd1, _ZZ1fiE1t;\n\tadd.cc.s64 \t%rd2, %rd1, -16;\n\taddc.cc.s64 \t%rd3, 0, 0;\n",
])
def test_what_ptxas_reads_is_what_is_followed(body):
    assert _written(body)


def test_only_the_parameters_vprintf_lists_and_no_other_call_gets_are_its_own():
    block = ("\tmov.u64 \t%rd1, _ZZ1fiE1t;\n\t{\n\t.param .b64 keep;\n\t.param .b64 param0;\n"
             "\tst.param.b64 \t[SLOT+0], %rd1;\n\tcall.uni \n\tvprintf, \n\t(\n\tparam0\n\t);\n")
    assert not _written(block.replace("SLOT", "param0") + "\t}\n")
    # a parameter vprintf does not list (round 314), or one a later call gets
    assert _written(block.replace("SLOT", "keep") + "\tcall.uni \n\tfill, \n\t(\n\tkeep\n\t);\n\t}\n")
    assert _written(block.replace("SLOT", "param0") + "\tcall.uni \n\tfill, \n\t(\n\tparam0\n\t);\n\t}\n")


def test_a_parked_address_is_harmless_only_where_no_function_reads_local_memory():
    other = (".func reader()\n{\n\t.local .align 8 .b8 \t__local_depot1[8];\n\t.reg .b64 \t%SPL;\n"
             "\t.reg .b64 \t%rd<4>;\n\tmov.u64 \t%SPL, __local_depot1;\n\tld.local.u64 \t%rd1, [%SPL];\n\tret;\n}\n")
    assert not _written(_DEPOT + _PRINTF_ARGUMENT)
    # another function reads the slot printf's buffer left (round 314)
    assert _written(_DEPOT + _PRINTF_ARGUMENT, other)


_REPORT = (".func (.param .b64 func_retval0) report(\n\t.param .b64 report_param_0\n)\n{\n\t.reg .b64 \t%rd<4>;\n"
           "\t.reg .f32 \t%f<3>;\n\tld.param.u64 \t%rd1, [report_param_0];\nUSE\tret;\n}\n")
_TWO_CALLS = ("\tmov.u64 \t%rd1, _ZZ1fiE1t;\n"
              + "".join(f"\t{{ // callseq {k}, 0\n\t.param .b64 param0;\n\tst.param.b64 \t[param0+0], %rd1;\n"
                        f"\t.param .b64 retval0;\n\tcall.uni (retval0), \n\treport, \n\t(\n\tparam0\n\t);\n"
                        f"\tld.param.b64 \t%rd{k + 5}, [retval0+0];\n\t}} // callseq {k}\n" for k in (0, 1)))


@pytest.mark.parametrize("use, written", [
    ("\tld.global.f32 \t%f1, [%rd1];\n\tst.param.b64 \t[func_retval0+0], 0;\n", False),  # only reads what it is handed
    ("\tst.global.f32 \t[%rd1], %f1;\n\tst.param.b64 \t[func_retval0+0], 0;\n", True),  # writes through it
    ("\tadd.s64 \t%rd2, %rd1, 4;\n\tst.param.b64 \t[func_retval0+0], %rd2;\n", False),  # returns it, unused
])
def test_an_address_handed_to_a_function_of_the_module_is_followed_there(use, written):
    # two calls, each in its own block with its own `param0` (nvcc's callseq blocks: round 316)
    assert _written(_TWO_CALLS, _REPORT.replace("USE", use)) == written


def test_an_address_a_function_returns_is_followed_in_the_caller():
    returns = _REPORT.replace("USE", "\tst.param.b64 \t[func_retval0+0], %rd1;\n")
    assert not _written(_TWO_CALLS + "\tld.global.f32 \t%f1, [%rd6];\n", returns)
    assert _written(_TWO_CALLS + "\tst.global.f32 \t[%rd6], %f1;\n", returns)
    # a function whose address is taken returns into calls no one sees
    assert _written(_TWO_CALLS + "\tmov.u64 \t%rd9, report;\n", returns)


def test_the_distance_of_two_addresses_in_one_table_is_no_address():
    search = ("\tmov.u64 \t%rd1, _ZZ1fiE1t;\n\tadd.s64 \t%rd2, %rd1, 8;\n\tsub.s64 \t%rd3, %rd2, %rd1;\n"
              "\tshr.s64 \t%rd4, %rd3, 2;\n")
    assert not _written(search)
    assert _written(search.replace("sub.s64 \t%rd3, %rd2, %rd1", "sub.s64 \t%rd3, %rd2, 8"))  # still an address


def test_a_register_named_by_digits_is_followed():
    # `%9` is a PTX identifier (round 318): the address moved there and stored through is a write
    assert _written("\tmov.u64 \t%rd1, _ZZ1fiE1t;\n\t{ .reg .b64 %9;\n\tmov.b64 %9, %rd1;\n\tst.f32 [%9+12], %f1;\n\t}\n")


def test_an_instruction_glued_to_its_operand_is_read():
    # `st.f32[...]` and `mov.b64%9,...`: ptxas needs no space before `[` or `%` (round 319)
    assert _written("\tmov.u64 \t%rd1, _ZZ1fiE1t;\n\tst.f32[%rd1+12],%f1;\n")
    assert _written("\tmov.u64 \t%rd1, _ZZ1fiE1t;\n\t{ .reg .b64 %9;\n\tmov.b64%9,%rd1;\n\tst.f32 [%9], %f1;\n\t}\n")


def test_a_callees_parameters_are_read_from_its_header_not_found_by_name():
    # a function named `f` (inside `.func`) that writes through its second parameter (round 320)
    f = (".func (.param .b32 func_retval0) f(\n\t.param .b64 f_param_0,\n\t.param .b64 f_param_1\n)\n{\n"
         "\t.reg .b64 \t%rd<4>;\n\t.reg .f32 \t%f<3>;\n\tld.param.u64 \t%rd1, [f_param_1];\n"
         "\tst.global.f32 \t[%rd1], %f1;\n\tret;\n}\n")
    call = ("\tmov.u64 \t%rd1, _ZZ1fiE1t;\n\t{ // callseq 0, 0\n\t.param .b64 param0;\n\tst.param.b64 \t[param0+0], 0;\n"
            "\t.param .b64 param1;\n\tst.param.b64 \t[param1+0], %rd1;\n\t.param .b32 retval0;\n"
            "\tcall.uni (retval0), \n\tf, \n\t(\n\tparam0, \n\tparam1\n\t);\n\t} // callseq 0\n")
    assert _written(call, f)


def test_an_asm_local_slot_is_local_memory():
    # the address parked in an asm's own `.local` and read back through a generic load (round 322)
    slot = ("\tmov.u64 \t%rd1, _ZZ1fiE1t;\n\t{ .local .align 8 .b64 slot;\n\t.reg .b64 t;\n\tst.local.b64 [slot], %rd1;\n"
            "\tmov.u64 t, slot;\n\tcvta.local.u64 t, t;\n\tld.b64 %rd2, [t];\n\t}\n\tst.f32 [%rd2], %f1;\n")
    assert _written(slot)


def test_line_directives_end_at_their_line():
    # nvcc's own, with the function a line was inlined from: nothing hidden
    assert not _written("\t.loc\t1 9 0, function_name $L__info_string0, inlined_at 1 20 3\n"
                        "\tld.global.f32 \t%f1, [_ZZ1fiE1t+4];\n")
    # the store after a `.loc` without its `;` is a store (round 313)
    assert _written("\tmov.u64 \t%rd1, _ZZ1fiE1t;\n\t.loc 1 14 3\n\tst.f32 \t[%rd1], %f1;\n")
    # a line directive sharing its line, or inside an open statement, is read some other way: every
    # variable counts as written
    assert _written("\t.loc 1 14 3 ld.global.f32 \t%f1, [_ZZ1fiE1t];\n")
    assert _written("\tld.global.f32 \t%f1,\n\t.loc 1 14 3\n\t[_ZZ1fiE1t];\n")


def test_memory_a_body_declares_itself_is_device_state():
    module = _module("\t{ .global .align 4 .f32 gain = 0f3F800000;\n\tmov.u64 \t%rd1, gain;\n\t}\n")
    assert body_memory(module) == {"gain"}
    assert body_memory(_module("\t{ .reg .b64 t;\n\t.shared .align 4 .f32 s;\n\t}\n")) == set()


def test_a_function_the_file_names_like_the_runtimes_is_not_trusted():
    call = ("\tmov.u64 \t%rd1, _ZZ1fiE1t;\n\t{ // callseq 1, 0\n\t.param .b64 param0;\n"
            "\tst.param.b64 \t[param0+0], %rd1;\n\tcall.uni \n\t__assertfail, \n\t(\n\tparam0\n\t);\n"
            "\t} // callseq 1\n")
    declared = ".extern .func __assertfail\n(\n\t.param .b64 __assertfail_param_0\n)\n;\n"
    defined = (".func __assertfail(\n\t.param .b64 __assertfail_param_0\n)\n{\n\t.reg .b64 \t%rd<3>;\n"
               "\tld.param.u64 \t%rd1, [__assertfail_param_0];\n\tst.u32 \t[%rd1], 0;\n\tret;\n}\n")
    assert not _written(call, declared)
    assert _written(call, defined)


def test_a_module_that_cannot_be_read_whole_counts_every_static_written():
    module = _module("\tld.global.f32 \t%f1, [_ZZ1fiE1t];\n")
    module.unreadable = True
    assert written_variables(module, {"_ZZ1fiE1t"}) == {"_ZZ1fiE1t"}


@pytest.mark.parametrize("step", [
    "add.rn.f64 \t%rd2, %rd1, 0d3FF0000000000000",  # the address's bits as a double, rounded (round 323)
    "add.s32 \t%rd2, %rd1, 4",  # a 32-bit offset drops the top of the address
    "cvta.to.shared.u64 \t%rd2, %rd1",  # mapped into another window
])
def test_the_distance_rule_trusts_only_whole_integer_offsets(step):
    # `a - b` where b came from a by a lossy step is the address's own bits, not a distance
    search = (f"\tmov.u64 \t%rd1, _ZZ1fiE1t;\n\t{step};\n\tsub.s64 \t%rd3, %rd1, %rd2;\n"
              "\tadd.s64 \t%rd4, %rd3, 4607182418800017408;\n\tst.f32 \t[%rd4], %f1;\n")
    assert _written(search)
    assert not _written(search.replace(step, "add.s64 \t%rd2, %rd1, 8").replace("\tst.f32 \t[%rd4], %f1;\n", ""))


def test_a_name_declared_again_inside_a_body_counts_the_variable_written():
    # a register named as the table (round 323): the reading follows names without scopes
    assert _written("\tmov.u64 \t%rd1, _ZZ1fiE1t;\n\t{ .reg .b64 _ZZ1fiE1t;\n\tmov.u64 _ZZ1fiE1t, 0;\n"
                    "\tmov.u64 \t%rd2, _ZZ1fiE1t;\n\t}\n\tld.f32 \t%f1, [%rd1];\n")


_BUMP = (".func bump(\n\t.param .b64 bump_param_0,\n\t.param .b64 bump_param_1\n)\n{\n\t.reg .b64 \t%rd<4>;\n"
         "\t.reg .f32 \t%f<3>;\n\tld.param.u64 \t%rd1, [READ];\n\tUSE\tret;\n}\n")
_HAND_TABLE_SECOND = ("\tmov.u64 \t%rd1, _ZZ1fiE1t;\n\t{ // callseq 0, 0\n\t.param .b64 param0;\n"
                      "\tst.param.b64 \t[param0+0], 0;\n\t.param .b64 param1;\n\tst.param.b64 \t[PLACE], %rd1;\n"
                      "\tcall.uni \n\tbump, \n\t(\n\tparam0, \n\tparam1\n\t);\n\t} // callseq 0\n")


@pytest.mark.parametrize("read, place, written", [
    ("bump_param_1", "param1+0", False),  # the table read where it is handed: only loaded there
    ("bump_param_0+8", "param1+0", True),  # the first parameter read 8 bytes on is the second (round 323)
    ("bump_param_1", "param0+8", True),  # stored past the first parameter's bytes, into the second
])
def test_a_parameter_is_read_and_filled_within_its_bytes(read, place, written):
    # the callee writes through what it reads from its parameters: harmless only where that is not the table
    callee = _BUMP.replace("READ", read).replace("USE", "ld.f32 \t%f1, [%rd1];\n\tst.f32 \t[%rd1], %f1;\n")
    if not written:
        callee = callee.replace("\tst.f32 \t[%rd1], %f1;\n", "")
    assert _written(_HAND_TABLE_SECOND.replace("PLACE", place), callee) == written


def test_a_copy_into_shared_memory_reads_its_global_source():
    # a table staged with cp.async is only read (round 323's false refusal); a bulk copy back to global
    # memory, or the table as the copy's destination, writes it
    stage = "\tmov.u64 \t%rd1, _ZZ1fiE1t;\n\tcvta.global.u64 \t%rd2, %rd1;\n\tmov.u32 \t%r1, 0;\n"
    assert not _written(stage + "\tcp.async.cg.shared.global [%r1], [%rd2], 16, 16;\n")
    assert _written(stage + "\tcp.async.bulk.global.shared::cta.bulk_group [%rd2], [%r1], 16;\n")
    assert _written(stage + "\tcp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%rd2], [%r1], 16;\n")


@pytest.mark.parametrize("back", [
    # the frame's base from `stacksave`, made generic, read through (round 324)
    "\t{ .reg .b64 s, t;\n\tstacksave.u64 s;\n\tcvta.local.u64 t, s;\n\tld.u64 %rd9, [t];\n\t}\n",
    # the first of two `.local` declarators, and spaced or ranged spellings
    "\t{ .local .align 8 .b8 kl_a[8], kl_b[8];\n\tst.local.u64 [kl_a], %rd2;\n\tmov.u64 %rd8, kl_a;\n"
    "\tcvta.local.u64 %rd7, %rd8;\n\tld.u64 %rd9, [%rd7];\n\t}\n",
    "\t{ .local .b64 kl_r<2>;\n\tst.local.u64 [kl_r1], %rd2;\n\tmov.u64 %rd8, kl_r1;\n\tld.u64 %rd9, [%rd8];\n\t}\n",
    # a number made into an address no parameter or variable gave: it may be the local window
    "\tmov.u64 \t%rd8, 72057594037927936;\n\tld.u64 \t%rd9, [%rd8];\n",
])
def test_an_address_read_back_from_local_memory_however_reached_is_followed(back):
    assert _written(_DEPOT + _PRINTF_ARGUMENT + back + "\tst.global.f32 \t[%rd9], %f1;\n")


def test_generic_loads_through_parameters_leave_printfs_arguments_read():
    through_parameter = "\tld.param.u64 \t%rd8, [k_param_0];\n\tadd.s64 \t%rd9, %rd8, 4;\n\tld.f32 \t%f2, [%rd9];\n"
    assert not _written(_DEPOT + _PRINTF_ARGUMENT + through_parameter)


@pytest.mark.parametrize("back", [
    # a qualified local load at a parameter's own address (parameters live in local memory: round 326)
    "\tmov.u64 \t%rd8, k_param_0;\n\tld.weak.local.u64 \t%rd9, [%rd8+-8];\n",
    # below the first parameter: the constants that place the local window
    "\tld.param.u64 \t%rd8, [k_param_0+-496];\n\tld.u64 \t%rd9, [%rd8+-8];\n",
    # an atomic returns what it read
    "\tmov.u64 \t%rd8, %SPL;\n\tcvta.local.u64 \t%rd7, %rd8;\n\tatom.add.u64 \t%rd9, [%rd7], 0;\n",
])
def test_every_way_of_reading_local_memory_counts(back):
    assert _written(_DEPOT + _PRINTF_ARGUMENT + back + "\tst.global.f32 \t[%rd9], %f1;\n")


@pytest.mark.parametrize("body", [
    "\tmov.u64 \t%rd1, _ZZ1fiE1t;\n\tld.global.f32 \t%f1, [%rd1];\n\tst.global.f32 \t[%rd9], %f1;\n",  # %rd9 undefined
    # a call parameter no st.param fills (round 327)
    "\tmov.u64 \t%rd1, _ZZ1fiE1t;\n\tld.global.f32 \t%f1, [%rd1];\n\t{ // callseq 0, 0\n\t.param .b64 param0;\n"
    "\tcall.uni \n\tvprintf, \n\t(\n\tparam0\n\t);\n\t} // callseq 0\n",
])
def test_a_value_left_undefined_counts_every_static_written(body):
    assert _written(body)
    defined = body.replace("[%rd9]", "[%rd1]").replace("\t.param .b64 param0;\n",
                                                       "\t.param .b64 param0;\n\tst.param.b64 \t[param0+0], 0;\n")
    assert not _written(defined.replace("st.global.f32 \t[%rd1], %f1;\n", ""))


@pytest.mark.parametrize("read", [
    "\t{ .reg .b64 t;\n\tmov.u64 t, 0;\n\t}\n\t{ .reg .b64 t;\n\tmov.b64 %rd9, t;\n\t}\n",  # a sibling block's t
    "\tsetp.eq.s32 \t%p1, %r1, 0;\n\t@%p1 mov.u64 \t%rd9, 0;\n",  # defined under a predicate only
    "\tmov.b64 \t%rd9, %rd8;\n\tmov.u64 \t%rd8, 0;\n",  # defined after its use
    "\t{ .reg .b64 %clockwork;\n\tmov.b64 %rd9, %clockwork;\n\t}\n",  # named like a special register
    "\tstackrestore.u64 \t%rd9;\n",  # an instruction that only reads it
])
def test_a_register_must_be_defined_before_its_use_on_every_path(read):
    # round 328: each of these left %rd9 (or what it came from) undefined, ptxas's register holding an address
    body = "\t.reg .pred \t%p<3>;\n\tmov.u64 \t%rd1, _ZZ1fiE1t;\n\tld.global.f32 \t%f1, [%rd1];\n" + read
    assert _written(body + "\tst.global.f32 \t[%rd9], %f1;\n")
    assert not _written(body.replace(read, "\tmov.u64 \t%rd9, 0;\n") + "\tst.global.f32 \t[%rd9+4], %f1;\n"
                        .replace("[%rd9+4]", "[%rd9]"))
