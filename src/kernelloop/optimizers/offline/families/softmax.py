"""Row softmax: every load X[r*C + c] and store Y[r*C + c] walks a row in a loop over c < C,
and the stored value is exp(x - m) divided by (or times the reciprocal of) a sum accumulated
from exp(...) terms.

Roles: the loaded array is the input, the stored one the output, C (the row stride and loop
bound) the columns, the guard on r the rows. The max is not required (exp(x)/sum exp(x) is the
same function), but no other transformation of the stored value is accepted.
"""

from __future__ import annotations

from ..conditions import loop_bound, loop_start, upper_bound
from ..facts import Access, Binding, Context, KernelFacts
from ..launcher import Binder
from ..symbolic import Poly, split_thread
from ..syntax import Binary, Call, Expr, Num, call_name
from .coverage import covers_range, index_width
from .base import (
    Config,
    Match,
    Mismatch,
    ceil_div,
    is_coordinate,
    is_float_pointer,
    is_zero_literal,
    param_arrays,
    read_target,
    role_texts,
    strip_casts,
    unreadable_access,
)

NAME = "softmax"
ROLES = ("in", "out", "rows", "cols")
INT_ROLES = ("rows", "cols")
_EXP = ("expf", "__expf", "exp")
BLOCK_THREADS = [256, 128, 512]  # 256: the exemplar (13.5x on an H200)
ONLINE = [(8, 4), (4, 4), (8, 8), (4, 8)]  # (WARPS, BLOCKS_PER_SM); (8, 4): the exemplar (9.3x)
_PRIOR_BLOCK = 13.5
_PRIOR_ONLINE = 9.3


def _row_walk(f: KernelFacts, a: Access) -> tuple[tuple[str, ...], Poly] | None:
    """(stride monomial, row coordinate) when `a` is at row*C + c with c a loop over [0|1, C)."""
    if a.offset is None or not a.ctx.loops:
        return None
    groups = split_thread(a.offset)
    loop = a.ctx.loops[-1]
    katom = f"L:{loop.var}" if loop.var else None
    if katom is None or groups.get((katom,)) != Poly.const(1) or len(groups) != 2:
        return None
    (key,) = [k for k in groups if k != (katom,)]
    row = groups[key]
    if not key or not is_coordinate(row) or any(a_.startswith("L:") for a_ in key):
        return None
    start = loop_start(f, loop)
    if not loop.unit_step or start is None or not start.is_const or start.const_value not in (0, 1):
        return None
    if loop_bound(f, loop) != Poly(((key, 1),)):
        return None
    return key, row


def _row_start(a: Access) -> tuple[tuple[str, ...], Poly] | None:
    """(stride monomial, row coordinate) for a load of the row's first element, x[0]."""
    if a.offset is None:
        return None
    groups = split_thread(a.offset)
    if len(groups) != 1:
        return None
    ((key, row),) = groups.items()
    if not key or not is_coordinate(row) or any(x.startswith("L:") for x in key):
        return None
    return key, row


def _exp_term(f: KernelFacts, e: Expr, src: Binding) -> tuple[Poly, Expr | None] | None:
    """(load offset, subtracted value) when `e` is exp(src[...] - m) or exp(src[...])."""
    e = strip_casts(f.resolve(e))
    if not (isinstance(e, Call) and call_name(e) in _EXP and len(e.args) == 1):
        return None
    arg, sub = strip_casts(e.args[0]), None
    if isinstance(arg, Binary) and arg.op == "-":
        arg, sub = strip_casts(arg.left), f.resolve(arg.right)
    t = read_target(f, arg)
    return (t[1], sub) if t is not None and t[0] is src else None


def _walks_from_zero(f: KernelFacts, offset: Poly, ctx: Context) -> bool:
    """The offset steps with the innermost loop, which starts at 0 by ones."""
    if not ctx.loops:
        return False
    loop = ctx.loops[-1]
    start = loop_start(f, loop)
    return bool(loop.var) and loop.unit_step and start is not None and start.is_const and \
        start.const_value == 0 and offset.coefficient((f"L:{loop.var}",)) == 1


def _sum_of_exps(f: KernelFacts, s: Binding, src: Binding, store: Access, sub: Expr | None) -> bool:
    """s starts at 0 and, unconditionally, adds exp(x - m) with the store's m for every element:
    one value m, unchanged from the sum to the store (red team round 107: `m += 1` between)."""
    conds = store.ctx.conds
    assigns = [a for a in f.assigns if a.binding is s]
    updates = [a for a in assigns if a.op != "decl"]
    if s.param is not None or len(assigns) - len(updates) != 1 or len(updates) != 1:
        return False
    (init,) = [a for a in assigns if a.op == "decl"]
    if init.value is None or not is_zero_literal(init.value):
        return False
    a = updates[0]
    if a.value is None or a.ctx.conds != conds:
        return False
    term: Expr | None = None
    if a.op == "+=":
        term = a.value
    elif a.op == "=":
        v = strip_casts(f.resolve(a.value))
        if isinstance(v, Binary) and v.op == "+":
            if f.binding(strip_casts(v.left)) is s:
                term = v.right
            elif f.binding(strip_casts(v.right)) is s:
                term = v.left
    found = _exp_term(f, term, src) if term is not None else None
    if found is None or not _walks_from_zero(f, found[0], a.ctx):
        return False
    if found[1] is None or sub is None:
        return found[1] is None and sub is None
    return f.same_value(found[1], sub, a, store)


