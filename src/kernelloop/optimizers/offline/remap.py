"""The remap tier: a kernel that gives each thread one element of a two-dimensional array, and
finds the element from its thread index by a division and a remainder in the order that puts
neighbouring threads a row apart, gets the other order.

`c = idx / rows; r = idx % rows; out[r * cols + c] = ...`: consecutive threads take consecutive
`r`, so every warp's loads and stores touch 32 elements `cols` apart, one memory sector each (a
column-first split, often written so a block shares one per-column value). Swapped, `r = idx /
cols; c = idx % cols` names the same elements, each still one thread's, and neighbouring
threads take neighbouring elements: every access coalesces. The pieces keep their names, so the
rest of the kernel is untouched.

Taken only where that keeps the kernel's meaning: the threads are independent (the thread
index is used only through the division and the remainder, no other CUDA built-in, no shared
memory, barriers or atomics, only side-effect-free calls); no index at or past the product of
the two extents does any work (`if (idx >= rows * cols) return;` before the split, or the whole
work wrapped in a last `if (idx < rows * cols) { ... }`); the two pieces are declared once from
that index and never assigned; and some access moves by one element with the quotient and by
more with the remainder (the split is column-first). Then idx -> (idx / X, idx % X) and
idx -> (idx % Y, idx / Y) are two bijections from [0, X*Y) onto the same pairs. The verifier
still decides whether the result is the same and faster.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ...program.scanner import strip_comments
from .facts import KernelFacts, collect_facts
from .launcher import EditablePart, Function, grid_reaches
from .rowwarp import (
    ItemPlanner,
    LaunchBlock,
    LaunchSite,
    NotARowKernel,
    Rewrite,
    apply_edits,
    launch_block,
    launch_count,
    tier_rewrites,
)
from .symbolic import Poly, is_uniform
from .syntax import Binary, Block, Cast, Decl, Expr, If, Launch, Name, Return, to_c


@dataclass
class RemapPlan:
    quotient: Decl  # `c = idx / X` (through casts)
    remainder: Decl  # `r = idx % X`
    index: str  # the thread index's name
    divisor: Expr  # X
    other: Expr  # Y: the guard's bound is X * Y
    bound: Expr  # the guard's bound as written


def _early_return(s) -> bool:
    return isinstance(s, Return) or (isinstance(s, Block) and len(s.body) == 1 and isinstance(s.body[0], Return))


class RemapPlanner:
    def __init__(self, fn: Function, facts: KernelFacts, helpers: frozenset[str], block: LaunchBlock = None) -> None:
        self.fn, self.f, self.helpers = fn, facts, helpers
        self.block = block  # the launch's block (rowwarp.launch_block): the tier keeps the launch as written

    @staticmethod
    def fail(why: str):
        raise NotARowKernel(why)

    def guarded_body(self, index_name: str) -> tuple[tuple, Expr | None]:
        """The statements the split sits among and, when they are the body of a wrapping guard
        `if (idx < B) { ... }` (or `B > idx`) that is the kernel's last statement, its bound."""
        top = self.fn.body.body
        last = top[-1] if top else None
        if isinstance(last, If) and last.other is None and isinstance(last.then, Block):
            c = self.f.without_kept_casts(last.cond)
            if isinstance(c, Binary) and c.op == "<" and self.f.without_kept_casts(c.left) == Name(index_name):
                return last.then.body, c.right
            if isinstance(c, Binary) and c.op == ">" and self.f.without_kept_casts(c.right) == Name(index_name):
                return last.then.body, c.left
        return top, None

    def pieces(self, statements: tuple, index_name: str) -> tuple[Decl, Decl]:
        """The declarations `q = idx / X` and `r = idx % X` among STATEMENTS."""
        found: dict[str, Decl] = {}
        for s in statements:
            if not isinstance(s, Decl) or len(s.declarators) != 1:
                continue
            init = self.f.without_kept_casts(s.declarators[0].init)
            if isinstance(init, Binary) and init.op in ("/", "%") and self.f.without_kept_casts(init.left) == Name(index_name):
                if init.op in found:
                    self.fail(f"splits its thread index with more than one '{init.op}'")
                found[init.op] = s
        if set(found) != {"/", "%"}:
            self.fail("does not split its thread index into a quotient and a remainder")
        q, r = found["/"], found["%"]
        divisors = [self.f.without_kept_casts(d.declarators[0].init).right for d in (q, r)]  # type: ignore[union-attr]
        if to_c(divisors[0]) != to_c(divisors[1]):
            self.fail("divides its thread index by one value and takes the remainder by another")
        for d in (q, r):
            b = self.f.declared.get(id(d.declarators[0]))
            if b is None or b.assignments or d.declarators[0].pointer or d.declarators[0].array:
                self.fail(f"assigns {d.declarators[0].name} after its declaration")
        return q, r

    def guard_bound(self, index_name: str, before: int) -> Expr:
        """The bound of `if (idx >= B) return;` (or `B <= idx`), among the statements before `before`."""
        for s in self.fn.body.body:
            if s.span[0] >= before:  # type: ignore[attr-defined]
                break
            if isinstance(s, If) and s.other is None and _early_return(s.then):
                c = self.f.without_kept_casts(s.cond)
                if isinstance(c, Binary) and c.op == ">=" and self.f.without_kept_casts(c.left) == Name(index_name):
                    return c.right
                if isinstance(c, Binary) and c.op == "<=" and self.f.without_kept_casts(c.right) == Name(index_name):
                    return c.left
        self.fail("has no guard for every index past its elements (if (idx >= rows * cols) return; or a "
                  "last if (idx < rows * cols) { ... })")
        raise AssertionError

    def other_extent(self, bound: Expr, divisor: Expr) -> Expr:
        """Y where the bound is X * Y (either order) and X is the divisor."""
        b = self.f.without_kept_casts(bound)
        if not isinstance(b, Binary) or b.op != "*":
            self.fail(f"bounds its index by {to_c(bound)}, not a product of two extents")
        x = self.f.poly(divisor)
        for mine, other in ((b.left, b.right), (b.right, b.left)):
            if x is not None and self.f.poly(mine) == x:
                return other
        self.fail(f"bounds its index by {to_c(bound)}, which is not {to_c(divisor)} times an extent")
        raise AssertionError

    def digit(self, e: Expr, index: Poly) -> tuple[Poly, Poly | None] | None:
        """(D, K) where E computes a digit of the thread index (the polynomial INDEX) in a mixed radix,
        floor((idx mod K) / D) (K None: no remainder), with D and K uniform: `idx % K`, `idx / D`,
        `(idx / D) % M` (K = D * M), `(idx % K) / D` and `(idx % K) % M` (M dividing K), through locals and value-keeping casts; None
        for anything else. The transpose tier reads its (batch, row, col) split with it."""
        e = self.f.without_kept_casts(self.f.resolve(e))
        if not isinstance(e, Binary) or e.op not in ("/", "%"):
            return None
        right = self.f.poly(e.right)
        if right is None or not is_uniform(right) or right.is_zero:
            return None
        if self.f.poly(e.left) == index:
            return (Poly.const(1), right) if e.op == "%" else (right, None)
        inner = self.digit(e.left, index)
        if inner is None:
            return None
        d, k = inner
        if e.op == "%" and k is None:
            return d, d * right
        if e.op == "/" and d == Poly.const(1):
            return right, k
        if e.op == "%" and d == Poly.const(1) and k is not None and _divides(right, k):
            return d, right  # (idx % (R * C)) % C
        return None

    def column_first(self, q: Decl, r: Decl) -> bool:
        """Some access moves one element with the quotient and a row (or any stride but one) with
        the remainder: the split puts neighbouring threads a row apart."""
        q_atom, r_atom = (self._atom(d) for d in (q, r))
        for a in self.f.accesses:
            if a.offset is None:
                continue
            unit_q = any(m == (q_atom,) and abs(coef) == 1 for m, coef in a.offset.terms)
            strided_r = any(r_atom in m and (len(m) > 1 or abs(coef) != 1) for m, coef in a.offset.terms)
            if unit_q and strided_r:
                return True
        return False

    def _atom(self, d: Decl) -> str:
        p = self.f.poly(self.f.without_kept_casts(d.declarators[0].init))  # type: ignore[arg-type]
        if p is None or len(p.terms) != 1 or len(p.terms[0][0]) != 1:
            self.fail(f"splits its index into {d.declarators[0].name}, which cannot be followed")
        return p.terms[0][0][0]  # type: ignore[union-attr]

    def plan(self) -> RemapPlan:
        items = ItemPlanner(self.fn, self.f, self.helpers, self.block)
        index, name = items.find_index()
        items.independent_threads(index, local_arrays=True)
        statements, wrapping_bound = self.guarded_body(name)
        q, r = self.pieces(statements, name)
        divisor = self.f.without_kept_casts(q.declarators[0].init).right  # type: ignore[union-attr]
        bound = wrapping_bound if wrapping_bound is not None else self.guard_bound(name, min(q.span[0], r.span[0]))
        other = self.other_extent(bound, divisor)
        uses = len(_index_uses(self.fn, name))
        if uses != 4:  # its declaration, the guard and the two pieces
            self.fail(f"uses its thread index {name} {uses - 4} more time(s) besides the split")
        if not self.column_first(q, r):
            self.fail("already gives neighbouring threads neighbouring elements (its split is row-first)")
        return RemapPlan(q, r, name, divisor, other, bound)


