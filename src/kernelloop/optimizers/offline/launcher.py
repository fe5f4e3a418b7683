"""The editable part's shape: which launchers the harness calls, what each launches, and how.

A launcher fits a template when it only sets up and launches one kernel: local geometry
(dim3, grid arithmetic), at most one `<<<...>>>` launch, optional zeroing of an output
(cudaMemset / cudaMemsetAsync, whatever macro wraps it), error checks and synchronizations,
and early returns. The zeroing statements are kept as the baseline wrote them, so the
candidate reproduces the launcher's observable behaviour exactly.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ...program.scanner import Item, function_name, scoped_items, strip_comments
from .cparse import Signature, parse_body, parse_signature
from .facts import KernelFacts, collect_facts
from .symbolic import Poly
from .syntax import (
    Assign,
    Block,
    Call,
    Cast,
    Decl,
    Expr,
    ExprStmt,
    For,
    If,
    Launch,
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
                        "cudaGetDeviceProperties", "cudaOccupancyMaxActiveBlocksPerMultiprocessor"])


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


@dataclass
class Launcher:
    fn: Function
    facts: KernelFacts  # the launcher's own body, for inlining its locals
    launch: Launch | None = None
    kernel: str | None = None
    args: tuple[Expr, ...] = ()  # launch arguments with the launcher's locals inlined
    zeroing: list[ZeroingStatement] = field(default_factory=list)
    preconditions: list[str] = field(default_factory=list)  # `assert(n > 0);` as written, kept first
    problem: str | None = None
    stream: Expr | None = None  # the launch's stream, made of the launcher's parameters; None: the default stream
    # A template launcher reached through init's wrapper: the template arguments the wrapper gives it
    # ("float"), the one instantiation the verifier runs; None for any other launcher.
    template_args: str | None = None
    # A launcher of several launches, each a statement of its own at the top of its body: one view
    # per launch (`in_place` its statement), for the templates, which then replace that statement
    # alone and keep the rest of the body as written (issue 11: optimize the hottest launch, keep
    # the others). The launcher itself keeps its problem ("launches N kernels") for everything else.
    per_launch: list[Launcher] = field(default_factory=list)
    in_place: ExprStmt | None = None

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


def _strip(text: str) -> str:
    return strip_comments(text)


def read_editable(editable: str, harness: str, exported: list[str]) -> EditablePart:
    # Items inside namespaces and extern "C" blocks too (PyTorch extensions): each keeps its blocks
    # (Item.scope), and whoever writes the part again puts it back inside them (scanner.in_scope).
    items = scoped_items(editable)
    functions: dict[str, Function] = {}
    ambiguous: set[str] = set()
    problems: list[str] = []
    for item in items:
        if not item.is_function_definition:
            continue
        name = function_name(item) or ""
        head = item.head
        try:
            sig = parse_signature(strip_comments(head))
            body = parse_body(item.text[len(head):])
        except ParseError as exc:
            problems.append(f"{name}: {exc}")
            continue
        named = next(naming_statements(body), None)
        if named is not None and {"__global__", "__device__"} & set(sig.qualifiers):
            # `using namespace ns;` in device code may make `min(a, b)` a function of ns that the
            # tiers would take for the math function: a kernel or helper with one is not read
            problems.append(f"{name}: declares names inside device code ({named.text})")
            continue
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
            for lau in [launcher, *launcher.per_launch]:
                acting = _acting_part_call(lau, functions)
                if lau.problem is None and acting:
                    lau.problem = acting
            launcher.template_args = _call_template_args(fn) if target is not fn else None
            unread = _unread_callee(fn, problems)
            if target is fn and unread:  # say why, not "launches 0 kernels"
                launcher.problem = f"calls {unread}"
            launchers.append(launcher)
    referenced = [n for n in functions if re.search(rf"(?<![\w.]){re.escape(n)}\b", harness_code)]
    return EditablePart(items, functions, launchers, launched, problems, referenced)


# calls handed a launcher's value that cannot change it (by value, or no such argument at all)
_VALUE_CALLS = frozenset(["min", "max", "std::min", "std::max", "umin", "umax", "abs", "std::abs", "assert",
                          "sizeof", "static_cast", "printf", "fprintf",
                          # a value type built from values (`dim3 block(tile, tile)`, `int(n)`, `size_t(n)`)
                          "dim3", "int", "unsigned", "long", "short", "char", "float", "double", "bool", "size_t",
                          "int32_t", "uint32_t", "int64_t", "uint64_t", "ptrdiff_t"]) | _DROPPABLE | _MEMSETS


def _acting_part_call(lau: Launcher, functions: dict[str, Function]) -> str | None:
    """Why a statement of LAU besides its launch may change what the launch computes through a call
    whose effect its syntax does not show, or None: a function of the part that launches a kernel
    (itself or through what it calls), is handed a pointer, writes anything but its own locals or
    takes a reference (red team rounds 100-101: `START_AT_ONE(out)`, `note_padding(...)` setting a
    global the launch reads); or a launcher value handed bare to a call that could bind it to a
    reference (`std::exchange(n, n / 2)` in a declaration). A rewritten launcher that leaves the
    statement out, or reads the launch's words elsewhere, would lose that effect."""
    pointers = {p.name for p in lau.fn.sig.params if p.pointer}
    values = {b.name for b in lau.facts.bindings} | {p.name for p in lau.fn.sig.params}

    def acts(fn: Function, seen: set[str]) -> bool:
        if fn.name in seen:
            return False
        seen.add(fn.name)
        if any("&" in p.type for p in fn.sig.params):
            return True
        facts = collect_facts(fn.sig, fn.body)
        exprs = [e for x in statement_exprs(fn.body) for e in walk_expr(x)]
        for e in exprs:
            if isinstance(e, Launch):
                return True
            target = e.target if isinstance(e, Assign) else e.operand if isinstance(e, Postfix) or (
                isinstance(e, Unary) and e.op in ("++", "--")) else None
            if target is not None and (not isinstance(target, Name) or facts.binding(target) is None):
                return True  # memory, a member or a file-scope variable written
            if isinstance(e, Call) and (callee := functions.get(call_name(e) or "")) is not None \
                    and not callee.is_kernel and acts(callee, seen):
                return True
        return False

    for stmt in lau.fn.body.body:
        if isinstance(stmt, ExprStmt) and isinstance(stmt.expr, Launch):
            continue
        for call in (e for x in statement_exprs(stmt) for e in walk_expr(x) if isinstance(e, Call)):
            name = call_name(call) or ""
            callee = functions.get(name)
            if callee is not None and callee.is_kernel:
                continue
            if callee is not None and callee is not lau.fn:
                handed = any(isinstance(y, Name) and y.id in pointers for a in call.args for y in walk_expr(a))
                if handed or acts(callee, set()):
                    return f"calls {callee.name}, a function of the part that launches, writes or is handed a pointer"
            elif name not in _VALUE_CALLS:
                bare = next((strip_casts(a).id for a in call.args
                             if isinstance(strip_casts(a), Name) and strip_casts(a).id in values), None)
                if bare is not None:
                    return f"hands {bare} to {name}, which could change it"
    return None


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


