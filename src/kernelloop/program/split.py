"""The kernel program contract: find the editable part and the frozen harness.

See docs/contract.md. A candidate is always built as *candidate editable part* +
*baseline frozen harness*, in two translation units, so the candidate can change
neither how inputs are made nor how time is measured nor what is printed.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from ..errors import InputError
from ..toolkit_roots import toolkit_roots
from .cuda_tree import declared_names
from .run_lambda import run_lambda_problem
from .scanner import SPLICE, Item, blank_comments, function_name, launched_kernels, normalized, scan_items, strip_comments

BEGIN_MARKER = re.compile(r"^[ \t]*//[ \t]*kernelloop:[ \t]*editable[ \t]+begin\b.*$", re.I | re.M)
END_MARKER = re.compile(r"^[ \t]*//[ \t]*kernelloop:[ \t]*editable[ \t]+end\b.*$", re.I | re.M)
_CUDA_HINT = re.compile(r"__global__|<<<|cudaMalloc|cudaLaunchKernel")
_MEASURED = re.compile(r"\bKERNEL_MS\b|\bkl\s*::\s*Harness\b|kernelloop_harness\.cuh")


class ProgramSplit(BaseModel):
    """A baseline program cut into its preamble, editable part and harness."""

    mode: Literal["markers", "default"]
    preamble: str
    editable: str
    harness: str
    exported: list[str]  # declarations of editable functions the harness may call
    exported_names: list[str]
    editable_line: int  # 1-based line of the editable part in the original file
    harness_line: int
    notes: list[str] = []  # what the split decided that the user should hear (a default split's editable part)
    headers: list[str] = []  # the user's own headers inlined into the frozen code (absolute paths)
    source_frozen: str = ""  # the frozen code as written, before the user's headers were inlined

    def editable_unit(self, editable: str | None = None, filename: str = "editable.cu") -> str:
        """Translation unit 1: preamble + an editable part (the baseline's by default)."""
        part = self.editable if editable is None else editable
        line = self.editable_line if editable is None else 1
        return f"{self.preamble}\n#line {line} \"{filename}\"\n{part}\n"

    def whole_program(self, editable: str | None = None) -> str:
        """One file: preamble, an editable part between markers, the frozen harness.

        With markers this reproduces the baseline file exactly for its own editable part; it
        is what `kernelloop verify`, `profile` and a person can build and run on its own."""
        part = self.editable if editable is None else editable
        if part and not part.endswith("\n"):
            part += "\n"
        return (f"{self.preamble}// kernelloop: editable begin\n{part}"
                f"// kernelloop: editable end\n{self.harness}")

    @property
    def is_v2(self) -> bool:
        """Whether the harness is contract v2's (kl::Harness): results are its buffers."""
        return bool(_V2_HARNESS.search(strip_comments(self.harness)))

    def harness_unit(self, filename: str = "harness.cu") -> str:
        """Translation unit 2: preamble + declarations + the frozen harness. A v2 unit reads the header first (its
        own #pragma once makes the harness's include a no-op): the header's code then means what it says, whatever
        the frozen code declares or defines before its include (red team round 295: a preamble `namespace kl`
        function, or a macro, that the header's own `write` and `getenv` calls reached)."""
        decls = "\n".join(self.exported)
        first = f"#include <{TRUSTED_HARNESS_HEADER}>\n#line 1\n" if self.is_v2 else ""
        return (
            f"{first}{self.preamble}\n// declarations of the editable part's functions\n{decls}\n"
            f"#line {self.harness_line} \"{filename}\"\n{self.harness}\n"
        )


def looks_like_cuda(text: str) -> bool:
    return bool(_CUDA_HINT.search(strip_comments(text)))


def require_cuda(text: str, name: str) -> None:
    """One InputError, worded once, for a text with no kernel in it."""
    if not looks_like_cuda(text):
        raise InputError(f"{name}: not a CUDA program (no __global__ kernel or kernel launch found)")


def read_program(path: Path) -> str:
    if not path.exists():
        raise InputError(f"{path}: no such file")
    if path.is_dir():
        raise InputError(f"{path}: is a directory, expected a .cu file")
    raw = path.read_bytes()
    if b"\0" in raw[:4096]:
        raise InputError(f"{path}: is a binary file, not CUDA source")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: is not UTF-8 text ({exc.reason})") from exc


# The header included by name, or its harness named: either makes the harness v2's (red team round 293:
# `using namespace kl; Harness h;` named no `kl::Harness` and skipped every v2 check of frozen code; the gate
# holds this reading to the build, which holds the header or not)
_V2_HARNESS = re.compile(r"\bkl\s*::\s*Harness\b|#\s*include\s*[<\"](?:[^<>\"]*/)?kernelloop_harness\.cuh[>\"]")
# Named anywhere (a call, a template call, a function pointer): every way the runtime and driver
# give memory, or the address of a variable, to frozen code (rounds 43-44).
_FROZEN_ALLOCATION = re.compile(r"\b(?:cudaMalloc\w*|cudaHostAlloc|cudaHostRegister|cudaGetSymbolAddress"
                                r"|cudaGraphAddMemAllocNode|cudaMallocFromPoolAsync|cuMem\w*|cuGraphAddMemAllocNode"
                                r"|cuModuleGetGlobal\w*|__managed__)\b")


def contract_problem(text: str) -> str | None:
    """What keeps a CUDA program from being a kernelloop program, in words; None when nothing.
    Checked from the text alone, before anything is compiled or run: a program the verifier
    cannot time (no v2 harness, no v1 KERNEL_MS line) would otherwise fail only after a build."""
    code = strip_comments(text)
    if _MEASURED.search(code):
        return None
    return ("nothing in it times the kernel for the verifier (no kl::Harness from kernelloop_harness.cuh, "
            "no 'KERNEL_MS: <ms>' line)")


_NO_RESULT_TYPES = {"void", "cudaError_t", "cudaError", "enum cudaError"}  # a launcher's status, not a result
_HARMLESS_WORDS = {"static", "inline", "__inline__", "__forceinline__", "__noinline__", "__host__", "extern",
                   "constexpr"}


def _without_balanced(code: str, opener: str) -> str:
    """`code` without every `opener(...)` (balanced parentheses): __attribute__((...)) and the like."""
    while (i := code.find(opener)) >= 0:
        j = code.find("(", i)
        if j < 0:
            break
        depth, k = 0, j
        while k < len(code):
            depth += {"(": 1, ")": -1}.get(code[k], 0)
            k += 1
            if depth == 0:
                break
        code = code[:i] + " " + code[k:]
    return code


def launcher_result_type(head: str, name: str) -> str | None:
    """What a host function returns when that is not proven to be nothing: None only for `void`
    or a CUDA status (`cudaError_t`), after template headers, attributes and linkage; anything
    else, or a head this cannot read, is a result ("float", "auto", "an unreadable type")."""
    code = strip_comments(head)
    code = re.sub(r"\[\[.*?\]\]", " ", code)
    for opener in ("__attribute__", "__declspec", "__launch_bounds__", "alignas"):
        code = _without_balanced(code, opener)
    code = re.sub(r'extern\s*"C(?:\+\+)?"', " ", code)
    while (m := re.search(r"\btemplate\s*<", code)) is not None:  # a template header, balanced
        depth, k = 1, m.end()
        while k < len(code) and depth:
            depth += {"<": 1, ">": -1}.get(code[k], 0)
            k += 1
        code = code[:m.start()] + " " + code[k:]
    m = re.search(rf"\b{re.escape(name)}\s*\(", code)
    if m is None:
        return "an unreadable type"
    kind = " ".join(w for w in code[:m.start()].split() if w not in _HARMLESS_WORDS)
    return None if kind in _NO_RESULT_TYPES else (kind or "an unreadable type")


def returned_results(split: ProgramSplit) -> list[tuple[str, str]]:
    """(function, type) for every function of the editable part the harness names that is not
    proven to return nothing: in contract v2 only the harness's buffers are compared, so a value
    it returns is checked by nothing (red team round 41: a launcher returning a mean loss, which a
    candidate dropped; round 42: the same behind an attribute, or called as a template)."""
    harness = strip_comments(split.harness)
    found = []
    for decl, fname in zip(split.exported, split.exported_names):
        if fname and "__global__" not in decl and re.search(rf"(?<![\w.]){re.escape(fname)}\b", harness):
            kind = launcher_result_type(decl, fname)
            if kind is not None:
                found.append((fname, kind))
    return found


_SCRATCH_DECLARATION = re.compile(r"\b(\w+)\s*=\s*\w+\s*\.\s*scratch\s*<")
_HOST_READ = re.compile(r"\b(?:fetch|cudaMemcpy\w*)\s*(?:<[^<>;]*>\s*)?\(([^;]*)\)\s*;")


def scratch_read_by_frozen_code(split: ProgramSplit) -> str | None:
    """The name of a scratch buffer the frozen code reads back to the host (h.fetch, a cudaMemcpy): in
    contract v2 nothing compares what scratch holds, so a result printed from it is checked by nothing
    (red team round 273). The harness refuses the fetch at run time and retires scratch after the
    last call; this says so before anything is built."""
    frozen = strip_comments(split.preamble + split.harness)
    scratch = set(_SCRATCH_DECLARATION.findall(frozen))
    for call in _HOST_READ.finditer(frozen):
        named = set(re.findall(r"\b\w+\b", call.group(1))) & scratch
        if named:
            return sorted(named)[0]
    return None


def split_program(text: str, name: str = "program", include_dirs: list[Path] | None = None) -> ProgramSplit:
    """Split a baseline program by its markers, or by the documented default.

    The user's own headers that the frozen code includes (`#include "common.h"` beside the file or
    in an include folder, `#include <helper_cuda.h>` in an include folder) are inlined into it as
    they are now: trusted, frozen, and built with no include path (docs/contract.md)."""
    require_cuda(text, name)
    headers = _Headers(name, include_dirs)
    begins, ends = list(BEGIN_MARKER.finditer(text)), list(END_MARKER.finditer(text))
    split = _harness_header_below(_split_by_markers(text, name, begins, ends, headers) if begins or ends
                                  else _split_by_default(text, name, headers))
    if headers.inlined:
        split.headers = [str(h) for h in headers.inlined]
        split.notes.append(f"your header{'s' if len(headers.inlined) > 1 else ''} "
                           f"{', '.join(h.name for h in headers.inlined)} {'are' if len(headers.inlined) > 1 else 'is'} "
                           "frozen: inlined into the preamble and harness as it is now")
    if split.is_v2 and (allocation := _FROZEN_ALLOCATION.search(strip_comments(split.preamble + split.harness))):
        # Memory the frozen code allocates itself and hands the launcher is compared by nothing: a
        # result kept there (device memory, pinned or managed host memory) could be dropped by a
        # candidate (red team round 43).
        raise InputError(f"{name}: the frozen code allocates memory itself ({allocation.group(0)}): "
                         "in contract v2 every buffer a launcher reads or writes is the harness's (h.input, "
                         "h.output, h.inout, h.scratch), so that what it holds is generated or compared")
    if split.is_v2 and (results := returned_results(split)):
        said = ", ".join(f"{fname} returns {kind}" for fname, kind in results)
        raise InputError(f"{name}: {said}, a result the verifier never compares (contract v2 compares the "
                         "harness's buffers): have the launcher write it into an output buffer (h.output) and "
                         "return void")
    if split.is_v2 and (lambda_problem := run_lambda_problem(
            strip_comments(split.harness), declared_names(strip_comments(split.editable)),
            (split.preamble, split.editable, split.harness))):
        raise InputError(f"{name}: {lambda_problem}: in contract v2 a timed call runs the editable part's functions "
                         "alone (and device-to-device copies between the harness's buffers), so that nothing the "
                         "verifier does not compare happens between the part's work and the checks")
    if split.is_v2 and (buffer := scratch_read_by_frozen_code(split)):
        raise InputError(f"{name}: the frozen code reads the scratch buffer {buffer} back to the host, whose "
                         "contents the verifier never compares: declare a buffer that holds a result h.output "
                         "(or h.inout)")
    problem = contract_problem(text)
    if problem:
        raise _not_a_program_yet(name, text, problem)
    return split


def _not_a_program_yet(name: str, text: str, problem: str, launchers: list[str] | None = None) -> InputError:
    """The one line for a file outside the contract: what is missing and the `init` command that
    wraps it (issue 10: a user's own file, as written, meets this first). `launchers`: the file's
    host functions that launch its kernels, when it has no main()."""
    stem = Path(name).stem or "program"
    if launchers and all(launchers):
        return InputError(
            f"{name}: not a kernelloop program yet: {problem}; `kernelloop init {name} -o {stem}_kl.cu --launcher "
            f"{launchers[0]} --set ARG=SIZE,ALT` wraps your launcher {launchers[0]} and the kernels it launches in a "
            "contract-v2 harness that calls it (by hand: docs/contract.md, 'Writing a v2 harness')")
    if _defines_main(text):  # a whole program: capturing one run of it gives init everything
        how = (f"`kernelloop init {name} -o {stem}_kl.cu --capture` runs it once under launch capture and wraps "
               "its hottest kernel in a contract-v2 harness (where it cannot run: `--set ARG=SIZE,ALT`; ")
    else:
        how = (f"`kernelloop init {name} -o {stem}_kl.cu --set ARG=SIZE,ALT` wraps its kernel (or `--launcher "
               "NAME`, your host function that launches it) in a contract-v2 harness (")
    return InputError(f"{name}: not a kernelloop program yet: {problem}; {how}by hand: docs/contract.md, "
                      "'Writing a v2 harness')")


def check_program(path: Path, include_dirs: list[Path] | None = None) -> tuple[str, ProgramSplit]:
    """A program file's text and split; every problem a user can fix is one InputError, found
    from the text alone (no compiler, no GPU), so commands can check it before anything else.
    The text has the user's own headers inlined (see split_program), so it builds and is
    copied on its own."""
    if not path.is_file():
        raise InputError(f"{path}: no such file")
    text = read_program(path)
    split = split_program(text, str(path), include_dirs)
    return (inline_user_headers(text, str(path), include_dirs) if split.headers else text), split


def inline_user_headers(text: str, name: str, include_dirs: list[Path] | None = None) -> str:
    """`text` with the user's own headers inlined outside its editable markers (everywhere when it
    has none): a program that builds with no include path, as split_program builds it."""
    headers = _Headers(name, include_dirs)
    begins, ends = list(BEGIN_MARKER.finditer(text)), list(END_MARKER.finditer(text))
    if len(begins) == 1 and len(ends) == 1 and begins[0].end() <= ends[0].start():
        begin, end = begins[0], ends[0]
        return (headers.inline(text[: begin.start()], 1, headers.resume) + text[begin.start(): end.end() + 1]
                + headers.inline(text[end.end() + 1:], text.count("\n", 0, end.end()) + 2, headers.resume))
    return headers.inline(text, 1, headers.resume)


def _system_header(target: str) -> bool:
    """Whether a CUDA toolkit (found as every command finds it) or the system has a header of this name."""
    roots = [Path("/usr/include"), Path("/usr/local/include")]
    for _, toolkit in toolkit_roots():
        roots += [toolkit / "include", *toolkit.glob("targets/*/include")]
    return any((root / target).is_file() for root in roots)


TRUSTED_HARNESS_HEADER = "kernelloop_harness.cuh"
_INCLUDE_LINE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*(?:"([^"\n]+)"|<([^>\n]+)>)[ \t]*(?://.*|/\*.*\*/[ \t]*)?$')
_PRAGMA_ONCE = re.compile(r"^[ \t]*#[ \t]*pragma[ \t]+once\b.*$")


