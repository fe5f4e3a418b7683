"""A program's own macros, and code as it reads once they are expanded.

What a statement does can hide in a macro of the program: `#define LAUNCH_CHECK n /= 2, cudaGetLastError`
makes `LAUNCH_CHECK();` an assignment (red team round 102). Whoever judges a statement by its
syntax reads its expansion instead. This expands only what it can expand as the preprocessor
would, and says so (None) for anything else: callers fail closed on None. Which definition is
in force where is read only in the plain case: a name defined once, outside any conditional
group (kernelloop's own include guards aside), before the code that uses it. A name defined twice, undefined
somewhere (but between `#pragma push_macro` and `pop_macro` around directives only, as init sets
the program's macros aside around its headers), defined inside `#if`/`#ifdef` (the compiler may skip it: red team round 103, a
`#define mark_pending(r) cudaSuccess` under `#if !REDUCE_MARKERS`) or defined after the code is
uncertain; so are token pasting and a macro that never stops expanding.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .scanner import preprocessed, strip_comments

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
# `#pragma push_macro("X")` ... `#undef X` ... `#pragma pop_macro("X")`: how init sets the program's macros aside
# around the harness's headers (a macro N would expand inside them); after the pop X is what it was before the push
_PUSH_POP = re.compile(r'^[ \t]*#[ \t]*pragma[ \t]+(push|pop)_macro[ \t]*\([ \t]*"([A-Za-z_]\w*)"[ \t]*\)[ \t]*$')
# Preprocessing tokens: a raw string whole (a macro's name inside one is text: red team round 152),
# string and character literals with their encoding prefix and user-defined suffix (`L"ab"` and
# `"ab"_n` are one token each, whatever macros L or _n name: round 153), names, pp-numbers (`1e+E`
# is one: an exponent's sign belongs to it; a `'` joins only before a digit, letter or `_`), `##`,
# any other character. Matched from each token's start, so a prefix is never a name's tail.
_TOKEN = re.compile(r'(?:u8|u|U|L)?R"(?P<delim>[^()\\\s]{0,16})\((?:.|\n)*?\)(?P=delim)"(?:[A-Za-z_]\w*)?'
                    r'|(?:u8|u|U|L)?(?:"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\')(?:[A-Za-z_]\w*)?'
                    r"|[A-Za-z_$][\w$]*|\.?\d(?:[eEpP][+-]|'[A-Za-z0-9_]|[\w.])*|##|.", re.S)


def _tokens(text: str) -> list[str]:
    return [m.group(0) for m in _TOKEN.finditer(text)]


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
        return {t for t in _tokens(strip_comments(text)) if t in self}


def macro_body_words(*texts: str) -> set[str]:
    """Every name the body of any `#define` of the texts writes, its own parameters aside, whatever
    conditional group the definition stands in: the names a macro's expansion may bring into code
    that does not show them (red team round 149: a loop bound `WORDS` that expands to
    `sizeof(T)`)."""
    code = preprocessed("\n".join(texts)).replace("%:", "#")
    words: set[str] = set()
    for line in code.split("\n"):
        if m := _DEFINE.match(line):
            params = set(re.findall(r"[A-Za-z_]\w*", m.group(2) or ""))
            words |= {t for t in _tokens(m.group(3)) if re.fullmatch(r"[A-Za-z_]\w*", t)} - params
    return words


def pasting_macros(*texts: str) -> set[str]:
    """The macros of the texts, in any conditional group, whose expansion may paste tokens together: a `##` in
    their body or in the body of a macro they name (a name made so appears nowhere in the text)."""
    return macros_writing({"##", "%:%:"}, *texts)


def macros_writing(words: set[str], *texts: str) -> set[str]:
    """The macros of the texts, in any conditional group, whose expansion may write one of WORDS (tokens): in
    their body or in the body of a macro they name."""
    code = preprocessed("\n".join(texts)).replace("%:", "#")
    bodies: dict[str, set[str]] = {}
    pasting: set[str] = set()
    for line in code.split("\n"):
        if m := _DEFINE.match(line):
            body = _tokens(m.group(3))
            bodies.setdefault(m.group(1), set()).update(body)
            if words & set(body) or any(w in m.group(3) for w in words if not re.fullmatch(r"\w+", w)):
                pasting.add(m.group(1))
    grown = True
    while grown:
        more = {name for name, words in bodies.items() if name not in pasting and words & pasting}
        pasting |= more
        grown = bool(more)
    return pasting


def program_macros(*texts: str, later: str = "") -> Macros:
    """Every `#define` of the texts (splices joined, `%:` read as `#`), object-like and function-like;
    a name LATER (the code after the point of use) defines is uncertain."""
    code = preprocessed("\n".join(texts)).replace("%:", "#")
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
    # name -> (line, definition, uncertain) of each open push_macro, outside any conditional group
    pushed: dict[str, list[tuple[int, Macro | None, bool]]] = {}
    for k, (i, line) in enumerate(directives):
        if m := _PUSH_POP.match(line):
            name = m.group(2)
            if m.group(1) == "push" and depth == 0:
                pushed.setdefault(name, []).append((i, defined.get(name), name in uncertain))
            elif m.group(1) == "pop" and depth == 0 and pushed.get(name):
                # the pushed definition back, whatever happened since: certain where it was, and where the pushed
                # stretch holds only directives (init's headers); code there read X otherwise than code after
                start, macro, was_uncertain = pushed[name].pop()
                if macro is None:
                    defined.pop(name, None)
                else:
                    defined[name] = macro
                quiet = all(not text.strip() or _DIRECTIVE.match(text) for text in lines[start + 1:i])
                if was_uncertain or not quiet:
                    uncertain.add(name)
                else:
                    uncertain.discard(name)
            else:  # a push or pop under a condition, or a pop with nothing pushed
                uncertain.add(name)
            continue
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
            if depth == 0 and pushed.get(m.group(1)):  # set aside until its pop_macro: undefined for sure till then
                defined.pop(m.group(1), None)
            else:
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
    after = preprocessed(later).replace("%:", "#")
    uncertain |= {m.group(1) for line in after.split("\n") if (m := _DEFINE.match(line))}
    return Macros({k: v for k, v in defined.items() if k not in uncertain}, frozenset(uncertain))


# A token and its hide set: the macros whose expansion produced it, which it may not name again
# (C++ [cpp.rescan]; Prosser's algorithm). Without them a name the compiler leaves alone is
# expanded on a later pass (red team round 151: `skip(skip)(1)`, a call of the function skip to
# the compiler, read as `1`).
_Token = tuple[str, frozenset[str]]
_NONE: frozenset[str] = frozenset()
# the space put around every replacement (so no two tokens join), which the source did not have:
# marked, so `#` of an expanded argument can tell it (red team round 152: `XS(E+1)` is "1+1")
_PAD = "\0pad"
_SPACE: _Token = (" ", frozenset({_PAD}))


def expand(text: str, macros: Macros, rounds: int = 16, limit: int = 200_000) -> str | None:
    """TEXT with the program's macros expanded as the preprocessor expands them (each argument
    expanded on its own before it is put in, every result read again with what follows, a name
    never expanded inside its own expansion), or None where that cannot be read for sure: a name
    of UNCERTAIN meaning, a paste that makes no single token, `__VA_OPT__`, a stringized literal, an unclosed call, more
    than ROUNDS x 1000 expansions or LIMIT characters."""
    tokens = [(t, _NONE) for t in _tokens(strip_comments(text))]
    try:
        out = _expanded(tokens, macros, [rounds * 1000], limit)
    except RecursionError:  # arguments nested past what the reading follows
        return None
    return None if out is None else "".join(t for t, _ in out)


def _expanded(tokens: list[_Token], macros: Macros, budget: list[int], limit: int) -> list[_Token] | None:
    pending = tokens[::-1]  # the next token last
    out: list[_Token] = []
    size = 0
    while pending:
        name, hidden = pending.pop()
        if name in macros.uncertain:
            return None
        macro = macros.defined.get(name)
        if macro is None or name in hidden:
            out.append((name, hidden))
            size += len(name)
            if size > limit:
                return None
            continue
        budget[0] -= 1
        if budget[0] < 0:
            return None
        if macro.params is None:
            replaced = _substituted(macro, [], hidden | {name}, macros, budget, limit)
        else:
            k = len(pending) - 1
            while k >= 0 and pending[k][0].isspace():
                k -= 1
            if k < 0 or pending[k][0] != "(":
                out.append((name, hidden))  # a function-like macro's name not called is only a name
                continue
            found = _arguments(pending, k)
            if found is None:
                return None
            args, closing, end = found
            del pending[end:]
            replaced = _substituted(macro, args, (hidden & closing) | {name}, macros, budget, limit)
        if replaced is None:
            return None
        pending.extend(reversed([_SPACE, *replaced, _SPACE]))
    return out


def _arguments(pending: list[_Token], at: int) -> tuple[list[list[_Token]], frozenset[str], int] | None:
    """The arguments of a call whose `(` is pending[at] (PENDING holds the next token last), the hide
    set of its `)`, and the index of that `)` (everything from there on is the call)."""
    depth, args, current = 0, [], []
    for i in range(at, -1, -1):
        t = pending[i]
        if t[0] == "(":
            depth += 1
            if depth == 1:
                continue
        elif t[0] == ")":
            depth -= 1
            if depth == 0:
                args.append(current)
                return args, t[1], i
        elif t[0] == "," and depth == 1:
            args.append(current)
            current = []
            continue
        current.append(t)
    return None


def _substituted(macro: Macro, args: list[list[_Token]], hidden: frozenset[str], macros: Macros, budget: list[int],
                 limit: int) -> list[_Token] | None:
    """MACRO's body with its parameters replaced (an argument expanded on its own; `#x` its
    spelling), every token hiding HIDDEN."""
    params = list(macro.params or ())
    if not params and len(args) == 1 and all(t.isspace() for t, _ in args[0]):
        args = []
    if macro.variadic:
        fixed = len(params) - 1
        if len(args) < fixed:
            return None
        rest: list[_Token] = []
        for k, arg in enumerate(args[fixed:]):
            rest += ([(",", _NONE)] if k else []) + arg  # as written, commas and all
        args = args[:fixed] + [rest]
    if len(args) != len(params):
        return None
    args = [_trimmed(arg) for arg in args]
    body = _tokens(macro.body)
    out: list[_Token] = []
    i = 0
    while i < len(body):
        t = body[i]
        if t == "__VA_OPT__":
            return None
        if t == "##":
            # token pasting (red team round 281: a name pasted together, `a##b`, declared a frozen function named
            # like the launcher where nothing read it): the operands unexpanded, the last and first tokens joined
            j = _solid(body, i + 1)
            if j >= len(body) or not out or body[j] == "##":
                return None
            right = args[params.index(body[j])] if body[j] in params else [(body[j], _NONE)]
            while out and out[-1][0].isspace():
                out.pop()
            pasted = _pasted(out.pop(), right)
            if pasted is None:
                return None
            out += pasted
            i = j + 1
            continue
        if t in params and _solid(body, i + 1) < len(body) and body[_solid(body, i + 1)] == "##":
            out += args[params.index(t)] or [_PLACEMARKER]  # a `##` operand is not expanded first
            i += 1
            continue
        if t == "#" and params:
            j = i + 1
            while j < len(body) and body[j].isspace():
                j += 1
            if j < len(body) and body[j] in params:
                spelled = _stringized(args[params.index(body[j])])
                if spelled is None:
                    return None
                out.append((spelled, _NONE))
                i = j + 1
                continue
        if t in params:
            expanded = _expanded(args[params.index(t)], macros, budget, limit)
            if expanded is None:
                return None
            out += expanded
        else:
            out.append((t, _NONE))
        i += 1
    return [(t, h | hidden) for t, h in out if t]  # placemarkers gone


_PLACEMARKER: _Token = ("", frozenset())  # an empty `##` operand


def _solid(body: list[str], i: int) -> int:
    """The index of the first token from I on that is not whitespace (len(body) if none)."""
    while i < len(body) and body[i].isspace():
        i += 1
    return i


def _pasted(left: _Token, right: list[_Token]) -> list[_Token] | None:
    """LEFT pasted to RIGHT's first token (RIGHT: an operand's tokens, perhaps none), or None where the two do not
    make one token (undefined behaviour to the compiler)."""
    if not right:
        return [left]
    if not left[0]:
        return list(right)
    joined = left[0] + right[0][0]
    if _tokens(joined) != [joined]:
        return None
    return [(joined, _NONE), *right[1:]]


def _trimmed(arg: list[_Token]) -> list[_Token]:
    """ARG without the whitespace at its ends."""
    start, end = 0, len(arg)
    while start < end and arg[start][0].isspace():
        start += 1
    while end > start and arg[end - 1][0].isspace():
        end -= 1
    return arg[start:end]


def _stringized(arg: list[_Token]) -> str | None:
    """`#x`: the argument's own spelling, each run of whitespace one space, none at its ends (a
    stand-in string changed a `sizeof` in a rewrite: red team round 150); None for an argument
    holding a literal (whose quotes and backslashes the compiler escapes) or an expansion of its own
    (an argument handed on after its macros were expanded: where the compiler spaces that is not
    read here)."""
    text = "".join(t for t, _ in arg)
    if any(ch in text for ch in "\"'\\") or any(_PAD in hidden for _, hidden in arg):
        return None
    return '"' + " ".join(text.split()) + '"'
