"""A program's own macros, and code as it reads once they are expanded.

What a statement does can hide in a macro of the program: `#define LAUNCH_CHECK n /= 2, cudaGetLastError`
makes `LAUNCH_CHECK();` an assignment (red team round 102). Whoever judges a statement by its
syntax reads its expansion instead. This expands only what it can expand as the preprocessor
would, and says so (None) for anything else: callers fail closed on None. Which definition is
in force where is read only in the plain case: a name defined once, outside any conditional
group (kernelloop's own include guards aside), before the code that uses it. A name defined twice, undefined
somewhere, defined inside `#if`/`#ifdef` (the compiler may skip it: red team round 103, a
`#define mark_pending(r) cudaSuccess` under `#if !REDUCE_MARKERS`) or defined after the code is
uncertain; so are token pasting and a macro that never stops expanding.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .scanner import strip_comments

_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)(\([^)]*\))?(.*)$")
_UNDEF = re.compile(r"^[ \t]*#[ \t]*undef[ \t]+([A-Za-z_]\w*)")
_OPEN = re.compile(r"^[ \t]*#[ \t]*(if|ifdef|ifndef)\b[ \t]*([A-Za-z_]\w*)?")
_CLOSE = re.compile(r"^[ \t]*#[ \t]*endif\b")
_BRANCH = re.compile(r"^[ \t]*#[ \t]*(?:else|elif|elifdef|elifndef)\b")
# kernelloop's own guard around a header it inlined in place of `#pragma once` (program.split):
# its name is made there, so nothing else defines it. A user's `#ifndef X / #define X` is read as
# any other condition: a header or a build flag may define X (red team round 104: CUDART_VERSION).
_OWN_GUARD = re.compile(r"KL_PRAGMA_ONCE_[0-9a-f]+")
_DIRECTIVE = re.compile(r"^[ \t]*#")
_TOKEN = re.compile(r'"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'|[A-Za-z_]\w*|\d[\w.\']*|##|.', re.S)


@dataclass(frozen=True)
class Macro:
    name: str
    params: tuple[str, ...] | None  # None: object-like
    variadic: bool
    body: str


@dataclass(frozen=True)
class Macros:
    defined: dict[str, Macro]
    uncertain: frozenset[str]  # defined more than once, or undefined somewhere: which one is in force is not read

    def __contains__(self, name: str) -> bool:
        return name in self.defined or name in self.uncertain

    def names_in(self, text: str) -> set[str]:
        """The program's macros that TEXT names (outside its string and character literals)."""
        return {t for t in _TOKEN.findall(strip_comments(text)) if t in self}


def program_macros(*texts: str, later: str = "") -> Macros:
    """Every `#define` of the texts (splices joined, `%:` read as `#`), object-like and function-like;
    a name LATER (the code after the point of use) defines is uncertain."""
    code = strip_comments("\n".join(texts)).replace("\\\r\n", "").replace("\\\n", "").replace("%:", "#")
    lines = code.split("\n")
    directives = [(i, line) for i, line in enumerate(lines) if _DIRECTIVE.match(line)]
    defined: dict[str, Macro] = {}
    uncertain: set[str] = set()
    counts: dict[str, int] = {}
    for _, line in directives:
        if m := _DEFINE.match(line):
            counts[m.group(1)] = counts.get(m.group(1), 0) + 1
    depth = 0  # conditional groups open, include guards aside
    guards: list[bool] = []
    for k, (_, line) in enumerate(directives):
        if m := _OPEN.match(line):
            # kernelloop's own include guard (`#ifndef KL_PRAGMA_ONCE_... / #define` it): entered once
            following = _DEFINE.match(directives[k + 1][1]) if k + 1 < len(directives) else None
            guard = m.group(1) == "ifndef" and following is not None and following.group(1) == m.group(2) \
                and _OWN_GUARD.fullmatch(m.group(2) or "") is not None and counts.get(m.group(2) or "", 0) == 1
            guards.append(guard)
            depth += 0 if guard else 1
            continue
        if _BRANCH.match(line):
            if guards and guards[-1]:  # another branch of a guard: a condition after all (round 104)
                guards[-1] = False
                depth += 1
            continue
        if _CLOSE.match(line):
            if guards:
                depth -= 0 if guards.pop() else 1
            continue
        if m := _UNDEF.match(line):
            uncertain.add(m.group(1))
            continue
        m = _DEFINE.match(line)
        if m is None:
            continue
        name, params = m.group(1), m.group(2)
        words = [p.strip() for p in params[1:-1].split(",") if p.strip()] if params is not None else None
        variadic = bool(words) and words[-1].endswith("...")
        if variadic:
            words[-1] = words[-1][:-3].strip() or "__VA_ARGS__"
        macro = Macro(name, tuple(words) if words is not None else None, variadic, m.group(3).strip())
        if depth > 0 or (name in defined and defined[name] != macro):
            uncertain.add(name)
        defined[name] = macro
    after = strip_comments(later).replace("\\\r\n", "").replace("\\\n", "").replace("%:", "#")
    uncertain |= {m.group(1) for line in after.split("\n") if (m := _DEFINE.match(line))}
    return Macros({k: v for k, v in defined.items() if k not in uncertain}, frozenset(uncertain))


