"""The one PTX reader behind init's state and copy checks."""

from __future__ import annotations

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
