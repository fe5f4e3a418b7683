"""The configuration switches the toolkit's own headers read: macros a user's build may define
(`-DCCCL_DISABLE_INT128_SUPPORT`) that change what a header declares, which no list kept by hand
follows as the toolkit grows (red team round 175: `cuda::std::is_integral<__int128>` is false
under that switch, and a part halved its column count on it). Read from the headers themselves,
once per toolkit: every name of the toolkit's (one of its components' words in it) that a
preprocessor condition tests and no header defines, the compiler's own facts left out."""

from __future__ import annotations

import functools
import re
from pathlib import Path

from ..tools.nvcc import Toolchain
from ..tools.toolkit import real_nvcc

_NAME = re.compile(r"\b[A-Za-z_]\w*\b")
# A name of the toolkit's: one of its components' words as a part of the name (`CCCL_...`,
# `__NV_DISABLE_128_ATOMICS`, `NVTX_DISABLE`, `__FORCE_INCLUDE_CUDA_FP16_HPP_FROM_FP16_H__`).
_TOOLKIT_WORD = re.compile(r"(?:^|_)(?:CCCL|CUB|THRUST|LIBCUDACXX|CUDA|CUDART|NV|NVTX|NVTX3|CG|CUPTI)(?:_|$)")
# What the compiler itself defines (or a tool other than nvcc does): the build's own facts, which a part
# may test (`__CUDA_ARCH__`), not switches a user sets.
_COMPILER_DEFINED = re.compile(r"^(?:__CUDACC|__CUDA_ARCH|__NVCC|__NVCOMPILER|_NVHPC|__CUDA__$|__CUDA_LIBDEVICE__"
                               r"|__CUDA_API_VERSION_INTERNAL|__CUDADEVRT_INTERNAL__|__CUDA_INTERNAL_|__CUDA_ICC"
                               r"|__CUDA_XLC|__CUDA_NO_)")
# Names spelled in the implementation's reserved form that are switches a user sets all the same
# (`-D__NV_DISABLE_128_ATOMICS` takes the 128-bit atomicCAS away: red team round 176): compared in
# the switches' build with the public ones. The other reserved-form names (libcu++'s and CCCL's own
# `_LIBCUDACXX_*`, `_CCCL_*` knobs) are only reserved.
_USER_FACING_RESERVED_FORM = re.compile(r"^__(?:NV|CUDA)_")
_CONDITION = re.compile(r"^\s*#\s*(?:if|ifdef|ifndef|elif|elifdef|elifndef)\b(.*)$")
_DEFINE = re.compile(r"^\s*#\s*define\s+(\w+)")
# tested only for being defined: `#ifdef X`, `#ifndef X`, `defined(X)`, `defined X`
_DEFINED_TEST = re.compile(r"\bdefined\s*\(\s*(\w+)\s*\)|\bdefined\s+(\w+)")
# Switches the build with every switch at once leaves out, and why (each is still reserved: the part
# may not name one).
NOT_SET_TOGETHER = {
    "CUDA_API_PER_THREAD_DEFAULT_STREAM": "every runtime call becomes its per-thread variant, so every part's "
                                          "code changes: judged by the host-code scan's default-stream rule",
    "THRUST_FORCE_64_BIT_OFFSET_TYPE": "excludes THRUST_FORCE_32_BIT_OFFSET_TYPE, which the build sets",
    "CUB_DISABLE_NAMESPACE_MAGIC": "needs a wrapped namespace named by value (THRUST_CUB_WRAPPED_NAMESPACE)",
    "CUDA_NO_HALF": "removes the half type the harness's header declares its buffers with",
    "CUDA_NO_BFLOAT16": "removes the bfloat16 type the harness's header declares its buffers with",
    # read for their value where they are used (tested only for being defined in conditions)
    "THRUST_CUB_WRAPPED_NAMESPACE": "names a namespace", "THRUST_STD_MR_NS": "names a namespace",
    "THRUST_DEVICE_BACKEND": "names a backend", "CUDA_FORCE_API_VERSION": "names an API version",
    "__NV_LEGACY_LAUNCH": "nvcc's launch stubs change with it, so every part's code changes",
}


@functools.lru_cache(maxsize=4)
def _read(include: Path) -> tuple[tuple[str, ...], tuple[str, ...]]:
    tested: set[str] = set()
    by_value: set[str] = set()
    defined: set[str] = set()
    for header in sorted(include.rglob("*")):
        if not header.is_file() or header.suffix not in ("", ".h", ".hpp", ".cuh", ".inl", ".inc", ".hxx"):
            continue
        for line in header.read_text(errors="replace").splitlines():
            if (d := _DEFINE.match(line)) is not None:
                defined.add(d.group(1))
                continue
            c = _CONDITION.match(line)
            if c is None:
                continue
            text = c.group(1).split("//", 1)[0]
            names = {n for n in _NAME.findall(text) if _TOOLKIT_WORD.search(n) and n != "defined"}
            if not names:
                continue
            tested |= names
            if line.lstrip().lstrip("#").lstrip().startswith(("ifdef", "ifndef", "elifdef", "elifndef")):
                continue
            as_defined = {a or b for a, b in _DEFINED_TEST.findall(text)}
            by_value |= names - as_defined
    free = {name for name in tested - defined if not _COMPILER_DEFINED.match(name)}
    return tuple(sorted(free - by_value)), tuple(sorted(free & by_value))


def toolkit_config_switches(toolchain: Toolchain) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(switches, values): the configuration names the toolkit's headers test and never define, those
    only tested for being defined (a build sets them with -DNAME) and those read for a value. All are
    reserved: a part may not name one."""
    return _read(real_nvcc(toolchain.nvcc).parent.parent / "include")


def switches_set_together(toolchain: Toolchain) -> tuple[str, ...]:
    """The switches of toolkit_config_switches the comparison builds set (the public ones and the
    user-facing ones of reserved form; NOT_SET_TOGETHER left out). Those the baseline's own part does
    not build alike with are split off by the comparison (shipped.other_build_differences)."""
    return tuple(s for s in toolkit_config_switches(toolchain)[0]
                 if s not in NOT_SET_TOGETHER and (not s.startswith("_") or _USER_FACING_RESERVED_FORM.match(s)))
