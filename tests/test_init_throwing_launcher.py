"""A launcher that reports a launch error with a C++ exception (`throw std::runtime_error(...)`,
the habit of C++ libraries and PyTorch extensions), in a library-style file with explicit
instantiations of its template launcher and a C entry point that calls it
(tests/fixtures/outside/axpby_throwing_lib.cu).

- Wrapped alone (`--kernel`), init leaves the launcher out, and with it what names it: its explicit
  instantiations and the C entry point (kept, they named a template the program no longer has:
  kept-aside set 26 met "axpby is not a template"). The left-out throw is the C++ runtime's
  (the standard exception classes), not a call init must be told to trust.
- Kept as the launcher, its throw references the exception's destructor and type information by
  address: functions and constants, never "another file's variable". The scan a candidate's host
  code must pass does not follow the exception's object, so init refuses it, and says so: the
  line names the throw and what to do, not a result handed back through host memory.
"""

from __future__ import annotations

import pytest

from kernelloop.init_state import refuse_state_set_by_dropped_code
from kernelloop.program.init import InitSpec, generate
from kernelloop.tools.state_refs import no_variable

from .conftest import FIXTURES, shared_cache_dir
from .test_cli import kl, one_error_line

LIBRARY = FIXTURES / "outside" / "axpby_throwing_lib.cu"
VALUES = {"n": ["1048576", "1001"], "a": ["2", "1.5"], "b": ["0.5", "0.25"]}
ALONE = InitSpec(kernel="axpby_kernel", template_args="float", values=VALUES, roles={"y": "inout"},
                 grid="(n + 255) / 256", block="256")


def test_what_names_a_left_out_launcher_is_left_out_with_it():
    program = generate(LIBRARY.read_text(), ALONE, "axpby_throwing_lib.cu").program
    assert "template void axpby<float>" not in program and "template void axpby<double>" not in program
    assert "mylib_saxpby" not in program.split("left out")[1]  # named in the header line only
    assert "launcher axpby, caller mylib_saxpby were left out" in program
    assert "mylib::axpby_kernel<float><<<(n + 255) / 256, 256>>>" in program


@pytest.mark.parametrize("mangled, readable, expected", [
    ("_ZNSt13runtime_errorD1Ev", "std::runtime_error::~runtime_error()", True),
    ("_ZTISt13runtime_error", "typeinfo for std::runtime_error", True),
    ("_ZTVN10__cxxabiv117__class_type_infoE", "vtable for __cxxabiv1::__class_type_info", True),
    ("_ZNK3lib5Table3getEi", "lib::Table::get(int) const", True),
    ("_ZN3cfg5alphaE", "cfg::alpha", False),  # a namespaced variable
    ("_ZZ4stepvE5count", "step()::count", False),  # a static local of another file's function
    ("blend_alpha", "blend_alpha", False),  # a C name: may be a variable
    ("_ZN3lib4hookE", "lib::hook", False),  # a function pointer is a variable
])
def test_only_what_is_certainly_no_variable_is_left_out_of_the_state(mangled, readable, expected):
    assert no_variable(mangled, readable) is expected


@pytest.mark.nvcc
def test_the_throw_is_neither_state_nor_an_unknown_call():
    source = LIBRARY.read_text()
    kept = InitSpec(launcher="axpby", template_args="float", values=VALUES, roles={"y": "inout"})
    for spec in (kept, ALONE):  # no InputError: nothing to vouch for
        refuse_state_set_by_dropped_code(source, generate(source, spec, "axpby_throwing_lib.cu"), arch="sm_90",
                                         cache_dir=shared_cache_dir())


@pytest.mark.nvcc
def test_init_says_the_launcher_throws_and_wraps_the_kernel_alone(tmp_path):
    cache = {"KERNELLOOP_CACHE_DIR": str(tmp_path / "cache")}
    sizes = ["--template-args", "float", "--set", "n=1048576,1001", "--set", "a=2,1.5", "--set", "b=0.5,0.25",
             "--role", "y=inout"]
    kept = kl("init", str(LIBRARY), "-o", str(tmp_path / "kept.cu"), *sizes, env=cache)
    line = one_error_line(kept)
    assert kept.returncode == 2 and "its launcher's host code throws a C++ exception" in line, line
    assert "--kernel NAME --grid EXPR --block EXPR" in line and "hand a result back" not in line
    alone = kl("init", str(LIBRARY), "-o", str(tmp_path / "alone.cu"), "--kernel", "axpby_kernel", "--grid",
               "(n + 255) / 256", "--block", "256", *sizes, env=cache)
    assert alone.returncode == 0, alone.stderr


@pytest.mark.nvcc
def test_the_kept_launcher_is_compared_as_code_not_as_the_compilers_inlining(tmp_path):
    # The same launcher compiled in the file (main builds no other std::string: its constructor inlined into the
    # launcher's cold part) and in the editable unit (called out of line) is the same code: init reaches the
    # throw's own refusal instead of "compiles to other code" (compared with no inlining, as check (c) compares)
    result = kl("init", str(FIXTURES / "outside" / "saxpy_throw_check_main.cu"), "-o", str(tmp_path / "kept.cu"),
                "--launcher", "saxpy", "--set", "n=1048576,1001", "--set", "a=2.0", "--role", "x=input",
                "--role", "y=inout", env={"KERNELLOOP_CACHE_DIR": str(tmp_path / "cache")})
    line = one_error_line(result)
    assert result.returncode == 2 and "its launcher's host code throws a C++ exception" in line, line
    assert "compiles to other code" not in line
