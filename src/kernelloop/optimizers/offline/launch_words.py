"""Whether a template's call may take a launch's place: the analysis must read the launch's words
(its arguments, grid, block and stream) as the program computes them, and the call must be free
to evaluate them again, or not at all.

A template's call takes the launch statement's place and reads the launch's arguments as
written, there (candidates.build); every other statement stays as written, and a template that
needs its output zeroed zeroes it itself, right before its own launch (red team round 103: a
zeroing the launcher made further up can be undone, or cover one byte). Two things remain that
a statement's syntax can hide (round 102: `std::exchange` on a global, a preamble function, an
object-like macro that assigns, an overload of `max` taking a reference):

- The analysis reads a launcher's local through its initializer (`int count = n;` read as
  `n`). That holds only if nothing between the declaration and the launch can change what the
  initializer read, or the local itself. Each statement between is read as the compiler reads
  it, the program's macros in force there expanded (program.macros), and judged by what it may
  change: a name it assigns, increments or takes the address of; or anything, for a write
  through a pointer, a call of a function of the program that may change anything its caller
  sees, or any other call but the few known to write nothing (a library call handed a pointer
  to a global, or a name, could change it: round 103).
- The launch's words, which the call evaluates once per use, or never: they must change
  nothing and call only what changes nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from ...program.launcher_prints import PRINTING, STREAMS, WRITING_CONVERSION
from ...program.macros import Macros, expand, program_macros
from ...program.scanner import preprocessed
from .cparse import UNKNOWN_NAMES, declared_names, parse_body, parse_expression
from .facts import collect_facts
from .launcher import (
    _MEMSETS,
    _VALUE_CALLS,
    EditablePart,
    Function,
    Launcher,
    read_editable,
    statement_exprs,
    with_names,
)
from .syntax import (
    Assign,
    Binary,
    Cast,
    Return,
    Call,
    Decl,
    Expr,
    Launch,
    Member,
    Name,
    ParseError,
    Postfix,
    Stmt,
    Str,
    Unary,
    call_name,
    strip_casts,
    walk_expr,
)

ANYTHING = None  # what a statement may change when that cannot be read


@dataclass(frozen=True)
class ProgramNames:
    """What a launcher's statements may call or name, beside the language."""

    functions: dict[str, Function]  # host functions of the part and the preamble that were read
    unread: frozenset[str]  # functions of the program that could not be read (or several of one name)
    macros: Macros  # in force where the launcher is (at_launcher)
    declared: frozenset[str]  # every name the program declares (UNKNOWN_NAMES among them: any)
    preamble: str = ""
    editable: str = ""
    # an operator or conversion function the program defines for host code: a `+` or a conversion
    # to dim3 in a launcher may then call the program's code without showing a call (round 104)
    host_operator: str | None = None

    def at_launcher(self, lau: Launcher) -> ProgramNames:
        """The same, with the macros in force where LAU is defined: one defined after it is uncertain."""
        at = lau.fn.item.start
        return replace(self, macros=program_macros(self.preamble, self.editable[:at], later=self.editable[at:]))


def program_names(part: EditablePart, editable: str, preamble: str) -> ProgramNames:
    frozen = read_editable(preamble, "", []) if preamble.strip() else None
    functions = {**(frozen.functions if frozen else {}), **part.functions}
    problems = [*(frozen.problems if frozen else []), *part.problems]
    unread = frozenset(p.split(":", 1)[0] for p in problems)
    macros = program_macros(preamble, editable)
    return ProgramNames(functions, unread, macros, frozenset(_declared(f"{preamble}\n{editable}", macros)),
                        preamble, editable, _host_operator(f"{preamble}\n{editable}", macros))


_OPERATOR = re.compile(r"\boperator\b\s*([^(\s]*(?:\(\))?)")


