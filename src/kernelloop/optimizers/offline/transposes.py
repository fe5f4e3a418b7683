"""The transpose tier: a kernel that gives each thread one element of a [batch,] rows x cols
array, finds it from a one-dimensional thread index split by `/` and `%` into (batch, row, col),
and stores an elementwise function of that one element at the transposed place
(`out[(b * cols + c) * rows + r] = alpha * in[linear]`, PyTorch-extension style, or with the
split over the output's coordinates, `out[linear] = in[(b * rows + r) * cols + c]`), gets a copy
that stages 32 x 32 tiles of each batch slice in shared memory: reads and writes coalesce.

Read (remap.py's reading of the split: its thread index, its guard, RemapPlanner.digit): the
index `blockIdx.x * blockDim.x + threadIdx.x` guarded by `if (idx >= N) return;` (or the whole
work inside `if (idx < N)`), locals that are digits of it (idx % Q, (idx / Q) % P, idx / (P * Q)),
N = B * P * Q, one load and one plain store, one of them at idx (or b*P*Q + p*Q + q) and the other
at b*P*Q + q*P + p: a permutation that swaps the two innermost axes. The stored value is any
expression of the one loaded element and of values every thread shares (families/base.
elementwise_value), written out as the kernel wrote it, in its own types. The kernel's signature
(its template header, its element type, its scalar types) stays; its body becomes the tiled
transpose, each element guarded, indexed in 64 bits; launched on a grid of one block per 1024 of
the baseline's threads (a grid-stride loop over the tiles covers every size) under the launch
checks of every tier (LaunchSite.beside).

Refused, with one line: a value that reads another element or array, names the thread's
coordinates (a row index, the thread index) or a non-uniform local; an index that is not such a
permutation (not a swap of the two innermost axes); loops, shared memory, atomics, barriers, any
other statement; a launch not shown to start every thread below the guard (grid_reaches). Where
the baseline indexes in fewer than 64 bits the rewrite runs only while B * P * Q < 2^31 (beyond,
the baseline's own launch). The 2-D spelling (row and column from a 2-D grid) is the transpose
family's (families/transpose.py). The verifier decides whether the result is the same and faster.
"""

from __future__ import annotations

from dataclasses import dataclass

from .facts import Binding, KernelFacts, collect_facts
from .families.base import elementwise_value, param_arrays
from .launch_guard import BaselineLaunch
from .launcher import EditablePart
from .remap import RemapPlanner, launch_covers
from .rowwarp import ItemPlanner, LaunchSite, NotARowKernel, Rewrite, launch_block, tier_rewrites
from .symbolic import Poly
from .syntax import Assign, Binary, Block, Decl, Empty, Expr, ExprStmt, If, Name, Return, to_c

TILE = 32
ROWS_PER_PASS = 8
_INT32_ELEMENTS = 2**31 - 1


@dataclass
class TransposePlan:
    src: Binding  # read: batch x rows x cols
    dst: Binding  # written: batch x cols x rows
    batch: Poly
    rows: Poly
    cols: Poly
    value: str  # the stored value, over the tile's element
    bound: Poly  # the guard's N
    narrow: bool  # the baseline indexes in fewer than 64 bits
    split: str  # one line: the split as read


def _fail(why: str):
    raise NotARowKernel(why)


def _quotient(p: Poly, d: Poly) -> Poly | None:
    """P / D where D is one monomial dividing every term of P; None otherwise."""
    if len(d.terms) != 1:
        return None
    (dm, dc), = d.terms
    out: dict[tuple[str, ...], int] = {}
    for m, c in p.terms:
        rest = list(m)
        for a in dm:
            if a not in rest:
                return None
            rest.remove(a)
        if c % dc:
            return None
        out[tuple(rest)] = out.get(tuple(rest), 0) + c // dc
    return Poly._from(out)


def _c_text(p: Poly) -> str | None:
    """P as C text in the kernel's scope, in 64 bits: its parameters and the program's constants."""
    terms = []
    for m, c in p.terms:
        factors = [f"{c}LL"] if c != 1 or not m else []
        for a in m:
            if a.startswith(("p:", "g:")):
                factors.append(f"(long long)({a[2:]})")
            elif a.startswith("o:"):
                factors.append(f"(long long)({a[2:]})")
            else:
                return None
        terms.append(" * ".join(factors))
    return " + ".join(terms) if terms else "0LL"


def _statements(top: tuple, wrapped: tuple | None) -> list:
    """The kernel's statements, the wrapping guard's body (the last statement's) in its place."""
    return list(top) if wrapped is None else list(top[:-1]) + list(wrapped)


