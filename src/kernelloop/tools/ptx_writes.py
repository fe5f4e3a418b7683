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
- any other use of it, which lets the address go where the reading cannot follow: a shift, mask,
  comparison or conversion (the address rebuilt bit by bit from loads or branches: red team round
  311), an add that sets the carry flag (`add.cc`: the carry passes its bits on, round 312), a
  load's other operands, another variable's value (`generic(v)`), a call through a register, an
  argument a call lists twice, a return from a function called where no call names it;
- an argument handed to a function the module defines is followed into it (its parameters read
  from its header), and what a function returns back into its callers, to a fixed point (round
  316); a call's parameters are scoped to the block that declares them; a parameter named other
  than as the place an `ld.param` reads escapes (round 317);
- the format string of `vprintf` and the arguments of `__assertfail` are only read, where the
  module declares them `.extern` (the CUDA runtime's own, not a definition of that name: round
  311) and the parameter is that call's alone (round 314); and printf's arguments (an address
  parked in the thread's local buffer for `vprintf`) are only read where no function of the module
  loads from local memory (nvcc's depot, every `.local` a body declares: round 322, an address
  `stacksave`, `alloca` or `cvta.local` makes, or any address no parameter or module variable
  gives: round 324) or lets a local address go anywhere but there (local memory outlives a call:
  round 314);
- the distance of two addresses into one object (`first - table`) is no address, where both are
  such addresses on every path (a must-analysis: round 317), reached by whole 64-bit integer
  arithmetic only (a floating-point `add` on its bits is no offset: round 323);
- a name a body or a header declares again (a register named as the table) counts the variable
  written, as names are followed without scopes; a parameter read or filled past its own bytes
  reaches the next one (ptxas lays them out in a row: round 323), so it hands on every address;
- a copy into shared memory reads its global source (`cp.async`: round 323's false refusal);
- a value the PTX leaves undefined on some path (a register, a byte of a call's argument the callee reads, a byte
  of a return value a caller reads) is whatever ptxas's register holds, a static's address among what it may hold:
  a must-analysis over the body's branches, and any such value, or one computed from it, that reaches an address,
  a stored value at any width (two halves stored apart are read back as one: round 332), an atomic's operand, a
  call, a return or a guard (bits rebuilt by branches) counts every static written (rounds 327-333), judged on the
  paths the program's comparisons allow (a value set where `c` and read where `c`, by a branch, a `selp` or a
  predicated statement, is defined; `.and`/`.or` pairs are no opposites: round 333), a register a cross-lane
  instruction reads (a shuffle, a vote, a barrier's reduction however spelled, a matrix fragment) on every path,
  another lane's (rounds 334-335), the carry flag a register of its own (round 335); a
  store parks an address in local memory only where its place is local memory itself on every path (nvcc's depot,
  a `.local`, `stacksave`, `alloca`, moved or offset by numbers: rounds 329-330);
- ptxas parks registers in local memory itself where no PTX statement shows it (a callee saving its caller's
  registers in its frame, a spill); where its report shows such stores and any function reads local memory (a
  stale frame read back at a negative offset or before a slot is written: round 331), every variable a body names
  counts as written;
- statements are read as ptxas reads them (comments, line directives, an opcode glued to its
  operand, PTX's identifiers: rounds 312-313, 318-319); a module or body that cannot be read so
  counts every variable as written.

The reading over-approximates where it cannot follow (an address stored anywhere, handed to a call
through a register): the user vouches with --keep-state; a table only ever loaded, here or in the
functions it is handed to, is not written. It follows names, not bounds: an address stepped out of
one object onto another is not seen (round 316, open).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from .ptx_module import PtxModule, line_code

# the CUDA runtime's device functions that only read what their pointer arguments point at
_READING_CALLEES = frozenset({"vprintf", "__assertfail"})
_READS = re.compile(r"^(?:ld|ldu|prefetch|prefetchu)(?:\.|$)")
_MOVES = frozenset({"mov", "add", "sub", "cvta", "selp"})  # an address moved, offset or converted
# copies into shared memory from global memory, the source their second operand (`cp.async.cg.shared.global
# [s], [g], 16;`, `cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [s], [g], n, [bar];`)
_COPY_FROM_GLOBAL = re.compile(r"^cp\.async\.(?:ca\.|cg\.|bulk\.)?shared(?:::cta|::cluster)?\.global(?:\.|$)")
_GUARD = re.compile(r"^@!?%?[\w$.]+\s+")
_LEADING = re.compile(r"^(?:[{}]\s*|[\w$.]+:(?!:)\s*)+")
# line directives inside a body, ending at the end of their line (`.loc 1 14 3`, with the function and
# the place it was inlined at; `.file 1 "x.cu"`, its string made `""` by line_code)
_LINE_DIRECTIVE = re.compile(r"^\.(?:loc|file)\b(?:\s+\d+\s+\d+\s+\d+(?:\s*,\s*function_name\s+[\w$.]+"
                             r"(?:\s*,\s*inlined_at\s+\d+\s+\d+\s+\d+)?)?$|\s+\d+\s+\"\"(?:\s*,\s*\d+\s*,\s*\d+)?$)?")
_BODY_MEMORY = re.compile(r"(?:^|\s)\.(?:global|const)\b")
_RETURN = re.compile(r"^func_retval\d+$")
_PARAMETER = re.compile(r"\.param\s+(?:(?:\.[\w:]+|\d+)\s+)*([A-Za-z_$][\w$]*)")  # `.param .align 8 .b8 p[16]`
_OPCODE = re.compile(r"([A-Za-z][\w.:]*)\s*(.*)", re.S)
# a function's header: its attributes, kind, return list, name and parameter list (ptx_module's reading)
_HEADER = re.compile(r"^(?:\.(?:visible|weak|extern)\s+)*\.(?:entry|func)\s*(?:\((?P<returns>[^()]*)\)\s*)?"
                     r"(?P<name>[\w$.]+)\s*(?:\((?P<parameters>[^()]*)\))?")
_CALL = re.compile(r"^call(?:\.\w+)*\s+(?:\([^)]*\)\s*,\s*)?(?P<target>[\w$.]+)")
# the thread's local memory as nvcc addresses it: the stack depot and its two pointers
_LOCAL_ROOTS = re.compile(r"^(?:%SP|%SPL|__local_depot\d*)$")
# instructions whose result is an address in local memory (`cvta.local`, not `cvta.to.local`)
_MAKES_LOCAL = re.compile(r"^(?:stacksave|alloca|cvta\.local)(?:\.|\s)")
# a load naming its state space (`ld.global`, `ld.param`...): not a generic one
_SPACED = re.compile(r"\.(?:global|local|shared|const|param|tex)\b")
# a PTX identifier, a register's `%` kept: `%rd1`, `%9` (PTX allows `%` and digits: red team round 318
# named an address register so, and a reading without `%` names saw nothing), `_ZZ3tapiE4taps`, `$str`
# a name, not a modifier or a component after a dot (`%tid.x` names %tid, not a register `x`: red team round 330)
# nor the digits of a number (`0f3F800000`)
_NAME = re.compile(r"%[\w$]+|(?<![.\w$%])[A-Za-z_$][\w$]*")


def _moves(opcode: str) -> bool:
    """An instruction that moves, offsets or converts an address and nothing else: one that also
    sets the carry flag (`add.cc`) passes the address's bits to the `addc` after it, which names
    no address (red team round 312 rebuilt one by a binary search on carries)."""
    base, *modifiers = opcode.split(".")
    return base in (*_MOVES, "mad") and "cc" not in modifiers


_WHOLE_WIDTHS = frozenset({"s64", "u64", "b64"})
_ROUNDING = frozenset({"rn", "rz", "rm", "rp", "rni", "rzi", "rmi", "rpi", "ftz", "sat", "approx", "full"})


def _exact(opcode: str) -> bool:
    """A move or offset that keeps an address whole: integer arithmetic on 64-bit values (a `mad`'s
    product added to a 64-bit addend), a conversion between generic and global or constant memory.
    A floating-point `add` is no offset (round 323: `add.rn.f64` on an address's bits, then the
    distance taken was the address), a 32-bit one drops its top, `cvta.to.shared` maps it elsewhere."""
    if not _moves(opcode):
        return False
    base, *modifiers = opcode.split(".")
    kinds = set(modifiers)
    if kinds & _ROUNDING:
        return False
    if base == "cvta":
        return bool(kinds & {"global", "const"}) and "u64" in kinds
    if base == "mad":
        return ("lo" in kinds and bool(kinds & _WHOLE_WIDTHS)) or ("wide" in kinds and bool(kinds & {"s32", "u32"}))
    return bool(kinds & _WHOLE_WIDTHS)


@dataclass
class _Body:
    statements: list[str]  # the instructions, one per `;` (a call spans lines), comments dropped
    memory: set[str]  # global or constant memory the body itself declares (only inline assembly can: round 313)
    readable: bool  # False where a statement is read otherwise than ptxas may read it
    blocks: list[tuple[int, ...]] = field(default_factory=list)  # each statement's enclosing `{ }` blocks
    parameters: dict[str, list[tuple[int, ...]]] = field(default_factory=dict)  # a `.param` -> blocks declaring it
    local: set[str] = field(default_factory=set)  # local memory the body declares by name (nvcc's depot, an asm's)
    declared: set[str] = field(default_factory=set)  # every name a declaration in the body makes (registers too)
    registers: set[str] = field(default_factory=set)  # the registers the body declares (`.reg`)
    predicates: set[str] = field(default_factory=set)  # those of them that are predicates (`.reg .pred`)
    register_blocks: dict[str, list[tuple[int, ...]]] = field(default_factory=dict)  # a register -> blocks declaring it
    guarded: list[bool] = field(default_factory=list)  # each statement's: run only where a predicate holds (`@p`)
    guards: list[tuple[str, bool] | None] = field(default_factory=list)  # that predicate, and whether negated (`@!p`)
    parameter_bytes: dict[tuple[str, tuple[int, ...]], int | None] = field(default_factory=dict)  # (name, block)
    labels: dict[str, list[tuple[int, tuple[int, ...]]]] = field(default_factory=dict)  # label -> (statement, blocks)
    wide: set[str] = field(default_factory=set)  # the registers of 64 bits or more (an address fits in one)


def _body(lines: list[str]) -> _Body:
    """A function body's statements as ptxas reads them: comments dropped as ptxas drops them (`/* //
    */ st ...` stores: round 312), a line directive (`.loc`, `.file`) ending at its line's end (it
    has no `;`: round 313 hid the store after it), every other statement at its `;`; with the blocks
    each statement lies in (a call's parameters are declared in a block of their own)."""
    body, pending, in_comment = _Body([], set(), True), "", False
    open_blocks: list[int] = []
    opened = 0

    def leading(text: str) -> str:
        """TEXT after its block braces and labels, the braces opening and closing blocks."""
        nonlocal opened
        text = " ".join(text.split())
        m = _LEADING.match(text)
        for token in re.findall(r"[{}]|[\w$.]+(?=\s*:)", m.group(0)) if m else []:
            if token == "{":
                opened += 1
                open_blocks.append(opened)
            elif token == "}":
                body.readable &= bool(open_blocks)
                if open_blocks:
                    open_blocks.pop()
            else:  # a label: where the next statement starts, in the blocks open there
                body.labels.setdefault(token, []).append((len(body.statements), tuple(open_blocks)))
        return text[m.end():] if m else text

    for line in lines:
        code, in_comment = line_code(line, in_comment)
        if _LINE_DIRECTIVE.match(_LEADING.sub("", " ".join(code.split()))):
            # alone on its line, where no statement is open: anything else is read some other way
            body.readable &= not leading(pending)
            body.readable &= bool(_LINE_DIRECTIVE.fullmatch(leading(code)))
            pending = ""
            continue
        pending += "\n" + code
        *parts, pending = pending.split(";")
        for part in parts:
            # a block's braces and labels before an instruction (`} $L__BB0_2: ret`, `{ .reg .b64 t`);
            # a brace after the opcode is a vector operand's (`mov.b64 {%r1, %r2}, %rd1`)
            statement = leading(part)
            if statement.startswith("."):
                body.declared |= _declared_names(statement)
                if statement.startswith(".reg"):
                    # a vector register's lanes (`.reg .v2 .b64 v`: v.x, v.y) are defined one by one, and a range
                    # past the names the reading lists leaves some unread (red team round 330): read otherwise
                    body.readable &= not re.search(r"\.v\d\b", statement) and all(
                        int(m.group(2)) <= _LARGEST_RANGE for m in _NAME_RANGE.finditer(statement))
                    wide = bool(re.search(r"\.[bsuf](?:64|128)\b", statement))
                    for name in _declared_names(statement):
                        body.registers.add(name)
                        if re.search(r"\.pred\b", statement):
                            body.predicates.add(name)
                        body.register_blocks.setdefault(name, []).append(tuple(open_blocks))
                        if wide:
                            body.wide.add(name)
                # every declarator of a list (`.local .b8 a[8], b[8]`, `a[8 ]`, `a<2>`: red team round 324 parked an
                # address in the first of two)
                if _BODY_MEMORY.search(statement):  # `.global .f32 gain = 0f3F800000` inside a function
                    body.memory |= _declared_names(statement) or {statement}
                elif statement.startswith(".local"):
                    body.local |= _declared_names(statement)
                elif statement.startswith(".param") and (m := _PARAMETER.match(statement)):
                    body.parameters.setdefault(m.group(1), []).append(tuple(open_blocks))
                    body.parameter_bytes[(m.group(1), tuple(open_blocks))] = _parameter_bytes(statement)
            elif statement:
                # the opcode and its operands, one space between: ptxas needs none before `[`, `%`, `{`
                # (`st.f32[%rd1],%f1;` is a store: red team round 319), and every reading here splits at it
                m = _OPCODE.match(_GUARD.sub("", statement))
                body.readable &= m is not None
                body.statements.append(f"{m.group(1)} {m.group(2)}".strip() if m else statement)
                body.blocks.append(tuple(open_blocks))
                body.guarded.append(bool(guard := _GUARD.match(statement)))
                body.guards.append((guard.group(0).strip().lstrip("@!"), guard.group(0).startswith("@!"))
                                   if guard else None)
    body.readable &= not leading(pending)
    return body


_DIRECTIVE_WORD = re.compile(r"\.[\w:]+|\[\s*\d*\s*\]|\b\d+\b")
_NAME_RANGE = re.compile(r"(%?[A-Za-z_$][\w$]*|%)\s*<\s*(\d+)\s*>")  # `%r<5>`: %r0 ... %r4
_LARGEST_RANGE = 1 << 16


def _declared_names(statement: str) -> set[str]:
    """The names a declaration makes (`.reg .b64 a, b;`, `.reg .pred %p<3>;` makes %p0 to %p2, `.param .b8
    p[16]`), its initialiser left out."""
    declared = _DIRECTIVE_WORD.sub(" ", _NAME_RANGE.sub(lambda m: " ", statement.partition("=")[0]))
    names = set(_NAME.findall(declared))
    for m in _NAME_RANGE.finditer(statement.partition("=")[0]):
        names |= {f"{m.group(1)}{i}" for i in range(min(int(m.group(2)), _LARGEST_RANGE))}
    return names


_TYPE_BYTES = {"8": 1, "16": 2, "32": 4, "64": 8, "128": 16}
_SIZED_PARAMETER = re.compile(r"\.param\s+(?:\.align\s+\d+\s+)?\.[bsuf](?P<bits>8|16|32|64|128)\s+"
                              r"(?:\.ptr(?:\s+\.(?:global|const|local|shared))?(?:\s+\.align\s+\d+)?\s+)?"
                              r"(?P<name>[A-Za-z_$][\w$]*)\s*(?:\[\s*(?P<count>\d+)\s*\])?\s*$")


def _parameter_bytes(declaration: str) -> int | None:
    """How many bytes a `.param` declaration holds (`.param .b64 p`: 8, `.param .align 8 .b8 p[16]`: 16);
    None where it does not read so."""
    m = _SIZED_PARAMETER.match(" ".join(declaration.split()))
    if m is None:
        return None
    return _TYPE_BYTES[m.group("bits")] * int(m.group("count") or 1)


def _access_bytes(opcode: str) -> int | None:
    """How many bytes a load or store reads or writes (`ld.param.v2.u64`: 16); None where unsure."""
    modifiers = opcode.split(".")
    width = next((_TYPE_BYTES.get(m[1:]) for m in reversed(modifiers) if m[:1] in "bsuf" and m[1:] in _TYPE_BYTES),
                 None)
    lanes = next((int(m[1:]) for m in modifiers if m in ("v2", "v4", "v8")), 1)
    return width * lanes if width else None


def _bytes_of(place: str, opcode: str, size: int | None) -> set[int] | None:
    """The bytes of a parameter a `ld.param`/`st.param` at PLACE (`[p+8]`) reads or fills; None where unsure."""
    m = re.fullmatch(r"\[\s*[A-Za-z_$%][\w$]*\s*(?:\+\s*(\d+)\s*)?\]", place.strip())
    width = _access_bytes(opcode)
    if m is None or width is None:
        return None
    start = int(m.group(1) or 0)
    return set(range(start, start + width)) if size is None or start + width <= size else None


def _fits(opcode: str, place: str, size: int | None) -> bool:
    """Whether a `ld.param`/`st.param` at PLACE (`[p+8]`) stays inside its parameter of SIZE bytes: ptxas
    lays a function's parameters out one after another, so `[f_param_0+8]` reads `f_param_1` (red team
    round 323 handed the table to the second parameter and read it through the first)."""
    return size is not None and _bytes_of(place, opcode, size) is not None


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
    return set(_NAME.findall(text))


@dataclass
class _Flow:
    """Where the addresses of some roots go in one function."""
    derived: dict[str, set[str]] = field(default_factory=dict)  # name -> the roots its value may be the address of
    escaped: set[str] = field(default_factory=set)  # roots whose address goes out of sight
    stored_at: set[str] = field(default_factory=set)  # roots written through (a store, atomic or copy at them)
    read: bool = False  # some load reads at a root's address
    parked: list[tuple[int, set[str]]] = field(default_factory=list)  # (statement, roots) stored at these addresses
    passed: dict[tuple[str, int], set[str]] = field(default_factory=dict)  # (callee, argument) -> roots handed over
    returned: set[str] = field(default_factory=set)  # roots the function returns

    def roots(self, text: str) -> set[str]:
        return set().union(set(), *(self.derived.get(n, set()) for n in _names(text)))


# what a `st.param` hands over: an argument of a reading runtime function, or argument K of a function
# the module defines (followed there), or None (a store like any other)
_Handed = Literal["reading"] | tuple[str, int] | None


def _derive(statements: list[str], roots: set[str], incoming: dict[str, set[str]] | None,
            always: dict[str, str]) -> _Flow:
    """The names whose values may be addresses of the roots (moves followed to a fixed point: a loop's
    back edge carries an address forward); a `sub` of two names ALWAYS an address into one root gives
    none."""
    flow = _Flow(derived={r: {r} for r in roots})
    changed = True
    while changed:
        changed = False
        for statement in statements:
            opcode, _, rest = statement.partition(" ")
            base = opcode.split(".", 1)[0]
            ops = _operands(rest)
            if len(ops) < 2:
                continue
            if incoming is not None and opcode.startswith("ld.param"):
                reached = set().union(set(), *(incoming.get(n, set()) for n in _names(ops[-1])))
            elif not _moves(opcode):
                continue
            elif base == "sub" and len(ops) == 3 and always.get(ops[1]) is not None \
                    and always.get(ops[1]) == always.get(ops[2]):
                continue
            else:
                sources = ops[1:3] if base == "selp" else ops[3:] if base == "mad" else ops[1:]
                reached = set().union(set(), *(flow.roots(s) for s in sources))
            for name in _names(ops[0]):
                if reached - flow.derived.get(name, set()):
                    flow.derived.setdefault(name, set()).update(reached)
                    changed = True
    return flow


_IMMEDIATE = re.compile(r"-?(?:0[xX][0-9a-fA-F]+|\d+)")


def _always_into(statements: list[str], roots: set[str], flow: _Flow,
                 immediate_offsets: bool = False) -> dict[str, str]:
    """The registers every definition of which makes them an address into one root (the root, or such a
    register, moved, converted or offset by a value no address comes into, in exact 64-bit integer
    arithmetic: `_exact`): a greatest fixed point. IMMEDIATE_OFFSETS: offset by a number written in the
    statement only (no value of any other origin, which may be another object's address)."""
    definitions: dict[str, list[tuple[str, list[str]]]] = {}
    for statement in statements:
        opcode, _, rest = statement.partition(" ")
        ops = _operands(rest)
        if ops and not ops[0].startswith("[") and not opcode.startswith("call"):
            for name in _names(ops[0]):
                definitions.setdefault(name, []).append((opcode, ops))
    unknown = "?"  # not yet ruled out
    always = {name: unknown for name in definitions if name not in roots}

    def into(operand: str) -> str | None:
        m = re.fullmatch(r"([A-Za-z_$%][\w$.]*)(?:\s*[+-]\s*\d+)?", operand.strip())
        if m is None:
            return None
        name = m.group(1)
        return name if name in roots else always.get(name)

    def offset(operand: str) -> bool:  # a value no address comes into
        if immediate_offsets:
            return bool(_IMMEDIATE.fullmatch(operand.strip()))
        return not flow.roots(operand)

    changed = True
    while changed:
        changed = False
        for name, defs in definitions.items():
            if name in roots or always.get(name) is None:
                continue
            found: set[str] = set()
            for opcode, ops in defs:
                base = opcode.split(".", 1)[0]
                if not _exact(opcode) or len(ops[0].split()) != 1 or ops[0].startswith("{"):
                    found.add("")
                elif base in ("mov", "cvta") and len(ops) == 2:
                    found.add(into(ops[1]) or "")
                elif base == "add" and len(ops) == 3:
                    a, b = into(ops[1]), into(ops[2])
                    found.add((a if a and offset(ops[2]) else b if b and offset(ops[1]) else "") or "")
                elif base == "sub" and len(ops) == 3:
                    a = into(ops[1])
                    found.add(a if a and offset(ops[2]) else "")
                elif base == "selp" and len(ops) == 4:
                    a, b = into(ops[1]), into(ops[2])
                    found.add(a if a and a == b else "")
                elif base == "mad" and len(ops) == 4:
                    a = into(ops[3])
                    found.add(a if a and offset(ops[1]) and offset(ops[2]) else "")
                else:
                    found.add("")
            found.discard(unknown)
            value = None if "" in found or len(found) > 1 else (found.pop() if found else unknown)
            if value != always[name]:
                always[name] = value
                changed = True
    return {name: root for name, root in always.items() if root not in (None, unknown)}


def _follow(statements: list[str], roots: set[str], handed: list[_Handed],
            incoming: dict[str, set[str]] | None = None, sizes: dict[str, int | None] | None = None) -> _Flow:
    """INCOMING: the parameters (the function's own, or a callee's return value) whose loads give
    these roots' addresses, SIZES their bytes. Without it (the thread's local memory), a call's
    argument is a store."""
    flow = _derive(statements, roots, incoming, {})
    # the distance of two addresses into one object is no address (`first - table`, a binary search),
    # where both are such addresses on every path (a value merged from two calls or two branches is
    # not: red team round 317 passed one root to a helper's two parameters from two call sites)
    flow = _derive(statements, roots, incoming, _always_into(statements, roots, flow))
    for i, statement in enumerate(statements):
        opcode, _, rest = statement.partition(" ")
        base = opcode.split(".", 1)[0]
        ops = _operands(rest)
        if incoming and _call(statement) is None:
            # a parameter named anywhere but as the place an `ld.param` reads (its own address moved
            # into a register and read through: red team round 317) hands its addresses on unseen
            read_at = _names(ops[-1]) if opcode.startswith("ld.param") and ops and ops[-1].startswith("[") else set()
            for name in (_names(rest) - read_at) & incoming.keys():
                flow.escaped |= incoming[name]
            # a load past its parameter's bytes reads the next parameter's (ptxas lays them out in a row)
            if read_at & incoming.keys() and not _fits(opcode, ops[-1], (sizes or {}).get(next(iter(read_at)))):
                flow.escaped |= set().union(set(), *incoming.values())
        if _READS.match(opcode):
            places = [o for o in ops if o.startswith("[")]
            flow.read |= any(flow.roots(p) for p in places)
            flow.escaped |= set().union(set(), *(flow.roots(o) for o in ops[1:] if not o.startswith("[")))
        elif _moves(opcode) and base != "mad":
            pass  # followed above
        elif _moves(opcode) and len(ops) == 4:
            flow.escaped |= flow.roots(ops[1]) | flow.roots(ops[2])  # an address multiplied
        elif handed[i] == "reading":
            continue  # an argument of vprintf or __assertfail
        elif incoming is not None and isinstance(handed[i], tuple) and len(ops) == 2:
            flow.passed.setdefault(handed[i], set()).update(flow.roots(ops[1]))
            flow.stored_at |= flow.roots(ops[0])
        elif incoming is not None and opcode.startswith("st.param") and len(ops) == 2 \
                and _names(ops[0]) and all(_RETURN.match(n) for n in _names(ops[0])) \
                and _fits(opcode, ops[0], (sizes or {}).get(next(iter(_names(ops[0]))))):
            flow.returned |= flow.roots(ops[1])
        elif opcode.startswith("st") and len(ops) == 2 and ops[0].startswith("["):
            flow.stored_at |= flow.roots(ops[0])
            if value := flow.roots(ops[1]):
                flow.parked.append((i, value))
        elif _COPY_FROM_GLOBAL.match(opcode) and len(ops) >= 2 and ops[1].startswith("["):
            # a copy into shared memory reads global memory at its source (a table staged with cp.async:
            # red team round 323's false refusal); the destination and any other operand as below
            flow.read |= bool(flow.roots(ops[1]))
            flow.stored_at |= flow.roots(ops[0])
            flow.escaped |= set().union(set(), *(flow.roots(o) for o in ops[2:]))
        else:
            flow.stored_at |= set().union(set(), *(flow.roots(o) for o in ops if o.startswith("[")))
            flow.escaped |= set().union(set(), *(flow.roots(o) for o in ops if not o.startswith("[")))
    return flow


def _call(statement: str) -> tuple[str, list[str], list[str]] | None:
    """A call's target, the parameters it passes in order and those its value comes back in
    (`call.uni (retval0), vprintf, (param0, param1)`), or None for any other statement."""
    m = _CALL.match(statement)
    if m is None:
        return None
    returns = statement[:m.start("target")]
    arguments = statement[m.end():]
    passed = _NAME.findall(arguments[arguments.rfind("("):]) if "(" in arguments else []
    return m.group("target"), passed, _NAME.findall(returns[returns.find("("):]) if "(" in returns else []


def _handed(body: _Body, module: PtxModule) -> list[_Handed]:
    """For each statement, what a `st.param` hands over: an argument only a reading runtime function
    gets (the next call is `vprintf` or `__assertfail` as the module declares it `.extern`: a
    definition of that name in the file is not the runtime's, round 311), or argument K of a
    function the module defines; in both cases only where that call lists the parameter and, within
    the block that declares it (nvcc gives each call's parameters a block of their own), no other
    call passes it and no load reads it back (round 314 stored an address into a parameter of its
    own before a `vprintf` and passed it to the next call)."""
    statements, blocks = body.statements, body.blocks
    # every call, a call through a register among them (`call %rd5, (param0), prototype`: no target
    # this reading can name, so what it is handed is a store: round 317)
    calls = [(i, _call(s) or ("", [], [])) for i, s in enumerate(statements) if s.startswith("call")]

    def reading(target: str) -> bool:
        callee = module.functions.get(target)
        return callee is not None and target in _READING_CALLEES and callee.extern and not callee.body

    def scope(name: str, i: int) -> tuple[int, ...]:
        """The block declaring parameter NAME that statement I lies in (the innermost), else the body."""
        inside = [b for b in body.parameters.get(name, []) if blocks[i][:len(b)] == b]
        return max(inside, key=len, default=())

    out: list[_Handed] = [None] * len(statements)
    for i, statement in enumerate(statements):
        if not statement.startswith("st.param"):
            continue
        place = _names(_operands(statement.partition(" ")[2])[0])
        j, following = next(((j, c) for j, c in calls if j > i), (len(statements), None))
        if following is None or len(place) != 1 or any(s.startswith("ret") for s in statements[i + 1:j]):
            continue
        (name,) = place
        block = scope(name, i)

        def within(k: int) -> bool:
            return blocks[k][:len(block)] == block

        target, passed, _ = following
        elsewhere = any((name in c[1] or not c[0]) for k, c in calls if k != j and within(k))
        loaded = any(s.startswith("ld.param") and name in _names(_operands(s.partition(" ")[2])[-1]) and within(k)
                     for k, s in enumerate(statements))
        # a parameter the call lists twice reaches two of the callee's parameters (red team round 321: only
        # the first was followed): a store like any other
        # a store past the parameter's bytes lands in the next parameter (ptxas lays them out in a row): a
        # store like any other (red team round 323)
        if not within(j) or passed.count(name) != 1 or elsewhere or loaded \
                or not _fits(statement.partition(" ")[0], _operands(statement.partition(" ")[2])[0],
                             body.parameter_bytes.get((name, block))):
            continue
        callee = module.functions.get(target)
        if reading(target):
            out[i] = "reading"
        elif callee is not None and callee.body and not callee.extern:
            out[i] = (target, passed.index(name))
    return out


def _header(function) -> re.Match[str] | None:
    """A function's header read as a header (its return list, name and parameter list; the name is no text to
    search for: `f` is in `.func`, red team round 320 shifted every parameter by one so); None where it does
    not read so."""
    header = " ".join(" ".join(function.lines[:max(1, len(function.lines) - len(function.body) - 1)]).split())
    m = _HEADER.match(header)
    return m if m is not None and m.group("name") == function.name else None


def _parameters(function) -> list[str] | None:
    """A function's own parameters, in order: the header's `.param`s after the return list and the name."""
    m = _header(function)
    return None if m is None else _PARAMETER.findall(m.group("parameters") or "")


# instructions whose first operand is read, not defined, and is no memory place (those start with `[`); a barrier's
# reduction, however spelled (`bar.red.popc.u32 %r3, 0, %p1`, `bar.cta.red`, `barrier.cta.aligned.red`: red team
# round 335), defines it
_DEFINES_NOTHING = re.compile(r"^(?:bra|brx|ret|exit|bar(?![\w.]*\.red(?:\.|$))|barrier(?![\w.]*\.red(?:\.|$))|membar|"
                              r"fence|trap|brkpt|pmevent|"
                              r"nanosleep|griddepcontrol|setmaxnreg|stackrestore|st|red)(?:\.|$)")


def _successors(body: _Body, i: int) -> list[int] | None:
    """The statements control may reach right after statement I (len(statements): the function's end, where it
    returns); None where a branch's target cannot be told (no label of that name in a block around it)."""
    opcode, _, rest = body.statements[i].partition(" ")
    base = opcode.split(".", 1)[0]
    after = [i + 1] if body.guarded[i] else []
    if base == "bra":
        target = (_operands(rest) or [""])[-1].strip()
        around = [(k, b) for k, b in body.labels.get(target, []) if body.blocks[i][:len(b)] == b]
        if not around:
            return None
        return [max(around, key=lambda kb: len(kb[1]))[0], *after]
    if base == "brx":  # an indexed branch: any label of the function
        return sorted({k for places in body.labels.values() for k, _ in places} | {i + 1})
    if base in ("ret", "exit", "trap"):
        return after
    return [i + 1]


def _innermost(declared: list[tuple[int, ...]], at: tuple[int, ...]) -> tuple[int, ...] | None:
    """Of the blocks that declare a name (DECLARED), the innermost one around a statement in blocks AT."""
    return max((b for b in declared if at[:len(b)] == b), key=len, default=None)


def _parameter_read(statement: str, name: str, size: int | None) -> set[int] | None:
    """The bytes of parameter NAME (of SIZE bytes) a statement naming it reads: an `ld.param` at it; None where the
    statement names it any other way."""
    opcode, _, rest = statement.partition(" ")
    ops = _operands(rest)
    if opcode.startswith("ld.param") and len(ops) == 2 and name in _names(ops[-1]) and name not in _names(ops[0]):
        return _bytes_of(ops[-1], opcode, size)
    return None


def parameter_reads(module: PtxModule) -> dict[tuple[str, int], set[int] | None]:
    """For each function the module defines and each of its parameters (by position): the bytes its body reads
    (`ld.param` at the parameter), None for all of them (named any other way, or a body that does not read)."""
    reads: dict[tuple[str, int], set[int] | None] = {}
    for name, function in module.functions.items():
        parameters = _parameters(function) if function.body else None
        if parameters is None:
            continue
        body = _body(function.body)
        sizes = _header_bytes(function)
        for k, parameter in enumerate(parameters):
            found: set[int] | None = set()
            for statement in body.statements:
                if parameter not in _names(statement):
                    continue
                got = _parameter_read(statement, parameter, sizes.get(parameter))
                if got is None or found is None:
                    found = None
                    break
                found |= got
            reads[(name, k)] = found
    return reads


def return_reads(module: PtxModule) -> dict[str, set[int] | None]:
    """For each function the module calls by name: the bytes of its return value the callers read (`ld.param` at
    the call's return parameter, in the call's block), None for all of them (named any other way)."""
    reads: dict[str, set[int] | None] = {}
    named = {n for v in module.variables.values() for n in _names(v)}  # a table of function pointers
    for function in module.functions.values():
        if not function.body:
            continue
        body = _body(function.body)
        for i, statement in enumerate(body.statements):
            call = _call(statement)
            named |= _names(statement) - ({call[0]} - set(call[1]) - set(call[2]) if call else set())
            if call is None:
                continue
            target, _, results = call
            found = reads.setdefault(target, set())
            for result in results:
                block = _innermost(body.parameters.get(result, []), body.blocks[i]) or ()
                for j in range(i + 1, len(body.statements)):
                    if body.blocks[j][:len(block)] != block:
                        break  # the call's block has closed
                    if result not in _names(body.statements[j]):
                        continue
                    got = _parameter_read(body.statements[j], result, body.parameter_bytes.get((result, block)))
                    if got is None or found is None:
                        found = None
                        break
                    found |= got
                reads[target] = found
    # a function named other than as a call's target may be called through its address: every byte
    return {name: None if name in named else found for name, found in reads.items()}


_INDIRECT_CALL = re.compile(r"^call(?:\.\w+)*\s+(?:\([^)]*\)\s*,\s*)?(?P<target>%[\w$.]+)")


# integer comparisons a `setp` makes, each one of two comparisons held one way or the other: lt(a, b); gt(a, b) is
# lt(b, a); ge(a, b) is not lt(a, b); le(a, b) is not lt(b, a); eq over its operands in either order, ne is not eq
# (PTX's unsigned lo/hs/hi/ls alike: the type tells signedness). A floating-point one is left out (NaN orders nothing).
_COMPARISON = {"eq": ("eq", False, True), "ne": ("eq", False, False), "lt": ("lt", False, True),
               "ge": ("lt", False, False), "gt": ("lt", True, True), "le": ("lt", True, False),
               "lo": ("lt", False, True), "hs": ("lt", False, False), "hi": ("lt", True, True),
               "ls": ("lt", True, False)}
# floating-point ones, each with its complement (NaN makes `lt` the opposite of `geu`, not of `ge`): lt(a, b) and
# le(a, b) as above with gt/ge swapping the operands, ltu/leu/gtu/geu their opposites; eq/ne/num in either order
# with equ/neu/nan their opposites
_FLOAT_COMPARISON = {"lt": ("flt", False, True), "geu": ("flt", False, False), "gt": ("flt", True, True),
                     "leu": ("flt", True, False), "le": ("fle", False, True), "gtu": ("fle", False, False),
                     "ge": ("fle", True, True), "ltu": ("fle", True, False), "eq": ("feq", False, True),
                     "neu": ("feq", False, False), "ne": ("fne", False, True), "equ": ("fne", False, False),
                     "num": ("fnum", False, True), "nan": ("fnum", False, False)}
_SYMMETRIC = frozenset({"eq", "feq", "fne", "fnum"})
_INTEGER = re.compile(r"^[bsu](?:16|32|64)$")
_NUMBER = re.compile(r"^-?(?:0[xX][0-9a-fA-F]+|\d+)[uU]?$|^0[fFdD][0-9a-fA-F]+$")
# instructions that read other lanes' registers (a shuffle, a warp reduction or vote, a block reduction, a matrix
# fragment spread over the warp): another lane reaches them on a path of its own (red team round 334)
_CROSS_LANE = re.compile(r"^(?:shfl|redux|match|vote|mma|wmma|wgmma|movmatrix|tcgen05)(?:\.|$)"
                         r"|^bar(?:rier)?(?:\.\w+)*\.red(?:\.|$)")
_EVERY_LANE = ("every lane",)
_CARRY = ("reg", "%carry flag", None)  # the carry flag's key among the registers  # the assumption a cross-lane read is judged under: none, on every path
# comparisons followed case by case in one function (each costs two readings of its body); past it, the plain one
_MOST_CONDITIONS = 16

_Assumption = tuple  # (comparison, whether it holds)


def _in_loops(successors: list[list[int]]) -> set[int]:
    """The statements on some cycle of the control flow (in a loop): strongly connected components (Kosaraju's,
    without recursion) of more than one statement, or one that reaches itself."""
    count = len(successors)
    order: list[int] = []
    seen = [False] * count
    for start in range(count):
        if seen[start]:
            continue
        seen[start] = True
        stack = [(start, iter(successors[start]))]
        while stack:
            node, edges = stack[-1]
            for nxt in edges:
                if 0 <= nxt < count and not seen[nxt]:
                    seen[nxt] = True
                    stack.append((nxt, iter(successors[nxt])))
                    break
            else:
                order.append(node)
                stack.pop()
    predecessors: list[list[int]] = [[] for _ in range(count)]
    for i, targets in enumerate(successors):
        for t in targets:
            if 0 <= t < count:
                predecessors[t].append(i)
    component = [-1] * count
    looping: set[int] = set()
    for root in reversed(order):
        if component[root] >= 0:
            continue
        members, stack = [], [root]
        component[root] = root
        while stack:
            node = stack.pop()
            members.append(node)
            for prev in predecessors[node]:
                if component[prev] < 0:
                    component[prev] = root
                    stack.append(prev)
        if len(members) > 1 or root in successors[root]:
            looping.update(members)
    return looping


def _comparisons(body: _Body, loops: set[int], defined_at) -> dict[str, tuple[tuple, bool]]:
    """For each predicate register set once, unguarded and outside every loop (one value for the whole call): what
    it holds, as a comparison and whether it holds it or its opposite. A `setp` comparing values each set so and
    before it on every path (DEFINED_AT(name, statement)), or numbers, holds that comparison of those values
    (`setp.ne.s32 %p2, %r1, 0` and `setp.eq.s32 %p5, %r1, 0` hold one, opposite ways; a float comparison and its
    unordered complement too: `setp.gt.f32` and `setp.leu.f32`); any other such predicate holds a comparison of its
    own, its statement's (an `and.pred`, a `setp` of values that change); a `setp` of one number without a combining
    operation sets its `|` second predicate to the opposite (with `.and`/`.or` the two are no opposites: red team
    round 333; a `.f16x2` pair compares two halves apart: round 336); a `not.pred` of a predicate defined there holds
    that predicate's opposite."""
    definers: dict[str, list[int]] = {}
    for i, statement in enumerate(body.statements):
        opcode, _, rest = statement.partition(" ")
        ops = _operands(rest)
        if ops and not _DEFINES_NOTHING.match(opcode) and not ops[0].startswith("["):
            for name in _names(ops[0]):
                definers.setdefault(name, []).append(i)

    def stable(name: str) -> bool:  # one value for the whole call
        places = definers.get(name, [])
        return (name in body.registers and len(places) == 1 and not body.guarded[places[0]]
                and places[0] not in loops and len(body.register_blocks.get(name, [])) == 1)

    def operand(text: str, i: int) -> str | None:
        text = text.strip()
        if _NUMBER.match(text):
            return text.lower().rstrip("u")
        return text if stable(text) and defined_at(text, i) else None

    facts: dict[str, tuple[tuple, bool]] = {}
    for i, statement in enumerate(body.statements):
        opcode, _, rest = statement.partition(" ")
        ops = _operands(rest)
        if not ops or body.guarded[i] or i in loops or ops[0].startswith("[") or _DEFINES_NOTHING.match(opcode):
            continue
        targets = [t.strip() for t in ops[0].split("|")]
        parts = opcode.split(".")
        own = ("statement", i)  # what this statement computes, once in the call
        if parts[0] == "setp" and len(ops) == 3 and len(parts) in (3, 4):
            number_type = parts[-1]
            known = _COMPARISON.get(parts[1]) if _INTEGER.match(number_type) and len(parts) == 3 \
                else _FLOAT_COMPARISON.get(parts[1]) if re.match(r"^f(?:16|32|64)$", number_type) else None
            a, b = operand(ops[1], i), operand(ops[2], i)
            if known is not None and a is not None and b is not None:
                kind, swapped, holds = known
                pair = sorted((a, b)) if kind in _SYMMETRIC else (b, a) if swapped else (a, b)
                comparison = (kind, ".".join(parts[2:]), *pair)
            else:
                comparison, holds = own, True
            for k, target in enumerate(targets[:2]):  # `p|q`: q the opposite of p, of one number
                if stable(target):
                    # a pair type compares two halves, p the low and q the high, each its own (red team round 336)
                    facts[target] = (comparison, holds if k == 0 else not holds) if not number_type.endswith("x2") \
                        else (("statement", i, k), True)
        elif parts[0] == "setp" and len(ops) == 4 and len(parts) >= 4 and parts[2] == "xor":
            for k, target in enumerate(targets[:2]):  # p = t ^ c, q = !t ^ c: opposites
                if stable(target):
                    facts[target] = (own, k == 0)
        elif opcode == "not.pred" and len(ops) == 2 and ops[1].strip() in facts and defined_at(ops[1].strip(), i):
            if stable(targets[0]):
                comparison, holds = facts[ops[1].strip()]
                facts[targets[0]] = (comparison, not holds)
        else:  # `and.pred`, `setp.ne.and`, `mov.pred`, a comparison of values that change: each its own
            for k, target in enumerate(targets):
                if stable(target) and target in body.predicates:
                    facts[target] = (("statement", i, k), True)
    return facts


def _leaves_undefined(body: _Body, function, reads: dict[tuple[str, int], set[int] | None] | None = None,
                      returns_read: set[int] | None = None) -> bool:
    """Whether a value the PTX leaves undefined on some path may carry an address: ptxas takes it from whatever its
    register holds, a static's address among what it may hold (rounds 327-330). A must-analysis over the body's
    branches (a read needs a definition on every path to it: a jump around the only one is none; unpredicated, in
    the block that declares the register); a branch whose target cannot be told leaves everything undefined. It
    counts where such a value, or one computed from it, reaches an instruction with a memory operand (an address, a
    value stored at any width: two 32-bit halves stored apart and read back as one address, round 332; an atomic's
    operand), a `cvta`, an indexed branch, a call (a byte of an argument the callee reads, READS:
    `parameter_reads`, every byte for a function the module does not define; a call through a register), a return
    (a byte a caller reads, RETURNS_READ) or a guard (its bits rebuilt by branches or predicated moves: round 333).
    Paths are read as the program's comparisons allow (`_comparisons`): a comparison fixed for the call splits the
    paths into a statement in two, a `selp` keeps each value where its predicate says, a predicated statement runs
    where its guard holds, so LLVM's undefined value on a path the same comparison rules out (`float a; if (c) a =
    f(); ...; if (c) r += a;`) is none (rounds 330-333)."""
    statements = body.statements
    count = len(statements)
    reads = reads or {}
    bits: dict[tuple, int] = {}

    def bit(key: tuple) -> int:
        return 1 << bits.setdefault(key, len(bits))

    def scope(name: str, i: int) -> tuple[int, ...] | None:
        return _innermost(body.register_blocks.get(name, []), body.blocks[i])

    def parameter_block(parameter: str, i: int) -> tuple[int, ...]:
        return _innermost(body.parameters.get(parameter, []), body.blocks[i]) or ()

    header = _header_bytes(function)
    returns = [n for n in header if _RETURN.match(n)]
    # per statement: the call-argument bytes it needs defined, what it defines (were it unpredicated), and the
    # registers it reads, each as an address-like use (True) or a value (False), with the operand it is read in
    needs: list[int] = []
    gives: list[int] = []
    writes: list[set[tuple]] = []
    uses: list[list[tuple[tuple, bool, int]]] = []
    for i, statement in enumerate(statements):
        opcode, _, rest = statement.partition(" ")
        ops = _operands(rest)
        call = _call(statement)
        indirect = _INDIRECT_CALL.match(statement) if call is None else None
        need, give, written, read = 0, 0, set(), []
        if call is not None or indirect is not None:
            target, passed = (call[0], call[1]) if call is not None else (indirect.group("target"), [])
            if indirect is not None:  # `call (r), %fp, (a0, a1), proto`: every byte of every argument
                listed = statement[indirect.end():]
                passed = _NAME.findall(listed[listed.find("("):listed.find(")") + 1]) if "(" in listed else []
            for k, parameter in enumerate(passed):
                block = parameter_block(parameter, i)
                size = body.parameter_bytes.get((parameter, block))
                wanted = reads.get((target, k)) if call is not None else None
                if wanted is None:
                    if size is None:
                        return True
                    wanted = set(range(size))
                need |= sum(bit(("param", parameter, block, b)) for b in wanted)
            names = _names(statement[(call_m.end() if (call_m := _CALL.match(statement)) else 4):])
            read = [(n, True, -1) for n in names]
        elif opcode.startswith("st.param") and len(ops) == 2:
            parameter = next(iter(_names(ops[0])), "")
            block = parameter_block(parameter, i)
            filled = _bytes_of(ops[0], opcode, body.parameter_bytes.get((parameter, block)) or header.get(parameter))
            give |= sum(bit(("param", parameter, block, b)) for b in filled or ())
            read = [(n, True, -1) for n in _names(rest) - {parameter}]  # an argument or return value: handed on
        else:
            defines = bool(ops) and not _DEFINES_NOTHING.match(opcode) and not ops[0].startswith("[")
            # every register an instruction with a memory operand reads (an address, a value it stores, an atomic's
            # operand, a surface's), a conversion of address spaces, an indexed branch's index
            touches = any(o.startswith("[") for o in ops) or opcode.startswith(("cvta", "brx", "stackrestore", "alloca"))
            for k, o in enumerate(ops):
                if k or not defines:
                    read += [(n, touches, k) for n in _names(o)]
            if defines:
                written = {("reg", n, scope(n, i)) for n in _names(ops[0]) & body.registers}
            # the carry flag, a register no operand names: set by `add.cc`..., read by `addc`... (its bits passed on
            # from an undefined value: red team round 335)
            base, *modifiers = opcode.split(".")
            if "cc" in modifiers:
                written = written | {_CARRY}
            if base in ("addc", "subc", "madc"):
                read.append((_CARRY[1], False, -1))
            give |= sum(bit(key) for key in written)
        needs.append(need)
        gives.append(give)
        writes.append(written)
        uses.append([(_CARRY if n == _CARRY[1] else ("reg", n, scope(n, i)), strict, k) for n, strict, k in read
                     if n in body.registers or n == _CARRY[1]])
    # the function's return value, read where it returns (a `ret`, or its end): the bytes its callers read
    # (RETURNS_READ; None: every byte it declares), not a struct's padding, which nvcc never fills
    returned = 0
    for name in returns:
        if returns_read is None and header.get(name) is None:
            return True
        wanted = returns_read if returns_read is not None else set(range(header[name] or 0))
        returned |= sum(bit(("param", name, (), b)) for b in wanted)
    for i in range(count):
        for key, _, _ in uses[i]:
            bit(key)
        if body.guards[i] is not None and body.guards[i][0] in body.registers:
            bit(("reg", body.guards[i][0], scope(body.guards[i][0], i)))
    successors = [_successors(body, i) for i in range(count)]
    if any(s is None for s in successors):
        return True
    everything = (1 << len(bits)) - 1

    def runs(i: int, assumed: _Assumption | None, known) -> bool | None:
        """Whether statement I runs where ASSUMED holds: None where that does not tell (no predicate, another one, one
        KNOWN(statement, predicate) does not tell: undefined on some path there)."""
        guard = body.guards[i]
        held = known(i, guard[0]) if guard is not None and assumed is not None else None
        if held is None or held[0] != assumed[0]:
            return None
        return (assumed[1] == held[1]) != guard[1]

    def definedness(assumed: _Assumption | None, known) -> tuple[list[int], list[bool]]:
        """What is defined on every path into each statement (count: the end) where ASSUMED holds, a greatest fixed
        point, each branch the assumption decides taken or not; and which statements a path reaches there."""
        edges: list[list[int]] = []
        given: list[int] = []
        for i in range(count):
            decided = runs(i, assumed, known)
            if decided is None:
                edges.append(successors[i])
                given.append(0 if body.guarded[i] else gives[i])
            elif not decided:
                edges.append([i + 1])
                given.append(0)
            else:
                base = statements[i].partition(" ")[0].split(".", 1)[0]
                edges.append(successors[i][:1] if base == "bra" else [] if base in ("ret", "exit", "trap")
                             else successors[i])
                given.append(gives[i])
        defined = [everything] * (count + 1)
        defined[0] = 0
        predecessors: list[list[int]] = [[] for _ in range(count + 1)]
        for i, targets in enumerate(edges):
            for t in targets:
                if 0 <= t <= count:
                    predecessors[t].append(i)
        changed = True
        while changed:
            changed = False
            for i in range(1, count + 1):
                value = everything
                for p in predecessors[i]:
                    value &= defined[p] | given[p]
                if not predecessors[i]:
                    value = everything  # never reached
                if value != defined[i]:
                    defined[i] = value
                    changed = True
        reached = [False] * (count + 1)
        reached[0], stack = True, [0]
        while stack:
            node = stack.pop()
            for t in edges[node] if node < count else []:
                if 0 <= t <= count and not reached[t]:
                    reached[t] = True
                    stack.append(t)
        return defined, reached

    plain, reached_plain = definedness(None, lambda i, predicate: None)
    for i in range(count):
        if needs[i] & ~plain[i]:
            return True
        if statements[i].partition(" ")[0].split(".", 1)[0] == "ret" and returned & ~plain[i]:
            return True
    if bool(returned & ~plain[count]) and any(count in s for s in successors):
        return True
    # the comparisons a predicate holds, used where the predicate is defined on every path
    facts = _comparisons(body, _in_loops(successors),
                         lambda name, i: bool(plain[i] & bit(("reg", name, scope(name, i)))))

    def fact(i: int, predicate: str) -> tuple[tuple, bool] | None:
        key = ("reg", predicate, scope(predicate, i))
        return facts.get(predicate) if predicate in facts and plain[i] & bit(key) else None

    def contexts(i: int, assumed: _Assumption | None) -> list[tuple[tuple, bool, _Assumption | None]] | None:
        """Statement I's reads, each with the assumption it is judged under, where ASSUMED holds; None where the
        statement does not run there. A `selp` reads its first value where its predicate holds, its second where it
        does not; a predicated statement runs where its predicate holds."""
        guard = body.guards[i]
        held = fact(i, guard[0]) if guard is not None and not statements[i].startswith("bra") else None
        within = assumed
        if held is not None:
            holds = held[1] != guard[1]
            if assumed is None:
                within = (held[0], holds)
            elif assumed[0] == held[0] and assumed[1] != holds:
                return None
        if _CROSS_LANE.match(statements[i]):  # other lanes' values, on their own paths
            return [(key, strict, _EVERY_LANE) for key, strict, _ in uses[i]]
        ops = _operands(statements[i].partition(" ")[2])
        chosen = fact(i, ops[3].strip()) if statements[i].startswith("selp") and len(ops) == 4 else None
        out = []
        for key, strict, k in uses[i]:
            if chosen is not None and k in (1, 2) and (within is None or within[0] == chosen[0]):
                under = (chosen[0], chosen[1] if k == 1 else not chosen[1])
                if within is not None and within != under:
                    continue  # the value this selp does not keep where the assumption holds
                out.append((key, strict, under))
            else:
                out.append((key, strict, within))
        return out

    # the assumptions a reading needs: each comparison a branch, a selp or a predicated statement reads, either way
    wanted_facts = []
    for i in range(count):
        guard = body.guards[i]
        ops = _operands(statements[i].partition(" ")[2])
        for predicate in ([guard[0]] if guard else []) + ([ops[3].strip()] if statements[i].startswith("selp")
                                                            and len(ops) == 4 else []):
            if (held := fact(i, predicate)) is not None and held[0] not in wanted_facts:
                wanted_facts.append(held[0])
    if len(wanted_facts) > _MOST_CONDITIONS:  # the plain reading: every value judged on every path
        facts = {}
        wanted_facts = []
    readings: dict[_Assumption | None, tuple[list[int], set[tuple], list[bool]]] = {}
    # what may be undefined, or computed from such a value, on any path, no comparison read: a cross-lane read's
    loose: set[tuple] = set()
    changed = True
    while changed:
        changed = False
        for i in range(count):
            if writes[i] - loose and any(key in loose or not plain[i] & bit(key) for key, _, _ in uses[i]):
                loose |= writes[i]
                changed = True

    def undefined(key: tuple, i: int, under: _Assumption | None) -> bool:
        """Whether KEY may be undefined (or computed from such a value) where statement I reads it, UNDER an
        assumption; with none, on some path the comparisons allow: a comparison fixed for the call splits the paths
        into I in two, and a value defined on each side (or a side no path takes) is defined."""
        if under == _EVERY_LANE:
            return key in loose or not plain[i] & bit(key)
        defined, tainted, _ = readings[under]
        if key not in tainted and defined[i] & bit(key):
            return False
        if under is not None:
            return True
        for c in wanted_facts:
            sides = [readings[(c, v)] for v in (True, False)]
            if all(not reached[i] or (key not in tainted and defined[i] & bit(key)) for defined, tainted, reached in sides):
                return False
        return True

    # each assumption's reading first (it judges in itself), then the plain one, which reads them
    for under in [(c, v) for c in wanted_facts for v in (True, False)] + [None]:
        defined, reached = definedness(under, fact) if under is not None else (plain, reached_plain)
        tainted: set[tuple] = set()
        readings[under] = (defined, tainted, reached)
        changed = True
        while changed:
            changed = False
            for i in range(count):
                reads_here = contexts(i, under) if reached[i] else None
                if reads_here and writes[i] - tainted and any(undefined(key, i, at) for key, _, at in reads_here):
                    tainted |= writes[i]
                    changed = True
    for i in range(count):
        for key, strict, at in contexts(i, None) or []:
            if strict and undefined(key, i, at):
                return True
        # a predicate computed from such a value steers what runs: its bits rebuilt by branches or predicated moves
        guard = body.guards[i]
        if guard is not None and guard[0] in body.registers and reached_plain[i] \
                and undefined(("reg", guard[0], scope(guard[0], i)), i, None):
            return True
    return False


def _header_bytes(function) -> dict[str, int | None]:
    """The bytes each parameter and return value the header declares holds (None where unread)."""
    m = _header(function)
    if m is None:
        return {}
    declared = [d for group in ("returns", "parameters") for d in (m.group(group) or "").split(",") if d.strip()]
    return {found.group(1): _parameter_bytes(d) for d in declared if (found := _PARAMETER.search(d))}


@dataclass
class _Function:
    written: set[str]  # roots written through or escaped
    parked: set[str]  # roots whose address is stored in the thread's local memory
    local_read: bool  # the function reads local memory, or lets a local address go out of sight
    passed: dict[tuple[str, int], set[str]]  # (callee, argument) -> roots handed to a function of the module
    returned: set[str]  # roots it returns


def _written_from(statements: list[str], roots: set[str], module: PtxModule, handed: list[_Handed],
                  incoming: dict[str, set[str]], local_memory: set[str], sizes: dict[str, int | None],
                  parameters: list[str] | None = None) -> _Function:
    """The roots whose address one function's statements may write through or let escape, those it
    parks in local memory (printf's argument buffer), hands to the module's functions or returns."""
    flow = _follow(statements, roots, handed, incoming, sizes)
    written, parked = flow.escaped | flow.stored_at, set()
    # the thread's local memory: nvcc's depot and its pointers, every `.local` the body declares (an asm's own
    # slot, read back through `cvta.local` and a generic load: red team round 322), and every address made into
    # local memory: `stacksave`, `alloca`, a `cvta.local` of any value (round 324 read a parked address back from
    # where `stacksave` points)
    local_roots = {n for s in statements for n in _names(s) if _LOCAL_ROOTS.match(n)} | local_memory | {
        n for s in statements if _MAKES_LOCAL.match(s) and (ops := _operands(s.partition(" ")[2]))
        for n in _names(ops[0])}
    local = _follow(statements, local_roots, handed)
    # a store parks an address only where its place is local memory on every path: a `st.local`, or local memory
    # itself (nvcc's depot, the body's `.local`s, what `stacksave` and `alloca` give) moved, converted or offset by
    # numbers alone (round 329 added a local slot's zero distance to a shared address; round 330 stored through a
    # `cvta.local` of an output's address and through a register the body declares as `%SP`)
    park_roots = {n for s in statements for n in _names(s) if n.startswith("__local_depot")} | local_memory | {
        n for s in statements if re.match(r"^(?:stacksave|alloca)(?:\.|\s)", s)
        and (ops := _operands(s.partition(" ")[2])) for n in _names(ops[0])}
    always_local = _always_into(statements, park_roots, local, immediate_offsets=True) if flow.parked else {}
    for i, value in flow.parked:
        place = _operands(statements[i].partition(" ")[2])[0]
        if statements[i].startswith("st.local") or _local_place(place, park_roots, always_local):
            parked |= value
        else:
            written |= value
    local_read = bool(local.escaped or local.read or local.parked or any(_reads_local(s) for s in statements)
                      or _loads_where_unknown(statements, set(module.variables), sizes, parameters or []))
    return _Function(written, parked, local_read, flow.passed, flow.returned)


def _local_place(place: str, local_roots: set[str], always_local: dict[str, str]) -> bool:
    """Whether a store's place (`[%rd3]`, `[%SP+8]`) is in the thread's local memory on every path."""
    m = re.fullmatch(r"\[\s*([A-Za-z_$%][\w$.]*)\s*(?:[+-]\s*\d+\s*)?\]", place.strip())
    return m is not None and (m.group(1) in local_roots or m.group(1) in always_local)


def _reads_local(statement: str) -> bool:
    """A statement that reads local memory by its state space, however qualified (`ld.local`, `ld.weak.local`,
    `ld.volatile.local`, an `atom.local`, which returns what it read: round 326)."""
    base, *modifiers = statement.partition(" ")[0].split(".")
    return "local" in modifiers and base not in ("st", "cvta")


# instructions that read memory at a generic address and hand what they read on (an atomic returns the old value:
# red team round 326)
_GENERIC_READS = re.compile(r"^(?:ld|ldu|atom)(?:\.|$)")


def _loads_where_unknown(statements: list[str], variables: set[str], sizes: dict[str, int | None],
                         parameters: list[str]) -> bool:
    """Whether a generic load or atomic reads at an address that comes from no parameter, call result or module
    variable (a pointer loaded from memory, a number made an address), or a parameter is read past its bytes
    (below a kernel's first parameter lie the constants that place local memory) or named as a value (a
    function's parameters live in local memory): either may read local memory, whatever the window's address
    was made from (rounds 324 and 326)."""
    known: set[str] = set(variables)
    for statement in statements:
        opcode, _, rest = statement.partition(" ")
        ops = _operands(rest)
        if opcode.startswith("ld.param") and len(ops) == 2:
            place = _names(ops[1])
            if not _fits(opcode, ops[1], sizes.get(next(iter(place), ""))):
                return True
            known |= _names(ops[0])
        elif set(parameters) & _names(rest) and not opcode.startswith(("ld.param", "st.param")):
            return True
    derived = _derive(statements, known, None, {}).derived
    for statement in statements:
        opcode, _, rest = statement.partition(" ")
        if _GENERIC_READS.match(opcode) and not _SPACED.search(opcode):
            places = [o for o in _operands(rest) if o.startswith("[")]
            if any(not (_names(p) & derived.keys()) for p in places):
                return True
    return False


def written_variables(module: PtxModule, names: set[str], *, register_saves: bool = True) -> set[str]:
    """Of NAMES (module-scope variables of MODULE), those its device code may write or whose address
    escapes where the module cannot follow it. An address handed to a function the module defines is
    followed there (a `__noinline__ report(const char*)` that only reads its string: round 316), and
    one it returns back in the caller, to a fixed point; a function that may be called where no call
    names it (its address taken, an entry point, a visible one) returns into the unknown, so what it
    returns counts as written. An address parked in local memory (printf's argument buffer) is
    harmless only where no function of the module reads local memory back: local memory outlives
    the call, and the next function called at the same depth reads the same slots (red team round
    314: an uninitialised local array returned the address printf had parked). ptxas parks registers there
    itself, out of the PTX's sight: a callee saves its caller's registers in its frame, a spill keeps one
    there (red team round 331 read an address a recursive callee had saved back from a stale frame). So
    where ptxas stores registers (REGISTER_SAVES: its report shows spill stores, or it was not read) and
    any function reads local memory, every variable a body names counts as written, its address having
    sat in some register."""
    if module.unreadable:
        return set(names)
    written = {other for n, statements in module.variables.items() for other in _names(statements) & names
               if other != n}
    bodies = {}
    reads = parameter_reads(module)
    returned_bytes = return_reads(module)
    for name, function in module.functions.items():
        if function.body:
            body = _body(function.body)
            if not body.readable:
                return set(names)
            parameters = _parameters(function)
            if parameters is None:
                return set(names)
            # a name a declaration in the body or the header makes again (a register named as the table: round
            # 323) hides the variable where the reading follows names without scopes: counted as written
            written |= names & (body.declared | set(parameters))
            # a value the PTX leaves undefined is whatever ptxas's register holds, a static's address among what it
            # may hold (red team round 327: a call argument never stored arrived in the register a read of the
            # static had just used): every variable counts as written
            # what its callers read of its return value: every byte where a call may come from elsewhere
            visible = re.search(r"\.(?:entry|visible|weak)\b", " ".join(function.lines[:3]))
            if _leaves_undefined(body, function, reads, None if visible else returned_bytes.get(name, set())):
                return set(names)
            # the bytes of each parameter the function reads or fills: its header's, and its calls' (the
            # smallest where a name is declared in several blocks)
            sizes: dict[str, int | None] = {}
            for (parameter, _), size in body.parameter_bytes.items():
                sizes[parameter] = None if size is None or sizes.get(parameter, size) is None \
                    else min(size, sizes.get(parameter, size))
            sizes |= _header_bytes(function)
            bodies[name] = (body.statements, _handed(body, module), parameters, body.local, sizes)
    every_statement = [s for statements, *_ in bodies.values() for s in statements]

    def address_taken(f: str) -> bool:  # named anywhere but as the target of a call
        for s in every_statement:
            if f in _names(s):
                c = _call(s)
                if c is None or c[0] != f or f in c[1] or f in c[2]:
                    return True
        return any(f in _names(v) for v in module.variables.values())

    # a function that may be called where no call here names it: its address taken, or the module's
    # entry points and the functions another module could link to
    taken = {f for f in bodies if address_taken(f)
             or re.search(r"\.(?:entry|visible|weak)\b", " ".join(module.functions[f].lines[:3]))}
    passed: dict[tuple[str, int], set[str]] = {}
    returned: dict[str, set[str]] = {}
    # each round carries the roots one call further; the sets only grow, so the rounds end (the cap is
    # a guard against a reading error, failing closed)
    for _ in range(64 * (len(bodies) + 1) * (len(names) + 1)):
        functions = {}
        for name, (statements, handed, parameters, local_memory, sizes) in bodies.items():
            incoming = {p: passed.get((name, k), set()) for k, p in enumerate(parameters)}
            for s in statements:
                if (c := _call(s)) is not None and c[0] in bodies:
                    for r in c[2]:
                        incoming[r] = incoming.get(r, set()) | returned.get(c[0], set())
            functions[name] = _written_from(statements, names, module, handed, incoming, local_memory, sizes,
                                            parameters)
        new_passed: dict[tuple[str, int], set[str]] = {}
        for f in functions.values():
            for key, roots in f.passed.items():
                new_passed.setdefault(key, set()).update(roots)
        new_returned = {name: f.returned for name, f in functions.items()}
        if new_passed == passed and new_returned == returned:
            break
        passed, returned = new_passed, new_returned
    else:
        return set(names)  # no fixed point within the rounds: fail closed
    # an argument past the callee's parameters (a call the header does not read alike) is followed nowhere
    for (callee, k), roots in passed.items():
        if k >= len(bodies[callee][2]):
            written |= roots
    local_read = any(f.local_read for f in functions.values())
    if local_read and register_saves:
        written |= {n for statements, *_ in bodies.values() for s in statements for n in _names(s) & names}
    for name, f in functions.items():
        written |= f.written | (f.parked if local_read else set()) | (f.returned if name in taken else set())
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