def _host_operator(program: str, macros: Macros) -> str | None:
    """The first operator or conversion function PROGRAM declares that host code can call (one
    declared `__device__` alone cannot be), as `operator+`; None when there is none. Read as the
    compiler reads it (_expanded_program; round 105: a spliced `operator`, a `__host__` behind a
    macro); where that cannot be read, from the text, and a head naming a macro is not exempt."""
    expanded = _expanded_program(program, macros)
    code = _without_literals(expanded if expanded is not None else
                             preprocessed(program))
    for m in _OPERATOR.finditer(code):
        head = code[max(code.rfind(";", 0, m.start()), code.rfind("{", 0, m.start()), code.rfind("}", 0, m.start())) + 1:
                    m.start()]
        if "__device__" in head and "__host__" not in head and (expanded is not None or not macros.names_in(head)):
            continue
        return "operator" + (" " if m.group(1)[:1].isalpha() else "") + m.group(1)
    return None


def _without_literals(code: str) -> str:
    return re.sub(r'"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', '""', code)


def _declared(program: str, macros: Macros) -> set[str]:
    """Every name PROGRAM declares, read with its macros expanded (a name handed to a macro is
    declared only if the expansion declares it); as declared_names reads the text (every name
    handed to a macro counts) where the expansion cannot be read."""
    expanded = _expanded_program(program, macros)
    found = declared_names(expanded) if expanded is not None else declared_names(program)
    return found | set(macros.defined) | set(macros.uncertain)


def _expanded_program(program: str, macros: Macros) -> str | None:
    """PROGRAM as the compiler reads its code: comments out, line splices joined (a name split
    by one is one name: round 105's `oper\\` + newline + `ator+`), directives out, macros
    expanded; None where the expansion cannot be read."""
    code = preprocessed(program)
    return expand(_DIRECTIVE.sub("", code), macros)


_DIRECTIVE = re.compile(r"^[ \t]*(?:#|%:).*$", re.M)


# Calls known to change no name of the caller and no host memory: value calls (their arguments by
# value), device queries and checks, a memset of device memory, and what an error check reports
# and stops with.
_CHANGES_NOTHING = _VALUE_CALLS | frozenset(["exit", "abort", "cudaGetErrorString", "cudaGetErrorName"])


def _trusted(name: str, names: ProgramNames) -> bool:
    """A call known to change nothing its caller sees (_CHANGES_NOTHING), when the program does not
    declare that name itself (an overload, a macro, a function of the same name)."""
    last = name.split("::")[-1]
    return _library_name(name) in _CHANGES_NOTHING and last not in names.declared and UNKNOWN_NAMES not in names.declared


def _library_name(name: str) -> str:
    """`abort` for `std::abort` and `::abort`: the C library's names as C++ code spells them."""
    for prefix in ("::std::", "std::", "::"):
        if name.startswith(prefix):
            return name[len(prefix):]
    return name


def _reports_only(call: Call, names: ProgramNames) -> bool:
    """Whether CALL is a C library printing call that changes nothing its caller sees: its format a
    literal without %n (which writes through a pointer argument), its stream stdout or stderr (the
    table init's print mover reads, program/launcher_prints.py)."""
    name = _library_name(call_name(call) or "")
    if name not in PRINTING or name in names.declared or UNKNOWN_NAMES in names.declared:
        return False
    format_at, stream_at = PRINTING[name]
    if stream_at is not None:
        stream = call.args[stream_at] if len(call.args) > stream_at else None
        if not (isinstance(stream, Name) and _library_name(stream.id) in STREAMS):
            return False
    if format_at is not None:
        fmt = call.args[format_at] if len(call.args) > format_at else None
        if not isinstance(fmt, Str) or WRITING_CONVERSION.search(fmt.text.replace("%%", "")):
            return False
    return True


_VALUE_TYPES = frozenset(["int", "unsigned", "signed", "long", "short", "char", "float", "double", "bool", "size_t",
                          "ptrdiff_t", "int8_t", "uint8_t", "int16_t", "uint16_t", "int32_t", "uint32_t", "int64_t",
                          "uint64_t", "dim3", "cudaStream_t", "cudaError_t", "cudaEvent_t", "void"])
_QUALIFIERS = frozenset(["const", "volatile", "__restrict__", "__restrict", "restrict", "std"])