class _Headers:
    """Inlines the user's own headers: a quoted include found beside the including file or in an
    include folder, an angle include found in an include folder (as nvcc -I would find them);
    anything else (the toolkit's and the system's headers) stays an include. Each header is
    inlined at every include of it, its own guard (or `#pragma once`, made a guard) deciding, as the
    preprocessor does, whether it expands there."""

    def __init__(self, name: str, include_dirs: list[Path] | None) -> None:
        given = Path(name)
        self.folder = given.resolve().parent if given.is_file() else None
        self.resume = given.name if given.suffix else "program.cu"
        self._dirs = include_dirs
        self.inlined: list[Path] = []

    @property
    def dirs(self) -> list[Path]:
        if self._dirs is None:
            from ..config import include_dirs_setting

            self._dirs = include_dirs_setting()
        return self._dirs

    def find(self, target: str, quoted: bool, folder: Path | None) -> Path | None:
        if Path(target).is_absolute():
            return None  # never by absolute path: a program names its headers relative to a folder
        if Path(target).name == TRUSTED_HARNESS_HEADER:
            return None  # always kernelloop's own, staged by the build: a file of that name never stands in
            # for it (red team round 47: an include folder's copy ran inside the frozen harness)
        bases = ([folder] if quoted and folder is not None else []) + self.dirs
        if not bases or not quoted and _system_header(target):
            return None  # <cuda_runtime.h> stays the toolkit's, whatever folders were given
        for base in bases:
            candidate = base / target
            if candidate.is_file():
                return candidate.resolve()
        return None

    def inline(self, text: str, first_line: int, resume: str, folder: Path | None = None, depth: int = 0) -> str:
        """`text` (whose first line is line `first_line` of file `resume`) with its user includes inlined."""
        if "include" not in text and "__has_embed" not in text:
            return text
        _refuse_file_tests(text, first_line, resume)
        folder = folder or self.folder
        lines = text.split("\n")
        out: list[str] = []
        for index, line in enumerate(lines):
            m = _INCLUDE_LINE.match(line)
            found = m and self.find(m.group(1) or m.group(2), bool(m.group(1)), folder)
            if not found:
                out.append(line)
                continue
            if depth > 32:
                raise InputError(f"{resume}:{first_line + index}: includes nest more than 32 deep ({found.name}); "
                                 "kernelloop inlines your headers and stops there")
            if found not in self.inlined:
                self.inlined.append(found)
            try:
                content = found.read_text()
            except (OSError, UnicodeDecodeError) as exc:
                raise InputError(f"{resume}: cannot read the header {found} it includes ({exc})") from exc
            # Inlined at every include, as the preprocessor reads it there: a header meant to be
            # included again (X-macros, a generic body per type) expands again, and a guarded one is
            # skipped by its own guard, also when its first include sat in a region `#if` left out
            # (red team round 99: "once per file" lost both). `#pragma once` becomes such a guard.
            lines_of = content.split("\n")
            once = any(_PRAGMA_ONCE.match(ln) for ln in lines_of)
            content = "\n".join("" if _PRAGMA_ONCE.match(ln) else ln for ln in lines_of)
            body = self.inline(content, 1, found.name, found.parent, depth + 1).rstrip("\n")
            block = [f'#line 1 "{found.name}"', body]
            if once:
                # keyed as GCC's preprocessor knows a file for #pragma once: by size, modification time
                # and contents, not by path (a hard link or a `cp -p` copy reached by another path is
                # the same file to it: red team round 100)
                st = found.stat()
                identity = f"{st.st_size}:{int(st.st_mtime)}:{hashlib.sha256(content.encode()).hexdigest()}"
                guard = "KL_PRAGMA_ONCE_" + hashlib.sha256(identity.encode()).hexdigest()[:16]
                block = [f"#ifndef {guard}", f"#define {guard}", *block, "#endif"]
            out += [*block, f'#line {first_line + index + 1} "{resume}"']
        return "\n".join(out)


