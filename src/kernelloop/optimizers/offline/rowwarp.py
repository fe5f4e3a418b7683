"""The generic row tier: a kernel that gives each thread one row becomes one that gives each
warp one row, whatever the row computes.

Naive row-wise kernels (layer norm, RMS norm, softmax, any per-row statistic) are written one
thread per row: `int row = blockIdx.x * blockDim.x + threadIdx.x; if (row < N) { for (c ...)
... x[row * C + c] ... }`. Neighbouring threads then read addresses C elements apart, so every
load is a separate memory transaction. Rewritten, the 32 lanes of a warp share the row and
split every loop over it (`c = lane; c < C; c += 32`): loads coalesce. The rewrite is
mechanical and only taken where it provably keeps the kernel's meaning:

- the thread index is used only as the row (no other use of the CUDA built-ins, no shared
  memory, barriers, shuffles or atomics), so every statement outside the loops computes the
  same value in every lane of a warp;
- each loop over the row *reduces* into scalars declared before it (`s += e`,
  `m = fmaxf(m, e)`, `if (e > m) m = e`, an argmax `if (e > m) { m = e; at = c; }` with c the
  counter) and/or *maps* (stores to memory), and nothing in
  the loop but an accumulator's own update reads an accumulator (a prefix sum, which stores
  what it accumulates, is refused); every access to an array the loop stores uses the stored
  element's own index, which moves one-to-one with the counter; nothing else is rewritten
  (no break, no other scalar assigned across iterations); a loop inside a row loop (a window of
  taps, a sum over a batch) runs whole in the lane that takes the element and may assign only
  that element's locals;
- after a reduction loop the lanes combine their partial results with warp shuffles, after a
  map loop they meet at `__syncwarp()`, and per-row stores outside loops are made by lane 0.

The index may count from a small constant (`j = ... + threadIdx.x + 1`, a Fortran-style first
column): the rewrite keeps the offset.

The launch keeps the baseline's rows: it had G blocks of B threads, one row per thread; the
rewrite launches G*B warps. The verifier still decides whether the result is the same and
faster; this only keeps the optimizer from proposing what cannot be.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

from ...program.macros import program_macros
from ...program.scanner import Item, function_name, in_scope, preprocessed, split_top_level, strip_comments, without_literals
from .cparse import Param
from .facts import ATOMICS, SIDE_EFFECT_FREE, Access, Binding, KernelFacts, collect_facts, integer_of, is_floating_type
from .launch_guard import BaselineLaunch, attributes_helper, baseline_launch, guarded, legal_launch
from .launcher import (
    EditablePart,
    Function,
    Launcher,
    expanded_function,
    launch_extent,
    read_editable,
    spliced,
    statement_exprs,
    statements_under,
)
from .sizes import is_integer_type, known_constants
from .symbolic import Poly, is_uniform_atom
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
    Jump,
    Index,
    Launch,
    Member,
    Name,
    Num,
    Postfix,
    Return,
    Stmt,
    Unary,
    call_name,
    strip_casts,
    to_c,
    walk_expr,
)

WARP = 32
ROW_WARP_BLOCK = 256  # threads per block of the rewritten launch: 8 rows per block
_INDEX_OFFSET_LIMIT = 64  # a thread index may count from a constant this small (Fortran's 1)
_BUILTIN_WORDS = re.compile(r"\b(threadIdx|blockIdx|blockDim|gridDim|warpSize)\b")
# Functions with no side effects and no cross-thread behaviour that a row kernel may call: facts.PURE_FUNCTIONS
_SUM_OPS = {"+=": "+", "-=": "-"}
# Bitwise reductions (flags packed into a mask, any/all, parity): exact, and the same whatever
# order the lanes' partials combine in; each kind's operator and the value that changes nothing.
_BIT_OPS = {"|=": "or", "&=": "and", "^=": "xor"}
BIT_KINDS = {"or": "|", "and": "&", "xor": "^"}


def bit_identity(kind: str, ctype: str) -> str:
    """The value a lane's partial of a bitwise reduction of type CTYPE starts from."""
    return f"({ctype})~({ctype})0" if kind == "and" else "0"
# Built-in arithmetic types in keywords (`const` aside): a name such as `uint8_t` or `size_t` is an
# identifier a program may declare as its own class (red team round 128: a counter whose `++` stops
# at 255, in a namespace of the program's own)
_ARITHMETIC_TYPE = re.compile(r"(?:const )?(?:(?:unsigned|signed) )?(?:char|short|int|long|long int|long long|"
                              r"long long int|unsigned|signed|float|double)(?: const)?")
# `if (v > best) { best = v; at = c; }`: the value and the loop counter where it was first seen. A
# strict comparison only: with `>=` a lane that never moved (still the initial pair) would have to
# lose every tie, which the pair alone cannot tell.
ARG_KINDS = ("argmax", "argmin")
_MAX_CALLS = {"fmaxf": "max", "fmax": "max", "max": "max", "fminf": "min", "fmin": "min", "min": "min"}


class NotARowKernel(Exception):
    """Why the kernel is not one the row tier may rewrite."""


@dataclass
class _Loop:
    stmt: For
    var: str  # binding key of the loop variable
    kind: str = ""  # "reduce" | "map"
    accumulators: dict[str, str] = field(default_factory=dict)  # binding key -> "sum" | "max" | "min" | BIT_KINDS | ARG_KINDS | "index"
    updates: list[Expr] = field(default_factory=list)  # the values accumulated, checked once the loop is read
    partners: dict[str, str] = field(default_factory=dict)  # an arg-kind value's key -> its index's key


@dataclass
class RowPlan:
    index: Decl  # the thread-index declaration
    index_key: str  # its binding
    loops: list[_Loop]
    lane0_stores: list[ExprStmt]
    bindings: dict[str, Binding]
    block: int
    index_offset: int = 0  # the index counts from this (1: a Fortran-style first item)
    # K where the index writes the launch's block as a number (blockIdx.x * K + threadIdx.x), and the
    # index's declaration with blockDim.x in K's place (None where no one factor of blockIdx.x is K):
    # a tier that keeps the index but launches other blocks writes that instead
    index_block: int | None = None
    index_with_block_dim: str | None = None
    # a grid-stride kernel read in thread-per-row form (rowstride): the `if (row < bound)` put after
    # the index in its loop's place, where the rewrite writes a loop of the grid's warps over the rows
    stride_guard: If | None = None


@dataclass(frozen=True)
class Rewrite:
    label: str
    source: str  # the complete candidate editable part
    kernel: str
    launcher: str
    detail: str
    # what a LaunchSite.beside wrote (rewritten kernel, the launch's edit in the launcher's body,
    # prologue): tier_rewrites joins a kernel's launches in one launcher into one rewrite with them
    pieces: tuple[str, tuple[int, int, str], tuple[str, ...]] | None = None


# -- recognition ---------------------------------------------------------------------------------

def _global_x() -> Poly:
    return Poly.atom("blockIdx.x") * Poly.atom("blockDim.x") + Poly.atom("threadIdx.x")


# The launch's block extents (x, y, z), each a number, or why they are not known (launch_block);
# None where no launch was read (a planner called on a kernel alone)
LaunchBlock = tuple[int, int, int] | str | None


def index_form(p: Poly) -> tuple[Poly, int | None]:
    """The global x index P may be written as: `blockIdx.x * blockDim.x + threadIdx.x`, or, where P
    multiplies blockIdx.x by a number K and not by blockDim.x (`blockIdx.x * BLOCK + threadIdx.x`, a
    macro, a literal or a `constexpr int`, casts and order as written), `blockIdx.x * K +
    threadIdx.x`; with K (None for the first). The caller compares P with the form (an offset
    allowed or not); a form with K is the global index only where block_proof says so."""
    terms = p.as_dict()
    k = terms.get(("blockIdx.x",))
    if ("blockIdx.x", "blockDim.x") in terms or k is None or k < 1 or terms.get(("threadIdx.x",)) != 1:
        return _global_x(), None
    return Poly.atom("blockIdx.x").scale(k) + Poly.atom("threadIdx.x"), k


def block_proof(name: str, k: int, block: LaunchBlock) -> str | None:
    """Why NAME = blockIdx.x * K + threadIdx.x is not shown to be the global x index, or None where
    it is: the launch's block is (K, 1, 1) (BLOCK: launch_block of the launch)."""
    head = f"numbers its threads {name} = blockIdx.x * {k} + threadIdx.x"
    if block is None:
        return f"{head}, and no launch shows its block to be ({k}, 1, 1)"
    if isinstance(block, str):
        return f"{head}, and {block}"
    if block != (k, 1, 1):
        return f"{head}, and is launched with blocks of {block[0]} x {block[1]} x {block[2]}, not {k} x 1 x 1"
    return None


