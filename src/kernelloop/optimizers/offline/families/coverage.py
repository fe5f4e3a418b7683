"""Which elements the baseline computes, against the template's: exactly every coordinate below
its bound, at every size.

A template computes every element below the sizes the family reads (every i < n, every row <
rows and col < cols). The baseline must be shown to do the same at every size, not only at the
two the harness runs:

- each condition its accesses run under says only `coord < bound` for the family's coordinates:
  a second bound (`row < rows && row < 32768`), a mask, a flag or a bit test (`(i >> 29) == 0`)
  selects part of the range (red team rounds 45, 111, 112);
- its launch reaches every coordinate below the bound, along the coordinate's own direction: a
  grid capped by a ternary or a constant covers a prefix (rounds 103, 111, 112). A grid that
  divides rounding down (`rows / TILE`, cuda-samples' transpose) covers all only where the tile
  divides the size: the candidate then asks that at run time and launches the baseline otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..conditions import exact_literals, loop_bound, loop_start, loop_step, upper_bound_from
from ..facts import Access, KernelFacts
from ..launcher import Binder, extent_reaches, launch_extent
from ..symbolic import Poly, is_uniform
from ..syntax import Binary, Call, Cast, Expr, Index, Unary, walk_expr


def says_only_bounds(f: KernelFacts, cond: Expr, holds: bool, bounds: list[tuple[Poly, Poly]]) -> bool:
    """Whether a condition (where it evaluates to `holds`) says nothing but `coord < bound` for some
    of the (coordinate, bound) pairs: every comparison in it is one of them, nothing else in it."""
    lits = exact_literals(f, cond, holds)
    return bool(lits) and all(any(upper_bound_from([lit], coord) == bound for coord, bound in bounds)
                              for lit in lits)  # type: ignore[union-attr]


def selects_part(f: KernelFacts, accesses: list[Access], bounds: list[tuple[Poly, Poly]]) -> str | None:
    """Why some access runs under a condition that says more than the bounds, or None."""
    for a in accesses:
        for c in a.ctx.conds:
            if not says_only_bounds(f, c.expr, c.holds, bounds):
                return "computes only the elements a condition selects (a mask, a flag or a second bound)"
    return None


@dataclass
class Reach:
    """What the launch is shown to cover: everything, or everything where `divides` hold at run
    time (C conditions in the launcher's scope)."""

    divides: list[str] = field(default_factory=list)


def _direction(coord: Poly) -> str | None:
    found = {a[-1] for a in coord.atoms() if a.startswith(("blockIdx.", "threadIdx."))}
    return found.pop() if len(found) == 1 else None


def launch_reaches(f: KernelFacts, binder: Binder, coord: Poly, bound: Poly) -> Reach | str:
    """Whether the baseline's launch runs every value of a thread coordinate below `bound` (both in
    the kernel's terms): coord = blockIdx.d * P + threadIdx.d (a block of P threads along d), or
    blockIdx.d * P + threadIdx.d + j with j = 0, U, 2U, ... < P (a block of U threads, each taking
    a few values; cuda-samples' transpose), or blockIdx.d (a block per value); and a grid of
    ceil(bound / P) blocks along d (or bound / P, rounding down, where P divides bound)."""
    lau = binder.launcher
    launch = lau.launch
    config = lau.config_read or (launch.config if launch is not None else ())
    d = _direction(coord)
    if launch is None or len(config) < 2 or d is None:
        return "is launched with a grid not shown to reach every element"
    # the program's constants (`#define TILE_DIM 32`), as the kernel reads them, in the launcher too
    known = {f"g:{name}": Poly.const(v) for name, v in f.constants.items() if isinstance(v, int)}

    def launcher_poly(p: Poly) -> Poly | None:
        q = binder.launcher_poly(p)
        return None if q is None else q.substitute(known)

    block_atom, thread_atom, dim_atom = f"blockIdx.{d}", f"threadIdx.{d}", f"blockDim.{d}"
    kernel_p = Poly._from({tuple(a for a in m if a != block_atom): c for m, c in coord.terms if block_atom in m})
    rest = coord - Poly.atom(block_atom) * kernel_p
    launcher_block = lau.facts.poly(launch_extent(lau.facts, config[1], d))
    launcher_block = None if launcher_block is None else launcher_block.substitute(known)
    # P, the coordinate's step per block, in the launcher's values
    per_block = launcher_block if kernel_p == Poly.atom(dim_atom) else \
        launcher_poly(kernel_p) if is_uniform(kernel_p) else None
    if launcher_block is None or per_block is None:
        return "is launched with a grid not shown to reach every element"
    thread = Poly.atom(thread_atom)
    if rest.is_zero:
        if per_block != Poly.const(1):  # a block per value: blockIdx.d alone
            return "steps its coordinate by more than one per block"
    elif rest == thread:
        if launcher_block != per_block:
            return "is launched with blocks whose size is not the coordinate's step per block"
    else:
        counters = [a for a in (rest - thread).atoms()]
        loop = next((lp for lp in f.loops if len(counters) == 1 and lp.var and counters[0] == f"L:{lp.var}"), None)
        if loop is None or rest - thread != Poly.atom(counters[0]):
            return "reads a coordinate not of the form blockIdx * P + threadIdx (+ a loop over the block's rows)"
        start, stop, step = loop_start(f, loop), loop_bound(f, loop), loop_step(f, loop)
        if start is None or not start.is_zero or stop is None or step is None or stop != kernel_p:
            return "steps its coordinate with a loop that does not cover the block's rows from 0"
        if (launcher_block if step == Poly.atom(dim_atom) else launcher_poly(step)) != launcher_block:
            return "steps its coordinate with a loop whose step is not the block's size"
    total = launcher_poly(bound)
    if total is None:
        return "is launched with a grid not shown to reach every element"
    reach = extent_reaches(lau.facts, config[0], d, per_block, total, known)
    if reach == "always":
        return Reach()
    if reach == "when it divides":
        bound_text = binder.int_text(bound)
        if bound_text is not None and per_block.is_const and per_block.const_value > 0:
            return Reach([f"({bound_text}) % {per_block.const_value} == 0"])
        step_text = binder.int_text(kernel_p) if is_uniform(kernel_p) else None
        if bound_text is not None and step_text is not None:
            return Reach([f"({step_text}) > 0 && ({bound_text}) % ({step_text}) == 0"])
    return ("is launched with a grid not shown to reach every element (along " + d + ": grid * block == bound, "
            "or grid == (bound + block - 1) / block)")


def covers_range(f: KernelFacts, binder: Binder, accesses: list[Access],
                 bounds: list[tuple[Poly, Poly]]) -> Reach | str:
    """Both halves: the accesses run under nothing but the bounds, and the launch reaches every
    coordinate below them."""
    if (why := selects_part(f, accesses, bounds)) is not None:
        return why
    reach = Reach()
    for coord, bound in bounds:
        got = launch_reaches(f, binder, coord, bound)
        if isinstance(got, str):
            return got
        reach.divides += got.divides
    return reach


# The largest element count a 32-bit signed index reaches without wrapping.
_INT32_ELEMENTS = 2**31 - 1


def _index_parts(f: KernelFacts, e: Expr, depth: int = 0):
    """The integer expressions an access's address is computed from: `x[i]`'s i, and the offsets
    of pointer arithmetic behind its base (`x = in + row * cols`)."""
    if depth > 16:
        return
    e = f.resolve(e)
    while isinstance(e, Cast):
        e = e.operand
    if isinstance(e, Index):
        yield e.index
        yield from _index_parts(f, e.base, depth + 1)
    elif isinstance(e, Unary) and e.op in ("*", "&"):
        yield from _index_parts(f, e.operand, depth + 1)
    elif isinstance(e, Call) and e.args:
        yield from _index_parts(f, e.args[0], depth + 1)
    elif isinstance(e, Binary) and e.op in ("+", "-"):
        for side in (e.left, e.right):
            if f.poly(side) is None:
                yield from _index_parts(f, side, depth + 1)  # the pointer
            else:
                yield side


def _thread_coordinate(f: KernelFacts, e: Expr) -> bool:
    """Arithmetic of the built-ins alone (`blockIdx.y * blockDim.y + threadIdx.y`): at most the
    launch's extent, which the coverage proof ties to the sizes, so it cannot wrap in 32 bits."""
    p = f.poly(e)
    if p is None or not p.atoms():
        return False
    directions = {a[-1] for a in p.atoms()}
    # one direction's coordinate (blockIdx.d * blockDim.d + threadIdx.d): a grid's worth of threads
    # along d; a product with gridDim or across directions (a flattened index) may reach past 2^31
    return len(directions) == 1 and all(a.startswith(("blockIdx.", "blockDim.", "threadIdx.")) for a in p.atoms()) \
        and all(len(m) <= 2 for m, _ in p.terms)


def index_width(f: KernelFacts, binder: Binder, accesses: list[Access], extents: list[Poly]) -> list[str] | str:
    """Run-time conditions under which the baseline's index arithmetic is exact. A template indexes
    in 64 bits; a baseline that computes an address in 32 bits (`int idx = row * cols + col`) wraps
    past 2^31 elements, inside the templates' size range: a signed wrap is undefined, an unsigned one
    another element. There the candidate launches the baseline (red team round 113 (f): a stencil
    exact to 46340 x 46340, wrapping at 50000 x 50000). EXTENTS: the element counts the accesses
    reach, in the kernel's terms."""
    narrow = False
    for a in accesses:
        for part in _index_parts(f, a.node):
            # every step of the arithmetic, not only the outermost type: `(size_t)(row * cols + col)`
            # multiplies in int before it widens (red team round 115)
            for step in walk_expr(f.resolve(part)):
                if (step is part or isinstance(step, Binary) and step.op in ("+", "-", "*", "<<")) \
                        and not _thread_coordinate(f, step):
                    kind = f.integer_kind(step)
                    narrow = narrow or kind is None or kind[0] < 64
    if not narrow:
        return []
    out: list[str] = []
    for extent in extents:
        terms = []
        for monomial, coef in extent.terms:  # each factor widened before it is multiplied
            factors = [binder.int_text(Poly.atom(a)) for a in monomial]
            if any(t is None for t in factors):
                return "indexes in 32 bits with sizes the candidate cannot bound"
            terms.append(" * ".join([*([f"{coef}LL"] if coef != 1 else []), *(f"(long long)({t})" for t in factors)]))
        out.append(f"{' + '.join(terms)} <= {_INT32_ELEMENTS}LL")
    return list(dict.fromkeys(out))
