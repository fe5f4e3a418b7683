"""The editable part's shape: which launchers the harness calls, what each launches, and how.

A launcher fits a template when its launch is a statement of its own at the top of its body
(one launch, or each of several: `per_launch`) and its other statements are of the kinds read
here: local geometry (dim3, grid arithmetic), zeroing of an output (cudaMemset /
cudaMemsetAsync, whatever macro wraps it), error checks and synchronizations, asserts and early
returns. A template's call replaces the launch's statement alone (`in_place`): every other
statement stays as written, where it was. What a statement may hide from this reading is judged
in launch_words.py.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from ...program.macros import Macros, expand, macro_body_words
from ...program.cuda_tree import Source, declared_names, walk
from ...program.scanner import Item, function_name, scoped_items, strip_comments
from .cparse import Param, Signature, parse_body, parse_signature, type_parameters
from .facts import KernelFacts, collect_facts, is_floating_type, not_an_integer
from .symbolic import Poly
from .syntax import (
    Assign,
    Binary,
    Block,
    Call,
    Cast,
    Decl,
    Expr,
    ExprStmt,
    For,
    If,
    Launch,
    Member,
    Name,
    Num,
    Postfix,
    ParseError,
    Return,
    Stmt,
    Unary,
    Using,
    While,
    call_name,
    strip_casts,
    to_c,
    walk_expr,
)

_MEMSETS = frozenset(["cudaMemset", "cudaMemsetAsync"])
# Calls a launcher may make besides the launch: checks, syncs and device queries (dropped).
_DROPPABLE = frozenset(["cudaGetLastError", "cudaPeekAtLastError", "cudaDeviceSynchronize", "cudaStreamSynchronize",
                        "cudaGetDevice", "cudaDeviceGetAttribute", "cudaFuncSetAttribute", "cudaFuncSetCacheConfig",
                        "cudaGetDeviceProperties", "cudaOccupancyMaxActiveBlocksPerMultiprocessor",
                        # a failure's text for a message: a query, no effect
                        "cudaGetErrorString", "cudaGetErrorName"])


@dataclass
class Function:
    name: str
    sig: Signature
    item: Item
    head: str  # the text before the body, verbatim
    body: Block
    is_kernel: bool


@dataclass
class ZeroingStatement:
    pointer: str  # the launcher parameter it zeroes
    text: str  # C text of the statement (locals of the launcher inlined)
    statement: Stmt | None = field(default=None, compare=False)  # where it is in the launcher's body


@dataclass
class Launcher:
    fn: Function
    facts: KernelFacts  # the launcher's own body, for inlining its locals
    launch: Launch | None = None
    kernel: str | None = None
    args: tuple[Expr, ...] = ()  # launch arguments with the launcher's locals inlined (what the analysis reads)
    # the launch arguments as written: a template's call takes the launch's place, so it reads them
    # there, where they mean what they meant to the kernel (red team round 102)
    written_args: tuple[Expr, ...] = ()
    # the zeroing statements, kept where they are (a template never takes them as done: it zeroes
    # what it needs zeroed itself, right before its own launch)
    zeroing: list[ZeroingStatement] = field(default_factory=list)
    problem: str | None = None
    stream: Expr | None = None  # the launch's stream as written (it names only parameters); None: the default stream
    # A template launcher reached through init's wrapper: the template arguments the wrapper gives it
    # ("float"), the one instantiation the verifier runs; None for any other launcher.
    template_args: str | None = None
    # the function the harness calls that only calls this launcher (forwarded_to), or None: the
    # harness calls the launcher itself
    forwarder: Function | None = None
    # A launcher of several launches, each a statement of its own at the top of its body: one view
    # per launch, for the templates (issue 11: optimize the hottest launch, keep the others). The
    # launcher itself keeps its problem ("launches N kernels") for everything else.
    per_launch: list[Launcher] = field(default_factory=list)
    # The launch's statement, at the top of the body: a template's call replaces that statement
    # alone and every other statement stays where it is, as written (red team rounds 100-102: a
    # statement left out, or moved, loses an effect its syntax does not show). None: the launch is
    # nested (in a condition or a loop), and no template applies.
    in_place: ExprStmt | None = None
    # the launch's configuration with the program's one-line helpers read into it
    # (launch_words.read_config, set by the analysis): what a family reads a grid's coverage from
    config_read: tuple[Expr, ...] = ()
    # statements that call the program's own functions or macros and nothing else (a project's
    # error check, `getLastCudaError("...")`): kept where they are, as written, once the analysis
    # has read, with the program's names, that they change none of the launcher's names and launch
    # nothing (launch_words.reading_problem); until then unconfirmed
    unconfirmed: list[ExprStmt] = field(default_factory=list)

    def param_names(self) -> list[str]:
        return [p.name for p in self.fn.sig.params]


@dataclass
class EditablePart:
    items: list[Item]
    functions: dict[str, Function]
    launchers: list[Launcher]  # exported host functions the harness calls, in source order
    harness_launched: list[str]  # kernels the harness launches itself
    problems: list[str]  # why a function could not be read (parse errors), by name
    harness_referenced: list[str] = field(default_factory=list)  # editable functions the harness names
    # every definition of a name defined more than once, all of them read (overloads): not in `functions`,
    # so no tier reads one for another; a helper only where every one is (rowwarp.pure_helpers)
    overloads: dict[str, list[Function]] = field(default_factory=dict)


def _strip(text: str) -> str:
    return strip_comments(text)


def _unread_claims(name: str, head: str, functions: dict[str, Function], ambiguous: set[str]) -> None:
    """A definition that is not read still defines its name: a call may reach it rather than a
    function of that name that is read (red team round 123: a `template <>` specialization of a
    pure helper, unread, read a built-in the axis swap did not rename). Its name, or every name in
    its head where the name is not found, is no one function's any more."""
    claimed = [name] if name else re.findall(r"[A-Za-z_]\w*", strip_comments(head))
    for word in claimed:
        functions.pop(word, None)
        ambiguous.add(word)