def _normalized_exp(f: KernelFacts, store: Access, src: Binding) -> bool:
    """The store writes exp(x - m) / s, or exp(x - m) * (1 / s), with s the sum of exp(x - m)."""
    assert store.value is not None
    v = strip_casts(f.resolve(store.value))
    if not isinstance(v, Binary):
        return False
    pairs: list[tuple[Expr, Expr]] = []
    if v.op == "/":
        pairs.append((v.left, v.right))
    elif v.op == "*":
        for e, inv in ((v.left, v.right), (v.right, v.left)):
            inv = strip_casts(f.resolve(inv))
            if isinstance(inv, Binary) and inv.op == "/" and isinstance(strip_casts(inv.left), Num) and \
                    strip_casts(inv.left).value == 1:
                pairs.append((e, inv.right))
    for e, denominator in pairs:
        term = _exp_term(f, e, src)
        s = f.binding(strip_casts(denominator))
        if term is not None and s is not None and _sum_of_exps(f, s, src, store, term[1]):
            return True
    return False


def match(f: KernelFacts, binder: Binder) -> Match | Mismatch:
    def no(reason: str) -> Mismatch:
        return Mismatch(NAME, reason)

    if (why := unreadable_access(f)) is not None:
        return no(why)
    if any(a.kind == "atomic" for a in f.accesses):
        return no("uses atomics")
    reads, stores = param_arrays(f, "read"), param_arrays(f, "store")
    if not reads or not stores:
        return no("expects loads of a row and stores of a row")
    X, Y = reads[0].array, stores[0].array
    if any(a.array is not X for a in reads) or any(a.array is not Y for a in stores) or X is Y:
        return no("expects loads from one array and stores to another")
    walks = [_row_walk(f, a) or (_row_start(a) if a.kind == "read" else None) for a in reads + stores]
    if any(w is None for w in walks):
        return no("not every access walks a row (row*C + c in a loop over c < C)")
    if len({w for w in walks}) != 1:  # type: ignore[misc]
        return no("accesses walk different rows or strides")
    key, row = walks[0]  # type: ignore[misc]
    cols = Poly(((key, 1),))
    assert X is not None and Y is not None
    if any(s.op != "=" or s.value is None or not _normalized_exp(f, s, X) for s in stores):
        return no("the stored value is not exp(x - max) / sum of exp")
    if any(s.offset is None or not _walks_from_zero(f, s.offset, s.ctx) for s in stores):
        return no("the stores do not cover the row from column 0")
    rows = upper_bound(f, stores[0].ctx, row)
    if rows is None:
        return no("no guard row < rows")
    if not (is_float_pointer(X) and is_float_pointer(Y, writable=True)):
        return no("not fp32 arrays")
    # the template writes every row below rows: so must the baseline, at every size
    reach = covers_range(f, binder, stores, [(row, rows)])  # the max may be taken under any test
    exact = index_width(f, binder, reads + stores, [rows * cols])
    if isinstance(reach, str) or isinstance(exact, str):
        return no(reach if isinstance(reach, str) else str(exact))
    mapped = role_texts(binder, {"in": X, "out": Y}, {"rows": rows, "cols": cols})
    if isinstance(mapped, str):
        return no(mapped)
    roles, described = mapped
    return Match(NAME, f.sig.name, binder.launcher, roles, described, {},
                 detail=f"{Y.name}[r][c] = exp({X.name}[r][c] - max) / sum (rows={rows}, cols={cols})",
                 polys={"rows": rows, "cols": cols}, conditions=reach.divides + exact)


def configs(m: Match, sms: int) -> list[Config]:
    rows, cols = m.sizes.get("rows"), m.sizes.get("cols")
    out: list[Config] = []
    tags = frozenset({"parallelism", "coalescing", "warp-reduction", "vectorized"})
    for t in BLOCK_THREADS:
        prior = _PRIOR_BLOCK
        if cols:
            units = cols // 4 if cols % 4 == 0 else cols
            per = ceil_div(units, t)
            if per > 8:
                prior *= 0.6  # the three-pass fallback re-reads the row
            else:
                prior *= (units / (per * t)) ** 0.5  # idle lanes in the last chunk
        out.append(Config(
            template="softmax_block_per_row", technique="block per row", params=(("THREADS", str(t)),),
            threads=t, smem_bytes=128, min_registers=24, blocks=rows, prior=prior, tags=tags,
            best_known=t == 256))
    for warps, bps in ONLINE:
        blocks = None if rows is None else min(ceil_div(rows, warps), bps * sms)
        out.append(Config(
            template="softmax_online", technique="online softmax",
            params=(("WARPS", str(warps)), ("BLOCKS_PER_SM", str(bps))), threads=32 * warps, smem_bytes=0,
            min_registers=32, blocks=blocks, prior=_PRIOR_ONLINE, best_known=(warps, bps) == (8, 4),
            tags=frozenset({"parallelism", "coalescing", "warp-reduction", "single-pass"})))
    return out