class ItemPlanner:
    def __init__(self, fn: Function, facts: KernelFacts, helpers: frozenset[str], block: LaunchBlock = None) -> None:
        self.fn = fn
        self.f = facts
        self.helpers = helpers
        self.block = block  # the launch's block (launch_block): proves an index written with a constant block
        self.index_poly = _global_x()  # the thread index as found (index_form), its offset aside
        self.index_block: int | None = None  # K where the index reads blockIdx.x * K (a constant block)
        self.loops: list[_Loop] = []
        self.lane0: list[ExprStmt] = []
        self.index_key = ""
        # locals whose `++` was read as `+= 1` though their type's spelling is no keyword: each
        # must be an accumulator, which the rewrite asserts is a built-in number (NUMBER_TYPE)
        self.counted: dict[str, str] = {}
        self.nested = 0  # how deep inside an item loop's inner loops the reader is
        self.index_offset = 0  # the thread index is blockIdx.x * blockDim.x + threadIdx.x + this

    def fail(self, why: str):
        raise NotARowKernel(why)

    def binding(self, e: Expr) -> Binding | None:
        return self.f.binding(e)

    # the thread index: a declaration `T row = blockIdx.x * blockDim.x + threadIdx.x;` (or with the
    # block's size a constant, `blockIdx.x * BLOCK + threadIdx.x`, where the launch's block is BLOCK)
    def find_index(self, offset_allowed: bool = False) -> tuple[Decl, str]:
        """The thread index's declaration and name; with OFFSET_ALLOWED, also one numbered from a
        constant (`j = blockIdx.x * blockDim.x + threadIdx.x + 1`, Fortran's first column), whose
        offset is kept in `self.index_offset`. An index that writes a number K for blockDim.x
        (index_form) is taken only where the launch's block is (K, 1, 1) (block_proof); its
        polynomial is kept in `self.index_poly`, K in `self.index_block`."""
        for s in self.fn.body.body:
            if not isinstance(s, Decl) or len(s.declarators) != 1:
                continue
            d = s.declarators[0]
            if d.init is None or d.pointer or d.array:
                continue
            p = self.f.poly(d.init)
            if p is None:
                continue
            index, k = index_form(p)
            offset = p - index
            # counted up only: `G - 1` wraps in the 32 bits CUDA computes G in (thread 0's index is
            # 4294967295, past every bound), which the rewrite's wider arithmetic would not (round 136)
            if offset_allowed and offset.is_const and 0 < offset.const_value <= _INDEX_OFFSET_LIMIT:
                self.index_offset = offset.const_value
                p = index
            if p == index:
                if k is not None and (why := block_proof(d.name, k, self.block)) is not None:
                    self.fail(why)
                b = self.f.declared.get(id(d))
                if b is None or b.assignments:
                    self.fail("its thread index is assigned after its declaration")
                self.index_poly, self.index_block = index, k
                return s, d.name
        self.fail("declares no one-dimensional thread index (blockIdx.x * blockDim.x + threadIdx.x, or blockIdx.x * K + "
                  "threadIdx.x launched with blocks of K) at the top")
        raise AssertionError

    def plan(self) -> RowPlan:
        """A thread-per-row kernel whose row loops stride across threads (the row tier's case)."""
        plan = self.recognise()
        if not self.uncoalesced():
            self.fail("already reads and writes its rows coalesced (neighbouring threads, neighbouring elements)")
        return plan

    def recognise(self) -> RowPlan:
        """A kernel that gives each thread one item (a row, a column, ...) and loops over it: the
        thread index is used only as the item, and every loop reduces or maps (module docstring)."""
        index, _ = self.find_index(offset_allowed=True)
        self.index_key = self.f.declared[id(index.declarators[0])].key
        self.independent_threads(index, local_arrays=False)
        self.region(self.fn.body)
        if not self.loops:
            self.fail("has no loop over its item (a row, a column)")
        accumulated = {key for loop in self.loops for key in loop.accumulators}
        if unasserted := sorted(name for key, name in self.counted.items() if key not in accumulated):
            self.fail(f"counts {unasserted[0]} with ++ or --, and its type is not known to be a built-in number")
        return RowPlan(index, self.index_key, self.loops, self.lane0, {b.key: b for b in self.f.bindings}, ROW_WARP_BLOCK,
                       self.index_offset, self.index_block,
                       None if self.index_block is None else self.with_block_dim(index, self.index_block))

    def with_block_dim(self, index: Decl, k: int) -> str | None:
        """INDEX's declaration with its factor K of blockIdx.x written `(decltype(K))blockDim.x`: the
        same value and type under a launch of (K, 1, 1), the launch's own block under any other;
        None where no single factor beside blockIdx.x is K (`blockIdx.x * 2 * 128`)."""
        found = [0]

        def block_x(e: Expr) -> bool:
            return self.f.poly(e) == Poly.atom("blockIdx.x")

        def sub(e: Expr) -> Expr:
            if isinstance(e, Binary) and e.op == "*":
                for mine, other, left in ((e.left, e.right, True), (e.right, e.left, False)):
                    if block_x(other) and self.f.poly(mine) == Poly.const(k):
                        found[0] += 1
                        dim = Cast(f"decltype({to_c(mine)})", Member(Name("blockDim"), "x"))
                        return Binary("*", dim, other) if left else Binary("*", other, dim)
                return Binary("*", sub(e.left), sub(e.right))
            if isinstance(e, Binary):
                return Binary(e.op, sub(e.left), sub(e.right))
            if isinstance(e, Cast):
                return Cast(e.type, sub(e.operand))
            return e
        d = index.declarators[0]
        init = sub(d.init)  # type: ignore[arg-type]
        if found[0] != 1:
            return None
        return f"{index.type} {d.name} = {to_c(init)};"

    def independent_threads(self, index: Decl, *, local_arrays: bool) -> None:
        """Threads that neither see nor touch each other: the CUDA built-ins only in the thread
        index, no shared memory (nor a local array, unless LOCAL_ARRAYS), only side-effect-free
        calls, no atomics."""
        body_text = strip_comments(self.fn.item.text[len(self.fn.head):])
        start, end = index.span
        outside = body_text[:start] + " " * (end - start) + body_text[end:]
        if (word := _BUILTIN_WORDS.search(outside)) is not None:
            self.fail(f"uses {word.group(1)} besides its thread index")
        if any(b.shared or (b.array and not local_arrays) for b in self.f.bindings):
            self.fail("uses shared memory" if local_arrays else "uses shared memory or a local array")
        if (why := effect_free_calls(self.fn, self.f, self.helpers)) is not None:
            self.fail(why)

    # statements every lane of a warp runs alike
    def region(self, s: Stmt | None) -> None:
        if s is None or isinstance(s, (Empty, Return)):
            if isinstance(s, Return) and s.value is not None:
                self.fail("returns a value")
            return
        if isinstance(s, Block):
            for x in s.body:
                self.region(x)
            return
        if isinstance(s, Decl):
            for d in s.declarators:
                if d.init is not None:
                    self.plain_value(d.init)
            return
        if isinstance(s, If):
            self.plain_value(s.cond)
            self.region(s.then)
            self.region(s.other)
            return
        if isinstance(s, For):
            self.row_loop(s)
            return
        if isinstance(s, ExprStmt):
            e = s.expr
            if isinstance(e, Assign):
                self.plain_value(e.value)
                if isinstance(e.target, Name):
                    if self.binding(e.target) is None:  # a global the kernel writes by name
                        self.fail(f"assigns to {e.target.id}, which it does not declare")
                    return  # a per-row scalar: the same in every lane
                if isinstance(e.target, (Index, Unary)) and (not isinstance(e.target, Unary) or e.target.op == "*"):
                    self.plain_value(e.target)
                    self.lane0.append(s)  # a per-row store: one lane makes it
                    return
                self.fail(f"assigns to {to_c(e.target)}")
            if isinstance(e, (Unary, Postfix)) and e.op in ("++", "--") and isinstance(e.operand, Name):
                return
            if is_kernel_check(e):  # every lane checks the row's values alike
                self.plain_value(e)
                return
            self.fail(f"has a statement that is not an assignment ({to_c(e)[:40]})")
        self.fail(f"has a {type(s).__name__.lower()} statement outside its row loops")

    def plain_value(self, e: Expr) -> None:
        """An expression without side effects (no assignment, ++/--, or launch inside)."""
        for x in walk_expr(e):
            if isinstance(x, (Assign, Launch)) or (isinstance(x, (Unary, Postfix)) and x.op in ("++", "--")):
                self.fail("assigns inside an expression")

    def row_loop(self, s: For) -> None:
        b, start = self.loop_counter(s)
        loop = next((x for x in self.f.loops if x.cond is s.cond and x.step is s.step), None)
        if b is None or loop is None or not loop.unit_step:
            self.fail("has a loop that does not step its counter by one")
        self.plain_value(start)
        bounds = self.prefix_bounds(s.cond, b)
        if bounds is None:
            self.fail("has a loop whose condition is not `counter < bound` (or `counter + offset < bound`)")
        for e in bounds:
            self.plain_value(e)
            if any(self.binding(x) is b for x in walk_expr(e)):
                self.fail("has a loop whose bound depends on its counter")
        if b.assignments != (1 if isinstance(s.init, Decl) else 2):  # the step only (and the header's start)
            self.fail("has a loop whose counter is assigned in its body")
        kind = integer_of(b.type)
        if kind is None or kind[0] < 32:
            # the rewrite steps it by 32 (or the split) past the bound, which a `short` may not hold
            # (red team round 111: `short c` wrapped at 32737 columns and the lanes never left)
            self.fail(f"has a loop counter of type {b.type or '?'}, narrower than int")
        info = _Loop(s, b.key)
        stores = [False]
        # every expression of the body but the accumulators' own updates, and the loop's start and
        # bound: a bound that reads an accumulator (`c < (used < budget ? cols : 0)`, an early exit)
        # would stop each lane on its own partial (red team round 133)
        reads: list[Expr] = [start, *bounds]
        self.loop_body(s.body, info, stores, set(), reads)
        written = {a.array.key for a in self.f.accesses if a.kind in ("store", "atomic") and a.array is not None
                   and any(lp.id == loop.id for lp in a.ctx.loops)}
        bound_arrays = {arr.key for e in bounds for x in walk_expr(e) if isinstance(x, Index)
                        and (arr := self.binding(x.base)) is not None}
        if bound_arrays & written:
            self.fail("has a loop whose bound reads an array the loop writes")
        if not stores[0] and not info.accumulators:
            self.fail("has a loop that neither stores nor accumulates")
        for e in reads:
            for x in walk_expr(e):
                acc = self.binding(x)
                if acc is not None and acc.key in info.accumulators:
                    self.fail(f"reads {acc.name} in the loop that accumulates it (a sequential dependence, "
                              "e.g. a prefix sum)")
        for e in info.updates:  # against every accumulator of the loop, wherever it is updated (round 42)
            for x in walk_expr(e):
                acc = self.binding(x)
                if acc is not None and acc.key in info.accumulators:
                    self.fail(f"accumulates a value that reads {acc.name}, an accumulator of the same loop")
        info.kind = "map" if stores[0] else "reduce"
        if stores[0]:
            self.check_map(loop.id)
        self.loops.append(info)

    def loop_counter(self, s: For) -> tuple[Binding | None, Expr]:
        """The row loop's counter and its start: declared in the header (`for (int c = 0; ...)`), or, in
        C89 and Fortran-ported code, a local declared before the loop and assigned by its header (`int
        c; ... for (c = 0; ...)`) that nothing but this loop names (its value after the loop, which each
        lane would leave otherwise, is never read; a second loop reusing it is refused)."""
        if isinstance(s.init, Decl) and len(s.init.declarators) == 1 and s.init.declarators[0].init is not None:
            d = s.init.declarators[0]
            return self.f.declared.get(id(d)), d.init  # type: ignore[return-value]
        e = s.init.expr if isinstance(s.init, ExprStmt) else None
        if not (isinstance(e, Assign) and e.op == "=" and isinstance(e.target, Name)):
            self.fail("has a loop whose counter is not declared in its header")
        assert isinstance(e, Assign)
        b = self.binding(e.target)
        decl = next((x for x in statements_under(self.fn.body) if isinstance(x, Decl)
                     and any(self.f.declared.get(id(dd)) is b for dd in x.declarators)), None)
        if b is None or b.param is not None or b.array or b.pointer or b.persistent or decl is None:
            self.fail(f"has a loop whose counter {to_c(e.target)} is neither declared in its header nor a local of "
                      "the kernel")
        assert b is not None and decl is not None
        declarator = next(dd for dd in decl.declarators if self.f.declared.get(id(dd)) is b)
        if declarator.init is not None:
            self.plain_value(declarator.init)
        body = self.fn.item.text[len(self.fn.head):]
        masked = list(body)
        for a, z in (s.span, decl.span):  # type: ignore[attr-defined]
            masked[a:z] = " " * (z - a)
        if re.search(rf"(?<![\w.]){re.escape(b.name)}\b", without_literals(strip_comments("".join(masked)))):
            self.fail(f"reads its loop counter {b.name} outside the loop (each lane would leave another value)")
        return b, e.value

    def prefix_bounds(self, cond: Expr | None, counter: Binding) -> list[Expr] | None:
        """The expressions besides the counter in a condition that holds for a prefix of the counter's
        values, or None: `c < n`, `c <= n`, `n > c`, `n >= c`, and the same with `c + k` (or `k + c`) for
        `c` (`t + lag < T`, a shift's overlap): each is false from some value of the counter on, so a
        lane stepping by 32 from its own start visits exactly the baseline's values it owns. The
        rewrite keeps the condition as written."""
        if not isinstance(cond, Binary) or cond.op not in ("<", "<=", ">", ">="):
            return None
        side, other = (cond.left, cond.right) if cond.op in ("<", "<=") else (cond.right, cond.left)
        if self.binding(side) is counter:
            return [other]
        if isinstance(side, Binary) and side.op == "+":
            for c, k in ((side.left, side.right), (side.right, side.left)):
                if self.binding(c) is counter:
                    return [k, other]
        return None

    def loop_body(self, s: Stmt | None, info: _Loop, stores: list[bool], declared_inside: set[str],
                  reads: list[Expr]) -> None:
        if s is None or isinstance(s, Empty):
            return
        if isinstance(s, Block):
            for x in s.body:
                self.loop_body(x, info, stores, declared_inside, reads)
            return
        if isinstance(s, Decl):
            for d in s.declarators:
                if d.init is not None:
                    self.plain_value(d.init)
                    reads.append(d.init)
                b = self.f.declared.get(id(d))
                if b is not None:
                    declared_inside.add(b.key)
            return
        if isinstance(s, For):
            self.inner_loop(s, info, stores, declared_inside, reads)
            return
        if isinstance(s, Jump) and s.kind == "continue":
            # ends one iteration (of this loop, or of an inner `for`, whose step is in its header):
            # which iterations run, and in what order each lane runs its own, is unchanged
            return
        if isinstance(s, If):
            # `if (v < 0) v = 0;` on a local of this iteration is a clamp of this element's value, no
            # max or min across the row (kept-aside set 16's levels stretch)
            acc = self.compare_update(s)
            if acc is not None and acc[0].key not in declared_inside:
                self.add_accumulator(info, *acc)
                return
            pair = self.arg_update(s, info)
            if pair is not None and not {pair[0].key, pair[3].key} & declared_inside:
                value, kind, compared, index = pair
                self.add_accumulator(info, value, (kind, compared))
                self.add_accumulator(info, index, ("index", Name(index.name)))
                info.partners[value.key] = index.key
                return
            self.plain_value(s.cond)
            reads.append(s.cond)
            self.loop_body(s.then, info, stores, declared_inside, reads)
            self.loop_body(s.other, info, stores, declared_inside, reads)
            return
        s = self.as_compound_assignment(s)
        if isinstance(s, ExprStmt) and isinstance(s.expr, Assign):
            e = s.expr
            self.plain_value(e.value)
            if isinstance(e.target, Name):
                b = self.binding(e.target)
                if b is None:
                    self.fail(f"assigns to {e.target.id}, which it does not declare")
                if b.key in declared_inside:
                    reads.append(e.value)
                    return  # a value of this iteration only
                self.add_accumulator(info, b, self.reduction_kind(e, b))
                return
            if not (isinstance(e.target, Index) or (isinstance(e.target, Unary) and e.target.op == "*")):
                # a field of a local (`seen.x = 1`, a float2 sum) is per-thread state, not memory:
                # it would stay one lane's partial (red team round 40)
                self.fail(f"assigns to {to_c(e.target)} in a loop (only scalars and array elements are read)")
            self.plain_value(e.target)
            reads += [e.target, e.value]
            stores[0] = True
            return
        if isinstance(s, ExprStmt) and is_kernel_check(s.expr):
            # the lane that takes the element checks it; a check of an accumulator would see a
            # lane's partial, which the dependence check on what the loop reads refuses
            self.plain_value(s.expr)
            reads.append(s.expr)
            return
        self.fail("has a loop body with other than declarations, assignments, ifs and assertions")

    def inner_loop(self, s: For, info: _Loop, stores: list[bool], declared_inside: set[str],
                   reads: list[Expr]) -> None:
        """A loop inside an item loop's body (a 9-tap window, a sum over a batch for each element):
        each lane runs it whole for each element it takes, so it may compute only values of that
        element (locals declared inside the item loop's body, array stores checked like the item
        loop's); it accumulates nothing across elements. Its counter is declared in its header and
        stepped there only."""
        init = s.init
        if not isinstance(init, Decl) or len(init.declarators) != 1 or init.declarators[0].init is None or \
                init.declarators[0].pointer or init.declarators[0].array:
            self.fail("has an inner loop whose counter is not declared in its header")
        counter = self.f.declared.get(id(init.declarators[0]))
        step = s.step
        stepped = step.operand if isinstance(step, (Unary, Postfix)) and step.op in ("++", "--") else \
            step.target if isinstance(step, Assign) and step.op in ("+=", "-=") else None
        if counter is None or stepped is None or self.binding(stepped) is not counter or s.cond is None:
            self.fail("has an inner loop that does not step its own counter in its header")
        loop = next((x for x in self.f.loops if x.cond is s.cond and x.step is s.step), None)
        if loop is None or loop.written_in_body:
            self.fail("has an inner loop whose counter is assigned in its body")
        for e in (init.declarators[0].init, s.cond, step.value if isinstance(step, Assign) else None):
            if e is not None:
                self.plain_value(e)
                reads.append(e)
        declared_inside.add(counter.key)
        self.nested += 1
        try:
            self.loop_body(s.body, info, stores, declared_inside, reads)
        finally:
            self.nested -= 1

    def as_compound_assignment(self, s: Stmt) -> Stmt:
        """`n++;`, `++n;` (and `--`) read as `n += 1;` (`n -= 1;`), the same statement for a local of an
        arithmetic type: a count (kept-aside set 13's zero crossings). A class type's `++` may be
        any function: a type spelled in keywords is read so; any other only where the local is an
        accumulator, whose type the rewrite asserts to the compiler is a built-in number."""
        if not (isinstance(s, ExprStmt) and isinstance(s.expr, (Unary, Postfix)) and s.expr.op in ("++", "--")
                and isinstance(s.expr.operand, Name)):
            return s
        b = self.binding(s.expr.operand)
        if b is None or b.pointer or b.array:
            return s
        if not _ARITHMETIC_TYPE.fullmatch(" ".join(b.type.split())):
            self.counted[b.key] = b.name
        return ExprStmt(Assign("+=" if s.expr.op == "++" else "-=", s.expr.operand, Num("1")))

    def reduction_kind(self, e: Assign, b: Binding) -> tuple[str, Expr]:
        def is_acc(x: Expr) -> bool:
            return self.binding(x) is b
        if e.op in _SUM_OPS:
            return "sum", e.value
        if e.op in _BIT_OPS:
            return _BIT_OPS[e.op], e.value
        if e.op == "=" and isinstance(e.value, Binary) and f"{e.value.op}=" in _BIT_OPS:  # `bits = bits | v`
            if is_acc(e.value.left):
                return _BIT_OPS[f"{e.value.op}="], e.value.right
            if is_acc(e.value.right):
                return _BIT_OPS[f"{e.value.op}="], e.value.left
        if e.op == "=" and isinstance(e.value, Binary) and e.value.op == "+":
            if is_acc(e.value.left):
                return "sum", e.value.right
            if is_acc(e.value.right):
                return "sum", e.value.left
        if e.op == "=" and isinstance(e.value, Call) and call_name(e.value) in _MAX_CALLS and len(e.value.args) == 2:
            a, c = e.value.args
            if is_acc(a):
                return _MAX_CALLS[call_name(e.value)], c
            if is_acc(c):
                return _MAX_CALLS[call_name(e.value)], a
        self.fail(f"updates {b.name} in a loop in a way that is not a sum, max or min")
        raise AssertionError

    def compare_update(self, s: If) -> tuple[Binding, tuple[str, Expr]] | None:
        """`if (e > m) m = e;` (max) or `if (e < m) m = e;` (min), any side written first."""
        if s.other is not None or not isinstance(s.cond, Binary) or s.cond.op not in ("<", ">", "<=", ">="):
            return None
        then = s.then.body[0] if isinstance(s.then, Block) and len(s.then.body) == 1 else s.then
        if not (isinstance(then, ExprStmt) and isinstance(then.expr, Assign) and then.expr.op == "="
                and isinstance(then.expr.target, Name)):
            return None
        b = self.binding(then.expr.target)
        if b is None:
            return None
        left, right, op = s.cond.left, s.cond.right, s.cond.op
        if self.binding(left) is b:  # m < e  ->  e > m
            left, right, op = right, left, {"<": ">", ">": "<", "<=": ">=", ">=": "<="}[op]
        if self.binding(right) is not b or left != then.expr.value:
            return None
        self.plain_value(left)
        return b, ("max" if op in (">", ">=") else "min", left)

    def arg_update(self, s: If, info: _Loop) -> tuple[Binding, str, Expr, Binding] | None:
        """`if (e > best) { best = e; at = c; }` (either order, a strict comparison, either side first),
        with c the loop's own counter: an argmax or argmin of the row (the value and where first)."""
        if s.other is not None or not isinstance(s.cond, Binary) or s.cond.op not in ("<", ">"):
            return None
        if not isinstance(s.then, Block) or len(s.then.body) != 2:
            return None
        assigns = [x.expr for x in s.then.body if isinstance(x, ExprStmt) and isinstance(x.expr, Assign)
                   and x.expr.op == "=" and isinstance(x.expr.target, Name)]
        if len(assigns) != 2:
            return None
        def uncast(e: Expr) -> Expr:  # `at = (int)c`: an integer conversion keeps the counters' order
            while isinstance(e, Cast) and is_integer_type(e.type):
                e = e.operand
            return e
        counter = [a for a in assigns if (b := self.binding(uncast(a.value))) is not None and b.key == info.var]
        if len(counter) != 1:
            return None
        at = counter[0]
        (kept,) = [a for a in assigns if a is not at]
        value, index = self.binding(kept.target), self.binding(at.target)
        if value is None or index is None or value is index:
            return None
        left, right, op = s.cond.left, s.cond.right, s.cond.op
        if self.binding(left) is value:  # best < e  ->  e > best
            left, right, op = right, left, {"<": ">", ">": "<"}[op]
        if self.binding(right) is not value or left != kept.value:
            return None
        self.plain_value(left)
        return value, "argmax" if op == ">" else "argmin", left, index

    def add_accumulator(self, info: _Loop, b: Binding, kind_value: tuple[str, Expr]) -> None:
        kind, value = kind_value
        if self.nested:
            self.fail(f"updates {b.name}, declared outside its item loop's body, in a loop nested in that loop")
        if b.param is not None or b.pointer or b.key == self.index_key:
            self.fail(f"assigns {b.name} in a loop over its row")
        if kind != "index" and (any(self.f.binding(x) is not None and self.f.binding(x).key in info.accumulators
                                    for x in walk_expr(value)) or any(self.binding(x) is b for x in walk_expr(value))):
            self.fail(f"updates {b.name} from a value that reads an accumulator")
        if info.accumulators.get(b.key, kind) != kind:
            self.fail(f"accumulates {b.name} in two ways")
        info.accumulators[b.key] = kind
        info.updates.append(value)

    def check_map(self, loop_id: int) -> None:
        """Every array stored in the loop is accessed there only at the stored element, and the
        stored element moves with the counter one-to-one."""
        inside = [a for a in self.f.accesses if any(lp.id == loop_id for lp in a.ctx.loops)]
        loop = next(x for x in self.f.loops if x.id == loop_id)
        counter = f"L:{loop.var}"
        stored = {a.array.key: a for a in inside if a.kind == "store" and a.array is not None}
        for a in inside:
            if a.kind == "atomic" or (a.kind == "store" and (a.array is None or a.offset is None)):
                self.fail("has a loop store whose array or element it cannot read")
            if a.kind == "store" and a.op not in ("=", "+=", "-=", "*=", "/="):
                self.fail("has a loop store it cannot read")
            if a.kind == "read" and a.array is None:
                self.fail("reads memory it cannot name in a loop that stores")
        for key, first in stored.items():
            if first.offset.coefficient((counter,)) != 1 or any(counter in m for m, _ in first.offset.terms
                                                                  if m != (counter,)):
                self.fail(f"stores {first.array.name} at an element that does not move one-to-one with the counter")
            # the rest of the element is the same for every iteration: the row's own (the thread
            # index, parameters, constants), never an inner loop's counter, a local or a loaded
            # value (red team round 136: `c + k` of an inner loop, `c + moved[...]` stored a
            # neighbour's element, which another lane stores at once)
            moving = sorted(a for m, _ in first.offset.terms if m != (counter,) for a in m if not _fixed_atom(a))
            if moving:
                self.fail(f"stores {first.array.name} at an element that moves with more than the counter "
                          f"({moving[0].split(':', 1)[-1]})")
            for a in inside:
                if a.array is not None and a.array.key == key and a.offset != first.offset:
                    self.fail(f"reads or writes {first.array.name} at two different elements in one loop")

    def uncoalesced(self) -> bool:
        """Some access in a row loop strides across threads: a per-thread value (the thread index,
        or what is computed from it, such as idx / T) times a row length or a constant above 1."""
        for a in self.f.accesses:
            if not a.ctx.loops or a.offset is None:
                continue
            for monomial, coef in a.offset.terms:
                per_thread = [x for x in monomial if x == "threadIdx.x" or x.startswith("t:")]
                if per_thread and (len(monomial) > len(per_thread) or abs(coef) > 1):
                    return True
        return False


