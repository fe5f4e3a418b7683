"""The syntax tree of the C++ subset cparse reads: expressions, statements, and printing back.

Nodes are frozen dataclasses, so structurally equal expressions compare equal; `span` fields
(offsets into the parsed text) are left out of comparisons. `to_c` prints an expression with
every compound operand parenthesized, so the printed text evaluates in the same order.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field


class ParseError(Exception):
    """The text uses a construct this parser does not read."""


# -- expressions -----------------------------------------------------------------------------

class Expr:
    """Base of expression nodes."""


@dataclass(frozen=True)
class Name(Expr):
    id: str


@dataclass(frozen=True)
class Num(Expr):
    text: str

    @property
    def is_float(self) -> bool:
        t = self.text.lower()
        if t.startswith("0x"):
            return "p" in t  # a hexadecimal float has a binary exponent: 0x1p-1
        return not t.startswith("0b") and ("." in t or "e" in t or t.endswith("f"))

    @property
    def value(self) -> int | float:
        t = self.text.replace("'", "").lower()
        if t.startswith("0x"):
            return float.fromhex(t.rstrip("fl")) if self.is_float else int(t.rstrip("ul"), 16)
        if t.startswith("0b"):
            return int(t.rstrip("ul"), 2)
        if self.is_float:
            return float(t.rstrip("fl"))
        t = t.rstrip("ul")
        return int(t, 8) if len(t) > 1 and t.startswith("0") else int(t)


@dataclass(frozen=True)
class Str(Expr):
    text: str


@dataclass(frozen=True)
class Member(Expr):
    base: Expr
    field: str
    arrow: bool = False


@dataclass(frozen=True)
class Index(Expr):
    base: Expr
    index: Expr


@dataclass(frozen=True)
class Call(Expr):
    func: Expr
    args: tuple[Expr, ...]
    targs: str = ""  # explicit template arguments, as text


@dataclass(frozen=True)
class Launch(Expr):
    kernel: Expr
    config: tuple[Expr, ...]
    args: tuple[Expr, ...]
    targs: str = ""


@dataclass(frozen=True)
class Unary(Expr):
    op: str  # prefix: - + ! ~ * & ++ --
    operand: Expr


@dataclass(frozen=True)
class Postfix(Expr):
    op: str  # ++ --
    operand: Expr


@dataclass(frozen=True)
class Binary(Expr):
    op: str
    left: Expr
    right: Expr


@dataclass(frozen=True)
class Ternary(Expr):
    cond: Expr
    then: Expr
    other: Expr


@dataclass(frozen=True)
class Cast(Expr):
    type: str
    operand: Expr


@dataclass(frozen=True)
class Assign(Expr):
    op: str  # = += -= ...
    target: Expr
    value: Expr


@dataclass(frozen=True)
class InitList(Expr):
    items: tuple[Expr, ...]


@dataclass(frozen=True)
class SizeOf(Expr):
    text: str  # the type, as text ("" for sizeof(expression))
    operand: Expr | None = None  # sizeof(expression): the expression (its size is never taken from a table)


# -- statements ------------------------------------------------------------------------------

class Stmt:
    """Base of statement nodes."""


@dataclass(frozen=True)
class Declarator:
    name: str
    pointer: int
    array: tuple[Expr | None, ...]
    init: Expr | None


@dataclass(frozen=True)
class Decl(Stmt):
    type: str  # base type with qualifiers, normalized ("const float", "unsigned int")
    declarators: tuple[Declarator, ...]
    span: tuple[int, int] = field(default=(0, 0), compare=False)

    @property
    def shared(self) -> bool:
        return "__shared__" in self.type.split()


@dataclass(frozen=True)
class Block(Stmt):
    body: tuple[Stmt, ...]
    span: tuple[int, int] = field(default=(0, 0), compare=False)


@dataclass(frozen=True)
class ExprStmt(Stmt):
    expr: Expr
    span: tuple[int, int] = field(default=(0, 0), compare=False)


@dataclass(frozen=True)
class If(Stmt):
    cond: Expr
    then: Stmt
    other: Stmt | None
    span: tuple[int, int] = field(default=(0, 0), compare=False)


@dataclass(frozen=True)
class For(Stmt):
    init: Stmt | None
    cond: Expr | None
    step: Expr | None
    body: Stmt
    span: tuple[int, int] = field(default=(0, 0), compare=False)


@dataclass(frozen=True)
class While(Stmt):
    cond: Expr
    body: Stmt
    do: bool = False
    span: tuple[int, int] = field(default=(0, 0), compare=False)


@dataclass(frozen=True)
class Return(Stmt):
    value: Expr | None
    span: tuple[int, int] = field(default=(0, 0), compare=False)


@dataclass(frozen=True)
class Jump(Stmt):
    kind: str  # "break" | "continue"
    span: tuple[int, int] = field(default=(0, 0), compare=False)


@dataclass(frozen=True)
class Empty(Stmt):
    span: tuple[int, int] = field(default=(0, 0), compare=False)


@dataclass(frozen=True)
class Using(Stmt):
    """A statement that only names things: `using namespace ns;`, `using ns::f;`, `using T = ...;`,
    `typedef ... T;`, `namespace a = ns;` (its text, as written)."""
    text: str
    span: tuple[int, int] = field(default=(0, 0), compare=False)
    # a type alias naming a plain type (no pointer, reference, array or function declarator):
    # `using acc_t = typename Acc<T>::type;`, `typedef unsigned int uint;`; empty otherwise
    alias: str = ""
    aliased: str = ""  # the type it names, as written


# -- printing --------------------------------------------------------------------------------

def to_c(e: Expr, sub: Callable[[Expr], str | None] | None = None) -> str:
    """C text of an expression, every compound operand parenthesized (evaluation order kept).
    `sub` may replace any sub-expression by text of its own (None: print it normally)."""
    if sub is not None:
        replaced = sub(e)
        if replaced is not None:
            return replaced
    t = lambda x: to_c(x, sub)  # noqa: E731
    o = lambda x: _operand(x, sub)  # noqa: E731
    if isinstance(e, Name):
        return e.id
    if isinstance(e, Num):
        return e.text
    if isinstance(e, Str):
        return e.text
    if isinstance(e, Member):
        return f"{o(e.base)}{'->' if e.arrow else '.'}{e.field}"
    if isinstance(e, Index):
        return f"{o(e.base)}[{t(e.index)}]"
    if isinstance(e, Call):
        targs = f"<{e.targs}>" if e.targs else ""
        return f"{o(e.func)}{targs}({', '.join(t(a) for a in e.args)})"
    if isinstance(e, Unary):
        return f"{e.op}{o(e.operand)}"
    if isinstance(e, Postfix):
        return f"{o(e.operand)}{e.op}"
    if isinstance(e, Binary):
        return f"{o(e.left)} {e.op} {o(e.right)}"
    if isinstance(e, Ternary):
        return f"{o(e.cond)} ? {o(e.then)} : {o(e.other)}"
    if isinstance(e, Cast):
        return f"({e.type}){o(e.operand)}"
    if isinstance(e, Assign):
        return f"{t(e.target)} {e.op} {t(e.value)}"
    if isinstance(e, InitList):
        return "{" + ", ".join(t(a) for a in e.items) + "}"
    if isinstance(e, SizeOf):
        return f"sizeof({e.text if e.operand is None else t(e.operand)})"
    if isinstance(e, Launch):
        return f"{t(e.kernel)}<<<{', '.join(t(c) for c in e.config)}>>>({', '.join(t(a) for a in e.args)})"
    raise ParseError(f"cannot print {type(e).__name__}")


def _operand(e: Expr, sub: Callable[[Expr], str | None] | None = None) -> str:
    text = to_c(e, sub)
    if sub is not None and sub(e) is not None:
        return text if re.fullmatch(r"[\w.]+(\[[^\[\]]*\])?", text) else f"({text})"
    return text if isinstance(e, (Name, Num, Str, Member, Index, Call, SizeOf)) else f"({text})"


def walk_expr(e: Expr):
    """Every sub-expression of `e`, `e` first."""
    yield e
    if isinstance(e, (Member,)):
        yield from walk_expr(e.base)
    elif isinstance(e, Index):
        yield from walk_expr(e.base)
        yield from walk_expr(e.index)
    elif isinstance(e, Call):
        yield from walk_expr(e.func)
        for a in e.args:
            yield from walk_expr(a)
    elif isinstance(e, Launch):
        yield from walk_expr(e.kernel)
        for a in (*e.config, *e.args):
            yield from walk_expr(a)
    elif isinstance(e, (Unary, Postfix, Cast)):
        yield from walk_expr(e.operand)
    elif isinstance(e, Binary):
        yield from walk_expr(e.left)
        yield from walk_expr(e.right)
    elif isinstance(e, Ternary):
        yield from walk_expr(e.cond)
        yield from walk_expr(e.then)
        yield from walk_expr(e.other)
    elif isinstance(e, Assign):
        yield from walk_expr(e.target)
        yield from walk_expr(e.value)
    elif isinstance(e, InitList):
        for a in e.items:
            yield from walk_expr(a)
    elif isinstance(e, SizeOf) and e.operand is not None:
        yield from walk_expr(e.operand)


def call_name(e: Expr) -> str | None:
    """`f` for a call of a plain function name `f(...)` (std::f counts as f)."""
    if isinstance(e, Call) and isinstance(e.func, Name):
        return e.func.id.split("::")[-1]
    return None


def strip_casts(e):
    """E without the casts around it (None stays None)."""
    while isinstance(e, Cast):
        e = e.operand
    return e