def read_editable(editable: str, harness: str, exported: list[str], preamble: str = "") -> EditablePart:
    # Items inside namespaces and extern "C" blocks too (PyTorch extensions): each keeps its blocks
    # (Item.scope), and whoever writes the part again puts it back inside them (scanner.in_scope).
    # PREAMBLE: the frozen code before the part, whose macros the part's code may use.
    items = scoped_items(editable)
    macro_named: set[str] | None = None  # the names the program's macros write (read when needed)
    functions: dict[str, Function] = {}
    ambiguous: set[str] = set()
    problems: list[str] = []
    definitions: dict[str, list[Function]] = {}  # every read definition, by name
    unread_names: set[str] = set()  # names with a definition that was not read ('' where the name was not found)
    for index, item in enumerate(items):
        if not item.is_function_definition:
            continue
        name = function_name(item) or ""
        head = item.head
        try:
            sig = parse_signature(strip_comments(head))
            body = parse_body(item.text[len(head):], type_parameters(sig))
        except ParseError as exc:
            problems.append(f"{name}: {exc}")
            _unread_claims(name, head, functions, ambiguous)
            unread_names.add(name or "")
            continue
        if next(naming_statements(body), None) is not None and {"__global__", "__device__"} & set(sig.qualifiers):
            # `using namespace ns;` in device code may make `min(a, b)` a function of ns that the
            # tiers would take for the math function: a kernel or helper with one is not read; a
            # type alias is read as the type it names
            if macro_named is None:
                macro_named = macro_body_words(preamble, editable)
            read = with_aliases_expanded(item, head, body, macro_named)
            if isinstance(read, str):
                problems.append(f"{name}: {read}")
                _unread_claims(name, head, functions, ambiguous)
                unread_names.add(name or "")
                continue
            item, body = read
            items[index] = item  # the part holds the function as read (its aliases spelled out)
        definitions.setdefault(name, []).append(Function(name, sig, item, head, body, "__global__" in sig.qualifiers))
        if name in functions or name in ambiguous:
            # Two functions of one name (namespaces, overloads): the tiers look functions up by
            # name, so either could be read for the other (red team round 85); neither is read.
            if name in functions:
                del functions[name]
                problems.append(f"{name}: more than one function of this name (in different namespaces or "
                                "overloaded); none of them is read")
            ambiguous.add(name)
            continue
        functions[name] = Function(name, sig, item, head, body, "__global__" in sig.qualifiers)
    harness_code = _strip(harness)
    exported_names = []
    for decl in exported:
        m = re.search(r"([A-Za-z_]\w*)\s*\(", re.sub(r"__launch_bounds__\s*\([^)]*\)", "", decl))
        if m:
            exported_names.append(m.group(1))
    called = [n for n in exported_names if re.search(rf"(?<![\w.]){re.escape(n)}\s*\(", harness_code)]
    launched = [n for n in exported_names
                if re.search(rf"(?<![\w.]){re.escape(n)}\s*(?:<[^;<>]*>)?\s*<<<", harness_code)]
    launchers: list[Launcher] = []
    seen: set[str] = set()
    for name, fn in functions.items():
        if fn.is_kernel or name not in called:
            continue
        target = forwarded_to(fn, functions) or fn
        if target.name not in seen:
            seen.add(target.name)
            launcher = read_launcher(target)
            launcher.template_args = _call_template_args(fn) if target is not fn else None
            launcher.forwarder = fn if target is not fn else None
            unread = _unread_callee(fn, problems)
            if target is fn and unread:  # say why, not "launches 0 kernels"
                launcher.problem = f"calls {unread}"
            launchers.append(launcher)
    referenced = [n for n in functions if re.search(rf"(?<![\w.]){re.escape(n)}\b", harness_code)]
    overloads = {n: fs for n, fs in definitions.items()
                 if len(fs) > 1 and n and n not in unread_names and "" not in unread_names and n in ambiguous}
    return EditablePart(items, functions, launchers, launched, problems, referenced, overloads)


# calls handed a launcher's value that cannot change it (by value, or no such argument at all)
_VALUE_CALLS = frozenset(["min", "max", "std::min", "std::max", "umin", "umax", "abs", "std::abs", "assert",
                          "sizeof", "static_cast", "printf", "fprintf",
                          # a value type built from values (`dim3 block(tile, tile)`, `int(n)`, `size_t(n)`)
                          "dim3", "int", "unsigned", "long", "short", "char", "float", "double", "bool", "size_t",
                          "int32_t", "uint32_t", "int64_t", "uint64_t", "ptrdiff_t"]) | _DROPPABLE | _MEMSETS


def forwarded_to(fn: Function, functions: dict[str, Function]) -> Function | None:
    """The host function of the part that FN only calls (its whole body one call, or one return of a
    call): init's `launch_NAME` wrapper around a namespaced, static or template launcher. That
    function is the launcher to read; the wrapper stays as it is."""
    body = fn.body.body
    if len(body) != 1:
        return None
    stmt = body[0]
    expr = stmt.expr if isinstance(stmt, ExprStmt) else stmt.value if isinstance(stmt, Return) else None
    name = call_name(expr) if expr is not None else None
    # `ns::launch<float>(...)`: the template launcher itself (read as written, for every type it has)
    target = functions.get(re.sub(r"\s*<.*>$", "", name or ""))
    if target is None or target is fn or target.is_kernel:
        return None
    if any(isinstance(e, (Launch, Assign)) for a in expr.args for e in walk_expr(a)):  # type: ignore[union-attr]
        return None
    return target