def read_launcher(fn: Function) -> Launcher:
    facts = collect_facts(fn.sig, fn.body)
    lau = Launcher(fn=fn, facts=facts)
    launches = [e for s in statement_exprs(fn.body) for e in walk_expr(s) if isinstance(e, Launch)]
    if len(launches) != 1:
        lau.problem = f"launches {len(launches)} kernels (a template replaces exactly one launch)"
        if len(launches) > 1:
            lau.per_launch = _per_launch(fn, facts, launches)
        return lau
    return _read_launch(lau, launches[0])


def _per_launch(fn: Function, facts: KernelFacts, launches: list[Launch]) -> list[Launcher]:
    """One view per launch of a launcher of several, when each is a statement of its own at the top
    of the body (not in a loop or a condition, where replacing one would change how often it runs)."""
    top = [s for s in fn.body.body if isinstance(s, ExprStmt) and isinstance(s.expr, Launch)]
    if len(top) != len(launches):
        return []
    views = []
    local_names = {b.name for b in facts.bindings} - {p.name for p in fn.sig.params}
    for stmt in top:
        view = _read_launch(Launcher(fn=fn, facts=facts, in_place=stmt), stmt.expr)
        body = list(fn.body.body)
        before, after = body[:body.index(stmt)], body[body.index(stmt) + 1:]
        zeroes = lambda s: any(isinstance(e, Call) and call_name(e) in _MEMSETS  # noqa: E731
                               for x in statement_exprs(s) for e in walk_expr(x))
        launches = lambda s: isinstance(s, ExprStmt) and isinstance(s.expr, Launch)  # noqa: E731
        if view.problem is not None:
            pass
        elif any(zeroes(s) for s in after):  # the templates read a zeroing as done just before their launch
            view.problem = "zeroes memory after the launch a template would replace"
        elif view.zeroing and any(launches(s) for s in before):
            # another launch between a zeroing and this one may have written there (red team round 100)
            view.problem = "zeroes memory before another launch that comes first"
        elif {x.id for a in (*view.args, *([view.stream] if view.stream is not None else []))
              for x in walk_expr(a) if isinstance(x, Name)} & local_names:
            # the call in place reads its words where the launch was: a local's initializer inlined
            # there can mean another thing (a name declared after it: red team round 100)
            view.problem = "its launch reads the launcher's locals, which a template call in place would misread"
        views.append(view)
    return views


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
        lau.stream = stream
    lau.launch, lau.kernel = launch, launch.kernel.id.split("::")[-1]
    lau.args = tuple(facts.resolve(a) for a in launch.args)
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


