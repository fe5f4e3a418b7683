"""Which module-scope variables of a PTX module its device code may change.

A `static` variable inside device code (`static float gain;` in a `__device__` function, a table a
kernel builds on its first launch) lives in global memory for the life of the context, like a
`__device__` variable, but nvcc registers no host copy of it, so nothing on the host side names it
(red team round 310). Its value persists between launches only if some device code writes it: a
`static const` table nvcc also puts in `.global`, and only reads. So each such variable is judged by
following its address through every function of the module, by name, flow-insensitively. An
address may only be moved, offset and converted between address spaces (`mov`, `add`, `sub`,
`cvta`, `selp`, the addend of a `mad`, none setting the carry flag), and used as the address a
load reads at; anything else counts as a write:

- a store, atomic, reduction or copy (`st`, `atom`, `red`, `cp...`) that names it, as the place or
  as the value;
- any other use of it, which lets the address go where the reading cannot follow: a call's
  argument or a return value, a shift, mask or comparison (the address rebuilt bit by bit from
  loads or branches: red team round 311), an add that sets the carry flag (`add.cc`: the carry
  passes its bits on, round 312), a load's other operands, another variable's value
  (`generic(v)`);
- the format string of `vprintf` and the arguments of `__assertfail` are only read, where the
  module declares them `.extern` (the CUDA runtime's own, not a definition of that name: round
  311) and the parameter is that call's alone (round 314); and printf's arguments (an address
  parked in the thread's local buffer for `vprintf`) are only read where no function of the module
  loads from local memory or lets a local address go anywhere but there (local memory outlives a
  call: round 314);
- a module that cannot be read whole (tools.ptx_module) counts every variable as written.

The reading over-approximates: a table whose address a non-inlined function receives counts as
written (the user vouches for it with --keep-state); a table only ever loaded does not.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .ptx_module import NAME, PtxModule, line_code

# the CUDA runtime's device functions that only read what their pointer arguments point at
_READING_CALLEES = frozenset({"vprintf", "__assertfail"})
_READS = re.compile(r"^(?:ld|ldu|prefetch|prefetchu)(?:\.|$)")
_MOVES = frozenset({"mov", "add", "sub", "cvta", "selp"})  # an address moved, offset or converted
_MEMORY_OPERAND = re.compile(r"\[[^\]]*\]")
_GUARD = re.compile(r"^@!?%?[\w$.]+\s+")
_LEADING = re.compile(r"^(?:[{}]\s*|[\w$.]+:(?!:)\s*)+")
# line directives inside a body, ending at the end of their line (`.loc 1 14 3`, with the function and
# the place it was inlined at; `.file 1 "x.cu"`, its string made `""` by line_code)
_LINE_DIRECTIVE = re.compile(r"^\.(?:loc|file)\b(?:\s+\d+\s+\d+\s+\d+(?:\s*,\s*function_name\s+[\w$.]+"
                             r"(?:\s*,\s*inlined_at\s+\d+\s+\d+\s+\d+)?)?$|\s+\d+\s+\"\"(?:\s*,\s*\d+\s*,\s*\d+)?$)?")
_BODY_MEMORY = re.compile(r"(?:^|\s)\.(?:global|const)\b")
_DECLARED_NAME = re.compile(r"(?P<name>[A-Za-z_$][\w$]*)(?:\[\d*\])*\s*(?:=|$)")
_CALL = re.compile(r"^call(?:\.\w+)*\s+(?:\([^)]*\)\s*,\s*)?(?P<target>[\w$.]+)")
# the thread's local memory as nvcc addresses it: the stack depot and its two pointers
_LOCAL_ROOTS = re.compile(r"^(?:SP|SPL|__local_depot\d*)$")


def _moves(opcode: str) -> bool:
    """An instruction that moves, offsets or converts an address and nothing else: one that also
    sets the carry flag (`add.cc`) passes the address's bits to the `addc` after it, which names
    no address (red team round 312 rebuilt one by a binary search on carries)."""
    base, *modifiers = opcode.split(".")
    return base in (*_MOVES, "mad") and "cc" not in modifiers


@dataclass
class _Body:
    statements: list[str]  # the instructions, one per `;` (a call spans lines), comments dropped
    memory: set[str]  # global or constant memory the body itself declares (only inline assembly can: round 313)
    readable: bool  # False where a statement is read otherwise than ptxas may read it


def _body(lines: list[str]) -> _Body:
    """A function body's statements as ptxas reads them: comments dropped as ptxas drops them (`/* //
    */ st ...` stores: round 312), a line directive (`.loc`, `.file`) ending at its line's end (it
    has no `;`: round 313 hid the store after it), every other statement at its `;`."""
    body, pending, in_comment = _Body([], set(), True), "", False
    for line in lines:
        code, in_comment = line_code(line, in_comment)
        head = _LEADING.sub("", " ".join(code.split()))
        if _LINE_DIRECTIVE.match(head):
            # alone on its line, where no statement is open: anything else is read some other way
            body.readable &= bool(_LINE_DIRECTIVE.fullmatch(head)) and not _LEADING.sub("", " ".join(pending.split()))
            pending = ""
            continue
        pending += "\n" + code
        *parts, pending = pending.split(";")
        for part in parts:
            # a block's braces and labels before an instruction (`} $L__BB0_2: ret`, `{ .reg .b64 t`);
            # a brace after the opcode is a vector operand's (`mov.b64 {%r1, %r2}, %rd1`)
            statement = _LEADING.sub("", " ".join(part.split()))
            if statement.startswith("."):
                if _BODY_MEMORY.search(statement):  # `.global .f32 gain = 0f3F800000` inside a function
                    body.memory |= {m.group("name") for m in [_DECLARED_NAME.search(statement)] if m} or {statement}
            elif statement:
                body.statements.append(_GUARD.sub("", statement))
    body.readable &= not _LEADING.sub("", " ".join(pending.split()))
    return body


def _operands(operands: str) -> list[str]:
    """The operands, split at top-level commas (`{%r1, %r2}` and `[%rd1+4]` are one each). Not
    program.scanner.split_top_level: that counts `<` and `>` as brackets, and a PTX constant
    expression may shift or compare (`1<<3`)."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(operands):
        depth += ch in "{[("
        depth -= ch in "}])"
        if ch == "," and depth == 0:
            parts.append(operands[start:i].strip())
            start = i + 1
    return [*parts, operands[start:].strip()] if operands.strip() else parts


def _names(text: str) -> set[str]:
    return set(NAME.findall(text))


@dataclass
class _Flow:
    """Where the addresses of some roots go in one function."""
    derived: dict[str, set[str]] = field(default_factory=dict)  # name -> the roots its value may be the address of
    escaped: set[str] = field(default_factory=set)  # roots whose address goes out of sight
    stored_at: set[str] = field(default_factory=set)  # roots written through (a store, atomic or copy at them)
    read: bool = False  # some load reads at a root's address
    parked: list[tuple[int, set[str]]] = field(default_factory=list)  # (statement, roots) stored at these addresses

    def roots(self, text: str) -> set[str]:
        return set().union(*(self.derived.get(n, set()) for n in _names(text)))


def _follow(statements: list[str], roots: set[str], reading_arguments: list[bool]) -> _Flow:
    flow = _Flow(derived={r: {r} for r in roots})
    changed = True
    while changed:  # the moves, to a fixed point (a loop's back edge carries an address forward)
        changed = False
        for statement in statements:
            opcode, _, rest = statement.partition(" ")
            base = opcode.split(".", 1)[0]
            ops = _operands(rest)
            if not _moves(opcode) or len(ops) < 2:
                continue
            sources = ops[1:] if base != "mad" else ops[3:]
            if base == "selp":
                sources = ops[1:3]
            reached = set().union(*(flow.roots(s) for s in sources))
            for name in _names(ops[0]):
                if reached - flow.derived.get(name, set()):
                    flow.derived.setdefault(name, set()).update(reached)
                    changed = True
    for i, statement in enumerate(statements):
        opcode, _, rest = statement.partition(" ")
        base = opcode.split(".", 1)[0]
        ops = _operands(rest)
        if _READS.match(opcode):
            places = [o for o in ops if o.startswith("[")]
            flow.read |= any(flow.roots(p) for p in places)
            flow.escaped |= set().union(set(), *(flow.roots(o) for o in ops[1:] if not o.startswith("[")))
        elif _moves(opcode) and base != "mad":
            pass  # followed above
        elif _moves(opcode) and len(ops) == 4:
            flow.escaped |= flow.roots(ops[1]) | flow.roots(ops[2])  # an address multiplied
        elif reading_arguments[i]:
            continue  # an argument of vprintf or __assertfail
        elif opcode.startswith("st") and len(ops) == 2 and ops[0].startswith("["):
            flow.stored_at |= flow.roots(ops[0])
            if value := flow.roots(ops[1]):
                flow.parked.append((i, value))
        else:
            flow.stored_at |= set().union(set(), *(flow.roots(o) for o in ops if o.startswith("[")))
            flow.escaped |= set().union(set(), *(flow.roots(o) for o in ops if not o.startswith("[")))
    return flow


def _call(statement: str) -> tuple[str, set[str]] | None:
    """A call's target and the names of the parameters it passes (`call.uni (retval0), vprintf,
    (param0, param1)`), or None for any other statement."""
    m = _CALL.match(statement)
    if m is None:
        return None
    arguments = statement[m.end():]
    return m.group("target"), _names(arguments[arguments.rfind("("):]) if "(" in arguments else set()


def _reading_arguments(statements: list[str], module: PtxModule) -> list[bool]:
    """For each statement, whether it is a `st.param` into an argument only a reading runtime
    function gets: the next call is `vprintf` or `__assertfail` as the module declares it `.extern`
    (a definition of that name in the file is not the runtime's: round 311), that call lists the
    parameter, and no other call passes it nor any load reads it back (round 314 stored an address
    into a parameter of its own before a `vprintf` and passed it to the next call)."""
    calls = [(i, c) for i, s in enumerate(statements) if (c := _call(s)) is not None]

    def reading(target: str) -> bool:
        callee = module.functions.get(target)
        return callee is not None and target in _READING_CALLEES and callee.extern and not callee.body

    passed_elsewhere = set().union(set(), *(args for _, (target, args) in calls if not reading(target)))
    loaded = {n for s in statements if s.startswith("ld.param") for n in _names(_operands(s.partition(" ")[2])[-1])}
    out = [False] * len(statements)
    for i, statement in enumerate(statements):
        if not statement.startswith("st.param"):
            continue
        place = _names(_operands(statement.partition(" ")[2])[0])
        following = next((c for j, c in calls if j > i), None)
        if any(s.startswith("ret") for s in statements[i + 1:(next((j for j, _ in calls if j > i), len(statements)))]):
            following = None
        out[i] = (following is not None and reading(following[0]) and bool(place) and place <= following[1]
                  and not place & (passed_elsewhere | loaded))
    return out


@dataclass
class _Function:
    written: set[str]  # roots written through or escaped
    parked: set[str]  # roots whose address is stored in the thread's local memory
    local_read: bool  # the function reads local memory, or lets a local address go out of sight


def _written_from(statements: list[str], roots: set[str], module: PtxModule) -> _Function:
    """The roots whose address one function's statements may write through or let escape, and those
    it parks in local memory (printf's argument buffer)."""
    reading_arguments = _reading_arguments(statements, module)
    flow = _follow(statements, roots, reading_arguments)
    written, parked = flow.escaped | flow.stored_at, set()
    local_roots = {n for s in statements for n in _names(s) if _LOCAL_ROOTS.match(n)}
    local = _follow(statements, local_roots, reading_arguments)
    for i, value in flow.parked:
        place = _operands(statements[i].partition(" ")[2])[0]
        if statements[i].startswith("st.local") or local.roots(place):
            parked |= value
        else:
            written |= value
    local_read = bool(local.escaped or local.read or local.parked or any(s.startswith("ld.local") for s in statements))
    return _Function(written, parked, local_read)


def written_variables(module: PtxModule, names: set[str]) -> set[str]:
    """Of NAMES (module-scope variables of MODULE), those its device code may write or whose address
    escapes where the module cannot follow it. An address parked in local memory (printf's argument
    buffer) is harmless only where no function of the module reads local memory back: local memory
    outlives the call, and the next function called at the same depth reads the same slots (red
    team round 314: an uninitialised local array returned the address printf had parked)."""
    if module.unreadable:
        return set(names)
    written = {other for n, statements in module.variables.items() for other in _names(statements) & names
               if other != n}
    functions = []
    for function in module.functions.values():
        if function.body:
            body = _body(function.body)
            if not body.readable:
                return set(names)
            functions.append(_written_from(body.statements, names, module))
    local_read = any(f.local_read for f in functions)
    for f in functions:
        written |= f.written | (f.parked if local_read else set())
    return written & names


def body_memory(module: PtxModule) -> set[str]:
    """Global or constant memory a function body declares itself (`{ .global .f32 gain; ... }` in
    inline assembly; nvcc never writes one): kept between launches, out of the module's list of
    variables, so counted as written, whatever its code does (red team round 313)."""
    return set().union(set(), *(_body(f.body).memory for f in module.functions.values() if f.body))


def device_statics(module: PtxModule, registered: set[str]) -> set[str]:
    """The module's variables in global or constant memory that no host registration names
    (REGISTERED: tools.registered): the `static` variables of device functions and kernels
    (`_ZZ...`, a lambda's too), string literals' storage (`$str`), anything else nvcc or an asm
    statement keeps there. A `.const` one too: device memory, writable through a generic pointer
    (red team round 271)."""
    return {name for name, statements in module.variables.items()
            if name not in registered and re.search(r"(?:^|\s)\.(?:global|const)\s", statements)
            and not re.search(r"(?:^|\s)\.extern\s", statements)}