def _unread_callee(fn: Function, problems: list[str]) -> str | None:
    """For a function whose body is one call of a function of the part that could not be read:
    that function and why ("ns::launch, which could not be read (...)")."""
    body = fn.body.body
    stmt = body[0] if len(body) == 1 else None
    expr = stmt.expr if isinstance(stmt, ExprStmt) else stmt.value if isinstance(stmt, Return) else None
    name = call_name(expr) if expr is not None else None
    base = re.sub(r"\s*<.*>$", "", name or "").split("::")[-1]
    for problem in problems:
        if base and problem.startswith(f"{base}: "):
            return f"{name}, which could not be read ({problem[len(base) + 2:]})"
    return None


def _call_template_args(wrapper: Function) -> str | None:
    """The template arguments of the one call a forwarding wrapper makes (`ns::f<float, 4>(...)`:
    "float, 4"), or None."""
    stmt = wrapper.body.body[0]
    expr = stmt.expr if isinstance(stmt, ExprStmt) else stmt.value if isinstance(stmt, Return) else None
    if not isinstance(expr, Call) or not isinstance(expr.func, Name):
        return None
    m = re.search(r"<(.*)>\s*$", expr.func.id)
    return m.group(1).strip() if m else (expr.targs or None)


_DIRECTIVE_LINE = re.compile(r"^[ \t]*#[ \t]*(?!pragma\b)\w", re.M)


def expanded_function(fn: Function, macros: Macros) -> Function | str:
    """FN read as the compiler reads it: its text with the program's macros (MACROS: those in force
    where it stands) expanded, or why it cannot be. The tiers plan from this text and write their
    copies from it, so a macro can hide neither a read nor a built-in from their checks (red team
    round 134: `c < UNTIL_ODD` read no accumulator, `#define blockDim (FixedBlock{})` gave the row
    tier a block of 128 threads where it launched 256). Refused: a directive inside the function
    (other than #pragma), an expansion that cannot be read for sure, and one that still names a
    macro of the program (the compiler would expand it again). Comments are left out."""
    text = strip_comments(fn.item.text)
    if _DIRECTIVE_LINE.search(text):
        return "has a preprocessor directive inside it"
    expanded = expand(text, macros)
    if expanded is None:
        return "uses a macro that cannot be read for sure"
    if expanded == fn.item.text:
        return fn
    # read again without its comments too: the tiers find statements by offsets into this text, and
    # a comment before the thread index moved them (`// one row per thread` made `int row = ...`
    # look like a second use of blockIdx)
    if macros.names_in(expanded):
        return f"uses a macro whose expansion names a macro again ({sorted(macros.names_in(expanded))[0]})"
    try:
        read = function_from_text(fn, expanded)
    except ParseError as exc:
        return f"cannot be read with its macros expanded ({exc})"
    return read if isinstance(read, Function) else f"{read} once its macros are expanded"


def function_from_text(fn: Function, text: str) -> Function | str:
    """FN read again from TEXT, a new text of the whole function (its macros expanded, a loop put
    in another form), or why not (an alias it names cannot be read); ParseError where TEXT is no
    function."""
    item = Item(fn.item.kind, text, fn.item.start, fn.item.end, fn.item.line, fn.item.scope)
    head = item.head
    sig = parse_signature(strip_comments(head))
    body = parse_body(text[len(head):], type_parameters(sig))
    if next(naming_statements(body), None) is not None:
        read = with_aliases_expanded(item, head, body, set())  # no macro left to name an alias
        if isinstance(read, str):
            return read
        item, body = read
    return Function(fn.name, sig, item, head, body, fn.is_kernel)


_TYPE_EXPRESSIONS = frozenset({"decltype", "typeof", "__typeof__", "__typeof", "sizeof", "alignof", "__alignof__",
                               "_Alignof"})


def spliced(text: str, edits: list[tuple[int, int, str]]) -> str:
    """TEXT with each (start, end, new text) of EDITS put in; ValueError where two overlap."""
    edits = sorted(edits)
    for (_, e1, _), (s2, _, _) in zip(edits, edits[1:]):
        if s2 < e1:
            raise ValueError("overlapping edits")
    out, pos = [], 0
    for start, end, new_text in edits:
        out.append(text[pos:start])
        out.append(new_text)
        pos = end
    out.append(text[pos:])
    return "".join(out)


def _closing(code: str, at: int) -> int | None:
    """The offset of the bracket closing the one at AT, or None."""
    pairs = {"(": ")", "[": "]", "{": "}"}
    stack: list[str] = []
    for i in range(at, len(code)):
        if code[i] in pairs:
            stack.append(pairs[code[i]])
        elif code[i] in ")]}":
            if not stack or stack.pop() != code[i]:
                return None
            if not stack:
                return i
    return None


def _top_level_comma(code: str) -> bool:
    depth = 0
    for ch in code:
        depth += ch in "([{"
        depth -= ch in ")]}"
        if ch == "," and depth == 0:
            return True
    return False


def _blanked(body: str) -> str:
    """BODY (a function body's text) with its comments and literals as spaces, offsets kept."""
    prefix = "void kl_f() "
    src = Source(prefix + body)
    out = list(body)
    for node in walk(src.root):
        if node.type in ("comment", "string_literal", "char_literal", "raw_string_literal"):
            start, end = src.span(node)
            out[start - len(prefix):end - len(prefix)] = " " * (end - start)
    return "".join(out)