def buffers_apart(site: "LaunchSite", stored: Iterable[str], in_place: Iterable[str]) -> list[str]:
    """Where a rewrite runs a loop's iterations in another order than the baseline's thread did
    (the row tier's lanes, the grid tier's threads), a buffer the loop stores must not be another
    parameter's, or an iteration may read what another writes (red team rounds 135-136: `smooth(y,
    y, n)` reading `in[i - 1]`, a running sum on one thread). Raises NotARowKernel where the launcher
    hands a STORED parameter and another pointer parameter from one variable (its locals read
    through: `float* next = y + 1`), unless it hands the same buffer to two parameters both accessed
    only at the iteration's own elements (IN_PLACE: an update in place); returns C conditions that
    the two addresses differ when the launch runs (a buffer the harness hands twice). Buffers that
    overlap without being equal, handed by the harness itself, are not detected."""
    launch = site.stmt.expr
    assert isinstance(launch, Launch)
    lau = next((x for x in site.part.launchers if x.fn is site.launcher), None)
    params = site.kernel.sig.params
    if lau is None or len(params) != len(launch.args):
        raise NotARowKernel("is launched with arguments that do not match its parameters one for one")
    # memory reached through a parameter not spelled as a pointer (an alias `fptr`, a template
    # type) cannot be told from another buffer
    through = {a.array.name for a in collect_facts(site.kernel.sig, site.kernel.body).accesses
               if a.array is not None and a.array.param is not None}
    hidden = sorted(p.name for p in params if p.name in through and not p.pointer)
    if hidden:
        raise NotARowKernel(f"accesses memory through {hidden[0]}, a parameter not declared as a pointer: "
                            "which buffer it is cannot be told")
    args = {p.name: a for p, a in zip(params, launch.args) if p.pointer}
    if not set(stored) & set(args):
        return []
    # Each buffer is named by what the harness hands: the launcher's parameters (through its
    # locals), and, where the harness calls a forwarder, the forwarder's parameters it passes on.
    # A pointer held any other way (a local assigned again, a global, a struct's field) cannot be
    # told from another (red team round 137: `next = y; next += 1;`, a forwarder's `run(y + 1, y)`).
    outer = _forwarded_arguments(lau, site.part, site.preamble_macros)
    roots: dict[str, set[str]] = {}
    # a buffer as the harness hands it: the roots it is named through and the launch's expression
    buffers: dict[str, tuple[frozenset[str], str]] = {}
    for name, a in args.items():
        e = lau.facts.resolve(a)
        names: set[str] = set()
        for x in walk_expr(e):
            if not isinstance(x, Name):
                continue
            b = lau.facts.binding(x)
            if b is None or b.param is None or b.assignments:
                raise NotARowKernel(f"is handed {name} through {x.id}, which is not a parameter of its launcher "
                                    "left as the caller gave it: which buffer it is cannot be told")
            names |= outer.get(b.name, {b.name})
        roots[name], buffers[name] = names, (frozenset(names), to_c(e))
    own = set(in_place)
    conditions = []
    for p in sorted(set(stored) & set(args)):
        for q in sorted(args):
            if q == p:
                continue
            if buffers[q] == buffers[p] and p in own and q in own:
                continue  # the same buffer, updated in place
            if roots[p] & roots[q]:
                raise NotARowKernel(f"is handed {p} and {q} from one variable ({sorted(roots[p] & roots[q])[0]}): "
                                    "an iteration may read what another writes")
            conditions.append(f"(const void*)({to_c(args[p])}) != (const void*)({to_c(args[q])})")
    return conditions