_FILE_TEST = re.compile(r"\b(__has_include_next|__has_include|__has_embed)\b\s*(?:\(\s*(?:\"([^\"\n]*)\"|<([^>\n]*)>))?")
# a library's spelling of the same test (CCCL's `_CCCL_HAS_INCLUDE(<x>)`): named so, it is one
_LIBRARY_FILE_TEST = re.compile(r"\b\w*(?:HAS_INCLUDE|HAS_EMBED)\w*\b", re.I)
_CONDITION = re.compile(r"^[ \t]*#[ \t]*(?:if|elif)\b(.*)$", re.M)
_DEFINITION = re.compile(r"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)(.*)$", re.M)


def _joined(code: str) -> tuple[str, list[int]]:
    """CODE as the preprocessor reads it after phase 3 (splices joined, comments blanked; `%:` is `#`), and for each of
    its characters the line of CODE it came from (1-based)."""
    out, lines, line, i = [], [], 1, 0
    while i < len(code):
        if splice := SPLICE.match(code, i):  # gcc and nvcc: whitespace may stand before the newline
            line, i = line + 1, splice.end()
            continue
        out.append(code[i])
        lines.append(line)
        line += code[i] == "\n"
        i += 1
    # then each comment a space, newlines too: a comment that spans lines continues a directive
    return blank_comments("".join(out)).replace("%:", "#"), lines