def with_aliases_expanded(item: Item, head: str, body: Block, macro_named: set[str]) -> tuple[Item, Block] | str:
    """ITEM (a device function whose BODY declares type aliases) with each alias's uses spelled as
    the type it names and the alias statements left out, read again; or why it cannot be read so.
    Only aliases of plain types (no `*`, `&`, array or function declarator: `const fptr p` is not
    `const float* p`), at the body's top level, each declared once, named nowhere before its
    statement, never as a member or a qualified name, and declared as nothing else in the body;
    the type it names holds no expression (`decltype`, `sizeof`) and no name the body declares or
    aliases; a use as a functional cast `T(x)` is written `((T)(x))` (`T()`, `T(a, b)`, `T{}` are
    refused); and no macro of the program writes the alias's name (MACRO_NAMED): a use a macro
    brings in is not spelled out, and with the alias statement left out it would name whatever
    the enclosing scope calls so (red team round 149: `sizeof(T)` in a loop-bound macro became a
    global `typedef unsigned char T`).
    Other naming statements (`using namespace ns;`, `using ns::f;`) are refused: they may change
    what a call the tiers read (`min(a, b)`) means."""
    naming = list(naming_statements(body))
    for u in naming:
        if not u.alias or "{" in u.aliased or not any(x is u for x in body.body):
            return f"declares names inside device code ({u.text})"
    text = item.text[len(head):]
    aliases = [u.alias for u in naming]
    if len(set(aliases)) != len(aliases):
        return f"declares names inside device code ({naming[0].text}) more than once"
    rest = text
    for u in reversed(naming):
        rest = rest[:u.span[0]] + " " * (u.span[1] - u.span[0]) + rest[u.span[1]:]
    code = _blanked(rest)
    body_names = declared_names(code)
    if set(aliases) & body_names:
        return f"declares names inside device code ({naming[0].text}) and a name of the same spelling"
    if named := sorted(set(aliases) & macro_named):
        return (f"declares names inside device code ({naming[0].text}): a macro of the program writes {named[0]}, "
                "whose uses there cannot be spelled out")
    for u in naming:
        # the type's own words must mean at every use what they meant at the alias: no expression
        # (`decltype(w)` of a `w` a nested block declares again: red team round 140), no name the
        # body declares or aliases (a later `using a = float;` would rebind `a` in `using b = a;`)
        words = set(re.findall(r"[A-Za-z_]\w*", u.aliased))
        rebound = sorted(words & (body_names | set(aliases) | _TYPE_EXPRESSIONS))
        if rebound:
            return f"declares names inside device code ({u.text}) naming {rebound[0]}, which may mean another thing where it is used"
    edits: list[tuple[int, int, str]] = []
    for u in naming:
        if re.search(rf"\b{re.escape(u.alias)}\b", code[:u.span[0]]) or \
                re.search(rf"(?:\.|->|::|~)\s*{re.escape(u.alias)}\b", code):
            return f"declares names inside device code ({u.text}) named before it or as a member"
        edits.append((u.span[0], u.span[1], ""))
        for m in re.finditer(rf"\b{re.escape(u.alias)}\b", code):
            if m.start() < u.span[1]:
                continue
            after = re.compile(r"\s*([({])").match(code, m.end())
            if after is None:
                edits.append((m.start(), m.end(), u.aliased))
                continue
            # a functional cast `T(x)` is the cast `(T)(x)` (C++ [expr.type.conv]), which reads for
            # every type (`typename Acc<T>::type(x)` and `unsigned int(x)` do not); `T()`, `T(a, b)`
            # and `T{...}` have no such spelling
            before = code[:m.start()].rstrip()
            if not before or before[-1] in ";{}):]" or re.search(r"\b(?:else|do)$", before):
                # at a statement's start `T (t);` declares t (red team round 144): not a cast
                return f"declares names inside device code ({u.text}) used where it may declare a name"
            close = _closing(code, after.start(1))
            inner = code[after.start(1) + 1:close] if close is not None else ""
            if after.group(1) == "{" or close is None or not inner.strip() or _top_level_comma(inner):
                return f"declares names inside device code ({u.text}) used as a constructor"
            edits += [(m.start(), m.end(), f"(({u.aliased})"), (close + 1, close + 1, ")")]
    expanded = head + spliced(text, edits)
    try:
        new_body = parse_body(expanded[len(head):], type_parameters(parse_signature(strip_comments(head))))
    except ParseError as exc:
        return f"cannot be read with its type aliases spelled out ({exc})"
    if next(naming_statements(new_body), None) is not None:
        return "declares names inside device code"
    return Item(item.kind, expanded, item.start, item.end, item.line, item.scope), new_body


def read_launcher(fn: Function) -> Launcher:
    facts = collect_facts(fn.sig, fn.body)
    lau = Launcher(fn=fn, facts=facts)
    launches = [e for s in statement_exprs(fn.body) for e in walk_expr(s) if isinstance(e, Launch)]
    if len(launches) != 1:
        lau.problem = f"launches {len(launches)} kernels (a template replaces exactly one launch)"
        if len(launches) > 1:
            lau.per_launch = _per_launch(fn, facts, launches)
        return lau
    lau.in_place = next((s for s in fn.body.body if isinstance(s, ExprStmt) and s.expr is launches[0]), None)
    return _read_launch(lau, launches[0])


