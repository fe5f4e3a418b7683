"""program.macros: a program's own macros expanded as the preprocessor would, or None where that
cannot be read for sure (callers fail closed)."""

from __future__ import annotations

import pytest

from kernelloop.program.macros import expand, program_macros

DEFINES = r"""
#define LAUNCH_CHECK n /= 2, cudaGetLastError
#define CUDA_CHECK(call) do { cudaError_t e_ = (call); \
  if (e_ != cudaSuccess) { fprintf(stderr, "%s: %s\n", #call, cudaGetErrorString(e_)); exit(1); } } while (0)
#define CEIL_DIV(a, b) (((a) + (b) - 1) / (b))
#define LOG(fmt, ...) printf(fmt, __VA_ARGS__)
#define TWICE(x) CEIL_DIV(x, 1) + CEIL_DIV(x, 1)
#define SELF SELF + 1
#define PASTE(a) a##_suffix
#define ALIAS CEIL_DIV
"""


@pytest.mark.parametrize("code, expanded", [
    # an object-like macro whose expansion ends in a name the following parentheses call
    ("LAUNCH_CHECK();", "n /= 2, cudaGetLastError ();"),
    ("ALIAS(n, 4);", "(((n) + (4) - 1) / (4)) ;"),
    ("int g = CEIL_DIV(n, TWICE(k));", "int g = (((n) + ( (((k) + (1) - 1) / (1)) + (((k) + (1) - 1) / (1)) ) - 1) / "
                                       "( (((k) + (1) - 1) / (1)) + (((k) + (1) - 1) / (1)) )) ;"),
    ('LOG("%d %d", a, (b, c));', 'printf("%d %d", a, (b, c)) ;'),
    ("CEIL_DIV;", "CEIL_DIV;"),  # a function-like macro's name not called
    ('printf("LAUNCH_CHECK");', 'printf("LAUNCH_CHECK");'),  # not inside a string
])
def test_expansion(code, expanded):
    assert " ".join(expand(code, program_macros(DEFINES)).split()) == " ".join(expanded.split())


def test_stringification_and_splices():
    out = expand("CUDA_CHECK(cudaMemset(p, 0, 4));", program_macros(DEFINES))
    assert "cudaError_t e_ = (cudaMemset(p, 0, 4));" in out and '"kl_stringified"' in out and "#" not in out


@pytest.mark.parametrize("code", ["PASTE(x);", "SELF;", "CEIL_DIV(n, 4;"])
def test_what_cannot_be_read_for_sure_is_none(code):
    assert expand(code, program_macros(DEFINES)) is None


def test_a_name_defined_twice_or_undefined_is_uncertain():
    macros = program_macros("#define A 1\n#if X\n#define A n /= 2\n#endif\n#define B 2\n#undef B\n#define C 3\n#define C 3\n")
    assert {"A", "B"} <= macros.uncertain and "C" in macros.defined
    assert expand("int k = A;", macros) is None and expand("int k = B;", macros) is None
    assert expand("int k = C;", macros).split() == ["int", "k", "=", "3", ";"]
    assert macros.names_in("A + C /* B */") == {"A", "C"}


def test_only_kernelloops_own_include_guards_are_read_as_entered():
    # red team round 104: `#ifndef CUDART_VERSION / #define CUDART_VERSION 0 / #define f(...)` was read as a
    # guard, and a toolkit header defines CUDART_VERSION; and a define in a guard's #else
    user = program_macros("#ifndef CUDART_VERSION\n#define CUDART_VERSION 0\n#define f(e) 0\n#endif\n")
    assert "f" in user.uncertain
    other = program_macros("#ifndef H_\n#define H_\n#else\n#define g(e) 0\n#endif\n")
    assert "g" in other.uncertain
    own = program_macros("#ifndef KL_PRAGMA_ONCE_0123456789abcdef\n#define KL_PRAGMA_ONCE_0123456789abcdef\n"
                         "#define CEIL_DIV(a, b) (((a) + (b) - 1) / (b))\n#endif\n")
    assert "CEIL_DIV" in own.defined