def _refuse_file_tests(text: str, first_line: int, resume: str) -> None:
    """Raise InputError for a test of whether a file exists (`#if __has_include("tuning.h")`) in the
    user's own text (the program and the headers it inlines): every build kernelloop makes of the
    program, and compares (init, verify), runs in a private folder with the user's headers inlined
    and its own include path, where the answer is not the one the user's build gets beside its
    files and with its flags (red team round 98: a baseline computing `out = in` for the user's
    `out = 2 * in`). Every target alike, a toolkit header too: which toolkit the user builds with
    is theirs to know. Read as the preprocessor reads it: splices joined (a backslash-newline
    inside the name), a library's macro for it, and a `#if` that pastes names (`##`) through a macro of the
    text's own, which could build one (red team round 99)."""
    code, line_of = _joined(text)

    def refuse(offset: int, what: str) -> None:
        line = first_line - 1 + (line_of[offset] if offset < len(line_of) else 1)
        raise InputError(f"{resume}:{line}: {what}, and kernelloop builds your program in a private folder, where "
                         "the answer can differ from your own build's: include the header, or define the setting "
                         "you build with, directly")

    for m in _FILE_TEST.finditer(code):
        shown = m.group(2) if m.group(2) is not None else m.group(3) if m.group(3) is not None else "a computed name"
        refuse(m.start(), f"{m.group(1)} tests whether {shown} exists")
    bodies: dict[str, list[str]] = {}
    for d in _DEFINITION.finditer(code):
        bodies.setdefault(d.group(1), []).append(d.group(2))
    for c in _CONDITION.finditer(code):
        condition = re.sub(r"\bdefined\s*(?:\(\s*\w+\s*\)|\w+)", " ", c.group(1))  # names, not expanded
        todo, seen = re.findall(r"[A-Za-z_]\w*", condition), set()
        while todo:
            name = todo.pop()
            if name in seen:
                continue
            seen.add(name)
            if _LIBRARY_FILE_TEST.fullmatch(name):
                refuse(c.start(), f"{name} tests whether a file exists")
            for body in bodies.get(name, []):
                if "##" in body:
                    refuse(c.start(), f"this #if builds a name by pasting (##, through {name}), which could test "
                                      "whether a file exists")
                todo += re.findall(r"[A-Za-z_]\w*", body)


