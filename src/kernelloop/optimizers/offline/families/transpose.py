"""Transpose: one store Y[c*R + r] = g(X[r*C + c]), r and c thread coordinates guarded by R and C,
g the identity or any elementwise function of the one loaded element and of values every thread
shares (`alpha * x + bias`, `(float)(x * scale)`: non-array parameters of built-in number types,
the program's constants, literals, locals computed from those; families/base.elementwise_value),
which the template applies as written to the element it stages. A value that reads another
element or array, or depends on the thread's coordinates, is refused. (The same class written
with a one-dimensional thread index split by / and %, batched or not, of any element type, is the
transpose tier's: transposes.py.)

Roles from the indexing: the loaded array is the input (rows x cols), the stored one the
output; cols is the load's row stride and the column guard, rows the store's row stride and
the row guard. Two more spellings are common (cuda-samples' naive transpose): each thread
covers a few rows through a fixed loop (`for (i = 0; i < TILE; i += ROWS)`, the counter in
the row coordinate of both accesses), and no guards at all (the grid covers the matrix
exactly): rows and cols then come from the strides alone. The template guards every element,
so the baseline must be shown to cover its matrix at every size (families/coverage.py); a
grid that rounds down (`rows / TILE`) covers it where the tile divides the sizes, which the
candidate asks at run time, launching the baseline otherwise.
"""

from __future__ import annotations

from ..conditions import loop_bound, loop_start, loop_var_atom, upper_bound
from ..facts import KernelFacts
from ..launcher import Binder
from ..rowwarp import NUMBER_TYPES
from ..symbolic import Poly, is_uniform
from .coverage import covers_range, index_width
from .base import (
    Config,
    Match,
    Mismatch,
    ceil_div,
    coordinate_form,
    elementwise_value,
    is_coordinate,
    is_float_pointer,
    param_arrays,
    role_texts,
    unreadable_access,
)

NAME = "transpose"
ROLES = ("in", "out", "rows", "cols")
INT_ROLES = ("rows", "cols")
ROWS_PER_PASS = [8, 4, 16]  # 8: the exemplar's 32x8 block (6.6x on an H200)
_PRIOR = 6.6