def _per_launch(fn: Function, facts: KernelFacts, launches: list[Launch]) -> list[Launcher]:
    """One view per launch of a launcher of several, when each is a statement of its own at the top
    of the body (not in a loop or a condition, where replacing one would change how often it runs)."""
    top = [s for s in fn.body.body if isinstance(s, ExprStmt) and isinstance(s.expr, Launch)]
    if len(top) != len(launches):
        return []
    return [_read_launch(Launcher(fn=fn, facts=facts, in_place=stmt), stmt.expr) for stmt in top]


def _read_launch(lau: Launcher, launch: Launch) -> Launcher:
    """LAU read for its one launch LAUNCH (the launcher's only one, or, in place, one of several)."""
    fn, facts = lau.fn, lau.facts
    if fn.sig.return_type not in ("void", "cudaError_t"):
        lau.problem = f"returns {fn.sig.return_type} (only void or cudaError_t launchers are rewritten)"
        return lau
    if not isinstance(launch.kernel, Name):
        lau.problem = "launches a kernel through an expression"
        return lau
    if len(launch.config) > 3 and not _default_stream(stream := facts.resolve(launch.config[3])):
        # kept for the template's launches; it must mean the same in a launcher whose body is rewritten
        names = {e.id for e in walk_expr(stream) if isinstance(e, Name)} - _STREAM_CONSTANTS
        if any(isinstance(e, Call) for e in walk_expr(stream)) or not names <= set(lau.param_names()):
            lau.problem = (f"launches on a stream it computes ({to_c(launch.config[3])}); a template keeps only a "
                           "stream the launcher is given")
            return lau
        lau.stream = launch.config[3]
    lau.launch, lau.kernel = launch, launch.kernel.id.split("::")[-1]
    lau.args = tuple(facts.resolve(a) for a in launch.args)
    lau.written_args = tuple(launch.args)
    for stmt in fn.body.body:
        problem = _classify(stmt, lau)
        if problem:
            lau.problem = problem
            return lau
    named = next(naming_statements(fn.body), None)
    if named is not None and lau.in_place is None:  # in place, the body and its names stay
        # A template writes a new body: the launch's words (`(idx_t)n`) would leave the scope
        # that gave them their meaning (red team round 85). Tiers that keep the body still apply.
        lau.problem = (f"names things in its body ({named.text}); a template replaces the body, and the launch's "
                       "words would lose the meaning those names give them")
    return lau


_STREAM_CONSTANTS = frozenset(["nullptr", "NULL", "cudaStreamDefault", "cudaStreamLegacy", "cudaStreamPerThread"])


def _default_stream(e: Expr) -> bool:
    while isinstance(e, Cast):
        e = e.operand
    return (isinstance(e, Num) and e.value == 0) or (isinstance(e, Name) and e.id in (
        "nullptr", "NULL", "cudaStreamDefault", "cudaStreamLegacy"))


def statements_under(s: Stmt | None):
    """`s` and every statement inside it (a for loop's header declaration too)."""
    if s is None:
        return
    yield s
    if isinstance(s, Block):
        for x in s.body:
            yield from statements_under(x)
    elif isinstance(s, If):
        yield from statements_under(s.then)
        yield from statements_under(s.other)
    elif isinstance(s, (For, While)):
        if isinstance(s, For):
            yield from statements_under(s.init)
        yield from statements_under(s.body)


def naming_statements(s: Stmt | None):
    """Every `using ...;`, `typedef ...;` or namespace alias anywhere under `s`."""
    return (x for x in statements_under(s) if isinstance(x, Using))


def statement_exprs(s: Stmt | None):
    """Top-level expressions of every statement under `s`."""
    if s is None:
        return
    if isinstance(s, Block):
        for x in s.body:
            yield from statement_exprs(x)
    elif isinstance(s, ExprStmt):
        yield s.expr
    elif isinstance(s, Decl):
        for d in s.declarators:
            if d.init is not None:
                yield d.init
    elif isinstance(s, If):
        yield s.cond
        yield from statement_exprs(s.then)
        yield from statement_exprs(s.other)
    elif isinstance(s, For):
        yield from statement_exprs(s.init)
        if s.cond is not None:
            yield s.cond
        if s.step is not None:
            yield s.step
        yield from statement_exprs(s.body)
    elif isinstance(s, While):
        yield s.cond
        yield from statement_exprs(s.body)
    elif isinstance(s, Return) and s.value is not None:
        yield s.value