def plain_value(p: Param) -> bool:
    """Whether a parameter holds a plain number: no pointer, no reference, of a built-in integer or
    floating type (not an alias, a class or a template's type, any of which may hold an address)."""
    return not p.pointer and "&" not in p.type and (is_integer_type(p.base) or is_floating_type(p.base))


def _forwarded_arguments(lau: Launcher, part: EditablePart, preamble_macros: str = "") -> dict[str, set[str]]:
    """Where the harness calls a forwarder that calls the launcher: each launcher parameter's root,
    the forwarder's parameter passed to it as is; raises NotARowKernel for a pointer passed any
    other way (`run(y + 1, y)`: the two overlap where the harness's buffers would not), for a
    number computed from anything but the forwarder's numbers (`(size_t)(y + 1)` is an address:
    red team round 139), and for a launcher reached another way too (a second caller in the part,
    the harness itself). Empty where the harness calls the launcher itself and nothing else does."""
    fwd = lau.forwarder
    named = re.compile(rf"(?<![\w.]){re.escape(lau.fn.name)}\b")
    # a macro may name it where its uses do not (red team round 141: `#define RUN run_smooth_rows`
    # in the frozen preamble, `RUN(y + 1, y, ...)` in the part), or make the name by pasting
    macros = "\n".join([preamble_macros, *(item.text for item in part.items if item.kind == "preproc")])
    if named.search(without_literals(strip_comments(preamble_macros))) or "##" in strip_comments(macros):
        raise NotARowKernel(f"is launched through {lau.fn.name}, which a macro of the program may name: "
                            "which buffers it is handed cannot be told from one caller")
    for item in part.items:  # every item, read or not
        if item is lau.fn.item or (fwd is not None and item is fwd.item):
            continue
        if not item.is_function_definition and function_name(item) == lau.fn.name and \
                len(named.findall(without_literals(strip_comments(item.text)))) == 1:
            continue  # a declaration of the launcher itself (`void run(float*, int);`, `template void run<float>(...);`)
        if named.search(without_literals(strip_comments(item.text))):
            raise NotARowKernel(f"is launched through {lau.fn.name}, which other code of the part names too "
                                f"({item.text.strip().splitlines()[0][:50]}): which buffers it is handed cannot be "
                                "told from one caller")
    if fwd is None:
        return {}
    if lau.fn.name in part.harness_referenced:
        raise NotARowKernel(f"is launched through {lau.fn.name}, which the harness calls besides {fwd.name}")
    body = fwd.body.body
    stmt = body[0] if len(body) == 1 else None
    call = stmt.expr if isinstance(stmt, ExprStmt) else stmt.value if isinstance(stmt, Return) else None
    if not isinstance(call, Call) or len(call.args) != len(lau.fn.sig.params):
        raise NotARowKernel(f"is launched through {fwd.name}, whose call of {lau.fn.name} cannot be read")
    fwd_params = {p.name for p in fwd.sig.params}
    numbers = {p.name for p in fwd.sig.params if plain_value(p)}
    out: dict[str, set[str]] = {}
    for p, a in zip(lau.fn.sig.params, call.args):
        if isinstance(a, Name) and a.id in fwd_params:
            out[p.name] = {a.id}
        elif plain_value(p) and all(x.id in numbers for x in walk_expr(a) if isinstance(x, Name)) and \
                not any(isinstance(x, (Call, Unary)) and not (isinstance(x, Unary) and x.op in ("-", "+"))
                        for x in walk_expr(a)):
            out[p.name] = set()  # a number computed from the forwarder's numbers and constants
        else:
            # a pointer, a type that may be one (`typedef float* fptr`: red team round 138), or a
            # number that may hold an address (`(size_t)(y + 1)`: round 139)
            raise NotARowKernel(f"is launched through {fwd.name}, which hands {p.name} {to_c(a)} (not one of its "
                                "own parameters): which buffer it is cannot be told")
    return out