def _by_value(type_text: str) -> bool:
    """Whether a parameter of this type is a copy its function cannot write through to its caller's
    names: a pointer, or one of the language's or the runtime's value types; a reference, an alias,
    a class type (its copy may run the program's code) is not known to be."""
    if "&" in type_text:
        return False
    if "*" in type_text:
        return True
    words = [w for w in re.findall(r"[A-Za-z_]\w*", type_text) if w not in _QUALIFIERS]
    return bool(words) and all(w in _VALUE_TYPES for w in words)


def _statements(s: Stmt | None):
    """S and every statement under it."""
    if s is None:
        return
    yield s
    for child in (getattr(s, "body", None), getattr(s, "then", None), getattr(s, "other", None),
                  getattr(s, "init", None)):
        if isinstance(child, tuple):
            for x in child:
                yield from _statements(x)
        elif isinstance(child, Stmt):
            yield from _statements(child)


def function_acts(fn: Function, names: ProgramNames, seen: set[str] | None = None) -> bool:
    """Whether a host function FN of the program may change anything its caller sees: it launches
    a kernel, writes anything but its own locals (memory, a member, a file-scope variable), takes a
    reference, or calls anything but a trusted call or a function of the program that does none of
    this (a CUDA runtime call, `std::exchange`: round 103's `mark_pending`, a memset that undid a
    zeroing)."""
    seen = set() if seen is None else seen
    if fn.name in seen:
        return False
    seen.add(fn.name)
    if fn.is_kernel or not all(_by_value(p.type) for p in fn.sig.params):
        return True  # a reference, or a type that may be one (`using Count = int&;`: round 104)
    if any(isinstance(s, Decl) and re.search(r"\bstatic\b", s.type) for s in _statements(fn.body)):
        return True  # a static local is state: the same call may give another value
    facts = collect_facts(fn.sig, fn.body)
    for e in (e for x in statement_exprs(fn.body) for e in walk_expr(x)):
        if isinstance(e, Launch):
            return True
        target = e.target if isinstance(e, Assign) else e.operand if isinstance(e, Postfix) or (
            isinstance(e, Unary) and e.op in ("++", "--")) else None
        if target is not None and (not isinstance(target, Name) or facts.binding(target) is None):
            return True  # memory, a member or a file-scope variable written
        if isinstance(e, Call):
            name = call_name(e) or ""
            callee = names.functions.get(name)
            if callee is not None:
                if function_acts(callee, names, seen):
                    return True
            elif not (_trusted(name, names) and name.split("::")[-1] not in _MEMSETS) and not _reports_only(e, names):
                return True
    return False


def _read_as_compiled(stmt: Stmt, text: str, names: ProgramNames) -> Stmt | None:
    """STMT as the compiler reads it: its text with the program's macros expanded, parsed; None
    where that cannot be read."""
    if not names.macros.names_in(text):
        return stmt
    expanded = expand(text, names.macros)
    if expanded is None:
        return None
    try:
        return parse_body("{" + expanded + "\n}")
    except ParseError:
        return None


def changed_names(stmt: Stmt, names: ProgramNames) -> set[str] | None:
    """The names STMT may change, or ANYTHING. A name a block inside it declares counts too: which
    of the two it writes is not read."""
    changed: set[str] = set()
    exprs = [e for x in statement_exprs(stmt) for e in walk_expr(x)]
    for e in exprs:
        target = e.target if isinstance(e, Assign) else e.operand if isinstance(e, Postfix) or (
            isinstance(e, Unary) and e.op in ("++", "--", "&")) else None
        if target is not None:
            target = strip_casts(target)
            while isinstance(target, Member) and not target.arrow:
                target = strip_casts(target.base)
            if not isinstance(target, Name):
                if isinstance(e, Unary) and e.op == "&":
                    continue  # the address of an element or a member: a pointer into memory, not a name
                return ANYTHING  # written through a pointer: it could point anywhere
            changed.add(target.id)
        if isinstance(e, Launch):
            continue  # device memory only: the words of a later launch are names
        if not isinstance(e, Call):
            continue
        name = call_name(e) or ""
        fn = names.functions.get(name)
        if fn is not None:
            if function_acts(fn, names):
                return ANYTHING
        elif not _trusted(name, names) and not _reports_only(e, names):
            # a library call could change a name handed to it, or reached through a pointer it is handed
            return ANYTHING
    return changed


