"""Split CUDA C++ source into top-level items without a full parser.

The scanner understands just enough of the language to find where each top-level
declaration ends: comments, string and character literals, preprocessor lines (with
continuations) and bracket depth. That is all the editable/frozen split needs.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

_SPECIFIER_WORDS = ("struct", "class", "union", "enum", "typedef", "using")


@dataclass(frozen=True)
class Item:
    """One top-level piece of a translation unit."""

    kind: str  # "preproc" | "code"
    text: str
    start: int  # offset in the source
    end: int  # offset one past the item
    line: int  # 1-based line of `start`
    # The blocks the item sits in, outermost first, as opened (`namespace act`, `namespace`,
    # `extern "C"`): empty for a top-level item (scoped_items fills it).
    scope: tuple[str, ...] = ()

    @property
    def head(self) -> str:
        """The text before a function body (or the whole item when there is none)."""
        body = body_start(self.text)
        return self.text if body is None else self.text[:body]

    @property
    def is_function_definition(self) -> bool:
        return self.kind == "code" and function_name(self) is not None and body_start(self.text) is not None

    @property
    def is_device_item(self) -> bool:
        head = strip_comments(self.head)
        return self.kind == "code" and bool(re.search(r"\b(__global__|__device__|__constant__)\b", head))


# A line splice as gcc and nvcc read one: a backslash, optional whitespace, a newline.
SPLICE = re.compile(r"\\[ \t\f\v]*(?:\r\n|\r|\n)")  # a lone CR ends a line too (round 157)


def preprocessed(text: str) -> str:
    """TEXT as the preprocessor's first phases leave it, for reading directives: line splices
    joined first (a backslash, then optional whitespace, then a newline, as gcc and nvcc read
    it), then each comment one space, even one that spans lines, so a directive it crosses goes on
    (red team round 150: `#define W(t) C - sizeof "ab" /* ... */ #t` over two lines, read as
    ending at the comment). String literals are kept, a raw string's lines joined into one: a
    line inside it that starts with `#` is no directive (red team round 151: a `#define` in an
    `R"(...)"` read as the program's); line numbers are not kept."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")  # phase 1: a lone CR ends a line too (round 157)
    return _comments_replaced(SPLICE.sub("", text), lambda comment: " " * len(comment),
                              lambda literal: literal.replace("\n", " "))


def blank_comments(text: str) -> str:
    """TEXT with every character of every comment a space, its newlines too (as the preprocessor
    reads a comment: one space), string literals kept; offsets are TEXT's."""
    return _comments_replaced(text, lambda comment: " " * len(comment))


def strip_comments(text: str) -> str:
    """Remove comments, keep string literals and line structure."""
    return _comments_replaced(text, lambda comment: "" if comment.startswith("//") else "\n" * comment.count("\n") or " ")


def _comments_replaced(text: str, replace, literal=lambda kept: kept) -> str:
    """TEXT with each comment (`//` up to its line's end, `/* */`) replaced by REPLACE(comment), and
    each string or character literal by LITERAL(literal)."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            end = n if j < 0 else j
            out.append(replace(text[i:end]))
            i = end
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            end = n if j < 0 else j + 2
            out.append(replace(text[i:end]))
            i = end
        elif c == "'" and in_number(text, i):  # a digit separator (1'000), not a character literal
            out.append(c)
            i += 1
        elif c in "\"'":
            j = _skip_literal(text, i)
            out.append(literal(text[i:j]))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def split_top_level(text: str, sep: str = ",") -> list[str]:
    """`text` cut at its top-level `sep` (commas unless told: not inside <>, (), [] or a braced
    list), each piece stripped, an empty last piece dropped."""
    parts, depth, cur = [], 0, ""
    for ch in text:
        depth += ch in "(<[{" and 1 or 0
        depth -= ch in ")>]}" and 1 or 0
        if ch == sep and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        parts.append(cur.strip())
    return parts


def in_number(text: str, i: int) -> bool:
    """Whether the quote at i is a digit separator inside a preprocessing number (C++14: 1'000,
    0xFF'FF), read as the compiler reads: forward, token by token from the text's start
    (number_quotes). A backward look from the quote could not know where the number began: red
    team round 154's `a.1'x'"', __LINE__, '"'` (`.1'x` is a number after the name `a`; the compiler
    then reads the character '"') put the scanner one quote out of step, and `__LINE__` inside a
    "string"; rounds 55 and 57 (`1'0`, `1e+'a`) and 153 (`1'('`: the number 1, then '(')."""
    return i in number_quotes(text)


# Preprocessing tokens for telling a number's quote from a literal's (C++ [lex.pptoken]): comments,
# raw strings, string and character literals with their encoding prefix (a literal not closed on
# its line ends there), pp-numbers (a `'` joins one only before a digit, a letter or `_`; an
# exponent's sign belongs to it), names (a literal's prefix is never a name's tail: names are read
# whole), anything else one character.
_PP_TOKEN = re.compile(
    r"(?P<comment>//[^\n]*|/\*.*?(?:\*/|\Z))"
    r'|(?P<raw>(?:u8|u|U|L)?R"(?P<delim>[^()\\\s]{0,16})\(.*?\)(?P=delim)")'
    r'|(?P<literal>(?:u8|u|U|L)?(?:"(?:\\.|[^"\\\n])*"?|\'(?:\\.|[^\'\\\n])*\'?))'
    r"|(?P<number>\.?\d(?:[eEpP][+-]|'[A-Za-z0-9_]|[\w.])*)"
    r"|(?P<name>[A-Za-z_$][\w$]*)"
    r"|.", re.S)


def literal_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of every string, character and raw string literal of TEXT, its encoding prefix
    with it, read forward into preprocessing tokens as the compiler reads them (red team round
    155: a raw string holding a quote, `R"a(")a"`, read by a plain literal pattern as two strings,
    hid the `__LINE__` between them)."""
    return [(m.start(), m.end()) for m in _PP_TOKEN.finditer(text) if m.lastgroup in ("raw", "literal")]


@functools.lru_cache(maxsize=64)
def number_quotes(text: str) -> frozenset[int]:
    """The offsets of every quote of TEXT that is a digit separator inside a number, TEXT read
    forward into preprocessing tokens as the compiler reads it."""
    found: set[int] = set()
    for m in _PP_TOKEN.finditer(text):
        if m.lastgroup == "number" and "'" in m.group(0):
            found.update(m.start() + k for k, ch in enumerate(m.group(0)) if ch == "'")
    return frozenset(found)


def without_literals(text: str) -> str:
    """`text` without comments, and with every string and character literal emptied (`""`): code
    only, for searches for names (a message naming a kernel is no call of it)."""
    clean = strip_comments(text)
    out: list[str] = []
    i = 0
    while i < len(clean):
        c = clean[i]
        if c in "\"'" and not (c == "'" and in_number(clean, i)):
            j = _skip_literal(clean, i)
            out.append(c + c)
            i = j
            continue
        out.append(c)
        i += 1
    return "".join(out)


_RAW_PREFIX = re.compile(r"(?:^|[^\w$])(?:u8|[uUL])?R$")


def _skip_literal(text: str, i: int) -> int:
    """Return the offset just past the string/char literal starting at i."""
    quote = text[i]
    # raw string R"delim( ... )delim": R (or LR, uR, UR, u8R) as a token of its own, not the end of a
    # name (`KL_R"("` is a name and a plain string: red team round 129 hid code between two strings)
    if quote == '"' and _RAW_PREFIX.search(text[max(0, i - 4):i]):
        m = re.match(r'"([^()\\\s]{0,16})\(', text[i:])
        if m:
            close = ")" + m.group(1) + '"'
            j = text.find(close, i + m.end())
            return len(text) if j < 0 else j + len(close)
    j = i + 1
    while j < len(text):
        if text[j] == "\\":
            j += 2
            continue
        if text[j] == quote or text[j] == "\n":
            return j + 1
        j += 1
    return j


def scan_items(source: str) -> list[Item]:
    """Split `source` into top-level items (preprocessor lines and declarations)."""
    items: list[Item] = []
    i, n = 0, len(source)
    item_start: int | None = None
    depth = 0
    saw_brace_at_top = False

    def line_of(offset: int) -> int:
        return source.count("\n", 0, offset) + 1

    def close_item(end: int) -> None:
        nonlocal item_start, saw_brace_at_top
        assert item_start is not None
        text = source[item_start:end]
        if text.strip():
            items.append(Item("code", text, item_start, end, line_of(item_start)))
        item_start = None
        saw_brace_at_top = False

    at_line_start = True
    while i < n:
        c = source[i]
        if source.startswith("//", i):
            j = source.find("\n", i)
            i = n if j < 0 else j
            continue
        if source.startswith("/*", i):
            j = source.find("*/", i + 2)
            i = n if j < 0 else j + 2
            continue
        if c == "\n":
            at_line_start = True
            i += 1
            continue
        if c in " \t\r\f\v":
            i += 1
            continue
        if c == "#" and at_line_start and depth == 0 and item_start is None:
            j = i
            while True:
                k = source.find("\n", j)
                if k < 0:
                    k = n
                    break
                if source[k - 1 : k] == "\\" or source[k - 2 : k] == "\\\r":
                    j = k + 1
                    continue
                break
            items.append(Item("preproc", source[i:k], i, k, line_of(i)))
            i = k
            continue
        at_line_start = False
        if item_start is None:
            item_start = i
        if c in "\"'":
            i = _skip_literal(source, i)
            continue
        if c in "({[":
            if c == "{" and depth == 0:
                saw_brace_at_top = True
            depth += 1
        elif c in ")}]":
            depth = max(0, depth - 1)
            if c == "}" and depth == 0 and _ends_at_brace(source[item_start : i + 1]):
                close_item(i + 1)
                i += 1
                continue
        elif c == ";" and depth == 0:
            close_item(i + 1)
            i += 1
            continue
        i += 1
    if item_start is not None:
        close_item(n)
    _ = saw_brace_at_top
    return items


_BLOCK_OPENER = re.compile(r'^\s*((?:inline\s+)?namespace\b[^{;=]*|extern\s*"C(?:\+\+)?")\s*\{')


def scoped_items(source: str) -> list[Item]:
    """scan_items with namespace and `extern "C" {}` blocks opened: the items inside them, each with
    the blocks it sits in (`scope`), in source order. A kernel and its launcher inside
    `namespace act { ... }` or an anonymous namespace (PyTorch extensions) are items like any other."""
    out: list[Item] = []

    def walk(text: str, offset: int, scope: tuple[str, ...]) -> None:
        for item in scan_items(text):
            clean = strip_comments(item.text)
            opener = _BLOCK_OPENER.match(clean) if item.kind == "code" else None
            if opener is None or not clean.rstrip().endswith("}"):
                out.append(Item(item.kind, item.text, item.start + offset, item.end + offset,
                                source.count("\n", 0, item.start + offset) + 1, scope))
                continue
            open_at = _map_offset(item.text, clean, opener.end() - 1)
            close_at = item.text.rstrip().rfind("}")
            walk(item.text[open_at + 1:close_at], offset + item.start + open_at + 1,
                 (*scope, " ".join(opener.group(1).split())))

    walk(source, 0, ())
    return out


def scope_qualifier(scope: tuple[str, ...]) -> str:
    """How code outside every block names what `scope` holds: `a::b::` for `namespace a`,
    `namespace b`; nothing for an anonymous namespace (its names are visible around it) or an
    extern "C" block."""
    names = [re.sub(r"^(?:inline\s+)?namespace\s*", "", block).strip() for block in scope if "namespace" in block]
    return "".join(f"{name}::" for name in names if name)


def in_scope(item: Item, text: str | None = None) -> str:
    """The item's text (or TEXT in its place) inside its blocks again (namespaces reopen; one unnamed
    namespace per unit)."""
    text = item.text if text is None else text
    for block in reversed(item.scope):
        text = f"{block} {{\n{text}\n}}  // {block}"
    return text


def _ends_at_brace(text: str) -> bool:
    """A brace-closed item with no trailing ';': function bodies, namespaces, extern blocks."""
    head = strip_comments(text[: text.index("{")] if "{" in text else text).strip()
    if re.match(r"^(namespace\b|extern\s*\"C\")", head):
        return True
    # a type's head keeps its parenthesized attributes (`template <...> struct alignas(sizeof(T) * N)
    # v {`, `struct __align__(16) p {`): they are no parameter list, and the item ends at its `;`
    words = re.findall(r"[A-Za-z_]\w*", _without_template_head(head))
    if words and words[0] in _SPECIFIER_WORDS:
        return False
    if re.search(r"=\s*$", head):  # aggregate initializer: `int x[] = {...};`
        return False
    return "(" in head


def body_start(text: str) -> int | None:
    """Offset of the `{` that opens a function body at depth 0, if any."""
    clean = strip_comments(text)
    depth = 0
    i = 0
    while i < len(clean):
        c = clean[i]
        if c in "\"'":
            i = _skip_literal(clean, i)
            continue
        if c in "([":
            depth += 1
        elif c in ")]":
            depth -= 1
        elif c == "{" and depth == 0:
            head = clean[:i]
            if "(" in head and not re.search(r"=\s*$", head):
                return _map_offset(text, clean, i)
            return None
        elif c == ";" and depth == 0:
            return None
        i += 1
    return None


def _map_offset(original: str, clean: str, clean_offset: int) -> int:
    """strip_comments keeps non-comment characters in order, so count them back."""
    # Fast path: comments rarely precede a body; when lengths agree the offsets do too.
    if len(original) == len(clean):
        return clean_offset
    target = clean[: clean_offset + 1].count("{")
    seen = 0
    i = 0
    while i < len(original):
        if original.startswith("//", i):
            j = original.find("\n", i)
            i = len(original) if j < 0 else j
            continue
        if original.startswith("/*", i):
            j = original.find("*/", i + 2)
            i = len(original) if j < 0 else j + 2
            continue
        if original[i] in "\"'":
            i = _skip_literal(original, i)
            continue
        if original[i] == "{":
            seen += 1
            if seen == target:
                return i
        i += 1
    return clean_offset


def function_name(item: Item) -> str | None:
    """Name of the function an item declares or defines (None for other items)."""
    if item.kind != "code":
        return None
    # a linkage specification on this one declaration (`extern "C" cudaError_t f(...) {`, not a block)
    head = re.sub(r'^\s*extern\s*"C(?:\+\+)?"\s*(?=[A-Za-z_])', "", _without_template_head(strip_comments(item.head)))
    first = re.findall(r"[A-Za-z_]\w*", head)
    if first and first[0] in _SPECIFIER_WORDS + ("namespace", "extern", "static_assert"):
        if not (first[0] == "extern" and len(first) > 1 and first[1] != "C"):
            return None
    # The parameter list is the last top-level (...) group in the head.
    depth = 0
    close = None
    for idx in range(len(head) - 1, -1, -1):
        ch = head[idx]
        if ch == ")":
            if depth == 0:
                close = idx
            depth += 1
        elif ch == "(":
            depth -= 1
            if depth == 0 and close is not None:
                before = head[:idx].rstrip()
                m = re.search(r"(~?[A-Za-z_]\w*(?:\s*<[^<>]*>)?)\s*$", before)
                if not m:
                    return None
                name = re.sub(r"\s*<.*", "", m.group(1))
                if name in {"__launch_bounds__", "__attribute__", "__declspec", "alignas", "decltype"}:
                    return None
                if "=" in before[: m.start()] and not before[: m.start()].rstrip().endswith("operator"):
                    return None
                return name
    return None


def _without_template_head(head: str) -> str:
    """`head` without its leading `template <...>` lists (their default arguments hold `=`)."""
    while m := re.match(r"\s*template\s*<", head):
        depth, i = 1, m.end()
        while i < len(head) and depth:
            depth += {"<": 1, ">": -1}.get(head[i], 0)
            i += 1
        head = head[i:]
    return head


def normalized(text: str) -> str:
    """Whitespace- and comment-insensitive form, for comparing items."""
    return " ".join(strip_comments(text).split())


# What launches a kernel from host code: the triple-chevron syntax or the runtime's launch calls.
_LAUNCH = re.compile(r"<<<|\bcudaLaunch(?:Cooperative)?Kernel(?:Ex|ExC)?\b")


def is_host_function(item: Item) -> bool:
    """A host function definition (`__host__ __device__` ones count as device code)."""
    return item.is_function_definition and not item.is_device_item


def launched_kernels(item: Item, kernels: list[str]) -> list[str]:
    """Which of `kernels` a host function launches (<<<...>>>, cudaLaunchKernel and its Ex and
    cooperative forms), in the order given; empty when it launches none of them."""
    if not is_host_function(item) or function_name(item) == "main":
        return []
    body = strip_comments(item.text[body_start(item.text) or 0:])
    if not _LAUNCH.search(body):
        return []
    return [k for k in kernels if re.search(rf"\b{re.escape(k)}\b", body)]