# A device assertion computes nothing: it stops the kernel where its condition fails. The tiers that
# take it run each statement of the kernel for the same row, column or element it ran for (never
# ahead of a guard, never for an element past the end), so every condition is checked on the
# values it was, once or by every lane of a warp alike: a failing one still fails, an honest one
# never does. (A helper is another matter: a pure helper may be evaluated where the kernel did not
# call it, so one that asserts is not pure.)
KERNEL_CHECKS = frozenset({"assert"})


def is_kernel_check(e: Expr) -> bool:
    """A call of a device assertion (KERNEL_CHECKS) as a statement of its own."""
    return isinstance(e, Call) and isinstance(e.func, Name) and e.func.id in KERNEL_CHECKS


def effect_free_calls(fn: Function, facts: KernelFacts, helpers: frozenset[str]) -> str | None:
    """Why FN's calls may have effects a rewrite would change, or None: only math functions, the
    program's pure HELPERS, device assertions (KERNEL_CHECKS) and conversions to its template type
    parameters (`T(0)`), no atomics."""
    type_params = {t.name for t in fn.sig.template if t.kind == "type"}
    impure = sorted(c for c in facts.calls
                    if c not in SIDE_EFFECT_FREE and c not in helpers and c not in type_params and c not in KERNEL_CHECKS)
    if impure:
        return f"calls {impure[0]} (only math functions and side-effect-free helpers are allowed)"
    if any(a.kind == "atomic" for a in facts.accesses) or facts.calls & ATOMICS:
        return "uses atomics"
    return None


def pure_helpers(functions: list[Function], unreadable: frozenset[str] = frozenset()) -> frozenset[str]:
    """Device functions that compute only from their arguments: no memory written through a
    pointer, no CUDA built-ins, shared memory, barriers or atomics, and calls only to math
    functions or to other such helpers. A name defined more than once (overloads, `dev_exp(float)`
    and `dev_exp(double)`; one in the part and one in the frozen code) is pure only where every
    definition given is: a call may reach any of them; a name in `unreadable` (a definition that
    could not be read) is pure nowhere."""
    candidates: dict[str, list[KernelFacts]] = {}
    impure: set[str] = set(unreadable)
    for fn in functions:
        if fn.is_kernel or "__device__" not in fn.sig.qualifiers:
            impure.add(fn.name)
            continue
        text = strip_comments(fn.item.text[len(fn.head):])
        facts = collect_facts(fn.sig, fn.body)
        if _BUILTIN_WORDS.search(text) or any(b.shared or b.array for b in facts.bindings) or \
                any(a.kind != "read" for a in facts.accesses) or any(p.pointer for p in fn.sig.params):
            impure.add(fn.name)
            continue
        # Assigning to a parameter (a reference, whatever alias or template argument spells it) or to
        # a global, or to a member of either, is a side effect no rewrite sees (red team rounds 42-43:
        # a flag set through `int&`, then through `using flag_t = int&;`, stayed one lane's).
        if _assigns_outside_its_locals(facts):
            impure.add(fn.name)
            continue
        candidates.setdefault(fn.name, []).append(facts)
    pure = set(candidates) - impure
    changed = True
    while changed:  # drop helpers that call something impure, until nothing changes
        changed = False
        for name in sorted(pure):
            if any(c not in SIDE_EFFECT_FREE and c not in pure for facts in candidates[name] for c in facts.calls):
                pure.discard(name)
                changed = True
    return frozenset(pure)


def _assigns_outside_its_locals(facts: KernelFacts) -> bool:
    """Whether a function assigns (or increments) anything but its own local variables: a
    parameter, a global, or a member or element of either."""
    def root(e: Expr) -> Expr:
        while isinstance(e, (Member, Index)) or (isinstance(e, Unary) and e.op == "*"):
            e = e.base if isinstance(e, (Member, Index)) else e.operand
        return e

    for x in walk_expr_in(facts.body):
        if isinstance(x, Assign):
            target = root(x.target)
        elif isinstance(x, (Unary, Postfix)) and x.op in ("++", "--"):
            target = root(x.operand)
        else:
            continue
        b = facts.binding(target) if isinstance(target, Name) else None
        if b is None or (b.param is not None and not (target is _assigned_name(x) and _by_value(b.param))):
            return True
    return False


# A parameter of a fundamental type, spelled in keywords alone, is the callee's own copy: no alias
# or template argument can make it a reference (`h ^= h >> 16` in a hash helper is local).
_FUNDAMENTAL_WORDS = frozenset({"const", "volatile", "unsigned", "signed", "char", "short", "int", "long", "float",
                                "double", "bool"})


def _by_value(param: Param) -> bool:
    words = param.type.split()
    return not param.pointer and bool(words) and set(words) <= _FUNDAMENTAL_WORDS


def _assigned_name(x: Expr) -> Expr:
    """The expression an assignment or increment writes, as written (a Name only when it is the whole target)."""
    return x.target if isinstance(x, Assign) else x.operand  # type: ignore[union-attr]


def walk_expr_in(s: Stmt | None):
    """Every expression node under a statement."""
    for top in statement_exprs(s):
        yield from walk_expr(top)


def plan_row_warp(fn: Function, helpers: frozenset[str] = frozenset(), constants: dict[str, int] | None = None,
                  launch: LaunchBlock = None) -> RowPlan:
    if not fn.is_kernel:
        raise NotARowKernel("is not a kernel")
    block = ROW_WARP_BLOCK
    bounds = re.search(r"__launch_bounds__\s*\(\s*([^,)]*)", fn.head)
    if bounds:
        if not bounds.group(1).strip().isdigit():
            raise NotARowKernel(f"declares __launch_bounds__({bounds.group(1).strip()}), which may be below a warp")
        block = int(bounds.group(1))
        if block < WARP or block % WARP:
            raise NotARowKernel(f"declares __launch_bounds__({block}), not whole warps")
        block = min(block, ROW_WARP_BLOCK)
    plan = ItemPlanner(fn, collect_facts(fn.sig, fn.body, constants), helpers, launch).plan()
    plan.block = block
    return plan


# -- emission --------------------------------------------------------------------------------------

def _exact(name: str) -> str:
    """NAME converted to the type of the library overload its combine calls (int for the types
    narrower than int, its own type otherwise): the library's own `::max(int, int)` or
    `__shfl_xor_sync(unsigned, int, int, int)` is then an exact match, which no overload or template
    of the program can beat (red team rounds 138, 141-146: the program's `max(short, int)` did)."""
    return f"(typename ::kl_lib<decltype({name})>::type)({name})"


def _arg_combine(value: str, index: str, kind: str) -> str:
    """Lanes meet pairwise (xor): the better value wins, a tie goes to the smaller index (the first
    in loop order: each lane saw its counters in increasing order). A lane that never moved holds
    the initial pair, which only ties when no element beat it, and then every lane holds it: every
    lane ends with the pair the sequential loop keeps."""
    better = ">" if kind == "argmax" else "<"
    tie = "<"
    return (f"for (int kl_offset = {WARP // 2}; kl_offset > 0; kl_offset /= 2) {{ "
            f"const auto kl_other = ::__shfl_xor_sync(0xffffffffu, {_exact(value)}, kl_offset); "
            f"const auto kl_other_at = ::__shfl_xor_sync(0xffffffffu, {_exact(index)}, kl_offset); "
            f"if (kl_other {better} {value} || (kl_other == {value} && kl_other_at {tie} {index})) "
            f"{{ {value} = kl_other; {index} = kl_other_at; }} }}")


def extreme_of(kind: str, ctype: str, mine: str, other: str) -> str:
    """The library call that keeps the larger (`max`) or smaller (`min`) of an accumulator MINE of
    declared type CTYPE and OTHER, as the tiers' combines do. The compiler, not the spelling,
    picks the overload: `::max` of float or double is the library's fmaxf/fmax, which passes over a
    NaN as the loop's fmaxf did over its own seed (red team round 109), also for a float spelled
    through a typedef or a template parameter (round 148: the column tier read the spelling and
    compared instead, keeping a NaN partial). fmaxf/fmax by name where the type is spelled so: a
    program's own `max` macro or function (common in C code) then has no say."""
    fn = {"float": f"f{kind}f", "double": f"f{kind}"}.get(ctype, kind)
    return f"::{fn}({_exact(mine)}, {other})"


def _shuffle_combine(name: str, kind: str, ctype: str) -> str:
    if kind == "sum":
        step = f"{name} += ::__shfl_xor_sync(0xffffffffu, {_exact(name)}, kl_offset);"
    else:
        step = f"{name} = {extreme_of(kind, ctype, name, f'::__shfl_xor_sync(0xffffffffu, {_exact(name)}, kl_offset)')};"
    return f"for (int kl_offset = {WARP // 2}; kl_offset > 0; kl_offset /= 2) {step}"


def loop_name(s: For) -> str:
    """A row loop's counter, declared in its header or assigned there (ItemPlanner.loop_counter)."""
    if isinstance(s.init, Decl):
        return s.init.declarators[0].name
    assert isinstance(s.init, ExprStmt) and isinstance(s.init.expr, Assign)
    return to_c(s.init.expr.target)


def loop_start(s: For, offset: str) -> str:
    """A row loop's header start, moved on by OFFSET (a lane, a slice): `int c = (0) + kl_lane`, or
    `c = (0) + kl_lane` for a counter declared before the loop."""
    if isinstance(s.init, Decl):
        counter = s.init.declarators[0]
        return f"{s.init.type} {counter.name} = ({to_c(counter.init)}) + {offset}"  # type: ignore[arg-type]
    assert isinstance(s.init, ExprStmt) and isinstance(s.init.expr, Assign)
    return f"{to_c(s.init.expr.target)} = ({to_c(s.init.expr.value)}) + {offset}"