def _split_by_markers(text: str, name: str, begins: list[re.Match], ends: list[re.Match],
                      headers: _Headers) -> ProgramSplit:
    if len(begins) != 1 or len(ends) != 1:
        raise InputError(
            f"{name}: expected exactly one '// kernelloop: editable begin' and one "
            f"'// kernelloop: editable end' marker, found {len(begins)} and {len(ends)}"
        )
    begin, end = begins[0], ends[0]
    if end.start() < begin.end():
        raise InputError(f"{name}: the editable end marker comes before the begin marker")
    preamble = text[: begin.start()]
    editable = text[begin.end() + 1 : end.start()]
    harness = text[end.end() + 1 :]
    if _defines_main(preamble) or _defines_main(editable):
        raise InputError(f"{name}: main() must lie below the editable part, in the harness")
    if not _defines_main(harness):
        raise InputError(f"{name}: no main() below the '// kernelloop: editable end' marker")
    items = scan_items(editable)
    exported, names = _declarations(items)
    if not any(i.is_device_item for i in items):
        raise InputError(f"{name}: the editable part holds no __global__ or __device__ code")
    harness_line = text.count("\n", 0, end.end()) + 2
    return ProgramSplit(
        mode="markers",
        preamble=headers.inline(preamble, 1, headers.resume),
        editable=editable,
        harness=headers.inline(harness, harness_line, "harness.cu"),
        exported=exported,
        exported_names=names,
        editable_line=text.count("\n", 0, begin.end()) + 2,
        harness_line=harness_line,
        source_frozen=preamble + harness,
    )