def naming_statements(s: Stmt | None):
    """Every `using ...;`, `typedef ...;` or namespace alias anywhere under `s`."""
    if isinstance(s, Using):
        yield s
    elif isinstance(s, Block):
        for x in s.body:
            yield from naming_statements(x)
    elif isinstance(s, If):
        yield from naming_statements(s.then)
        yield from naming_statements(s.other)
    elif isinstance(s, (For, While)):
        if isinstance(s, For):
            yield from naming_statements(s.init)
        yield from naming_statements(s.body)


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
        # an early return (`if (n == 0) return;`): kept as written, first, as a precondition is, when its
        # condition is pure and reads only parameters; any other stops the templates (red team round 100:
        # any `if (...) return;` was dropped as one for empty sizes)
        then = stmt.then if isinstance(stmt.then, Return) else stmt.then.body[0]
        plain = then.value is None or (isinstance(then.value, Name) and then.value.id == "cudaSuccess")
        body = list(lau.fn.body.body)
        # moved to the top only from before anything that acts (a zeroing, a launch, a call)
        acted = any(isinstance(e, (Call, Launch)) and call_name(e) != "assert"
                    for s in body[:body.index(stmt)] for x in statement_exprs(s) for e in walk_expr(x))
        if isinstance(then, Return) and plain and not acted and _pure_on_parameters(stmt.cond, lau):
            start, end = stmt.span  # type: ignore[attr-defined]
            lau.preconditions.append(lau.fn.item.text[len(lau.fn.head):][start:end].strip())
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
    """`assert(cond)` on the launcher's arguments (llm.c's `assert(C % 4 == 0)`): recorded as written,
    so a template's new body checks what the baseline checked, first. Only a condition that calls,
    assigns and increments nothing and names nothing but the launcher's parameters: it means the
    same at the top of the new body, and it holds for every size the harness gives (the baseline
    would stop otherwise). `assert` must be <cassert>'s: analysis.analyze drops the preconditions'
    launchers of a program that defines its own (red team round 99: one that assigns)."""
    e = stmt.expr
    if not (isinstance(e, Call) and call_name(e) == "assert" and len(e.args) == 1):
        return False
    # every name a parameter of the launcher: a macro or a global could mean something else at the
    # top of the new body, or hide an assignment the condition's syntax does not show (round 99)
    if not _pure_on_parameters(e.args[0], lau):
        return False
    start, end = stmt.span  # type: ignore[attr-defined]
    text = lau.fn.item.text[len(lau.fn.head):][start:end].strip()
    if not text.startswith("assert") or "\n#" in text:
        return False
    lau.preconditions.append(text if text.endswith(";") else text + ";")
    return True


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
    lau.zeroing.append(ZeroingStatement(pointer=b.name, text=text))
    return None


@dataclass
class Binder:
    """Kernel parameters -> the launcher's argument expressions (C text in the launcher's scope)."""

    launcher: Launcher
    kernel: Function

    def arg(self, param: str) -> Expr | None:
        names = [p.name for p in self.kernel.sig.params]
        if param not in names or len(self.launcher.args) != len(names):
            return None
        return self.launcher.args[names.index(param)]

    def pointer_text(self, param: str) -> str | None:
        a = self.arg(param)
        return None if a is None else to_c(a)

    def launcher_param(self, param: str) -> str | None:
        """The launcher parameter a kernel pointer parameter receives, when it is one (maybe cast)."""
        a = self.arg(param)
        while isinstance(a, Cast):
            a = a.operand
        b = self.launcher.facts.binding(a) if a is not None else None
        return b.name if b is not None and b.param is not None else None

    def int_text(self, p: Poly) -> str | None:
        """C text of a uniform polynomial over kernel parameters and outside constants."""
        if p.is_zero:
            return "0"
        parts: list[str] = []
        for monomial, coef in p.terms:
            factors: list[str] = [] if coef == 1 else [f"({coef})"]
            for atom in monomial:
                if atom.startswith("p:"):
                    a = self.arg(atom[2:])
                    if a is None:
                        return None
                    text = to_c(a)
                    factors.append(text if re.fullmatch(r"[A-Za-z_]\w*|\d+", text) else f"({text})")
                elif atom.startswith("g:"):
                    factors.append(atom[2:])
                else:
                    return None  # an opaque value: its text is in the kernel's names
            parts.append("*".join(factors) if factors else "1")
        return " + ".join(parts)

    def describe(self, p: Poly) -> str:
        text = self.int_text(p)
        return text if text is not None else str(p)