def _reading(pair, digits: dict[str, tuple[Poly, Poly | None]], bound: Poly, index: Poly, load_off: Poly | None,
             store_off: Poly | None) -> tuple[Poly, Poly, Poly, bool] | str:
    """(batch, rows, cols of the input, whether a batch digit is split off) where the column digit
    q = idx % Q and the row digit p = (idx / Q) % P of PAIR, with the batch digit idx / (P * Q) where
    the guard's N exceeds P * Q, put one access at idx (or b*P*Q + p*Q + q) and the other at the
    transposed place b*P*Q + q*P + p; or why not."""
    one = Poly.const(1)
    (q_atom, Q), (p_atom, K) = pair
    P = _quotient(K, Q) if K is not None else _quotient(bound, Q)
    if P is None:
        return f"splits its index into a row whose extent cannot be read ({K if K is not None else bound} / {Q})"
    PQ = P * Q
    batch = [a for a, (d, k) in digits.items() if d == PQ and (k is None or k == bound)]
    B = _quotient(bound, PQ)
    if B is None:
        return f"guards its index by {bound}, not a multiple of its rows x cols {PQ}"
    if batch:
        b = Poly.atom(batch[0])
    elif B == one:
        b = Poly()
    else:
        return f"guards its index by {bound}, more than its rows x cols {PQ}, and splits off no batch"
    p, q = Poly.atom(p_atom), Poly.atom(q_atom)
    linear, swapped = b * PQ + p * Q + q, b * PQ + q * P + p
    if load_off in (index, linear) and store_off == swapped:
        return B, P, Q, bool(batch)
    if store_off in (index, linear) and load_off == swapped:
        return B, Q, P, bool(batch)  # the split walks the output: the input is batch x Q x P
    return "does not store at the transposed place of its one load (b, r, c -> b, c, r)"


def plan_transpose(site: LaunchSite) -> TransposePlan:
    fn = site.kernel
    if not fn.is_kernel:
        _fail("is not a kernel")
    f: KernelFacts = collect_facts(fn.sig, fn.body, site.constants)
    items = ItemPlanner(fn, f, site.helpers, launch_block(site))
    index_decl, name = items.find_index()
    items.independent_threads(index_decl, local_arrays=False)
    if f.loops:
        _fail("loops (the transpose tier reads one element per thread)")
    remap = RemapPlanner(fn, f, site.helpers)
    statements, wrap_bound = remap.guarded_body(name)
    stores, reads = param_arrays(f, "store"), param_arrays(f, "read")
    if len(stores) != 1 or len(reads) != 1 or stores[0].op != "=" or stores[0].value is None \
            or any(a.kind == "atomic" for a in f.accesses):
        _fail("does not load one element and store one (the transpose tier's class)")
    store, load = stores[0], reads[0]
    # nothing but declarations, the guard and the store
    store_stmt = None
    every = _statements(fn.body.body, statements if wrap_bound is not None else None)
    for s in every:
        if isinstance(s, (Decl, Empty)) or (isinstance(s, If) and s.other is None and
                                            (isinstance(s.then, Return) or isinstance(s.then, Block) and
                                             len(s.then.body) == 1 and isinstance(s.then.body[0], Return))):
            continue
        if isinstance(s, ExprStmt) and isinstance(s.expr, Assign) and store_stmt is None:
            store_stmt = s
            continue
        _fail("does more than declare values, guard its index and store one element")
    assert store_stmt is not None
    bound_expr = wrap_bound if wrap_bound is not None else remap.guard_bound(name, store_stmt.span[0])  # type: ignore[attr-defined]
    bound = f.poly(bound_expr)
    index = items.index_poly  # the rewrite writes its own body and launch: a constant block K is not kept
    # the digits of the split: (D, K) per local, floor((idx mod K) / D)
    digits: dict[str, tuple[Poly, Poly | None]] = {}
    for s in every:
        if isinstance(s, Decl):
            for d in s.declarators:
                if d.init is None or d.pointer or d.array:
                    continue
                got = remap.digit(d.init, index)
                atom = f.poly(f.without_kept_casts(f.resolve(d.init)))
                if got is not None and atom is not None and len(atom.terms) == 1 and len(atom.terms[0][0]) == 1:
                    digits[atom.terms[0][0][0]] = got
    if bound is None or not digits:
        _fail("does not split its thread index into coordinates by / and %")
    one = Poly.const(1)
    # the column idx % Q, and the row (idx / Q) % P (or idx / Q); a remainder of a whole slice
    # (`rem = idx % (rows * cols)`) may be among the digits too
    pairs = [((qa, qk), (pa, pk)) for qa, (qd, qk) in digits.items() if qd == one and qk is not None
             for pa, (pd, pk) in digits.items() if pd == qk]
    if not pairs:
        _fail("does not split its thread index into a column idx % cols and a row (idx / cols) % rows")
    load_off, store_off = load.offset, store.offset
    readings = [_reading(pair, digits, bound, index, load_off, store_off) for pair in pairs]
    found = [r for r in readings if not isinstance(r, str)]
    if len(found) != 1:
        _fail(next(r for r in readings if isinstance(r, str)) if not found else
              "splits its thread index in more than one way that fits")
    B, rows, cols, batch = found[0]
    src, dst = load.array, store.array
    if src is None or dst is None or src is dst or src.pointer != 1 or dst.pointer != 1 or \
            (dst.param is not None and dst.param.const):
        _fail("does not read one array and write another")
    value = elementwise_value(f, store.value, src, load_off, "kl_tile[threadIdx.x][kl_j]")  # type: ignore[arg-type]
    if isinstance(value, str):
        _fail(value)
    widths = [f.integer_kind(x) for x in (index_decl.declarators[0].init, bound_expr)]
    # the index as declared (`int idx = ...`): its declared type decides the arithmetic
    declared = f.declared.get(id(index_decl.declarators[0]))
    narrow = any(w is None or w[0] < 64 for w in widths) or declared is None or \
        declared.type not in ("long long", "unsigned long long", "int64_t", "uint64_t", "size_t", "long",
                               "unsigned long", "ptrdiff_t", "auto", "const auto")
    split = f"{'batch, ' if batch else ''}row, col from {name} (batch={B}, rows={rows}, cols={cols})"
    return TransposePlan(src, dst, B, rows, cols, value.text, bound, narrow, split)