def _harness_header_below(split: ProgramSplit) -> ProgramSplit:
    """kernelloop_harness.cuh included above the editable part (at the top of the file, with the
    other includes, as people write them) is the harness's: it moves to the harness's own unit,
    where its include folder is given, so the editable part neither fails to find it nor sees it."""
    lines = split.preamble.split("\n")
    moved = False
    for k, line in enumerate(lines):
        m = _INCLUDE_LINE.match(line)
        if m and Path(m.group(1) or m.group(2)).name == TRUSTED_HARNESS_HEADER:
            lines[k], moved = "", True  # blanked, not removed: the preamble's line numbers stay
    if not moved:
        return split
    return split.model_copy(update={
        "preamble": "\n".join(lines),
        "harness": f"#include <{TRUSTED_HARNESS_HEADER}>\n#line {split.harness_line} \"harness.cu\"\n{split.harness}"})


def _split_by_default(text: str, name: str, headers: _Headers) -> ProgramSplit:
    items = scan_items(text)
    device_items = [i for i in items if i.is_device_item]
    if not device_items:
        raise InputError(f"{name}: no __global__ or __device__ code to optimize")
    # A host function that launches the file's kernels (not main) is a launcher: it chooses grid
    # and block, so it is editable with them; the harness calls it through its declaration.
    kernels = [function_name(i) or "" for i in device_items
               if i.is_function_definition and "__global__" in strip_comments(i.head)]
    launchers = [i for i in items if i.start > device_items[0].start and launched_kernels(i, kernels)]
    if not any(function_name(i) == "main" for i in items):
        raise _not_a_program_yet(name, text, "no main() (a kernel program is a whole program, its harness's "
                                 "main() calling the kernels)", [function_name(i) or "" for i in launchers])
    editable_items = sorted(device_items + launchers, key=lambda i: i.start)
    first = editable_items[0]
    preamble = text[: first.start]
    # Everything frozen after the first editable item is the harness, in source order,
    # each piece under a #line directive so compiler messages point at the real file.
    pieces: list[str] = []
    for item in items:
        if item.start < first.start or item in editable_items:
            continue
        piece = headers.inline(item.text, item.line, "harness.cu") if item.kind == "preproc" else item.text
        pieces.append(f"#line {item.line} \"harness.cu\"\n{piece}")
    editable = "\n".join(f"#line {i.line} \"editable.cu\"\n{i.text}" for i in editable_items)
    exported, names = _declarations(editable_items)
    return ProgramSplit(
        mode="default",
        preamble=headers.inline(preamble, 1, headers.resume),
        editable=editable,
        harness="\n".join(pieces),
        exported=exported,
        exported_names=names,
        editable_line=first.line,
        harness_line=first.line,
        notes=[_default_split_note(launchers, kernels)],
        source_frozen=preamble + "\n".join(i.text for i in items if i.start >= first.start and i not in editable_items),
    )