def _classify(stmt: Stmt, lau: Launcher) -> str | None:
    """None when the statement is allowed (recording zeroing statements), else why not."""
    exprs = list(statement_exprs(stmt))
    calls = [e for x in exprs for e in walk_expr(x) if call_name(e)]
    names = {call_name(c) for c in calls}
    has_launch = any(isinstance(e, Launch) for x in exprs for e in walk_expr(x))
    if any(_has_effect(x) for x in exprs):
        # a check that also assigns, increments or hands out an address (`CUDA_CHECK((n -= 32) ...)`,
        # `cudaDeviceGetAttribute(&m, ...)`, `int k = n--;`): dropping it, or reading the launch's
        # words elsewhere, would drop that too (red team round 100)
        return "changes a value in a statement besides the launch"
    memsets = [c for c in calls if call_name(c) in _MEMSETS]
    if memsets:
        if has_launch or len(memsets) > 1:
            return "zeroes memory and launches in one statement"
        return _zeroing(stmt, memsets[0], lau)
    if isinstance(stmt, Decl):
        return None if not (names & {"cudaMalloc", "cudaMemcpy", "cudaMemcpyAsync", "malloc"}) else \
            "allocates or copies memory"
    if has_launch:
        if isinstance(stmt, ExprStmt) and isinstance(stmt.expr, Launch):
            return None
        return "launches its kernel inside a condition or loop"
    if isinstance(stmt, (Return, Using)):  # a using or alias declaration names things, does nothing
        return None
    if isinstance(stmt, If) and stmt.other is None and isinstance(stmt.then, (Return, Block)) and \
            (isinstance(stmt.then, Return) or (len(stmt.then.body) == 1 and isinstance(stmt.then.body[0], Return))):
        # an early return (`if (n == 0) return;`), kept where it is, when its condition is pure and
        # reads only parameters; any other stops the templates (red team round 100)
        then = stmt.then if isinstance(stmt.then, Return) else stmt.then.body[0]
        plain = then.value is None or (isinstance(then.value, Name) and then.value.id == "cudaSuccess")
        body = list(lau.fn.body.body)
        # moved to the top only from before anything that acts (a zeroing, a launch, a call)
        acted = any(isinstance(e, (Call, Launch)) and call_name(e) != "assert"
                    for s in body[:body.index(stmt)] for x in statement_exprs(s) for e in walk_expr(x))
        # its locals read through their values (`const int64_t numel = b * r * c; if (numel == 0) return;`):
        # a local never changed, declared from the parameters alone, is as pure as they are
        if isinstance(then, Return) and plain and not acted and _pure_on_parameters(lau.facts.resolve(stmt.cond), lau):
            return None
        return "returns early on a condition a template could not keep"
    if isinstance(stmt, ExprStmt) and _precondition(stmt, lau):
        return None
    if isinstance(stmt, ExprStmt) and calls and all(
            n in _DROPPABLE or (n is not None and n.isupper()) for n in names):
        cuda_calls = {n for n in names if n and n.startswith("cuda")}
        if cuda_calls <= _DROPPABLE:
            return None
    if isinstance(stmt, ExprStmt) and _error_check(stmt.expr):
        return None
    if isinstance(stmt, ExprStmt) and _discarded(stmt.expr, lau.param_names()):
        return None  # `(void)unused;`: says a parameter is unused, does nothing
    if isinstance(stmt, ExprStmt) and not calls:
        return "computes something besides the launch"
    if isinstance(stmt, ExprStmt) and isinstance(stmt.expr, Call) and call_name(stmt.expr) not in _VALUE_CALLS \
            and all(n is not None and not n.startswith("cuda") for n in names):
        lau.unconfirmed.append(stmt)  # a call of the program's own: read with its names later
        return None
    called = ", ".join(sorted(n for n in names if n)) or "nothing"
    return f"does more than launch one kernel (statement calling {called})"


def _discarded(e: Expr, params: list[str]) -> bool:
    """`(void)p`: a parameter's value cast to void, with nothing else in it (a name that is not a
    parameter may be a macro that does work: red team round 83)."""
    if not (isinstance(e, Cast) and e.type.strip() == "void"):
        return False
    operand = strip_casts(e.operand)
    return isinstance(operand, Name) and operand.id in params


def _error_check(e: Expr) -> bool:
    """`check(cudaGetLastError())`, `cudaCheck(cudaDeviceSynchronize(), "launch")`: any function
    (llm.c's cudaCheck, a project's own) handed the result of droppable CUDA calls and nothing
    else that calls: an error check, which the rewritten launcher may leave out."""
    if not isinstance(e, Call) or call_name(e) is None:
        return False
    queries = [a for a in e.args if isinstance(a, Call)]
    others = [a for a in e.args if not isinstance(a, Call)]

    def calls_or_assigns(x: Expr) -> bool:
        return any(isinstance(y, (Call, Launch, Assign)) for y in walk_expr(x))

    return bool(queries) and all(
        call_name(q) in _DROPPABLE and not any(calls_or_assigns(arg) for arg in q.args) for q in queries
    ) and not any(calls_or_assigns(a) for a in others)


def _has_effect(e: Expr) -> bool:
    """Whether E assigns, increments or takes an address anywhere (a lambda or a call inside is
    judged by the caller)."""
    return any(isinstance(x, (Assign, Postfix)) or (isinstance(x, Unary) and x.op in ("++", "--", "&"))
               for x in walk_expr(e))


def _pure_on_parameters(e: Expr, lau: Launcher) -> bool:
    """Whether E calls, launches and changes nothing and names only the launcher's parameters."""
    parts = list(walk_expr(e))
    return not _has_effect(e) and not any(isinstance(x, (Call, Launch)) for x in parts) and \
        all(x.id in lau.param_names() for x in parts if isinstance(x, Name))


def _precondition(stmt: ExprStmt, lau: Launcher) -> bool:
    """`assert(cond)` on the launcher's arguments (llm.c's `assert(C % 4 == 0)`), which stays where it
    is in a template's launcher: a condition that calls, assigns and increments nothing and names
    nothing but the launcher's parameters. A program's own `assert` macro is read through its
    expansion (launch_words.reading_problem; red team round 99: one that assigns)."""
    e = stmt.expr
    return isinstance(e, Call) and call_name(e) == "assert" and len(e.args) == 1 and _pure_on_parameters(e.args[0], lau)


