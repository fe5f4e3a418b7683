"""What a kernel body does, as facts the family matchers can test.

Two passes over the parsed body. The first resolves every name to a binding (scopes,
shadowing) and counts how often each local is assigned after its declaration; a local
declared with a value and never assigned again is *inlined* wherever it is used, so
`size_t idx = (size_t)row * cols + col; out[idx] = in[idx - cols];` is seen as accesses at
row*cols + col and row*cols + col - cols. The second pass records every memory access
(reads, stores, atomics) with its context: the conditions that guard it (if/else branches,
early returns, ternaries, short-circuit operands) and the loops around it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from itertools import count

from ...program.numeric_types import element_type
from .cparse import Param, Signature
from .symbolic import Poly, is_thread_atom, is_uniform_atom
from .syntax import (
    Assign,
    Binary,
    Block,
    Call,
    Cast,
    Decl,
    Empty,
    Expr,
    ExprStmt,
    For,
    If,
    Index,
    InitList,
    Jump,
    Launch,
    Member,
    Name,
    Num,
    Postfix,
    Return,
    SizeOf,
    Stmt,
    Ternary,
    Unary,
    While,
    call_name,
    to_c,
    walk_expr,
)

_BUILTINS = ("threadIdx", "blockIdx", "blockDim", "gridDim")
SIZEOF = {"float": 4, "int": 4, "unsigned int": 4, "unsigned": 4, "double": 8, "size_t": 8, "char": 1,
           "unsigned char": 1, "long long": 8, "unsigned long long": 8, "long": 8, "short": 2, "float4": 16,
           "uint4": 16, "int4": 16, "float2": 8}
ATOMICS = frozenset(["atomicAdd", "atomicSub", "atomicMax", "atomicMin", "atomicExch", "atomicCAS", "atomicInc",
                     "atomicDec", "atomicAnd", "atomicOr", "atomicXor", "atomicAdd_block", "atomicAdd_system"])


@dataclass
class Binding:
    key: str  # unique within the kernel: name#n
    name: str
    type: str  # base type without qualifiers ("float", "unsigned int")
    pointer: int
    array: bool = False  # declared with [] (a local or shared array)
    dims: int = 0  # how many [] it was declared with
    shared: bool = False
    param: Param | None = None
    init: Expr | None = None
    assignments: int = 0  # after the declaration
    loop_var: bool = False  # declared in or stepped by a for header
    # `static` or `thread_local`: initialized once, at the first call; later calls keep the value
    # (red team round 113: a static grid sized at the first call's rows read as every call's)
    persistent: bool = False

    @property
    def inlinable(self) -> bool:
        return (self.param is None and self.init is not None and self.assignments == 0 and not self.array
                and not self.persistent
                and not self.shared and not self.loop_var and not isinstance(self.init, InitList)
                and not (isinstance(self.init, Call) and self.type == "dim3"))


@dataclass(frozen=True)
class Loop:
    id: int
    var: str | None  # binding key of the counted variable; None for while loops
    init: Expr | None
    cond: Expr | None
    step: Expr | None
    unit_step: bool  # ++k, k++, k += 1, k = k + 1
    # the counted variable is also written in the body or the condition (`i += stride` under an `if`):
    # its header then says nothing of which values it takes (red team round 105)
    written_in_body: bool = False
    # the body may end the loop before its condition does (a `break` or `return` of its own, a call
    # not known to return), or the condition is more than one comparison (`i < n && !done`): the
    # header's bound is then only an upper limit of what the loop visits (red team round 106)
    may_end_early: bool = False


@dataclass(frozen=True)
class Cond:
    expr: Expr
    holds: bool


@dataclass(frozen=True)
class Context:
    conds: tuple[Cond, ...] = ()
    loops: tuple[Loop, ...] = ()

    def where(self, expr: Expr, holds: bool) -> Context:
        return Context(self.conds + (Cond(expr, holds),), self.loops)

    def inside(self, loop: Loop) -> Context:
        return Context(self.conds, self.loops + (loop,))


@dataclass
class Access:
    kind: str  # "read" | "store" | "atomic"
    array: Binding | None  # None: an array the kernel cannot name (a global)
    offset: Poly | None  # element index; None when it is no polynomial
    node: Expr
    ctx: Context
    op: str = ""  # store: "=", "+=", ...; atomic: the function
    value: Expr | None = None  # what is stored or atomically combined (as written)
    reinterpreted: bool = False  # through a cast to a pointer of another element type
    seq: int = 0  # order of appearance in the kernel's text (see `KernelFacts.unchanged_between`)


@dataclass
class ScalarAssign:
    binding: Binding
    op: str  # "=", "+=", ..., "++", "--"; "decl" for a declaration's value
    value: Expr | None
    ctx: Context
    seq: int = 0  # order of appearance in the kernel's text


@dataclass
class KernelFacts:
    sig: Signature
    body: Block
    params: dict[str, Binding]
    names: dict[int, Binding]  # id(Name node) -> binding
    declared: dict[int, Binding] = field(default_factory=dict)  # id(Declarator) -> the binding it creates
    accesses: list[Access] = field(default_factory=list)
    assigns: list[ScalarAssign] = field(default_factory=list)
    calls: set[str] = field(default_factory=set)
    loops: list[Loop] = field(default_factory=list)
    bindings: list[Binding] = field(default_factory=list)
    constants: dict[str, int] = field(default_factory=dict)  # integer macros and constants of the program

    # -- names and values --
    def binding(self, e: Expr) -> Binding | None:
        return self.names.get(id(e)) if isinstance(e, Name) else None

    def integer_kind(self, e: Expr, depth: int = 0) -> tuple[int, bool] | None:
        """(bits, signed) of the integer `e` computes, where its declarations show it; None when
        not known to be an integer. A thread coordinate counts as 31 bits unsigned (CUDA's limits)."""
        if depth > 64:
            return None
        k = lambda x: self.integer_kind(x, depth + 1)  # noqa: E731
        if isinstance(e, Num):
            if e.is_float:
                return None
            suffix = e.text.lower().lstrip("0123456789abcdefx'")
            bits = 64 if "l" in suffix or abs(int(e.value)) >= 2**31 else 32
            return bits, "u" not in suffix
        if isinstance(e, Member) and isinstance(e.base, Name) and e.base.id in _BUILTINS:
            return 31, False
        if isinstance(e, Name):
            b = self.binding(e)
            if b is None:
                return (32, True) if e.id in self.constants else None
            if b.pointer or b.array:
                return None
            if b.inlinable and b.init is not None and b.type in ("auto", "const auto"):
                return k(b.init)
            return integer_of(b.type)
        if isinstance(e, Cast):
            return integer_of(e.type)
        if isinstance(e, SizeOf):
            return 64, False
        if isinstance(e, Unary) and e.op in ("-", "+", "~"):
            inner = k(e.operand)
            return None if inner is None else (max(32, inner[0]), inner[1] or inner[0] < 32)
        if isinstance(e, Binary) and e.op in ("+", "-", "*", "/", "%", "&", "|", "^"):
            a, b = k(e.left), k(e.right)
            if a is None or b is None:
                return None
            # the usual arithmetic conversions, after promotion to int
            a = (32, True) if a[0] < 32 else a
            b = (32, True) if b[0] < 32 else b
            if a[1] == b[1]:
                return max(a[0], b[0]), a[1]
            unsigned, signed = (a, b) if not a[1] else (b, a)
            return (unsigned[0], False) if unsigned[0] >= signed[0] else signed
        if isinstance(e, Binary) and e.op in ("<<", ">>"):
            a = k(e.left)
            return None if a is None else ((32, True) if a[0] < 32 else a)
        if isinstance(e, Ternary):
            a, b = k(e.then), k(e.other)
            return a if a == b else None
        return None

    def keeps_value(self, cast: Cast) -> bool:
        """Whether the conversion keeps every value its operand can take: a wider (or as wide)
        integer type of the same signedness, an unsigned operand into a wider signed type, or a
        signed one into an unsigned type as wide (sizes and indices are not negative: `i <
        (unsigned)n`). Narrowing, unsigned into signed as wide, floats and unknown types change it."""
        to = integer_of(cast.type)
        of = self.integer_kind(cast.operand)
        if to is None or of is None:
            return False
        if to[1] == of[1]:
            return to[0] >= of[0]
        return to[0] > of[0] if to[1] else to[0] >= of[0]

    def without_kept_casts(self, e: Expr) -> Expr:
        """`e` without the casts around it that keep its value (see keeps_value)."""
        while isinstance(e, Cast) and self.keeps_value(e):
            e = e.operand
        return e

    def same_value(self, a: Expr, b: Expr, first: Access | ScalarAssign, second: Access | ScalarAssign) -> bool:
        """`a` read where `first` is and `b` where `second` is are one value: the same text naming
        the same variables (a shadowing `m` is another), calling only pure functions, and none of
        its variables written between the two, nor in a loop around only one of them (red team
        round 107: `m` moved between a softmax's sum and its store)."""
        def keyed(x: Expr) -> str | None:
            bound = self.binding(x)
            return bound.key if bound is not None else None

        if to_c(a, keyed) != to_c(b, keyed):
            return False
        if any(isinstance(x, Call) and call_name(x) not in SIDE_EFFECT_FREE for x in walk_expr(a)):
            return False
        return all(self.unchanged_between(bound, first, second)
                   for x in walk_expr(a) if (bound := self.binding(x)) is not None)

    def unchanged_between(self, b: Binding, first: Access | ScalarAssign, second: Access | ScalarAssign) -> bool:
        """No write to `b` runs after `first` and before `second` (in text order, `first` earlier)."""
        writes = [w for w in self.assigns if w.binding is b]
        if first.seq >= second.seq:
            return False
        if sum(w.op != "decl" for w in writes) != b.assignments:
            return False  # written where no assignment shows (`&b`, a call taking it by reference)
        around_first = {loop.id for loop in first.ctx.loops}
        around_second = {loop.id for loop in second.ctx.loops}
        only_one = around_first ^ around_second  # loops whose later iterations run between the two
        return not any(first.seq < w.seq < second.seq or any(loop.id in only_one for loop in w.ctx.loops)
                       for w in writes)

    def keeps_init(self, b: Binding) -> bool:
        return self.keeps_as(b, b.init)

    def keeps_as(self, b: Binding, value: Expr | None) -> bool:
        """Whether a local holds its initializer's value: its declared type is not an integer type,
        or the conversion into it keeps every value (red team round 113: `unsigned short row =
        blockIdx.y * blockDim.y + threadIdx.y` read as the full coordinate, as round 109's explicit
        casts were)."""
        if value is None or b.pointer or b.type in ("auto", "const auto"):
            return True  # `auto` keeps the initializer's own type
        if integer_of(b.type) is not None:
            return self.keeps_value(Cast(b.type, value))
        if is_floating_type(b.type):
            # a float holds an integer exactly only to 2^24 (a half to 2^11): it keeps only a value
            # that is a float already (red team round 116: `const float x = col; if (x < cols)`)
            return self.is_floating(value)
        if b.type.replace("const ", "").strip() == "dim3":  # three unsigned ints
            return self.integer_kind(value) is None or self.keeps_value(Cast("unsigned int", value))
        # a type not read as an integer holds the value only where it is known to be no integer at
        # all: an alias, an enum or a template parameter may be a 16-bit one (red team round 115:
        # `typedef unsigned short coord_t;`)
        return not_an_integer(b.type)

    def is_floating(self, e: Expr, depth: int = 0) -> bool:
        """Whether `e` is known to compute a floating-point value: a float literal or variable, a
        float array's element, a cast to a float type, arithmetic or a math function with a float
        operand. Converting it to a float type is no change of what it is."""
        if depth > 64:
            return False
        fl = lambda x: self.is_floating(x, depth + 1)  # noqa: E731
        if isinstance(e, Num):
            return e.is_float
        if isinstance(e, Name):
            b = self.binding(e)
            return b is not None and not b.pointer and not b.array and is_floating_type(b.type)
        if isinstance(e, Index):
            base = e.base
            while isinstance(base, Index):
                base = base.base
            b = self.binding(base) if isinstance(base, Name) else None
            return b is not None and (b.pointer + b.dims) >= 1 and is_floating_type(b.type)
        if isinstance(e, Cast):
            return is_floating_type(e.type)
        if isinstance(e, Unary) and e.op in ("-", "+"):
            return fl(e.operand)
        if isinstance(e, Binary) and e.op in ("+", "-", "*", "/"):
            return fl(e.left) or fl(e.right)
        if isinstance(e, Ternary):
            return fl(e.then) or fl(e.other)
        if isinstance(e, Call) and call_name(e) in PURE_FUNCTIONS and call_name(e) not in _INTEGER_RESULTS:
            return any(fl(a) for a in e.args)
        return False

    def resolve(self, e: Expr, depth: int = 0) -> Expr:
        """`e` with every inlinable local replaced by its value."""
        if depth > 64:
            return e
        if isinstance(e, Name):
            b = self.binding(e)
            if b is not None and b.inlinable and self.keeps_init(b):
                assert b.init is not None
                return self.resolve(b.init, depth + 1)
            return e
        r = lambda x: self.resolve(x, depth + 1)  # noqa: E731
        if isinstance(e, Binary):
            return Binary(e.op, r(e.left), r(e.right))
        if isinstance(e, Unary):
            return Unary(e.op, r(e.operand))
        if isinstance(e, Cast):
            return Cast(e.type, r(e.operand))
        if isinstance(e, Ternary):
            return Ternary(r(e.cond), r(e.then), r(e.other))
        if isinstance(e, Index):
            return Index(r(e.base), r(e.index))
        if isinstance(e, Call):
            return Call(e.func, tuple(r(a) for a in e.args), e.targs)
        if isinstance(e, Member):
            return Member(r(e.base), e.field, e.arrow)
        if isinstance(e, SizeOf) and e.operand is not None:
            return SizeOf(e.text, r(e.operand))
        return e

    def atom_of(self, e: Name) -> str:
        b = self.binding(e)
        if b is None:
            return f"g:{e.id}"
        if b.param is not None and not b.assignments:
            return f"p:{b.name}"
        # a parameter the kernel writes (`n &= ~3`) holds the launch's value only until then: read as
        # a local of its own, never as the launch argument (red team round 107)
        return f"L:{b.key}" if b.loop_var else f"v:{b.key}"

    def poly(self, e: Expr, depth: int = 0) -> Poly | None:
        """The integer polynomial `e` computes, or None (floats, pointers)."""
        if depth > 64:
            return None
        p = lambda x: self.poly(x, depth + 1)  # noqa: E731
        if isinstance(e, Num):
            return None if e.is_float else Poly.const(int(e.value))
        if self.is_floating(e):
            # compared or computed in floating point: rounded beyond 2^24, no integer (round 116)
            return None
        if isinstance(e, Name):
            b = self.binding(e)
            if b is not None and b.inlinable and self.keeps_init(b):
                assert b.init is not None
                return p(b.init)
            if b is not None and (b.pointer or b.array):
                return None
            if b is None and e.id in self.constants:  # `#define TILE 32`: a number, not an unknown
                return Poly.const(self.constants[e.id])
            return Poly.atom(self.atom_of(e))
        if isinstance(e, Member) and isinstance(e.base, Name) and e.base.id in _BUILTINS:
            return Poly.atom(f"{e.base.id}.{e.field}")
        if isinstance(e, Cast):
            # only a conversion that keeps every value its operand can take is no change (red team
            # round 109: `k < (short)n` read as `k < n`, equal at every size the harness runs)
            return p(e.operand) if self.keeps_value(e) else self._opaque(e)
        if isinstance(e, SizeOf):
            size = SIZEOF.get(e.text) if e.operand is None else None
            return Poly.const(size) if size else self._opaque(e)
        if isinstance(e, Unary) and e.op in ("-", "+"):
            inner = p(e.operand)
            return None if inner is None else (-inner if e.op == "-" else inner)
        if isinstance(e, Binary) and e.op in ("+", "-", "*"):
            a, b = p(e.left), p(e.right)
            if a is None or b is None:
                return None if (a is None and b is None) else self._opaque(e)
            return a + b if e.op == "+" else a - b if e.op == "-" else a * b
        if isinstance(e, Binary) and e.op == "<<":
            a, b = p(e.left), p(e.right)
            if a is not None and b is not None and b.is_const and 0 <= b.const_value < 63:
                return a.scale(1 << b.const_value)
        return self._opaque(e)

    def _opaque(self, e: Expr) -> Poly:
        resolved = self.resolve(e)
        atoms: set[str] = set()
        for sub in _leaves(resolved):
            if isinstance(sub, Member) and isinstance(sub.base, Name) and sub.base.id in _BUILTINS:
                atoms.add(f"{sub.base.id}.{sub.field}")
            elif isinstance(sub, Name):
                atoms.add(self.atom_of(sub))
        text = " ".join(to_c(resolved).split())
        if atoms and all(is_uniform_atom(a) for a in atoms):
            return Poly.atom(f"o:{text}")
        if any(is_thread_atom(a) for a in atoms) and all(is_thread_atom(a) or is_uniform_atom(a) for a in atoms):
            return Poly.atom(f"t:{text}")
        return Poly.atom(f"x:{text}")

    # -- arrays --
    def array_of(self, e: Expr, depth: int = 0) -> tuple[Binding | None, Poly | None, bool]:
        """(array, element offset, reinterpreted) of a pointer expression."""
        if depth > 64:
            return None, None, False
        if isinstance(e, Name):
            b = self.binding(e)
            if b is None:
                return None, None, False
            if b.inlinable and b.pointer:
                assert b.init is not None
                return self.array_of(b.init, depth + 1)
            if b.pointer and b.assignments:
                return None, None, False  # a pointer moved (`in += 1`): no longer its array's start
            if b.pointer or b.array:
                return b, Poly(), False
            return None, None, False
        if isinstance(e, Binary) and e.op in ("+", "-"):
            base, off, re_ = self.array_of(e.left, depth + 1)
            other = e.right
            if base is None and e.op == "+":
                base, off, re_ = self.array_of(e.right, depth + 1)
                other = e.left
            if base is None:
                return None, None, False
            step = self.poly(other)
            if off is None or step is None:
                return base, None, re_
            return base, (off + step if e.op == "+" else off - step), re_
        if isinstance(e, Unary) and e.op == "&" and isinstance(e.operand, Index):
            base, off, re_ = self.array_of(e.operand.base, depth + 1)
            idx = self.poly(e.operand.index)
            return base, (None if off is None or idx is None else off + idx), re_
        if isinstance(e, Cast):
            base, off, re_ = self.array_of(e.operand, depth + 1)
            if base is not None:
                target = " ".join(w for w in e.type.replace("*", " ").split()
                                  if w not in ("const", "volatile", "__restrict__"))
                re_ = re_ or target != base.type
            return base, off, re_
        return None, None, False


def _leaves(e: Expr):
    if isinstance(e, (Name, Num)):
        yield e
    elif isinstance(e, Member):
        if isinstance(e.base, Name) and e.base.id in _BUILTINS:
            yield e
        else:
            yield from _leaves(e.base)
    elif isinstance(e, Index):
        yield from _leaves(e.base)
        yield from _leaves(e.index)
    elif isinstance(e, Call):
        for a in e.args:
            yield from _leaves(a)
    elif isinstance(e, (Unary, Cast)):
        yield from _leaves(e.operand)
    elif isinstance(e, Binary):
        yield from _leaves(e.left)
        yield from _leaves(e.right)
    elif isinstance(e, Ternary):
        yield from _leaves(e.cond)
        yield from _leaves(e.then)
        yield from _leaves(e.other)


# -- pass 1: scopes ------------------------------------------------------------------------------

class _Scopes:
    def __init__(self, sig: Signature, returning: frozenset[str] = frozenset()) -> None:
        self.returning = returning
        self.counter = count()
        self.names: dict[int, Binding] = {}
        self.declared: dict[int, Binding] = {}
        self.bindings: list[Binding] = []
        self.params: dict[str, Binding] = {}
        top: dict[str, Binding] = {}
        for prm in sig.params:
            b = Binding(key=f"{prm.name}#p", name=prm.name, type=prm.base, pointer=prm.pointer, param=prm)
            top[prm.name] = b
            self.params[prm.name] = b
        self.stack: list[dict[str, Binding]] = [top]

    def lookup(self, name: str) -> Binding | None:
        for scope in reversed(self.stack):
            if name in scope:
                return scope[name]
        return None

    def declare(self, d: Decl, loop_header: bool = False) -> None:
        words = [w for w in d.type.split() if w not in ("const", "volatile", "static", "extern", "__shared__",
                                                       "register", "constexpr", "__restrict__", "thread_local")]
        persistent = bool({"static", "thread_local"} & set(d.type.split()))
        for dec in d.declarators:
            if dec.init is not None:
                self.expr(dec.init)
            for dim in dec.array:
                if dim is not None:
                    self.expr(dim)
            b = Binding(key=f"{dec.name}#{next(self.counter)}", name=dec.name, type=" ".join(words),
                        pointer=dec.pointer, array=bool(dec.array), dims=len(dec.array), shared=d.shared, init=dec.init,
                        loop_var=loop_header, persistent=persistent)
            self.stack[-1][dec.name] = b
            self.bindings.append(b)
            self.declared[id(dec)] = b

    def assigned(self, target: Expr, loop_step: bool = False) -> None:
        for name in lvalue_names(target):
            b = self.lookup(name.id)
            if b is not None:
                b.assignments += 1
                if loop_step:
                    b.loop_var = True

    def expr(self, e: Expr | None, loop_step: bool = False) -> None:
        if e is None:
            return
        if isinstance(e, Name):
            b = self.lookup(e.id)
            if b is not None:
                self.names[id(e)] = b
            return
        if isinstance(e, Assign):
            self.assigned(e.target, loop_step)
        elif isinstance(e, (Unary, Postfix)) and e.op in ("++", "--"):
            self.assigned(e.operand, loop_step)
        elif isinstance(e, Unary) and e.op == "&":
            # its address taken (`cudaDeviceGetAttribute(&m, ...)`): written through it, for all we
            # know, so never replaced by its initializer (red team round 100)
            self.assigned(e.operand)
        elif isinstance(e, Call):
            # handed whole to a call that may take it by reference (`drop_padding(i, n)` with an
            # `unsigned&`): written, for all we know (red team round 106)
            taken = _by_reference(e, self.returning)
            for a in e.args:
                if any(name.id in taken for name in lvalue_names(a)):
                    self.assigned(a)
        for child in _children(e):
            self.expr(child, loop_step)

    def stmt(self, s: Stmt | None) -> None:
        if s is None:
            return
        if isinstance(s, Block):
            self.stack.append({})
            for x in s.body:
                self.stmt(x)
            self.stack.pop()
        elif isinstance(s, Decl):
            self.declare(s)
        elif isinstance(s, ExprStmt):
            self.expr(s.expr)
        elif isinstance(s, If):
            self.expr(s.cond)
            self.scoped(s.then)
            self.scoped(s.other)
        elif isinstance(s, For):
            self.stack.append({})
            if isinstance(s.init, Decl):
                self.declare(s.init, loop_header=True)
            elif isinstance(s.init, ExprStmt):
                self.expr(s.init.expr, loop_step=True)
            self.expr(s.cond)
            self.expr(s.step, loop_step=True)
            self.scoped(s.body)
            self.stack.pop()
        elif isinstance(s, While):
            self.expr(s.cond)
            self.scoped(s.body)
        elif isinstance(s, Return):
            self.expr(s.value)

    def scoped(self, s: Stmt | None) -> None:
        self.stack.append({})
        self.stmt(s)
        self.stack.pop()


def _children(e: Expr) -> list[Expr]:
    if isinstance(e, Member):
        return [e.base]
    if isinstance(e, Index):
        return [e.base, e.index]
    if isinstance(e, Call):
        return [e.func, *e.args]
    if isinstance(e, Launch):
        return [e.kernel, *e.config, *e.args]
    if isinstance(e, (Unary, Postfix, Cast)):
        return [e.operand]
    if isinstance(e, Binary):
        return [e.left, e.right]
    if isinstance(e, Ternary):
        return [e.cond, e.then, e.other]
    if isinstance(e, Assign):
        return [e.target, e.value]
    if isinstance(e, InitList):
        return list(e.items)
    return []


# -- pass 2: accesses in context ---------------------------------------------------------------

# Device functions known to return to their caller (no `exit` in inline asm, no unread code):
# math and conversions, loads, atomics, barriers and shuffles.
PURE_FUNCTIONS = frozenset("""
    expf exp __expf exp2f exp2 expm1f logf log __logf log2f log2 log10f log10 log1pf sqrtf sqrt rsqrtf rsqrt
    cbrtf powf pow __powf sinf cosf tanf sin cos tan __sinf __cosf tanhf tanh erff erf erfcf fabsf fabs abs
    fmaxf fminf fmax fmin max min floorf floor ceilf ceil roundf round truncf fmodf fmaf fma __fdividef
    __frcp_rn __fsqrt_rn __fmul_rn __fadd_rn copysignf isnan isinf isfinite __float2int_rn __int2float_rn
    __float2half __half2float __float2bfloat16 __bfloat162float static_cast float double int
    __ldg __ldca __ldcg __ldcs __ldlu __ldcv
""".split())
# CUDA's vector constructors (`make_float4(a.x + b.x, ...)` in llm.c's helpers): each builds a value
# from its arguments and nothing else. Not in PURE_FUNCTIONS, which the type reading takes for
# scalar math; wherever a call must be free of effects, SIDE_EFFECT_FREE is what is allowed. A
# program that defines a function of one of these names is read by the tiers' clash check
# (analysis._known_by_spelling), as for the math functions.
VECTOR_CONSTRUCTORS = frozenset(
    f"make_{kind}{n}" for kind in ("char", "uchar", "short", "ushort", "int", "uint", "long", "ulong", "longlong",
                                   "ulonglong", "float", "double") for n in (1, 2, 3, 4))
SIDE_EFFECT_FREE = PURE_FUNCTIONS | VECTOR_CONSTRUCTORS
_RETURNING = SIDE_EFFECT_FREE | ATOMICS | frozenset([
    "__syncthreads", "__syncwarp", "__threadfence", "__threadfence_block", "__threadfence_system",
    "__shfl_sync", "__shfl_down_sync", "__shfl_up_sync", "__shfl_xor_sync", "__ballot_sync", "__any_sync",
    "__all_sync", "__activemask", "printf", "sizeof"])
# not `assert`: a failing one traps, the kernel stops and the program's context is lost, where a
# rewrite that does not check would run on (red team round 117: `assert(cols <= 65536)` in a softmax)
_LEFT = Name("kl_may_have_left")  # a condition nothing decides: what follows may not run for every thread


def _may_leave(s: Stmt | None, in_loop: bool = False, returning: frozenset[str] = frozenset()) -> bool:
    """Whether control may leave the enclosing code from inside S without S always doing so: a
    `return`, a `break`/`continue` not bound to a loop inside S, or a call of a function not known to
    return (a device helper's inline `exit`: red team round 105)."""
    if s is None:
        return False
    if isinstance(s, Return):
        return True
    if isinstance(s, Jump):
        return not in_loop
    exprs: list[Expr] = []
    if isinstance(s, Block):
        return any(_may_leave(x, in_loop, returning) for x in s.body)
    if isinstance(s, If):
        exprs.append(s.cond)
        if _may_leave(s.then, in_loop, returning) or _may_leave(s.other, in_loop, returning):
            return True
    elif isinstance(s, For):
        exprs += [e for e in (s.cond, s.step) if e is not None]
        if _may_leave(s.init, in_loop, returning) or _may_leave(s.body, True, returning):
            return True
    elif isinstance(s, While):
        exprs.append(s.cond)
        if _may_leave(s.body, True, returning):
            return True
    elif isinstance(s, ExprStmt):
        exprs.append(s.expr)
    elif isinstance(s, Decl):
        exprs += [d.init for d in s.declarators if d.init is not None]
    return any(isinstance(x, Call) and call_name(x) not in _RETURNING and call_name(x) not in returning
               for e in exprs for x in _walk(e))


def returning_helpers(helpers: dict[str, tuple[Stmt, bool, list[str]]]) -> frozenset[str]:
    """The device helpers (name -> (body, is a kernel, parameter types)) known to return to their
    caller and to take every argument by value: each parameter a pointer or a plain arithmetic type
    (no reference, no alias that may be one), each call in them of a function known to return or of
    such a helper (no inline asm: the parser reads none; no unread call)."""
    known: set[str] = set()
    changed = True
    while changed:
        changed = False
        for name, (body, kernel, types) in helpers.items():
            if name not in known and not kernel and all(_plain_parameter(t) for t in types) \
                    and not _calls_unknown(body, frozenset(known)):
                known.add(name)
                changed = True
    return frozenset(known)


_ARITHMETIC = frozenset(["int", "unsigned", "signed", "long", "short", "char", "float", "double", "bool", "size_t",
                         "int32_t", "uint32_t", "int64_t", "uint64_t", "const", "__restrict__", "volatile"])


def _plain_parameter(type_text: str) -> bool:
    if "&" in type_text:
        return False
    return "*" in type_text or all(w in _ARITHMETIC for w in type_text.replace("*", " ").split())


def _expressions(s: Stmt | None):
    """The top-level expressions of S and of every statement under it."""
    if s is None:
        return
    if isinstance(s, Block):
        for x in s.body:
            yield from _expressions(x)
    elif isinstance(s, ExprStmt):
        yield s.expr
    elif isinstance(s, Decl):
        yield from (d.init for d in s.declarators if d.init is not None)
    elif isinstance(s, If):
        yield s.cond
        yield from _expressions(s.then)
        yield from _expressions(s.other)
    elif isinstance(s, For):
        yield from _expressions(s.init)
        yield from (e for e in (s.cond, s.step) if e is not None)
        yield from _expressions(s.body)
    elif isinstance(s, While):
        yield s.cond
        yield from _expressions(s.body)
    elif isinstance(s, Return) and s.value is not None:
        yield s.value


def _calls_unknown(body: Stmt | None, returning: frozenset[str]) -> bool:
    """Whether BODY calls anything not known to return (its own returns are its caller's normal path)."""
    return any(isinstance(x, Call) and call_name(x) not in _RETURNING and call_name(x) not in returning
               for e in _expressions(body) for x in _walk(e))


def _walk(e: Expr):
    yield e
    for child in _children(e):
        yield from _walk(child)


def _ends_early(body: Stmt | None, returning: frozenset[str]) -> bool:
    """Whether BODY may leave its loop other than by its condition: a `break` bound to it, a
    `return`, a call not known to return (`continue` only ends an iteration)."""
    def walk(s: Stmt | None, nested: bool) -> bool:
        if s is None:
            return False
        if isinstance(s, Return):
            return True
        if isinstance(s, Jump):
            return s.kind == "break" and not nested
        if isinstance(s, Block):
            return any(walk(x, nested) for x in s.body)
        if isinstance(s, If):
            return walk(s.then, nested) or walk(s.other, nested)
        if isinstance(s, (For, While)):
            return walk(s.body, True)
        return False
    return walk(body, False) or _calls_unknown(body, returning)


def _one_comparison(cond: Expr | None) -> bool:
    """A loop condition that is one comparison (`i < n`), parentheses and casts aside."""
    while isinstance(cond, Cast):
        cond = cond.operand
    return isinstance(cond, Binary) and cond.op in ("<", "<=", ">", ">=", "!=")


_NOT_INTEGERS = re.compile(r"(?:float|double|__half|half|__nv_bfloat16|nv_bfloat16|__half2|__nv_bfloat162)[1-4]?|dim3")
_FLOATING = re.compile(r"float|double|__half|half|__nv_bfloat16|nv_bfloat16")
# pure functions whose result is an integer or a truth value whatever their operands
_INTEGER_RESULTS = frozenset(["isnan", "isinf", "isfinite", "__float2int_rn", "int", "static_cast"])


def is_floating_type(spelled: str) -> bool:
    """Whether a type as written is a scalar floating-point type (float, double, a half, a bfloat16)."""
    words = [w for w in spelled.replace("std::", "").split() if w not in ("const", "volatile", "__restrict__")]
    return len(words) == 1 and _FLOATING.fullmatch(words[0]) is not None


def not_an_integer(spelled: str) -> bool:
    """Whether a type as written is known to be no integer (a float, a vector of floats, dim3)."""
    words = [w for w in spelled.replace("std::", "").split() if w not in ("const", "volatile", "__restrict__")]
    return len(words) == 1 and _NOT_INTEGERS.fullmatch(words[0]) is not None


def integer_of(spelled: str) -> tuple[int, bool] | None:
    """(bits, signed) of an integer type as written (`unsigned short`, `std::size_t`, `int64_t`)."""
    element = element_type(spelled)
    if element is None or not element.startswith(("int", "uint")) or not element.endswith("_t"):
        return None
    return int(element.removeprefix("u").removeprefix("int").removesuffix("_t")), not element.startswith("u")


def lvalue_names(target: Expr) -> list[Name]:
    """The variables an assignment to TARGET may write: the name itself, either arm of a `?:`, the
    right of a comma, through a cast (`(int&)n`, `reinterpret_cast<int&>(n)`), a field of a local
    (`v.x`), an assignment or `++` used as the target (red team round 108: `(true ? n : n) = 4096`
    and `(0, n) &= ~3` wrote a parameter no count saw)."""
    if isinstance(target, Name):
        return [target]
    if isinstance(target, Ternary):
        return lvalue_names(target.then) + lvalue_names(target.other)
    if isinstance(target, Binary) and target.op == ",":
        return lvalue_names(target.right)
    if isinstance(target, Cast):
        return lvalue_names(target.operand)
    if isinstance(target, Member) and not target.arrow:
        return lvalue_names(target.base)
    if isinstance(target, Assign):
        return lvalue_names(target.target)
    if isinstance(target, Unary) and target.op in ("++", "--"):
        return lvalue_names(target.operand)
    return []


def lvalue_names_of_args(call: Call, returning: frozenset[str]) -> list[Name]:
    """The variables handed whole to CALL where it may take them by reference."""
    taken = _by_reference(call, returning)
    return [name for a in call.args for name in lvalue_names(a) if name.id in taken]


# The CUDA runtime's calls a launcher makes around its launch that take every argument by value (a
# buffer zeroed or copied before the launch is written through its pointer, never the pointer itself).
_RUNTIME_BY_VALUE = frozenset(["cudaMemset", "cudaMemsetAsync", "cudaMemset2D", "cudaMemset2DAsync", "cudaMemcpy",
                               "cudaMemcpyAsync", "cudaMemcpy2D", "cudaMemcpy2DAsync", "cudaGetLastError",
                               "cudaPeekAtLastError", "cudaDeviceSynchronize", "cudaStreamSynchronize"])


def _by_reference(call: Expr, returning: frozenset[str]) -> list[str]:
    """The names handed whole to CALL where it may take them by reference: any call but the
    device's own functions, the runtime's by-value calls and the program's helpers known to take
    values (returning_helpers)."""
    if not isinstance(call, Call) or call_name(call) in _RETURNING or call_name(call) in returning or \
            call_name(call) in _RUNTIME_BY_VALUE:
        return []
    return [name.id for a in call.args for name in lvalue_names(a)]


def _writes(f: KernelFacts, key: str, body: Stmt | None, cond: Expr | None,
            returning: frozenset[str] = frozenset()) -> bool:
    """Whether the variable KEY is assigned, incremented, has its address taken or is handed whole
    to a call that may take it by reference (round 106: `skip_slot(i, s)` with an `int&`), in BODY
    or COND."""
    for e in [*([cond] if cond is not None else []), *_expressions(body)]:
        for x in _walk(e):
            target = x.target if isinstance(x, Assign) else x.operand if isinstance(x, Postfix) or (
                isinstance(x, Unary) and x.op in ("++", "--", "&")) else None
            while isinstance(target, (Member, Index)):
                target = target.base
            if target is not None and any((b := f.binding(n)) is not None and b.key == key
                                          for n in lvalue_names(target)):
                return True
            if isinstance(x, Call) and any((b := f.binding(n)) is not None and b.key == key
                                           for n in lvalue_names_of_args(x, returning)):
                return True
    return False


def always_exits(s: Stmt | None) -> bool:
    """Control never falls through `s` (return, break, continue, or a block ending so)."""
    if isinstance(s, (Return, Jump)):
        return True
    if isinstance(s, Block):
        return any(always_exits(x) for x in s.body)
    if isinstance(s, If):
        return s.other is not None and always_exits(s.then) and always_exits(s.other)
    return False


class _Collector:
    def __init__(self, facts: KernelFacts, returning: frozenset[str] = frozenset()) -> None:
        self.f = facts
        self.returning = returning
        self.loop_ids = count()
        self.order = count(1)

    def stmt(self, s: Stmt | None, ctx: Context) -> None:
        if s is None or isinstance(s, Empty):
            return
        if isinstance(s, Block):
            cur = ctx
            for x in s.body:
                self.stmt(x, cur)
                if isinstance(x, (Return, Jump)):
                    return
                if isinstance(x, If) and always_exits(x.then) and not always_exits(x.other) \
                        and not _may_leave(x.other, returning=self.returning):
                    cur = cur.where(x.cond, False)
                elif isinstance(x, If) and x.other is not None and always_exits(x.other) \
                        and not always_exits(x.then) and not _may_leave(x.then, returning=self.returning):
                    cur = cur.where(x.cond, True)
                elif _may_leave(x, returning=self.returning):
                    # control may have left for some threads, under a condition not read (a nested
                    # `if (pad) continue;`, a helper that ends the thread): what follows is not
                    # known to run for every thread (red team round 105)
                    cur = cur.where(_LEFT, True)
        elif isinstance(s, Decl):
            for dec in s.declarators:
                if dec.init is None:
                    continue
                self.expr(dec.init, ctx)
                b = self.f.declared.get(id(dec))
                if b is not None:
                    self.f.assigns.append(ScalarAssign(b, "decl", dec.init, ctx, next(self.order)))
        elif isinstance(s, ExprStmt):
            self.expr(s.expr, ctx)
        elif isinstance(s, If):
            self.expr(s.cond, ctx)
            self.stmt(s.then, ctx.where(s.cond, True))
            self.stmt(s.other, ctx.where(s.cond, False))
        elif isinstance(s, For):
            var, init_value = None, None
            if isinstance(s.init, Decl) and s.init.declarators:
                b = self.f.declared.get(id(s.init.declarators[0]))
                var, init_value = (b.key if b else None), s.init.declarators[0].init
                self.stmt(s.init, ctx)
            elif isinstance(s.init, ExprStmt) and isinstance(s.init.expr, Assign) and \
                    isinstance(s.init.expr.target, Name):
                b = self.f.binding(s.init.expr.target)
                var, init_value = (b.key if b else None), s.init.expr.value
                self.expr(s.init.expr.value, ctx)
            elif s.init is not None:
                self.stmt(s.init, ctx)
            loop = Loop(next(self.loop_ids), var, init_value, s.cond, s.step, _unit_step(self.f, s.step, var),
                        var is not None and _writes(self.f, var, s.body, s.cond, self.returning),
                        _ends_early(s.body, self.returning) or not _one_comparison(s.cond))
            self.f.loops.append(loop)
            inner = ctx.inside(loop)
            if s.cond is not None:
                self.expr(s.cond, inner)
            if s.step is not None:
                self.expr(s.step, inner)
            self.stmt(s.body, inner)
        elif isinstance(s, While):
            loop = Loop(next(self.loop_ids), None, None, s.cond, None, False)
            self.f.loops.append(loop)
            inner = ctx.inside(loop)
            self.expr(s.cond, inner)
            self.stmt(s.body, inner)
        elif isinstance(s, Return) and s.value is not None:
            self.expr(s.value, ctx)

    def access(self, kind: str, ptr: Expr, index: Expr | None, node: Expr, ctx: Context, op: str = "",
               value: Expr | None = None) -> None:
        base, off, re_ = self.f.array_of(ptr)
        if index is not None and off is not None:
            idx = self.f.poly(index)
            off = None if idx is None else off + idx
        self.f.accesses.append(Access(kind, base, off, node, ctx, op, value, re_, next(self.order)))

    def opaque_writes(self, target: Expr, ctx: Context) -> None:
        """A write through an lvalue that is not a plain name (`(c ? n : m) = v`, `v.x += 1`): each
        variable it may write gets a write no family reads as a value (op "lvalue")."""
        for name in lvalue_names(target):
            b = self.f.binding(name)
            if b is not None:
                self.f.assigns.append(ScalarAssign(b, "lvalue", None, ctx, next(self.order)))
        if any(isinstance(x, Index) or isinstance(x, Unary) and x.op == "*" or isinstance(x, Member) and x.arrow
               for x in walk_expr(target)):
            # memory written through it (`(*p)++`, `s->n = v`, `(c ? a[i] : b[i]) = v`): a store to
            # memory the kernel does not name, which every family refuses
            self.f.accesses.append(Access("store", None, None, target, ctx, "lvalue", None, False, next(self.order)))

    def expr(self, e: Expr | None, ctx: Context) -> None:
        if e is None:
            return
        if isinstance(e, Assign):
            t = e.target
            if isinstance(t, Index):
                self.access("store", t.base, t.index, t, ctx, e.op, e.value)
                self.expr(t.index, ctx)
                self.expr(t.base, ctx)
            elif isinstance(t, Unary) and t.op == "*":
                self.access("store", t.operand, None, t, ctx, e.op, e.value)
                self.expr(t.operand, ctx)
            elif isinstance(t, Name):
                b = self.f.binding(t)
                if b is not None:
                    self.f.assigns.append(ScalarAssign(b, e.op, e.value, ctx, next(self.order)))
            else:
                self.opaque_writes(t, ctx)
                self.expr(t, ctx)
            self.expr(e.value, ctx)
            return
        if isinstance(e, (Unary, Postfix)) and e.op in ("++", "--"):
            t = e.operand
            if isinstance(t, Name):
                b = self.f.binding(t)
                if b is not None:
                    self.f.assigns.append(ScalarAssign(b, e.op, None, ctx, next(self.order)))
            elif not isinstance(t, Index):
                self.opaque_writes(t, ctx)
            if isinstance(t, Index):
                self.access("store", t.base, t.index, t, ctx, "+=" if e.op == "++" else "-=", Num("1"))
                self.expr(t.index, ctx)
            return
        if isinstance(e, Index):
            self.access("read", e.base, e.index, e, ctx)
            self.expr(e.base, ctx)
            self.expr(e.index, ctx)
            return
        if isinstance(e, Unary) and e.op == "*":
            self.access("read", e.operand, None, e, ctx)
            self.expr(e.operand, ctx)
            return
        if isinstance(e, Unary) and e.op == "&" and isinstance(e.operand, Index):
            self.expr(e.operand.base, ctx)  # an address, not a read
            self.expr(e.operand.index, ctx)
            return
        if isinstance(e, Call):
            name = call_name(e)
            if name:
                self.f.calls.add(name)
            if name in ATOMICS and e.args:
                self.access("atomic", e.args[0], None, e, ctx, name, e.args[1] if len(e.args) > 1 else None)
                self.expr(e.args[0], ctx)
                for a in e.args[1:]:
                    self.expr(a, ctx)
                return
            if name in ("__ldg", "__ldcg", "__ldca", "__ldcs", "__ldlu", "__ldcv") and len(e.args) == 1:
                self.access("read", e.args[0], None, e, ctx)
                self.expr(e.args[0], ctx)
                return
            for a in e.args:
                self.expr(a, ctx)
            return
        if isinstance(e, Ternary):
            self.expr(e.cond, ctx)
            self.expr(e.then, ctx.where(e.cond, True))
            self.expr(e.other, ctx.where(e.cond, False))
            return
        if isinstance(e, Binary) and e.op in ("&&", "||"):
            self.expr(e.left, ctx)
            self.expr(e.right, ctx.where(e.left, e.op == "&&"))
            return
        for child in _children(e):
            self.expr(child, ctx)


def _unit_step(f: KernelFacts, step: Expr | None, var: str | None) -> bool:
    if step is None or var is None:
        return False

    def is_var(x: Expr) -> bool:
        b = f.binding(x)
        return b is not None and b.key == var

    if isinstance(step, (Unary, Postfix)) and step.op == "++":
        return is_var(step.operand)
    if isinstance(step, Assign) and is_var(step.target):
        if step.op == "+=":
            return isinstance(step.value, Num) and step.value.value == 1
        if step.op == "=" and isinstance(step.value, Binary) and step.value.op == "+":
            left, right = step.value.left, step.value.right
            one = lambda x: isinstance(x, Num) and x.value == 1  # noqa: E731
            return (is_var(left) and one(right)) or (is_var(right) and one(left))
    return False


def collect_facts(sig: Signature, body: Block, constants: dict[str, int] | None = None,
                  returning: frozenset[str] = frozenset()) -> KernelFacts:
    """What the kernel's body does; `constants` are the program's integer macros and constants
    (sizes.constants), read as numbers; `returning`: the program's device helpers known to return
    (returning_helpers)."""
    scopes = _Scopes(sig, returning)
    scopes.stmt(body)
    facts = KernelFacts(sig=sig, body=body, params=scopes.params, names=scopes.names, declared=scopes.declared,
                        bindings=scopes.bindings, constants=dict(constants or {}))
    _Collector(facts, returning).stmt(body, Context())
    return facts