def _default_split_note(launchers: list[Item], kernels: list[str]) -> str:
    """What a split without markers made editable, in one sentence."""
    launched = [k for k in kernels if any(k in launched_kernels(item, kernels) for item in launchers)]
    if launchers:
        names = [function_name(i) or "" for i in launchers]
        note = (f"no markers: the launcher{'s' if len(names) > 1 else ''} {', '.join(names)} and "
                f"kernel{'s' if len(launched) > 1 else ''} {', '.join(launched)} are the editable part")
        rest = [k for k in kernels if k not in launched]
        if rest:
            note += f" (with {', '.join(rest)}, launched by the frozen harness with its own grid and block)"
        return note
    what = (f"kernels {', '.join(kernels)} are" if len(kernels) > 1 else
            f"kernel {kernels[0]} is" if kernels else "device code is")
    return f"no markers: the {what} the editable part; the frozen harness launches them, so grid and block stay as they are"


def _defines_main(text: str) -> bool:
    return any(function_name(i) == "main" and i.is_function_definition for i in scan_items(text))


def _declarations(items: list[Item]) -> tuple[list[str], list[str]]:
    """Declarations of the non-static functions an editable part defines."""
    decls: list[str] = []
    names: list[str] = []
    for item in items:
        if not item.is_function_definition:
            continue
        head = strip_comments(item.head).strip()
        if re.search(r"\b(static|inline|__forceinline__)\b", head) and "__global__" not in head:
            continue
        if re.match(r"^static\b", head):
            continue
        decls.append(" ".join(head.split()) + ";")
        names.append(function_name(item) or "")
    return decls, names