def _arguments(tokens: list[str], at: int) -> tuple[list[str], int] | None:
    """The arguments of a call whose `(` is tokens[at], and the index after its `)`."""
    depth, args, current = 0, [], []
    for i in range(at, len(tokens)):
        t = tokens[i]
        if t == "(":
            depth += 1
            if depth == 1:
                continue
        elif t == ")":
            depth -= 1
            if depth == 0:
                args.append("".join(current).strip())
                return args, i + 1
        elif t == "," and depth == 1:
            args.append("".join(current).strip())
            current = []
            continue
        current.append(t)
    return None


def _substituted(macro: Macro, args: list[str]) -> str | None:
    params = list(macro.params or ())
    if args == [""] and not params:
        args = []
    if macro.variadic:
        fixed = len(params) - 1
        if len(args) < fixed:
            return None
        args = args[:fixed] + [", ".join(args[fixed:])]
    if len(args) != len(params):
        return None
    tokens = _TOKEN.findall(macro.body)
    out: list[str] = []
    i = 0
    while i < len(tokens):
        t = tokens[i]
        if t == "##":
            return None  # a name pasted together could be any name
        if t == "#":
            j = i + 1
            while j < len(tokens) and tokens[j].isspace():
                j += 1
            if j < len(tokens) and tokens[j] in params:
                out.append('"kl_stringified"')
                i = j + 1
                continue
        out.append(args[params.index(t)] if t in params else t)
        i += 1
    return "".join(out)


def expand(text: str, macros: Macros, rounds: int = 16, limit: int = 200_000) -> str | None:
    """TEXT with the program's macros expanded, or None where that cannot be read for sure."""
    code = strip_comments(text)
    for _ in range(rounds):
        tokens = _TOKEN.findall(code)
        out: list[str] = []
        changed = False
        i = 0
        while i < len(tokens):
            t = tokens[i]
            if t in macros.uncertain:
                return None
            macro = macros.defined.get(t)
            if macro is None:
                out.append(t)
                i += 1
                continue
            if macro.params is None:
                out.append(f" {macro.body} ")
                changed, i = True, i + 1
                continue
            j = i + 1
            while j < len(tokens) and tokens[j].isspace():
                j += 1
            if j >= len(tokens) or tokens[j] != "(":
                out.append(t)  # a function-like macro's name not called is only a name
                i += 1
                continue
            found = _arguments(tokens, j)
            if found is None:
                return None
            args, after = found
            replaced = _substituted(macro, args)
            if replaced is None:
                return None
            out.append(f" {replaced} ")
            changed, i = True, after
        code = "".join(out)
        if len(code) > limit:
            return None
        if not changed:
            return code
    return None
