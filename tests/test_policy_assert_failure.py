"""Newer C libraries expand `assert` into a call of their failure routine with the file and line
as builtins (glibc 2.40: `__assert_fail (#expr, __builtin_FILE (), __builtin_LINE (), ...)`). On the
lent GPU's toolchain that made `init` refuse its own programs whose launcher asserts ("build-context
(preprocessed source): __builtin_FILE ... is a value of the build"; kept-aside set 8). The failure
routine prints them and aborts: a message, as assert's own are. A build value anywhere else in the
expanded part is still refused."""

from __future__ import annotations

import pytest

from kernelloop.verify.policy import scan_preprocessed

GLIBC_240_ASSERT = ('(static_cast <bool> (n > 0) ? void (0) : __assert_fail ("n > 0", __builtin_FILE (), '
                    '__builtin_LINE (), __extension__ __PRETTY_FUNCTION__))')


def test_an_assert_expanded_by_a_newer_c_library_is_a_message():
    assert scan_preprocessed("", f"void f(int n) {{ {GLIBC_240_ASSERT}; }}", {}) == []


@pytest.mark.parametrize("part", [
    f"void f(int n) {{ int l = __builtin_LINE (); {GLIBC_240_ASSERT}; }}",
    f"void f(int n) {{ {GLIBC_240_ASSERT}; const char* s = __builtin_FILE (); }}",
    "void f(int n) { __assert_fail (\"x\", \"f\", 1, \"g\"); int c = __builtin_COLUMN (); }",
])
def test_a_build_value_outside_the_failure_call_is_still_refused(part):
    violations = scan_preprocessed("", part, {})
    assert [v.rule for v in violations] == ["build-context"], violations