def _launch_words_problem(launch_stmt: Stmt, names: ProgramNames) -> str | None:
    """Why the template's call could not evaluate the launch's words again, or never: one that
    changes something, or calls what may."""
    for e in (e for x in statement_exprs(launch_stmt) for e in walk_expr(x)):
        if isinstance(e, (Assign, Postfix)) or (isinstance(e, Unary) and e.op in ("++", "--")):
            return "changes a value in its launch's own words"
        if isinstance(e, Unary) and e.op == "&" and isinstance(strip_casts(e.operand), Name):
            return "hands out a variable's address in its launch's words"
        if isinstance(e, Call):
            name = call_name(e) or ""
            fn = names.functions.get(name)
            if (fn is None and _trusted(name, names)) or (fn is not None and not function_acts(fn, names)):
                continue
            return (f"computes its launch's words with {name or 'a call through an expression'}, which a template's "
                    "call could not evaluate again (or leave out) without changing what it does")
    return None


def reading_problem(lau: Launcher, names: ProgramNames) -> str | None:
    """Why LAU's launch cannot be read as the program computes it, or replaced by a call that
    reads its words where it was; None when it can."""
    if lau.in_place is None or lau.launch is None:
        return None  # no template applies (the launcher's problem says why)
    if names.host_operator is not None:
        return (f"is in a program that defines {names.host_operator} for host code: an operator or a conversion "
                "in the launcher could run the program's code where no call shows")
    names = names.at_launcher(lau)
    body_text = lau.fn.item.text[len(lau.fn.head):]

    def text_of(s: Stmt) -> str:
        start, end = s.span  # type: ignore[attr-defined]
        return body_text[start:end]

    # the statements that call only the program's own functions (an error check): kept as written,
    # where nothing they do can change a name of the launcher or launch a kernel
    for stmt in lau.unconfirmed:
        read = _read_as_compiled(stmt, text_of(stmt), names)
        changed = ANYTHING if read is None else changed_names(read, names)
        if changed is ANYTHING or changed or any(isinstance(e, Launch) for x in statement_exprs(read)
                                                 for e in walk_expr(x)):
            called = sorted({call_name(e) or "" for x in statement_exprs(stmt) for e in walk_expr(x)} - {""})
            return (f"does more than launch one kernel (statement calling {', '.join(called)}, which may change "
                    f"{'anything' if changed is ANYTHING else ', '.join(sorted(changed)) or 'what a launch reads'})")
    launch_stmt = _read_as_compiled(lau.in_place, text_of(lau.in_place), names)
    if launch_stmt is None:
        return "launches through a macro of the program that cannot be read for sure"
    if (why := _launch_words_problem(launch_stmt, names)) is not None:
        return why

    # the launcher's locals the analysis inlines into the launch's words, and what each was computed from
    body = list(lau.fn.body.body)
    at = body.index(lau.in_place)
    declared_at = {id(d): i for i, s in enumerate(body) if isinstance(s, Decl) for d in s.declarators}
    inlined: dict[str, tuple[int, set[str]]] = {}
    todo: list[Expr] = [*lau.launch.config, *lau.launch.args]
    while todo:
        for x in walk_expr(todo.pop()):
            b = lau.facts.binding(x)
            if b is None or b.param is not None or not b.inlinable or b.name in inlined:
                continue
            assert b.init is not None
            where = next((declared_at[k] for k, v in lau.facts.declared.items() if v is b and k in declared_at), None)
            if where is None or where > at:
                return f"reads {b.name}, declared where the analysis cannot follow it"
            for y in walk_expr(b.init):  # a local its value reads must come first (else the name is another's)
                c = lau.facts.binding(y)
                if c is not None and c.param is None and next(
                        (declared_at[k] for k, v in lau.facts.declared.items() if v is c and k in declared_at), at) >= where:
                    return (f"reads {b.name}, whose value names {c.name}, declared after it (the name there is "
                            "another's)")
            reads = {y.id for y in walk_expr(b.init) if isinstance(y, Name)} | {b.name}
            inlined[b.name] = (where, reads)
            todo.append(b.init)
    if not inlined:
        return None
    changes: dict[int, set[str] | None] = {}
    for name, (where, reads) in inlined.items():
        for i in range(where + 1, at):
            if i not in changes:
                stmt = _read_as_compiled(body[i], text_of(body[i]), names)
                changes[i] = ANYTHING if stmt is None else changed_names(stmt, names)
            changed = changes[i]
            if changed is ANYTHING or changed & reads:
                what = "may change anything" if changed is ANYTHING else f"may change {sorted(changed & reads)[0]}"
                return (f"reads {name} through what it was computed from, and the statement "
                        f"`{' '.join(text_of(body[i]).split())[:80]}` between them {what}")
    return None