def candidate_editable_part(candidate: str, baseline: ProgramSplit, name: str = "candidate") -> tuple[str, list[str]]:
    """The editable part of a candidate file, with notes on what was ignored.

    (a) markers: the region between them; (b) no main(): the whole file;
    (c) a whole program without markers: every item but main() and the items it
    shares with the baseline's frozen code.
    """
    notes: list[str] = []
    begins, ends = list(BEGIN_MARKER.finditer(candidate)), list(END_MARKER.finditer(candidate))
    if begins or ends:
        if len(begins) != 1 or len(ends) != 1 or ends[0].start() < begins[0].end():
            raise InputError(f"{name}: malformed kernelloop editable markers")
        part = candidate[begins[0].end() + 1 : ends[0].start()]
        outside = normalized(candidate[: begins[0].start()] + candidate[ends[0].end() :])
        frozen = normalized(baseline.preamble + baseline.harness)
        if outside != frozen and outside != normalized(baseline.source_frozen):
            notes.append("the candidate's code outside the editable markers differs from the baseline's; it is ignored")
        return _drop_shared_items(part, baseline), notes
    items = scan_items(candidate)
    if not any(function_name(i) == "main" and i.is_function_definition for i in items):
        return _drop_shared_items(candidate, baseline), notes
    notes.append("the candidate is a whole program without markers: its main() is ignored, the baseline harness is used")
    frozen = {normalized(i.text) for i in scan_items(baseline.preamble + "\n" + baseline.harness + "\n"
                                                     + baseline.source_frozen)}
    kept = [
        i.text
        for i in items
        if not (function_name(i) == "main" and i.is_function_definition) and normalized(i.text) not in frozen
    ]
    return "\n".join(kept), notes


def _drop_shared_items(part: str, baseline: ProgramSplit) -> str:
    """Drop items the preamble already provides (repeated includes, constants)."""
    # The baseline's includes of its own headers as written count too: repeating one adds nothing
    # (the policy refuses any other include by path).
    preamble_items = {normalized(i.text) for i in scan_items(baseline.preamble + "\n" + baseline.source_frozen)
                      if i.start < len(baseline.preamble) or i.kind == "preproc" and "include" in i.text}
    out: list[str] = []
    last = 0
    for item in scan_items(part):
        if normalized(item.text) in preamble_items:
            out.append(part[last : item.start])
            last = item.end
    out.append(part[last:])
    return "".join(out)