def _zeroing(stmt: Stmt, memset: Expr, lau: Launcher) -> str | None:
    assert isinstance(memset, Call)
    if len(memset.args) < 3:
        return "calls cudaMemset with too few arguments"
    target = memset.args[0]
    while isinstance(target, Cast):
        target = target.operand
    value = lau.facts.resolve(memset.args[1])
    b = lau.facts.binding(target)
    if b is None or b.param is None or not b.param.pointer:
        return "zeroes memory that is not one of its pointer parameters"
    if not (isinstance(value, Num) and not value.is_float and value.value == 0):
        return "sets memory to a non-zero byte"
    if isinstance(stmt, ExprStmt):
        text = to_c(lau.facts.resolve(stmt.expr)) + ";"
    else:
        start, end = stmt.span  # type: ignore[attr-defined]
        body_text = lau.fn.item.text[len(lau.fn.head):]
        text = body_text[start:end]
        local_names = {bd.name for bd in lau.facts.bindings}
        if any(re.search(rf"\b{re.escape(n)}\b", _strip(text)) for n in local_names):
            return "zeroes memory inside a statement that uses its local variables"
    lau.zeroing.append(ZeroingStatement(pointer=b.name, text=text, statement=stmt))
    return None


@dataclass
class Binder:
    """Kernel parameters -> the launcher's argument expressions: as the analysis reads them (the
    launcher's locals inlined), and as C text where the launch was (the words as written)."""

    launcher: Launcher
    kernel: Function

    def arg(self, param: str) -> Expr | None:
        names = [p.name for p in self.kernel.sig.params]
        if param not in names or len(self.launcher.args) != len(names):
            return None
        return self.launcher.args[names.index(param)]

    def written(self, param: str) -> Expr | None:
        names = [p.name for p in self.kernel.sig.params]
        if param not in names or len(self.launcher.written_args) != len(names):
            return None
        return self.launcher.written_args[names.index(param)]

    def pointer_text(self, param: str) -> str | None:
        a = self.written(param)
        return None if a is None else to_c(a)

    def launcher_param(self, param: str) -> str | None:
        """The launcher parameter a kernel pointer parameter receives, when it is one (maybe cast)."""
        a = self.arg(param)
        while isinstance(a, Cast):
            a = a.operand
        b = self.launcher.facts.binding(a) if a is not None else None
        return b.name if b is not None and b.param is not None else None

    def received(self, param: str, arg: Expr) -> Expr:
        """ARG as kernel parameter PARAM receives it (received_as)."""
        declared = next((p for p in self.kernel.sig.params if p.name == param), None)
        return arg if declared is None else received_as(self.launcher.facts, declared, arg)

    def int_text(self, p: Poly) -> str | None:
        """C text of a uniform polynomial over kernel parameters and outside constants."""
        if p.is_zero:
            return "0"
        parts: list[str] = []
        # every name in parentheses once it is combined: it may be a macro of the program
        # (`#define PAIRS n / 2` read as 2*PAIRS: red team round 103)
        alone = len(p.terms) == 1 and p.terms[0][1] == 1 and len(p.terms[0][0]) == 1
        for monomial, coef in p.terms:
            factors: list[str] = [] if coef == 1 else [f"({coef})"]
            for atom in monomial:
                if atom.startswith("p:"):
                    a = self.written(atom[2:])
                    if a is None:
                        return None
                    text = to_c(self.received(atom[2:], a))
                elif atom.startswith("g:"):
                    text = atom[2:]
                    if text in {b.name for b in self.launcher.facts.bindings}:
                        return None  # the launcher's own name there (red team round 100): another value
                else:
                    return None  # an opaque value: its text is in the kernel's names
                factors.append(text if alone or re.fullmatch(r"\d+", text) else f"({text})")
            parts.append("*".join(factors) if factors else "1")
        return " + ".join(parts)

    def launcher_poly(self, p: Poly) -> Poly | None:
        """A uniform polynomial over kernel parameters and outside constants in the launcher's
        values (its arguments as the analysis reads them), or None."""
        lf = self.launcher.facts
        values: dict[str, Poly] = {}
        for atom in p.atoms():
            if atom.startswith("p:"):
                a = self.arg(atom[2:])
                v = None if a is None else lf.poly(without_wide_casts(lf, self.received(atom[2:], lf.resolve(a))))
            elif atom.startswith("g:"):
                v = None if atom[2:] in {b.name for b in lf.bindings} else Poly.atom(atom)
            else:
                v = None
            if v is None:
                return None
            values[atom] = v
        return p.substitute(values)

    def describe(self, p: Poly) -> str:
        text = self.int_text(p)
        return text if text is not None else str(p)


_AXES = "xyz"


def launch_extent(f: KernelFacts, e: Expr, axis: str = "x", depth: int = 0) -> Expr:
    """A launch dimension's extent along AXIS in the launcher's parameters: `dim3(a, b)` -> a or b
    (1 for a missing one), `d.x` of such a dim3 -> a, a local never assigned after its declaration
    -> its value; a plain integer is its own x and 1 along y and z; the rest as is."""
    e = f.without_kept_casts(e)  # a narrowing cast changes the extent at some size (red team round 109)
    if depth > 32:
        return e
    if isinstance(e, Name):
        b = f.binding(e)
        # an integer (a local, a parameter, an integer macro or constant) is a block's x alone: 1 along y
        # and z, whatever its value (`const int block = THREADS;` is not THREADS threads along y)
        if axis != "x" and ((b is not None and not b.pointer and b.type != "dim3" and f.integer_kind(e) is not None)
                            or (b is None and e.id in f.constants)):
            return Num("1")
        if b is not None and b.init is not None and not b.assignments and not b.pointer and b.param is None \
                and not b.persistent and f.keeps_init(b):
            return launch_extent(f, b.init, axis, depth + 1)
        return e
    if isinstance(e, Call) and call_name(e) == "dim3" and e.args:
        i = _AXES.index(axis)
        return launch_extent(f, e.args[i], "x", depth + 1) if i < len(e.args) else Num("1")
    if isinstance(e, Member) and e.field in _AXES and not e.arrow:
        base = launch_extent(f, e.base, e.field, depth + 1)
        if axis != "x":
            return Num("1") if not isinstance(base, Member) and base is not f.without_kept_casts(e.base) else e
        return base if not isinstance(base, Member) and base is not f.without_kept_casts(e.base) else e
    if axis != "x":
        return Num("1") if isinstance(e, Num) or (isinstance(e, Binary | Cast) and f.integer_kind(e) is not None) else e
    if isinstance(e, Binary):
        return Binary(e.op, launch_extent(f, e.left, "x", depth + 1), launch_extent(f, e.right, "x", depth + 1))
    if isinstance(e, Cast):
        return Cast(e.type, launch_extent(f, e.operand, "x", depth + 1))
    return e


