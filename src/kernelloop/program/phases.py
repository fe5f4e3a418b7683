"""Whether a program's text means to the optimizer's readers what it means to the compiler.

The compiler reads a program after translation phases 1-3: trigraphs replaced (in ISO dialects
before C++17), backslash-newlines joined (a backslash with blanks after it too, as gcc reads it),
form feeds and vertical tabs taken as blanks, digraphs taken as their punctuators. The optimizer's
readers (tree-sitter, the scanner, regexes) read the physical text, and some of them join splices
and some do not (red team rounds 129-130: a splice inside a name or a raw string's prefix, a
vertical tab between `#define` and a keyword). Rather than teaching every reader each phase, a
program is read only where the phases change nothing a reader could see: a splice only inside a
directive, between tokens (a blank on one side, no `//` comment on its line); no form feed or
vertical tab beside code; no trigraph; no digraph outside comments and literals.
"""

from __future__ import annotations

import re

from .scanner import SPLICE, strip_comments, without_literals

# gcc joins a backslash followed by blanks and a newline (with a warning), not only `\` newline.
_DIRECTIVE_START = re.compile(r"[ \t\f\v]*(?:#|%:|\?\?=)")
_TRIGRAPH = re.compile(r"\?\?[=/'()!<>\-]")
_DIGRAPH = re.compile(r"<:|:>|<%|%>|%:")
# Characters that are a token of their own whatever stands beside them: a splice next to one
# joins no two tokens into one (`abort();\` newline `} while (0)`).
_SEPARATE = re.compile(r"[\s;{}(),\[\]~]")


# A raw string literal (its prefix a token of its own), lazily to its closing delimiter.
_RAW_STRING = re.compile(r'(?<![\w])(?:u8|u|U|L)?R"([^()\\ \t\n\f\v]{0,16})\((.*?)\)\1"', re.S)


def spliced_raw_string(text: str) -> int | None:
    """Where TEXT has a raw string literal holding a backslash-newline, or None. C++ keeps a splice
    inside a raw string as written, and g++ and the optimizer's readers do; nvcc 13.0 joins it (red
    team round 131: code after the splice built by nvcc and read as string data by every reader).
    Read on the physical text, so a raw string that is not one to the compiler (inside a comment)
    only costs a refusal."""
    for m in _RAW_STRING.finditer(text):
        if SPLICE.search(m.group(2)) or "??/" in m.group(2):
            return m.start()
    return None


def unread_spelling(text: str) -> str | None:
    """Why TEXT's words may not be what the compiler builds (a line splice outside a directive or
    inside a token, a `//` comment continued by a splice, a form feed or vertical tab beside code,
    a trigraph, a digraph), or None where every reader reads what the compiler reads."""
    if (raw := spliced_raw_string(text)) is not None:
        return (f"line {text.count(chr(10), 0, raw) + 1} has a raw string holding a line splice, which nvcc joins "
                "and the C++ standard (and every other reader) keeps")
    lines = text.split("\n")
    in_directive = False
    for number, line in enumerate(lines, 1):
        if not in_directive:
            in_directive = bool(_DIRECTIVE_START.match(line))
        splice = SPLICE.search(line + "\n")
        if re.search(r"[\f\v]", line) and line.strip(" \t\f\v\r"):
            return f"line {number} has a form feed or vertical tab beside code, which the compiler reads as a blank"
        if splice is None or splice.end() != len(line) + 1:
            in_directive = False
            continue
        if not in_directive:
            return (f"line {number} ends in a line splice outside a directive (the compiler joins it with the "
                    "next line, which not every reader does)")
        if "//" in line:
            return f"line {number} ends in a line splice after a `//` comment, which continues the comment"
        before = line[:splice.start()]
        after = lines[number] if number < len(lines) else ""
        if len(re.findall(r'(?<!\\)"', before)) % 2:
            return f"line {number} ends in a line splice inside a string literal"
        if before and after and not (_SEPARATE.match(before[-1]) or _SEPARATE.match(after[0])):
            return f"line {number}'s line splice joins two tokens' characters, which not every reader does"
    if _TRIGRAPH.search(text):
        return "the program spells a trigraph, which some dialects read as another character"
    if (digraph := _DIGRAPH.search(without_literals(strip_comments(text)))) and not _namespace_after_less(
            without_literals(strip_comments(text)), digraph):
        return f"the program spells the digraph {digraph.group(0)!r}, which not every reader reads as the compiler does"
    return None


def _namespace_after_less(code: str, first: re.Match[str]) -> bool:
    """Whether every digraph of CODE is `<::` read as `<` `::` (C++11: `vector<::ns::T>`)."""
    for m in _DIGRAPH.finditer(code, first.start()):
        if not (m.group(0) == "<:" and code[m.start():m.start() + 3] == "<::"
                and code[m.start() + 3:m.start() + 4] not in (":", ">")):
            return False
    return True