def rewrite_kernel(fn: Function, plan: RowPlan) -> str:
    body = fn.item.text[len(fn.head):]
    edits: list[tuple[int, int, str]] = []
    d = plan.index.declarators[0]
    start, end = plan.index.span
    index_type = plan.bindings[plan.index_key].type
    offset = plan.index_offset
    head = with_item_count(fn.head)
    if plan.stride_guard is not None:
        warp = f"((unsigned long long)blockIdx.x * blockDim.x + threadIdx.x) / {WARP}"
        warps = f"((unsigned long long)gridDim.x * blockDim.x) / {WARP}"
        edits.append((start, plan.stride_guard.then.span[0],  # type: ignore[attr-defined]
                      f"const int kl_lane = (int)(threadIdx.x % {WARP});  // one warp per row, the grid's warps "
                      f"taking turns (kernelloop row tier)\n  for ({plan.index.type} {d.name} = ({index_type})({warp}); "
                      f"{to_c(plan.stride_guard.cond)}; {d.name} += ({index_type})({warps})) "))
        head = fn.head
    else:
        edits.append((start, end, f"{plan.index.type} {d.name} = ({index_type})(((unsigned long long)blockIdx.x * "
                                  f"blockDim.x + threadIdx.x) / {WARP}{_plus(offset)}); const int kl_lane = (int)(threadIdx.x % {WARP}); "
                                  f"// one warp per row (kernelloop row tier)\n"
                                  f"  if ((long long){d.name}{_plus(-offset)} >= {ITEM_COUNT}) return;  // rows the baseline never had"))
    for loop in plan.loops:
        s = loop.stmt
        header = f"for ({loop_start(s, 'kl_lane')}; {to_c(s.cond)}; {loop_name(s)} += {WARP}) "
        b_start, b_end = s.body.span  # type: ignore[attr-defined]
        loop_text = header + body[b_start:b_end]
        before = [a for a in [number_asserts(plan.bindings[key].name for key in loop.accumulators)] if a]
        after: list[str] = []
        for key, kind in loop.accumulators.items():
            b = plan.bindings[key]
            if kind == "sum":
                before.append(f"const {b.type} kl_{b.name}_before = {b.name}; {b.name} = 0;")
                after.append(_shuffle_combine(b.name, kind, b.type))
                after.append(f"{b.name} = kl_{b.name}_before + {b.name};")
            elif kind in BIT_KINDS:
                op = BIT_KINDS[kind]
                before.append(f"const {b.type} kl_{b.name}_before = {b.name}; {b.name} = {bit_identity(kind, b.type)};")
                after.append(f"for (int kl_offset = {WARP // 2}; kl_offset > 0; kl_offset /= 2) "
                             f"{b.name} {op}= ::__shfl_xor_sync(0xffffffffu, {_exact(b.name)}, kl_offset);")
                after.append(f"{b.name} = kl_{b.name}_before {op} {b.name};")
            elif kind in ARG_KINDS:
                after.append(_arg_combine(b.name, plan.bindings[loop.partners[key]].name, kind))
            elif kind != "index":  # an index combines with its value
                after.append(_shuffle_combine(b.name, kind, b.type))
        if loop.kind == "map":
            after.append("::__syncwarp();")
        if loop.kind == "map":
            # every lane's reads before the loop (`p = y[r * cols + piv]`) before any lane's stores in
            # it (red team round 137: a pivot overwritten by its owner lane, then read by another)
            before.insert(0, "::__syncwarp();")
        f_start, f_end = s.span
        line_start = body.rfind("\n", 0, f_start) + 1
        indent = re.match(r"[ \t]*", body[line_start:f_start]).group(0)
        edits.append((f_start, f_end, "{ " + " ".join(before) + (" " if before else "") + loop_text + "\n"
                      + indent + " ".join(after) + " }"))
    for store in plan.lane0_stores:
        s_start, s_end = store.span
        edits.append((s_start, s_end, f"{{ if (kl_lane == 0) {{ {body[s_start:s_end]} }} ::__syncwarp(); }}"))
    return head + apply_edits(body, edits)


def _fixed_atom(atom: str) -> bool:
    """An atom of an element's index that no iteration of a row loop changes: a parameter, a
    constant or an opaque uniform value, a CUDA built-in, or a value of those and the thread's
    coordinates alone."""
    return is_uniform_atom(atom) or atom.startswith("t:") or atom.split(".")[0] in (
        "threadIdx", "blockIdx", "blockDim", "gridDim")


def _plus(n: int) -> str:
    """` + n` (` - |n|`), or nothing for 0: an index's offset in C."""
    return "" if n == 0 else f" + {n}LL" if n > 0 else f" - {-n}LL"


def apply_edits(text: str, edits: list[tuple[int, int, str]]) -> str:
    try:
        return spliced(text, edits)
    except ValueError:
        raise NotARowKernel("overlapping rewrites") from None


ITEM_COUNT = "kl_items"  # the baseline's thread count, passed to a rewritten kernel


def with_item_count(head: str, declaration: str = f"long long {ITEM_COUNT}") -> str:
    """The kernel's head with one more parameter (DECLARATION), by default the number of items
    (threads) the baseline launched: a rewrite rounds its launch up to whole warps or blocks, and the kernel may have no
    guard of its own for the extra items (a launch of exactly N threads; red team round 40)."""
    close = head.rstrip().rfind(")")
    depth, open_ = 0, -1
    for i in range(close, -1, -1):
        depth += {")": 1, "(": -1}.get(head[i], 0)
        if depth == 0:
            open_ = i
            break
    if close < 0 or open_ < 0:
        raise NotARowKernel("has a head whose parameter list cannot be found")
    empty = not head[open_ + 1:close].strip() or head[open_ + 1:close].strip() == "void"
    params = declaration if empty else f"{head[open_ + 1:close]}, {declaration}"
    return head[:open_ + 1] + params + head[close:]


def item_count(base: BaselineLaunch) -> str:
    """The baseline's items, as C: its thread index blockIdx.x * blockDim.x + threadIdx.x takes
    grid.x * block.x values, whether the launch dimensions are integers or dim3s (`dim3
    grid(...)` is the common spelling; red team round 41), read from its evaluated configuration."""
    return f"((long long){base.grid}.x * {base.block}.x)"


def rounded_launch(base: BaselineLaunch, kernel: str, per_block: int, block: str,
                   args: list[str]) -> tuple[str, str, str, list[str]]:
    """KERNEL launched with blocks of BLOCK taking PER_BLOCK items each, covering every thread of
    the baseline's launch, the item count its last argument: (statement, grid, block, the condition
    that the grid fits a launch; see launch_guard.guarded)."""
    blocks = f"(({item_count(base)} + {per_block - 1}) / {per_block})"
    grid = f"(unsigned int){blocks}"
    statement = (f"{kernel}<<<{grid}, {block}, {base.shmem}{base.stream}>>>"
                 f"({', '.join([*args, item_count(base)])});")
    return statement, f"dim3({grid})", f"dim3({block})", [f"{blocks} <= 2147483647LL"]


def launches_in(s: Stmt | None):
    """Statements `kernel<<<...>>>(...);` anywhere under `s`."""
    if isinstance(s, Block):
        for x in s.body:
            yield from launches_in(x)
    elif isinstance(s, ExprStmt) and isinstance(s.expr, Launch):
        yield s
    elif isinstance(s, If):
        yield from launches_in(s.then)
        yield from launches_in(s.other)
    elif isinstance(s, For):
        yield from launches_in(s.body)


# The shortest row a warp per row is launched for: a row of fewer elements than one 32-byte memory
# sector holds of 4-byte values lies inside a sector, so the baseline's thread per row already reads
# whole sectors across its warp (32 rows side by side), with a 32nd of the threads (an H100 ran a
# grid-stride row max 1.3x slower than its baseline at 65536 rows of one element, 2.3x faster at 512).
SHORTEST_WARP_ROW = 8


def long_rows(site: LaunchSite, plan: RowPlan) -> list[str]:
    """The launch's condition that some row loop of PLAN runs at least SHORTEST_WARP_ROW elements
    (none where a loop's length cannot be written at the launch: a bound read from a local may be
    long). NotARowKernel where every row loop is known to be shorter."""
    launch = site.stmt.expr
    assert isinstance(launch, Launch)
    params = [p.name for p in site.kernel.sig.params]
    constants = site.constants or {}

    def written(e: Expr | None) -> str | None:
        """E at the launch: parameters as their launch arguments, constants as numbers."""
        if e is None:
            return None
        for part in walk_expr(e):
            if isinstance(part, Name) and part.id not in constants and part.id not in params:
                return None
            if not isinstance(part, (Name, Num, Binary, Unary, Cast)) or \
                    (isinstance(part, Unary) and part.op not in ("-", "+", "~", "!")):
                return None  # never a read through a pointer on the host (`*n` of a device pointer)

        def sub(x: Expr) -> str | None:
            if isinstance(x, Name):
                if x.id in params and params.index(x.id) < len(launch.args):
                    return f"({to_c(launch.args[params.index(x.id)])})"
                return f"({constants[x.id]})" if x.id in constants else None
            return None
        return to_c(e, sub)

    def number(e: Expr | None) -> int | None:
        e = strip_casts(e)
        if isinstance(e, Num) and not e.is_float:
            return int(e.value)
        return constants.get(e.id) if isinstance(e, Name) else None

    lengths: list[str] = []
    known: list[int] = []
    for lp in plan.loops:
        cond, init = lp.stmt.cond, lp.stmt.init
        start: Expr | None = None
        if isinstance(init, Decl) and len(init.declarators) == 1:
            start = init.declarators[0].init
        elif isinstance(init, ExprStmt) and isinstance(init.expr, Assign):
            start = init.expr.value
        if not (isinstance(cond, Binary) and cond.op in ("<", "<=")) or start is None:
            return []
        bound, first = written(cond.right), written(start)
        if bound is None or first is None:
            return []
        extra = 1 if cond.op == "<=" else 0
        if number(cond.right) is not None and number(start) is not None:
            known.append(number(cond.right) - number(start) + extra)  # type: ignore[operator]
        from_start = "" if number(start) == 0 else f" - (double)({first})"
        lengths.append(f"((double)({bound}){from_start}{' + 1.0' if extra else ''} >= {SHORTEST_WARP_ROW}.0)")
    if len(known) == len(lengths) and known and max(known) < SHORTEST_WARP_ROW:
        raise NotARowKernel(f"has rows of at most {max(known)} elements, within one memory sector: its thread per "
                            "row already reads whole sectors")
    return [" || ".join(dict.fromkeys(lengths))] if lengths else []


def _launch_text(stmt: ExprStmt, block: int,
                 conditions: list[str]) -> Callable[[BaselineLaunch, str], tuple[str, str, str, list[str]]]:
    launch = stmt.expr
    assert isinstance(launch, Launch)

    def new_launch(base: BaselineLaunch, kernel: str) -> tuple[str, str, str, list[str]]:
        statement, grid, block_text, needed = rounded_launch(base, kernel, block // WARP, str(block),
                                                             [to_c(a) for a in launch.args])
        return statement, grid, block_text, [*needed, *conditions]
    return new_launch


def map_buffers(fn: Function, plan: RowPlan) -> tuple[set[str], set[str]]:
    """The pointer parameters a row loop of PLAN stores (map loops), and those updated in place at
    the one element those loops store (in_place_parameters)."""
    facts = collect_facts(fn.sig, fn.body)
    maps = {id(lp.stmt) for lp in plan.loops if lp.kind == "map"}
    loop_ids = {x.id for x in facts.loops for lp in plan.loops if id(lp.stmt) in maps and x.cond is lp.stmt.cond}
    in_loops = [a for a in facts.accesses if any(lp.id in loop_ids for lp in a.ctx.loops)]
    stored = {a.array.name for a in in_loops if a.kind == "store" and a.array is not None and a.array.param is not None}
    return stored, in_place_parameters(fn.sig.params, [a for a in in_loops if a.kind == "store"], facts.accesses)