def with_names(e: Expr, values: dict[str, Expr]) -> Expr:
    """E with each name in VALUES replaced (a kernel's parameters by the launch's arguments, a
    helper's by a call's); a form not followed here that holds such a name becomes a name nothing
    binds (`kl_unread`), so nothing is proved from it."""
    if isinstance(e, Name):
        return values.get(e.id, e)
    if isinstance(e, Binary):
        return Binary(e.op, with_names(e.left, values), with_names(e.right, values))
    if isinstance(e, Cast):
        return Cast(e.type, with_names(e.operand, values))
    if isinstance(e, Call):
        return Call(e.func, tuple(with_names(a, values) for a in e.args), e.targs)
    if isinstance(e, Unary):
        return Unary(e.op, with_names(e.operand, values))
    return e if not any(isinstance(x, Name) and x.id in values for x in walk_expr(e)) else Name("kl_unread")


def block_size(f: KernelFacts, launch: Launch, config: tuple[Expr, ...] = (), axis: int = 1,
               direction: str = "x") -> Poly | None:
    """The launch's block size along DIRECTION (AXIS 0: its grid size), in the launcher's values (F:
    the launcher's facts; CONFIG: the configuration as read, helpers inlined, else the launch's own)."""
    config = config or launch.config
    return f.poly(launch_extent(f, config[axis], direction)) if len(config) >= 2 else None


def received_as(f: KernelFacts, declared: Param, arg: Expr) -> Expr:
    """ARG (in the launcher's facts F) as a kernel's parameter DECLARED receives it: converted to the
    parameter's type where that conversion may change it (red team round 113: an `int` handed to
    `unsigned short rows` read as the int; round 116: to a `float`, exact only to 2^24)."""
    if declared.pointer:
        return arg
    if is_floating_type(declared.base):
        return arg if f.is_floating(arg) else Cast(declared.base, arg)
    if not_an_integer(declared.base):
        return arg
    # a type not read as an integer (an alias, an enum: round 115) may narrow too: the cast stays
    cast = Cast(declared.base, arg)
    return arg if f.keeps_value(cast) else cast


def grid_reaches(f: KernelFacts, launch: Launch, params: tuple[Param, ...], bound: Expr,
                 config: tuple[Expr, ...] = ()) -> bool:
    """Whether LAUNCH starts at least BOUND threads along x (BOUND in the kernel's parameters
    PARAMS; F: the launcher's facts; CONFIG: the configuration as read, helpers inlined, else the
    launch's own), proved from the launcher: grid * block == BOUND, or grid == (BOUND + block - 1) /
    block."""
    config = config or launch.config
    if len(config) < 2 or len(params) != len(launch.args):
        return False
    total = f.poly(with_names(bound, {p.name: received_as(f, p, f.resolve(a)) for p, a in zip(params, launch.args)}))
    block = f.poly(launch_extent(f, config[1]))
    if total is None or block is None:
        return False
    return extent_reaches(f, config[0], "x", block, total) == "always"


def without_wide_casts(f: KernelFacts, e: Expr) -> Expr:
    """E without its casts to integer types of 32 bits or more (`(int)((rows + 127) / 128)` of an
    int64_t rows). For a coverage proof only: a template runs where its sizes are in [1, 2^30], so
    such a cast of a size keeps its value there or wraps it lower (never past the grid), and a grid
    computed from a size wraps only beyond 2^31 blocks (red team round 112)."""
    if isinstance(e, Cast):
        kind = f.integer_kind(e)
        inner = without_wide_casts(f, e.operand)
        return inner if kind is not None and kind[0] >= 31 and f.integer_kind(e.operand) is not None \
            else Cast(e.type, inner)
    if isinstance(e, Binary):
        return Binary(e.op, without_wide_casts(f, e.left), without_wide_casts(f, e.right))
    return e


def extent_reaches(f: KernelFacts, grid: Expr, direction: str, per_block: Poly, total: Poly,
                   known: Mapping[str, Poly] | None = None) -> str | None:
    """Whether a grid of GRID blocks along DIRECTION, each covering PER_BLOCK values of a
    coordinate, covers [0, TOTAL) (all in the launcher's values; KNOWN: values of the outside
    constants): "always" (grid * per_block == total, or grid == (total + per_block - 1) /
    per_block), "when it divides" (grid == total / per_block, rounding down), else None."""
    def poly(e: Expr) -> Poly | None:
        p = f.poly(e)
        return None if p is None else p.substitute(known or {})

    extent = without_wide_casts(f, launch_extent(f, grid, direction))
    g = poly(extent)
    if g is not None and g * per_block == total:
        return "always"
    division = extent
    if isinstance(division, Binary) and division.op == "/" and poly(division.right) == per_block:
        num = poly(division.left)
        if num == total + per_block - Poly.const(1):
            return "always"
        if num == total:
            return "when it divides"
    return None