def _divides(d: Poly, p: Poly) -> bool:
    """Whether the one monomial D divides every term of P (C divides R * C)."""
    if len(d.terms) != 1:
        return False
    (dm, dc), = d.terms
    return dc != 0 and all(c % dc == 0 and all(m.count(a) >= dm.count(a) for a in dm) for m, c in p.terms)


def _index_uses(fn: Function, name: str) -> list[int]:
    body = strip_comments(fn.item.text[len(fn.head):])
    return [m.start() for m in re.finditer(rf"(?<![\w.]){re.escape(name)}\b", body)]


def launch_covers(site: LaunchSite, plan: RemapPlan, bound: Expr) -> bool:
    """Whether the launch starts at least BOUND threads along x (the kernel's guard, in its
    parameters): grid_reaches. The swap keeps the elements only if every index below the bound
    runs (red team round 80: a launch of fewer threads updates a prefix of the elements, another one
    after the swap)."""
    lau = next((x for x in site.part.launchers if x.fn is site.launcher), None)
    launch = site.stmt.expr
    if lau is None or not isinstance(launch, Launch):
        return False
    return grid_reaches(lau.facts, launch, site.kernel.sig.params, bound)


def plan_remap(fn: Function, helpers: frozenset[str] = frozenset(), constants: dict[str, int] | None = None,
               launch: LaunchBlock = None) -> RemapPlan:
    if not fn.is_kernel:
        raise NotARowKernel("is not a kernel")
    return RemapPlanner(fn, collect_facts(fn.sig, fn.body, constants), helpers, launch).plan()