def read_config(lau: Launcher, names: ProgramNames) -> tuple[Expr, ...]:
    """LAU's launch configuration with the program's one-line helpers read into it: a function of
    the program whose body is one `return` of its by-value parameters and that acts on nothing
    (`ceil_div(n, 256)`), and a function-like macro whose body is one expression (llm.c's
    `CEIL_DIV(M, N)`), their parameters replaced by the arguments; anything else as written. What a
    grid covers is then read from the arithmetic itself, never from a helper's name."""
    if lau.launch is None:
        return ()
    names = names.at_launcher(lau)
    return tuple(_inlined(c, names, lau, 0) for c in lau.launch.config)


_TRAILING_RETURN = re.compile(r"\)\s*(?:const\s*)?(?:noexcept\s*)?->\s*(?P<type>[^{;]+?)\s*$")


def returned_type(declared: str, head: str) -> str | None:
    """The type a function returns, as written: DECLARED, or its trailing `-> T` (red team round
    117: `auto blocks_for(...) -> unsigned short` read as returning its int expression), or "auto"
    where it is deduced from the returned expression; None where that is not plain."""
    if declared.strip() not in ("auto", "decltype(auto)"):
        return declared
    if "->" not in head:
        return "auto" if declared.strip() == "auto" else None
    m = _TRAILING_RETURN.search(head.strip())
    return m.group("type") if m is not None and "decltype" not in m.group("type") else None


def _inlined(e: Expr, names: ProgramNames, lau: Launcher, depth: int) -> Expr:
    if depth > 16:
        return e
    again = lambda x: _inlined(x, names, lau, depth + 1)  # noqa: E731
    if isinstance(e, Name) and (b := lau.facts.binding(e)) is not None and b.param is None and b.init is not None \
            and b.inlinable:
        value = again(b.init)  # a local read through its value (reading_problem: only where that holds),
        return value if lau.facts.keeps_as(b, value) else e  # where its type holds that value
    if isinstance(e, Call) and (name := call_name(e)) is not None:
        params, body = None, None
        args = list(e.args)
        fn = names.functions.get(name)
        macro = names.macros.defined.get(name)
        if fn is not None and not fn.is_kernel and len(fn.body.body) == 1 and isinstance(fn.body.body[0], Return) \
                and fn.body.body[0].value is not None and len(fn.sig.params) == len(e.args) \
                and not any(p.pointer or "&" in p.type for p in fn.sig.params) and not function_acts(fn, names):
            # the helper's own types convert what goes in and what comes out (red team round 116: an
            # `unsigned short` result or parameter read as the int it was computed from)
            params, body = [p.name for p in fn.sig.params], fn.body.body[0].value
            args = [Cast(p.type.replace("const ", "").strip() or p.base, a) for p, a in zip(fn.sig.params, e.args)]
            returned = returned_type(fn.sig.return_type, fn.head)
            if returned is None:
                params, body = None, None
            elif returned != "auto":
                body = Cast(returned, body)
        elif fn is None and macro is not None and macro.params is not None and not macro.variadic \
                and len(macro.params) == len(e.args) and "#" not in macro.body:
            try:
                params, body = list(macro.params), parse_expression(macro.body)
            except ParseError:
                body = None
        if body is not None and params is not None:
            return again(with_names(body, dict(zip(params, args))))
        return Call(e.func, tuple(again(a) for a in e.args), e.targs)
    if isinstance(e, Binary):
        return Binary(e.op, again(e.left), again(e.right))
    if isinstance(e, Cast):
        return Cast(e.type, again(e.operand))
    return e
