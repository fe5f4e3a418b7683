"""A launcher's own error reports, moved into frozen helpers by `kernelloop init`.

Real launchers print when a launch fails (`if (err != cudaSuccess) fprintf(stderr, "...: %s\\n",
cudaGetErrorString(err));`, kept-aside sets 7 and 9). Only the frozen part of a program may print
(verify/policy.py), and the launcher becomes the editable part, so such a file could not be
optimized. Each printing statement of the launcher is moved, as written, into a helper above it
that takes the launcher's variables it names (by value, as declared), and the statement is
replaced by a call of the helper. The helper is the user's code and stays frozen; a candidate may
call it, and can then print only the user's own format with numbers of its choice.

A statement is moved only where what a candidate could pass cannot turn printing into something
else: the format is a string literal without a `%n` conversion (which writes through a pointer
argument), the stream is `stdout` or `stderr` (a FILE* of the candidate's choosing hands libc a
structure to act on), and every variable it names is a number or a CUDA error code (a string
would be printed as the user's text: red team round 110 forged the harness's KERNEL_MS line with
one). Any other printing stays, and the static gate refuses it as before.
"""

from __future__ import annotations

import re

from .cuda_tree import Source, declared_names, walk
from .numeric_types import element_type
from .scanner import Item

# function -> (index of the format argument or None, index of the stream argument or None)
PRINTING = {
    "printf": (0, None), "fprintf": (1, 0), "puts": (None, None), "perror": (None, None),
    "fputs": (None, 1), "putchar": (None, None), "fputc": (None, 1), "putc": (None, 1), "fflush": (None, 0),
}
STREAMS = {"stdout", "stderr"}
_ERROR_TYPES = {"cudaError_t", "cudaError", "CUresult"}
WRITING_CONVERSION = re.compile(r"%[-+ #0'\d.*]*(?:hh|h|ll|l|j|z|t|L)?n")


def _literal(node) -> bool:
    """A string literal, or literals side by side: no macro in it (`"%" FMT` could spell `%n`)."""
    if node.type == "string_literal":
        return True
    return node.type == "concatenated_string" and all(c.type == "string_literal" for c in node.named_children)


def _printing_function(src: Source, callee) -> str | None:
    """The C library printing function a callee names: `fprintf`, or as C++ code spells it,
    `std::fprintf` or `::fprintf` (kept-aside set 10: a launcher's `std::fprintf` was refused)."""
    if callee is None or callee.type not in ("identifier", "qualified_identifier"):
        return None
    name = _unqualified(src.text_of(callee))
    return name if name in PRINTING else None


_STD_QUALIFIED = re.compile(r"(?:(?:::)?std::|::)?(\w+)")


def _unqualified(text: str) -> str | None:
    """`name` for `name`, `std::name` or `::name`; None for any other text."""
    found = _STD_QUALIFIED.fullmatch("".join(text.split()))
    return found.group(1) if found else None


def _movable(src: Source, call) -> bool:
    format_at, stream_at = PRINTING[_printing_function(src, call.child_by_field_name("function"))]
    args = [a for a in call.child_by_field_name("arguments").named_children if a.type != "comment"]
    if stream_at is not None and (len(args) <= stream_at or _unqualified(src.text_of(args[stream_at])) not in STREAMS):
        return False
    if format_at is not None:
        if len(args) <= format_at or not _literal(args[format_at]):
            return False
        if WRITING_CONVERSION.search(src.text_of(args[format_at]).replace("%%", "")):
            return False
    return True


def _number_variables(src: Source) -> dict[str, str]:
    """The launcher's parameters and locals declared as a number or a CUDA error code (no pointer,
    array or reference), by name: their type as written, without qualifiers."""
    out: dict[str, str] = {}
    for node in walk(src.root):
        if node.type not in ("parameter_declaration", "declaration"):
            continue
        kind = node.child_by_field_name("type")
        spelled = " ".join(w for w in src.text_of(kind).split() if w not in ("const", "volatile")) if kind else ""
        for declarator in node.children_by_field_name("declarator"):
            target = declarator.child_by_field_name("declarator") if declarator.type == "init_declarator" else declarator
            if target is None or target.type != "identifier":
                continue  # a pointer, array, reference or function declarator
            if spelled and (element_type(spelled) is not None or spelled in _ERROR_TYPES or spelled == "bool"):
                out[src.text_of(target)] = spelled
    return out


def move_printing_out(source: str, launcher: Item, launcher_name: str) -> tuple[str, list[str]]:
    """`source` with the launcher's movable printing statements moved into helpers placed just
    before it (in its scope), and a note per helper; `source` unchanged when there is none."""
    src = Source(launcher.text)
    local = declared_names(launcher.text) - {launcher_name}
    numbers = _number_variables(src)
    moved: list[tuple[int, int, str, str, str]] = []  # (start, end, replacement, helper, its definition)
    for node in walk(src.root):
        if node.type != "expression_statement" or not node.named_children:
            continue
        call = node.named_children[0]
        callee = call.child_by_field_name("function") if call.type == "call_expression" else None
        if _printing_function(src, callee) is None:
            continue
        if not _movable(src, call):
            continue
        named: list[str] = []
        for leaf in walk(call.child_by_field_name("arguments")):
            word = src.text_of(leaf)
            if leaf.type == "identifier" and word in local and word not in named:
                named.append(word)
        if any(n not in numbers for n in named):
            # a string, pointer or object the candidate could hand over: its text would be printed
            # as the user's (red team round 110: a `%s` stage name carrying a forged KERNEL_MS line)
            continue
        helper = f"kl_{launcher_name}_report_{len(moved) + 1}"
        statement = src.text_of(node)
        params = ", ".join(f"const {numbers[n]} {n}" for n in named)
        definition = f"static void {helper}({params}) {{ {statement} }}"
        start, end = src.span(node)
        moved.append((start, end, f"{helper}({', '.join(named)});", helper, definition))
    if not moved:
        return source, []
    text = launcher.text
    for start, end, replacement, _, _ in reversed(moved):
        text = text[:start] + replacement + text[end:]
    helpers = "".join(
        f"// moved out of {launcher_name} by kernelloop init: only frozen code prints\n{definition}\n\n"
        for *_, definition in moved)
    plural = "s" if len(moved) > 1 else ""
    note = (f"{launcher_name}'s printing statement{plural} moved, as written, into frozen helper{plural} above it "
            f"({', '.join(m[3] for m in moved)}): only frozen code prints")
    return source[:launcher.start] + helpers + text + source[launcher.end:], [note]