def tiled_kernel(site: LaunchSite, plan: TransposePlan) -> str:
    fn = site.kernel
    texts = [_c_text(x) for x in (plan.batch, plan.rows, plan.cols)]
    if any(t is None for t in texts):
        _fail("has extents that are not its parameters' or the program's constants")
    batch, rows, cols = texts
    elem = plan.src.type
    x, y = plan.src.name, plan.dst.name
    body = f"""{{
  // kernelloop transpose tier: {TILE} x {TILE} tiles of each batch slice staged in shared memory
  __shared__ {elem} kl_tile[{TILE}][{TILE + 1}];
  const long long kl_batch = {batch}, kl_rows = {rows}, kl_cols = {cols};
  if (kl_batch <= 0 || kl_rows <= 0 || kl_cols <= 0) return;
  const long long kl_tiles_c = (kl_cols + {TILE - 1}) / {TILE}, kl_tiles_r = (kl_rows + {TILE - 1}) / {TILE};
  const long long kl_tiles = kl_batch * kl_tiles_r * kl_tiles_c;
  for (long long kl_t = blockIdx.x; kl_t < kl_tiles; kl_t += gridDim.x) {{
    const long long kl_tc = kl_t % kl_tiles_c, kl_tr = (kl_t / kl_tiles_c) % kl_tiles_r;
    const long long kl_base = (kl_t / (kl_tiles_c * kl_tiles_r)) * kl_rows * kl_cols;
    for (int kl_j = threadIdx.y; kl_j < {TILE}; kl_j += {ROWS_PER_PASS}) {{
      const long long kl_r = kl_tr * {TILE} + kl_j, kl_c = kl_tc * {TILE} + threadIdx.x;
      if (kl_r < kl_rows && kl_c < kl_cols) kl_tile[kl_j][threadIdx.x] = {x}[kl_base + kl_r * kl_cols + kl_c];
    }}
    __syncthreads();
    for (int kl_j = threadIdx.y; kl_j < {TILE}; kl_j += {ROWS_PER_PASS}) {{
      const long long kl_c = kl_tc * {TILE} + kl_j, kl_r = kl_tr * {TILE} + threadIdx.x;
      if (kl_r < kl_rows && kl_c < kl_cols) {y}[kl_base + kl_c * kl_rows + kl_r] = {plan.value};
    }}
    __syncthreads();
  }}
}}
"""
    return fn.item.text[:fn.item.text.index(fn.head) + len(fn.head)].rstrip() + " " + body \
        if fn.head in fn.item.text else fn.head.rstrip() + " " + body