def rewrite_kernel(fn: Function, plan: RemapPlan) -> str:
    """The kernel with its two pieces swapped: q = idx % Y, r = idx / Y."""
    body = fn.item.text[len(fn.head):]
    edits = []
    for decl, op in ((plan.quotient, "%"), (plan.remainder, "/")):
        d = decl.declarators[0]
        start, end = decl.span
        text = body[start:end]
        head = text[:text.index("=")].rstrip()
        cast = f"({d.init.type})" if isinstance(d.init, Cast) else ""  # type: ignore[union-attr]
        edits.append((start, end, f"{head} = {cast}({plan.index} {op} ({to_c(plan.other)}));"
                                  f"  // kernelloop remap tier: neighbouring threads, neighbouring elements"))
    return fn.head + apply_edits(body, edits)


def remap_rewrites(part: EditablePart, harness: str, preamble: str = "") -> tuple[list[Rewrite], list[str]]:
    """A rewrite for every launch of a kernel whose column-first split the remap tier may swap
    (tier_rewrites)."""
    def rewrites_of(site: LaunchSite) -> list[Rewrite]:
        name = site.kernel.name
        if launch_count(site.launcher, name) != 1:  # the kernel changes in place: every launch would take it
            raise NotARowKernel("is launched more than once (the remap tier changes the kernel in place)")
        plan = plan_remap(site.kernel, site.helpers, site.constants, launch_block(site))
        if not launch_covers(site, plan, plan.bound):
            raise NotARowKernel(f"is launched with a grid not shown to cover its guard's {to_c(plan.bound)} threads "
                                "(grid * block, or its ceiling division by the block)")
        kernel_text = rewrite_kernel(site.kernel, plan)
        body = site.launcher.item.text[len(site.launcher.head):]
        start, end = site.stmt.span
        q, r = plan.quotient.declarators[0].name, plan.remainder.declarators[0].name
        x, y = to_c(plan.divisor), to_c(plan.other)
        return [Rewrite(
            label=f"remap tier: {name} split row-first",
            source=site.assemble(kernel_text, body[start:end]),
            kernel=name, launcher=site.launcher.name,
            detail=f"kernel {name} split its thread index column-first ({q} = {plan.index} / {x}, {r} = "
                   f"{plan.index} % {x}), so neighbouring threads touched elements a row apart; {r} = "
                   f"{plan.index} / {y}, {q} = {plan.index} % {y} gives the same elements, neighbouring threads "
                   "on neighbouring ones")]
    return tier_rewrites(part, harness, preamble, "remap", rewrites_of)