def in_place_parameters(params: Iterable[Param], stores: Iterable[Access], accesses: Iterable[Access]) -> set[str]:
    """The pointer parameters updated in place: every access of each is at one element, the same
    one every store of STORES (to a parameter's array) is at, read as its own type. Two such
    parameters handed one buffer touch only an iteration's own element (red team round 137:
    `cur[c]` and `spill[c + 1]` are each at *an* element the loop stores, not at the one)."""
    elements = {a.offset for a in stores if a.array is not None and a.array.param is not None}
    if len(elements) != 1 or None in elements:
        return set()
    (element,) = elements
    owned = set()
    for p in params:
        mine = [a for a in accesses if a.array is not None and a.array.param is not None and a.array.name == p.name]
        if p.pointer and mine and all(a.offset == element and not a.reinterpreted for a in mine):
            owned.add(p.name)
    # one element in bytes too: `double* out` and `float* in` at `i` are not (red team round 139)
    if len({(" ".join(w for w in p.base.split() if w not in ("const", "volatile")), p.pointer)
            for p in params if p.name in owned}) > 1:
        return set()
    return owned


def launch_block(site: LaunchSite) -> LaunchBlock:
    """The site's block extents (x, y, z) where each is a number (an int or a dim3; the program's
    integer macros and constants read as theirs: `#define THREADS 256`, `constexpr int kThreads =
    256;`), else why not, in words."""
    lau = next((x for x in site.part.launchers if x.fn is site.launcher), None)
    launch = site.stmt.expr
    if lau is None or not isinstance(launch, Launch) or len(launch.config) < 2:
        return "is launched where its launcher's values cannot be read"
    facts = replace(lau.facts, constants={**site.constants, **lau.facts.constants})
    polys = [facts.poly(launch_extent(facts, launch.config[1], axis)) for axis in "xyz"]
    extents = [p.const_value if p is not None and p.is_const else None for p in polys]
    if any(e is None for e in extents):
        return f"is launched with a block ({to_c(launch.config[1])}) that is not a constant"
    return extents[0], extents[1], extents[2]  # type: ignore[return-value]


@dataclass(frozen=True)
class LaunchSite:
    """One launch, in a launcher the harness calls, of a kernel of the editable part."""
    part: EditablePart
    launcher: Function
    stmt: ExprStmt  # `kernel<<<...>>>(...);`
    kernel: Function
    helpers: frozenset[str]  # device functions the kernel may call freely (pure_helpers)
    # A template launcher: the C++ condition true for the one instantiation the verifier runs
    # (`kl_same_type<scalar_t, float>::value`); None for a plain launcher.
    verified_instantiation: str | None = None
    # the program's integer macros and constants (sizes.constants), read as numbers: a local computed
    # from `ELEMS_PER_THREAD` is then known as an integer of its width (round 113's keeps_init)
    constants: dict[str, int] = field(default_factory=dict)
    # the part's item the kernel is (`kernel` is read from its text with the program's macros
    # expanded: launcher.expanded_function); None: the kernel's own item
    source_item: Item | None = None
    # the frozen preamble's #define directives: a macro there may name the launcher (round 141)
    preamble_macros: str = ""

    @property
    def kernel_item(self) -> Item:
        return self.source_item or self.kernel.item

    def assemble(self, kernel_text: str, launch_text: str) -> str:
        """The whole editable part with this kernel and this launch replaced. In a template launcher
        only the instantiation the verifier runs changes: the rewritten kernel is a new template
        beside the original, launched under `if constexpr` of that instantiation; every other
        instantiation keeps the original launch of the original kernel."""
        body = self.launcher.item.text[len(self.launcher.head):]
        l_start, l_end = self.stmt.span
        prologue = []
        if self.verified_instantiation is not None:
            renamed = f"{self.kernel.name}_kl_rewritten"
            pattern = re.compile(rf"\b{re.escape(self.kernel.name)}\b")
            kernel_text = self.kernel_item.text.rstrip("\n") + "\n\n" + pattern.sub(renamed, kernel_text, count=1)
            launch_text = (f"if constexpr ({self.verified_instantiation}) {{ {pattern.sub(renamed, launch_text, count=1)} "
                           f"}} else {{ {body[l_start:l_end]} }}")
            prologue.append(_SAME_TYPE)
        return self._with(kernel_text, apply_edits(body, [(l_start, l_end, launch_text)]), prologue)

    def beside(self, kernel_text: str, new_launch: Callable[[BaselineLaunch, str], tuple]) -> dict:
        """assemble_beside's source and the pieces it wrote, as a Rewrite's `source` and `pieces`."""
        pieces = self._beside_pieces(kernel_text, new_launch)
        body = self.launcher.item.text[len(self.launcher.head):]
        return {"source": self._with(pieces[0], apply_edits(body, [pieces[1]]), list(pieces[2])), "pieces": pieces}

    def assemble_beside(self, kernel_text: str, new_launch: Callable[[BaselineLaunch, str], tuple]) -> str:
        """The whole editable part with the rewritten kernel (KERNEL_TEXT, under the kernel's name)
        beside the baseline's, renamed, and the launch guarded: NEW_LAUNCH(baseline's configuration,
        the renamed kernel as launched) gives the rewritten launch (statement, grid, block,
        conditions[, declarations its conditions and statement read]), which runs only where it and
        the baseline's launch are legal and the conditions hold, the baseline's launch as written everywhere else (launch_guard). In a template
        launcher, only under `if constexpr` of the instantiation the verifier runs."""
        return self.beside(kernel_text, new_launch)["source"]

    def _beside_pieces(self, kernel_text: str, new_launch: Callable[[BaselineLaunch, str], tuple]) -> tuple:
        """assemble_beside's pieces: the rewritten kernel beside the baseline's, the launch's edit in the
        launcher's body, the prologue."""
        name = self.kernel.name
        renamed = f"{name}_kl_rewritten"
        pattern = re.compile(rf"\b{re.escape(name)}\b")
        kernel_text = self.kernel_item.text.rstrip("\n") + "\n\n" + pattern.sub(renamed, kernel_text, count=1)
        body = self.launcher.item.text[len(self.launcher.head):]
        l_start, l_end = self.stmt.span
        launch = self.stmt.expr
        assert isinstance(launch, Launch)
        try:
            base = baseline_launch(body[l_start:l_end], parsed=[to_c(c) for c in launch.config])
        except ValueError as exc:
            raise NotARowKernel(str(exc)) from None
        launched = renamed + (f"<{launch.targs}>" if launch.targs else "")
        statement, grid, block, conditions, *declarations = new_launch(base, launched)
        launch_text = guarded(base, statement, [*conditions, legal_launch(launched, grid, block, base.shmem)],
                              declarations="".join(declarations))
        prologue = [attributes_helper()]  # what the guard calls, defined once before the part's code
        if self.verified_instantiation is not None:
            launch_text = f"if constexpr ({self.verified_instantiation}) {{ {launch_text} }} else {{ {body[l_start:l_end]} }}"
            prologue.append(_SAME_TYPE)
        return kernel_text, (l_start, l_end, launch_text), tuple(prologue)

    def assemble_all(self, pieces: list[tuple]) -> str | None:
        """The whole editable part with every one of PIECES (one rewrite of each launch of this
        site's kernel in its launcher, each guarded by its own launch's checks): an int32/int64
        dispatch runs the rewritten kernel whichever branch it takes. None where the rewritten
        kernels differ."""
        kernel_text, _, prologue = pieces[0]
        if any(p[0] != kernel_text or p[2] != prologue for p in pieces):
            return None
        body = self.launcher.item.text[len(self.launcher.head):]
        return self._with(kernel_text, apply_edits(body, [p[1] for p in pieces]), list(prologue))

    def _with(self, kernel_text: str, launcher_body: str, prologue: list[str]) -> str:
        launcher_text = self.launcher.head + launcher_body
        out = ([NUMBER_TYPE] if "::kl_number<" in kernel_text else []) + \
            ([INTEGER_TYPE] if "::kl_integer<" in kernel_text else []) + prologue
        for item in self.part.items:  # each inside its namespaces again
            if item is self.kernel_item:
                out.append(in_scope(item, kernel_text))
            elif item is self.launcher.item:
                out.append(in_scope(item, launcher_text))
            else:
                out.append(in_scope(item))
        return "\n\n".join(t.rstrip("\n") for t in out) + "\n"


# Whether a type is a built-in number (no header needed). A rewrite combines accumulators with +,
# shuffles and comparisons, which mean what the tiers read only for those, so it asserts the type
# of each: the compiler, not a spelling, decides (red team round 128: a class named uint8_t whose
# `++` saturates; a class whose `+=` does).
NUMBER_TYPES = ("char", "signed char", "unsigned char", "short", "unsigned short", "int", "unsigned int", "long",
                "unsigned long", "long long", "unsigned long long", "float", "double")
NUMBER_TYPE = ("template <class KlT> struct kl_number { static constexpr bool value = false; };\n"
               "template <class KlT> struct kl_number<const KlT> : kl_number<KlT> {};\n"
               + "\n".join(f"template <> struct kl_number<{t}> {{ static constexpr bool value = true; }};"
                           for t in NUMBER_TYPES)
               # the type a combine's library call takes a number as (_exact): int below int's width
               + "\ntemplate <class KlT> struct kl_lib { typedef KlT type; };\n"
               + "template <class KlT> struct kl_lib<const KlT> : kl_lib<KlT> {};\n"
               + "template <class KlT> struct kl_lib<volatile KlT> : kl_lib<KlT> {};\n"
               + "\n".join(f"template <> struct kl_lib<{t}> {{ typedef int type; }};"
                           for t in ("bool", "char", "signed char", "unsigned char", "short", "unsigned short")))


# An integer type's width and signedness, as the compiler knows them (0 bits: no built-in integer).
# A launch guard that evaluates a kernel's bound on the host in a type of its own choosing has the
# kernel assert that type (red team round 133: a spelling is no type).
_INTEGER_TYPES = ("char", "signed char", "unsigned char", "short", "unsigned short", "int", "unsigned int", "long",
                  "unsigned long", "long long", "unsigned long long")
INTEGER_TYPE = ("template <class KlT> struct kl_integer { static constexpr int bits = 0; "
                "static constexpr bool is_signed = false; };\n"
                "template <class KlT> struct kl_integer<const KlT> : kl_integer<KlT> {};\n"
                + "\n".join(f"template <> struct kl_integer<{t}> {{ static constexpr int bits = 8 * (int)sizeof({t}); "
                            f"static constexpr bool is_signed = ({t})-1 < ({t})0; }};" for t in _INTEGER_TYPES))


def integer_asserts(checks: Iterable[tuple[str, tuple[int, bool]]]) -> str:
    """Static assertions, for a kernel's body, that each type (as written there) is a built-in
    integer of the given (bits, signed)."""
    return " ".join(f'static_assert(::kl_integer<{t}>::bits == {bits} && ::kl_integer<{t}>::is_signed == '
                    f'{"true" if signed else "false"}, "kernelloop: {t} is a {bits}-bit '
                    f'{"signed" if signed else "unsigned"} integer");' for t, (bits, signed) in checks)