def _launcher_text(site: LaunchSite, p: Poly) -> str | None:
    """P (in the kernel's parameters) in the launcher's scope: each parameter the launch's argument,
    converted to the parameter's built-in integer type, in 64 bits."""
    launch = site.stmt.expr
    params = {prm.name: (prm, a) for prm, a in zip(site.kernel.sig.params, launch.args)}  # type: ignore[attr-defined]
    terms = []
    for m, c in p.terms:
        factors = [f"{c}LL"] if c != 1 or not m else []
        for a in m:
            if not a.startswith("p:") or a[2:] not in params:
                return None
            prm, arg = params[a[2:]]
            t = prm.type.replace("const ", "").strip()
            if prm.pointer or t not in _INTEGERS:
                return None
            factors.append(f"(long long)(({t})({to_c(arg)}))")
        terms.append(" * ".join(factors))
    return " + ".join(terms) if terms else None


_INTEGERS = ("int", "unsigned int", "unsigned", "long", "unsigned long", "long long", "unsigned long long", "short",
             "unsigned short", "int32_t", "uint32_t", "int64_t", "uint64_t", "size_t")


def tiled_launch(site: LaunchSite, plan: TransposePlan):
    launch = site.stmt.expr
    args = ", ".join(to_c(a) for a in launch.args)  # type: ignore[attr-defined]
    # every element below the guard has its thread in the baseline's launch: proved from the launcher
    # (grid_reaches), else asked at run time (a grid narrowed by a cast, `(unsigned)blocks`)
    covered, total = _bound_expr(plan), None
    if covered is None or not launch_covers(site, None, covered):  # type: ignore[arg-type]
        total = _launcher_text(site, plan.bound)
        if total is None:
            _fail("is launched with a grid not shown to start a thread for every element (grid * block, or its "
                  "ceiling division by the block)")
    elements = None
    if plan.narrow:
        elements = _launcher_text(site, plan.batch * plan.rows * plan.cols)
        if elements is None:
            _fail("indexes in fewer than 64 bits with sizes the rewrite cannot bound in its launcher")

    def new_launch(base: BaselineLaunch, kernel: str) -> tuple[str, str, str, list[str], str]:
        threads = (f"(unsigned long long){base.grid}.x * {base.grid}.y * {base.grid}.z * {base.block}.x * "
                   f"{base.block}.y * {base.block}.z")
        declarations = (f"const unsigned long long kl_tiles_wanted = ({threads} + {TILE * TILE - 1}ull) / "
                        f"{TILE * TILE}ull; const dim3 kl_tile_grid((unsigned int)(kl_tiles_wanted < 1ull ? 1ull : "
                        f"kl_tiles_wanted > 2147483647ull ? 2147483647ull : kl_tiles_wanted)); "
                        f"const dim3 kl_tile_block({TILE}, {ROWS_PER_PASS});")
        conditions = []
        x_threads = f"(unsigned long long){base.grid}.x * {base.block}.x"
        if total is not None:
            conditions.append(f"(long long)({x_threads}) >= {total}")
        if elements is not None:  # the baseline's 32-bit index stays exact
            conditions += [f"{elements} <= {_INT32_ELEMENTS}LL", f"{x_threads} <= {_INT32_ELEMENTS}ull"]
        return (f"{kernel}<<<kl_tile_grid, kl_tile_block, {base.shmem}{base.stream}>>>({args});", "kl_tile_grid",
                "kl_tile_block", conditions, declarations)
    return new_launch


def transpose_rewrites(part: EditablePart, harness: str, preamble: str = "") -> tuple[list[Rewrite], list[str]]:
    """A rewrite for every launch of a kernel the transpose tier reads (tier_rewrites)."""
    def rewrites_of(site: LaunchSite) -> list[Rewrite]:
        name = site.kernel.name
        plan = plan_transpose(site)
        return [Rewrite(
            label=f"transpose tier: {name} as a {TILE} x {TILE} shared-memory tiled transpose",
            **site.beside(tiled_kernel(site, plan), tiled_launch(site, plan)),
            kernel=name, launcher=site.launcher.name,
            detail=f"kernel {name} reads ({plan.split}) and stores {plan.dst.name}[b][c][r] = f({plan.src.name}[b][r][c]), "
                   f"one element per thread, every warp's store (or load) a row apart; a copy stages {TILE} x {TILE} "
                   f"tiles of each batch slice in shared memory, reading and writing whole rows, and applies the "
                   f"kernel's own expression to each element")]
    return tier_rewrites(part, harness, preamble, "transpose", rewrites_of)




def _bound_expr(plan: TransposePlan) -> Expr | None:
    """The guard's N as an expression of the kernel's parameters (a product of them), or None."""
    if len(plan.bound.terms) != 1:
        return None
    (m, c), = plan.bound.terms
    if c != 1 or not m or not all(a.startswith("p:") for a in m):
        return None
    e: Expr = Name(m[0][2:])
    for a in m[1:]:
        e = Binary("*", e, Name(a[2:]))
    return e
