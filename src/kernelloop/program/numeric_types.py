"""The number types of C and CUDA as the harness names them (`unsigned long` -> `uint64_t`),
shared by `kernelloop init` and the readers of a kernel's code."""

from __future__ import annotations

import re

# Element types a buffer may have (the harness's DType list), by the spellings kernels use that are
# no C integer keywords (those are read by _integer_type) nor <cstdint> names (_FIXED_WIDTH).
_ELEMENT_TYPES = {
    "float": "float", "double": "double", "__half": "__half", "half": "__half", "__nv_bfloat16": "__nv_bfloat16",
    "nv_bfloat16": "__nv_bfloat16", "char": "int8_t",  # a plain char argument: drawn as a small integer
    # the C library's integer typedefs (LP64)
    "size_t": "uint64_t", "ptrdiff_t": "int64_t", "ssize_t": "int64_t", "intptr_t": "int64_t", "uintptr_t": "uint64_t",
}
QUALIFIERS = re.compile(r"\b(?:const|volatile|__restrict__|__restrict|restrict|struct)\b")

_INTEGER_WORDS = frozenset({"signed", "unsigned", "short", "long", "int", "char"})
_FIXED_WIDTH = re.compile(r"^u?int(?:_fast|_least)?(8|16|32|64)_t$")


def _integer_type(words: list[str]) -> str | None:
    """The harness's type of an integer spelled with C's keywords, or None."""
    if not words or any(w not in _INTEGER_WORDS for w in words):
        return None
    unsigned = "unsigned" in words
    if "signed" in words and unsigned:
        return None
    longs, shorts, chars = words.count("long"), words.count("short"), words.count("char")
    if longs > 2 or shorts > 1 or chars > 1 or (longs and (shorts or chars)) or (shorts and chars):
        return None
    if chars:
        if "int" in words or ("signed" not in words and not unsigned):
            return None  # plain `char` is a character, not a number init draws
        bits = 8
    else:
        bits = 16 if shorts else 64 if longs else 32  # LP64: long and long long are 64 bits
    return f"{'u' if unsigned else ''}int{bits}_t"


def element_type(ctype: str) -> str | None:
    """The harness's element type of a parameter type as written (`const float* __restrict__`:
    `float`, `unsigned int`: `uint32_t`, `std::size_t`: `uint64_t`, `long unsigned int`: `uint64_t`);
    None for anything but numbers and pointers to numbers."""
    words = QUALIFIERS.sub(" ", ctype.replace("*", " ")).replace("std::", " ").replace("::", " ").split()
    spelled = " ".join(words)
    if spelled in _ELEMENT_TYPES:
        return _ELEMENT_TYPES[spelled]
    if len(words) == 1 and (m := _FIXED_WIDTH.match(words[0])):  # int_least16_t, uint_fast32_t
        # glibc's fast types wider than a byte are `long` (64 bits); least types are exact
        bits = "64" if "_fast" in words[0] and m.group(1) != "8" else m.group(1)
        return f"{'u' if words[0].startswith('u') else ''}int{bits}_t"
    return _integer_type(words)