def number_asserts(names: Iterable[str]) -> str:
    """Static assertions, for a kernel's body, that each of NAMES is of a built-in number type."""
    return " ".join(f'static_assert(::kl_number<decltype({n})>::value, "kernelloop: {n} is a built-in number");'
                    for n in names)


# Whether two types are one (no header needed: the part may include none).
_SAME_TYPE = ("template <class KlA, class KlB> struct kl_same_type { static constexpr bool value = false; };\n"
              "template <class KlA> struct kl_same_type<KlA, KlA> { static constexpr bool value = true; };")


# Template arguments whose meaning is the same in every scope: built-in types spelled in keywords,
# names qualified from the global namespace (`::int64_t`), and integer or boolean literals.
_KEYWORD_TYPE = re.compile(r"(?:(?:const|volatile|signed|unsigned|char|short|int|long|float|double|bool|"
                           r"char8_t|char16_t|char32_t|wchar_t)\b\s*)+|(?:::\s*[A-Za-z_]\w*\s*)+")
_LITERAL_VALUE = re.compile(r"[+-]?\s*(?:0[xX][0-9a-fA-F']+|0[bB][01']+|\d[\d']*)[uUlLzZ]*|true|false")


def verified_instantiation(launcher: Launcher) -> str | None:
    """For a template launcher, the condition that holds for the instantiation its wrapper makes;
    raises NotARowKernel where there is none to tell (no wrapper, or arguments the tiers cannot
    match to the parameters); None for a plain launcher."""
    params = launcher.fn.sig.template
    if not params:
        return None
    if launcher.template_args is None:
        raise NotARowKernel(f"is launched by the template launcher {launcher.fn.name}, which the harness does not "
                            "reach through a wrapper naming its template arguments")
    args = split_top_level(launcher.template_args)
    if len(args) != len(params):
        raise NotARowKernel(f"is launched by {launcher.fn.name}<{launcher.template_args}>, whose template arguments "
                            "do not match its parameters one for one (defaults or packs)")
    for p, a in zip(params, args):
        # The wrapper's spelling is pasted into the launcher, where its own parameters, its
        # namespace and its locals may give a name another meaning (red team round 84: a file-scope
        # `typedef float scalar_t;` read inside `template <typename scalar_t>` made the condition
        # true for every instantiation). Only words no scope can redefine are pasted.
        if not (_KEYWORD_TYPE if p.kind == "type" else _LITERAL_VALUE).fullmatch(a):
            raise NotARowKernel(f"is launched by {launcher.fn.name}<{launcher.template_args}>, whose template "
                                f"argument {a!r} is a name the launcher's scope may read differently (give a "
                                "built-in type or a literal, e.g. --template-args float)")
    terms = [f"::kl_same_type<{p.name}, {a}>::value" if p.kind == "type" else f"(({p.name}) == ({a}))"
             for p, a in zip(params, args)]
    return " && ".join(terms)


_DEFINE_DIRECTIVE = re.compile(r"^[ \t]*#[ \t]*define\b.*$", re.M)


def launch_sites(part: EditablePart, harness: str, preamble: str = "") -> list[LaunchSite | tuple[str, str]]:
    """Every launch of a kernel of the editable part in the launchers the harness calls: a
    LaunchSite where the kernel's thread mapping may change, else (kernel name, why not)."""
    frozen = read_editable(preamble, "", []) if preamble.strip() else None
    program_constants = known_constants(preamble, *(item.text for item in part.items))
    # every function as the compiler reads it where it stands: the program's macros expanded
    expanded: dict[str, Function | str] = {}
    for fn in part.functions.values():
        at = next((k for k, item in enumerate(part.items) if item is fn.item), len(part.items))
        macros = program_macros(preamble, *(item.text for item in part.items[:at]),
                                later="\n".join(item.text for item in part.items[at + 1:]))
        expanded[fn.name] = expanded_function(fn, macros)
    readable = [f for f in expanded.values() if isinstance(f, Function)]
    frozen_read = [expanded_function(f, program_macros(preamble)) for f in (frozen.functions.values() if frozen else [])]
    frozen_helpers = [f for f in frozen_read if isinstance(f, Function)]
    # every definition of an overloaded name, read where it stands (a name with one that is not read is in none)
    overloaded = [f for fs in part.overloads.values() for f in fs] + \
        [f for fs in (frozen.overloads.values() if frozen else []) for f in fs]
    overloads = [(f.name, expanded_function(f, program_macros(preamble))) for f in overloaded]
    helpers = pure_helpers(readable + frozen_helpers + [f for _, f in overloads if isinstance(f, Function)],
                           unreadable=frozenset(name for name, f in overloads if not isinstance(f, Function)))
    harness_code = without_literals(harness)  # a message naming the kernel is no use of it
    defines = "\n".join(m.group(0) for m in _DEFINE_DIRECTIVE.finditer(preprocessed(preamble)))
    sites: list[LaunchSite | tuple[str, str]] = []
    for lau in part.launchers:
        for stmt in launches_in(lau.fn.body):
            launch = stmt.expr
            assert isinstance(launch, Launch)
            name = _launched_name(stmt)
            fn = part.functions.get(name)
            if fn is None and (unread := next((p for p in part.problems if p.startswith(f"{name}: ")), None)):
                sites.append((name, f"is not read ({unread[len(name) + 2:]})"))  # say why, not nothing
                continue
            if fn is None or not fn.is_kernel:
                continue
            why = shared_kernel(part, fn, lau.fn, harness_code)
            read = expanded.get(name, fn)
            if why is None and isinstance(read, str):
                why = read
            if why is None and len(launch.config) < 2:
                why = "is launched without a block size"
            verified = None
            if why is None:
                try:
                    verified = verified_instantiation(lau)
                except NotARowKernel as exc:
                    why = str(exc)
            sites.append((name, why) if why is not None else
                         LaunchSite(part, lau.fn, stmt, read, helpers, verified, program_constants,  # type: ignore[arg-type]
                                    source_item=fn.item, preamble_macros=defines))
    return sites


def tier_rewrites(part: EditablePart, harness: str, preamble: str, tier: str,
                  rewrites_of: Callable[[LaunchSite], list[Rewrite]]) -> tuple[list[Rewrite], list[str]]:
    """The rewrites REWRITES_OF makes for every launch, in the launchers the harness calls, of a
    kernel of the part; and one line per launched kernel the tier may not take (REWRITES_OF raises
    NotARowKernel), saying why."""
    rewrites: list[Rewrite] = []
    refused: list[str] = []
    taken: dict[tuple[str, str], list[tuple[LaunchSite, Rewrite | None]]] = {}
    for site in launch_sites(part, harness, preamble):
        if isinstance(site, tuple):
            refused.append(f"{tier} tier: kernel {site[0]} {site[1]}")
            continue
        try:
            made = rewrites_of(site)
        except NotARowKernel as exc:
            refused.append(f"{tier} tier: kernel {site.kernel.name} {exc}")
            made = []
        rewrites += made
        taken.setdefault((site.launcher.name, site.kernel.name), []).append((site, made[0] if len(made) == 1 else None))
    # A kernel launched at several places in one launcher (a dispatch on the index width or the batch
    # size): first the rewrite of every launch at once, then each alone
    joined: list[Rewrite] = []
    for group in taken.values():
        if len(group) < 2 or any(r is None or r.pieces is None for _, r in group):
            continue
        first, made = group[0]
        try:
            source = first.assemble_all([r.pieces for _, r in group])  # type: ignore[union-attr]
        except NotARowKernel:
            source = None
        if source is not None:
            assert made is not None
            joined.append(Rewrite(label=f"{made.label} (all {len(group)} launches)", source=source, kernel=made.kernel,
                                  launcher=made.launcher, detail=f"{made.detail}; each of its {len(group)} launches "
                                                                 "in the launcher is rewritten alike"))
    return joined + rewrites, refused


def loop_kinds(plan: RowPlan) -> str:
    """What each row loop of PLAN does, for a rewrite's detail: `reduce (max), map`."""
    return ", ".join(f"{lp.kind}" + (f" ({', '.join(sorted(set(lp.accumulators.values())))})"
                                     if lp.accumulators else "") for lp in plan.loops)


def row_warp_rewrites(part: EditablePart, harness: str, preamble: str = "") -> tuple[list[Rewrite], list[str]]:
    """A rewrite for every launch of a kernel the row tier may rewrite (tier_rewrites)."""
    def rewrites_of(site: LaunchSite) -> list[Rewrite]:
        name = site.kernel.name
        plan = plan_row_warp(site.kernel, site.helpers, site.constants, launch_block(site))
        stored, in_place = map_buffers(site.kernel, plan)
        apart = buffers_apart(site, stored, in_place)
        kernel_text = rewrite_kernel(site.kernel, plan)
        return [Rewrite(
            label=f"row tier: one warp per row of {name}",
            **site.beside(kernel_text, _launch_text(site.stmt, plan.block, [*apart, *long_rows(site, plan)])),
            kernel=name, launcher=site.launcher.name,
            detail=f"kernel {name} gives each thread one row; its {len(plan.loops)} row loop(s) ({loop_kinds(plan)}) are "
                   f"split across the 32 lanes of a warp, {plan.block} threads per block")]
    return tier_rewrites(part, harness, preamble, "row", rewrites_of)


def _launched_name(stmt: ExprStmt) -> str:
    assert isinstance(stmt.expr, Launch)
    return to_c(stmt.expr.kernel).split("::")[-1]


def launch_count(launcher: Function, kernel: str) -> int:
    """How many launch statements of KERNEL the launcher has."""
    return sum(1 for stmt in launches_in(launcher.body) if _launched_name(stmt) == kernel)


def shared_kernel(part: EditablePart, kernel: Function, launcher: Function, harness_code: str) -> str | None:
    """Why the kernel cannot change its thread mapping: someone else launches or names it."""
    pattern = re.compile(rf"(?<![\w.]){re.escape(kernel.name)}\b")
    if pattern.search(harness_code):
        return "is named by the harness too"
    for item in part.items:
        if item is kernel.item:
            continue
        count = len(pattern.findall(without_literals(item.text)))
        if item is launcher.item:
            # each launch a statement of its own (an int32/int64 dispatch: `if (fits) k<int><<<...>>>(...);
            # else k<int64_t><<<...>>>(...);`): the tiers that write a kernel beside the baseline's take
            # one launch at a time, the others launching the baseline's kernel as written
            if count != launch_count(launcher, kernel.name):
                return "is named in its launcher besides its launches"
        elif count:
            return "is used outside its launcher"
    return None