def match(f: KernelFacts, binder: Binder) -> Match | Mismatch:
    def no(reason: str) -> Mismatch:
        return Mismatch(NAME, reason)

    if (why := unreadable_access(f)) is not None:
        return no(why)
    if any(a.kind == "atomic" for a in f.accesses):
        return no("uses atomics")
    if len(f.loops) > 1:
        return no("uses more than one loop")
    counter = None
    if f.loops:
        start, bound = loop_start(f, f.loops[0]), loop_bound(f, f.loops[0])
        if start is None or bound is None or not is_uniform(start) or not is_uniform(bound):
            return no("uses a loop whose range differs between threads (a loop over a few rows per thread, "
                      "the same for every thread, is read)")
        if start != Poly.const(0):
            return no("uses a loop over rows that does not start at the thread's own row (counter from 0)")
        counter = loop_var_atom(f.loops[0])
    stores, reads = param_arrays(f, "store"), param_arrays(f, "read")
    if len(stores) != 1 or len(reads) != 1 or stores[0].op != "=" or stores[0].value is None:
        return no("expects one load and one plain store")
    store = stores[0]
    X, load_off = reads[0].array, reads[0].offset
    if X is None or load_off is None:
        return no("the one load cannot be read")
    load = coordinate_form(_counter_as_coordinate(load_off, counter))
    out = coordinate_form(_counter_as_coordinate(store.offset, counter)) if store.offset is not None else None
    if load is None or out is None:
        return no("indices are not of the form row*stride + col")
    cols_key, r, c = load
    rows_key, c2, r2 = out
    if not (is_coordinate(r) and is_coordinate(c)) or r == c or c2 != c or r2 != r:
        return no("the store does not swap the load's row and column")
    if counter is not None and (f.loops[0] not in store.ctx.loops or not any(_COUNTER in m for m, _ in r.terms)
                                or any(_COUNTER in m for m, _ in c.terms)):
        return no("its loop does not step the row of the one load and store")
    # the stored value: the loaded element itself, or an elementwise function of it and of uniform
    # values (`alpha * x[i] + bias`), applied by the template as written
    value = elementwise_value(f, store.value, X, load_off, "kl_v", lambda i, _b: f"kl_e{i}")
    if isinstance(value, str):
        return no(value)
    odd = next((b for b in value.scalars if b.type not in NUMBER_TYPES), None)
    if odd is not None:
        return no(f"the stored value uses {odd.name}, of type {odd.type}, not a built-in number")
    rows_p, cols_p = Poly(((rows_key, 1),)), Poly(((cols_key, 1),))
    unguarded = not store.ctx.conds
    # the guards name the counter as the loop does (`y + j < rows`)
    guard_r, guard_c = _counter_as_coordinate(r, counter, back=True), _counter_as_coordinate(c, counter, back=True)
    if not unguarded and (upper_bound(f, store.ctx, guard_r) != rows_p or upper_bound(f, store.ctx, guard_c) != cols_p):
        return no("no guards row < rows and col < cols matching the strides")
    # the template writes every element below rows x cols: so must the baseline, at every size
    reach = covers_range(f, binder, [store, reads[0]], [(guard_r, rows_p), (guard_c, cols_p)])
    exact = index_width(f, binder, [store, reads[0]], [rows_p * cols_p])
    if isinstance(reach, str) or isinstance(exact, str):
        return no(reach if isinstance(reach, str) else str(exact))
    Y = store.array
    if not (is_float_pointer(X) and is_float_pointer(Y, writable=True)) or X is Y:
        return no("not an out-of-place fp32 transpose")
    mapped = role_texts(binder, {"in": X, "out": Y}, {"rows": rows_p, "cols": cols_p})
    if isinstance(mapped, str):
        return no(mapped)
    roles, described = mapped
    scalars = [binder.pointer_text(b.name) for b in value.scalars]
    if any(t is None for t in scalars):
        return no("cannot map the stored value's scalars to launcher arguments")
    stored = f"{X.name}[r*cols + c]" if value.plain else \
        f"{value.text.replace('kl_v', f'{X.name}[r*cols + c]')}" + (
            f" ({', '.join(f'kl_e{i}={b.name}' for i, b in enumerate(value.scalars))})" if value.scalars else "")
    return Match(NAME, f.sig.name, binder.launcher, roles, described, {},
                 detail=f"{Y.name}[c*rows + r] = {stored} (rows={rows_p}, cols={cols_p})"
                        + (", several rows per thread through a fixed loop" if counter else "")
                        + (", no guards: the grid covers the matrix" if unguarded else ""),
                 polys={"rows": rows_p, "cols": cols_p}, conditions=reach.divides + exact,
                 placeholders={"VALUE": value.text,
                               "VAL_FIELDS": " ".join(f"{b.type} kl_e{i};" for i, b in enumerate(value.scalars)),
                               "VAL_PARAMS": "".join(f", {b.type} kl_e{i}" for i, b in enumerate(value.scalars)),
                               "VAL_ARGS": "".join(f", kl_e{i}" for i in range(len(value.scalars))),
                               "VAL_INIT": ", ".join(f"kl_e{i}" for i in range(len(value.scalars))),
                               "_EXTRA_ARGS": "\n".join(t for t in scalars if t is not None)})


_COUNTER = "t:loop"  # the loop counter, read as part of a thread coordinate


def _counter_as_coordinate(p: Poly, counter: str | None, back: bool = False) -> Poly:
    """`p` with the loop counter renamed as a per-thread atom: each thread covers the rows
    r + i, so r + i is the row coordinate (`back`: the other way, as the guards name it)."""
    if counter is None:
        return p
    old, new = (_COUNTER, counter) if back else (counter, _COUNTER)
    terms: dict[tuple[str, ...], int] = {}
    for m, c in p.terms:
        renamed = tuple(sorted(new if a == old else a for a in m))
        terms[renamed] = terms.get(renamed, 0) + c
    return Poly._from(terms)


def configs(m: Match, sms: int) -> list[Config]:
    rows, cols = m.sizes.get("rows"), m.sizes.get("cols")
    known = rows is not None and cols is not None and rows > 0 and cols > 0
    return [Config(
        template="transpose_smem_padded", technique="padded shared-memory transpose",
        params=(("ROWS_PER_PASS", str(rpp)),), threads=32 * rpp, smem_bytes=32 * 33 * 4, min_registers=16,
        blocks=ceil_div(cols, 32) * ceil_div(rows, 32) if known else None,  # type: ignore[operator]
        prior=_PRIOR, tags=frozenset({"coalescing", "smem-tiling", "padding"}), best_known=rpp == 8)
        for rpp in ROWS_PER_PASS]
