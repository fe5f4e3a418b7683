"""Sum reduction: every element of one fp32 array flows, through additions only, into a single
fp32 output (atomicAdd or a plain store to element 0).

The data flow is followed from the loads through locals, shared arrays and warp shuffles: each
step must be an addition (or a select against 0), so a sum of squares, a max or a mean is not
mistaken for a sum, and no element may be loaded at two places (it would count twice; what the
tree does with the partial sums is the verifier's to check). The element count is the bound
that guards the loads (i < n, or the loop bound of a grid-stride loop). With atomics the kernel
adds to whatever the output holds, and so does the template, after whatever the launcher does
before its launch (kept as written). A plain store replaces it, so the candidate zeroes the
output itself right before its own launch, whatever the launcher zeroed further up (red team
round 103: a zeroing undone by a later statement, or of one byte).
"""

from __future__ import annotations

from ..conditions import loop_bound, loop_start, loop_step, upper_bound
from ..facts import Access, Binding, KernelFacts
from ..launcher import Binder, block_size, grid_reaches
from ..symbolic import Poly
from ..syntax import Binary, Call, Expr, Index, Member, Name, Ternary, call_name, to_c, walk_expr
from .coverage import says_only_bounds
from .base import (
    Config,
    Match,
    Mismatch,
    ceil_div,
    is_float_pointer,
    is_zero_literal,
    param_arrays,
    read_target,
    role_texts,
    strip_casts,
    unreadable_access,
)

NAME = "reduction"
ROLES = ("in", "out", "n")
INT_ROLES = ("n",)
_SHUFFLES = ("__shfl_down_sync", "__shfl_xor_sync", "__shfl_up_sync", "__shfl_sync")
CONFIGS = [(256, 4), (512, 4), (256, 8), (512, 2), (256, 2), (512, 8)]  # (BLOCK, BLOCKS_PER_SM); first: exemplar
_PRIOR = 10.0  # exemplars/reduction_warp_shuffle.cu on an H200


def element_bound(f: KernelFacts, a: Access) -> Poly | None:
    """n for a load guarded by i < n, or inside a loop over i < n (grid-stride loops)."""
    if a.offset is None:
        return None
    for loop in reversed(a.ctx.loops):
        if loop.var and a.offset == Poly.atom(f"L:{loop.var}"):
            return loop_bound(f, loop)
    return upper_bound(f, a.ctx, a.offset)


_GLOBAL_INDEX = Poly.atom("blockIdx.x") * Poly.atom("blockDim.x") + Poly.atom("threadIdx.x")
# (start, step) of loops over the input that visit every element below their bound whatever the grid:
# the grid-stride loop, and the block-stride one (each block sums all of it: a grid of several
# blocks then sums it several times, which the verifier's result check sees)
_EVERY_ELEMENT = [(_GLOBAL_INDEX, Poly.atom("blockDim.x") * Poly.atom("gridDim.x")),
                  (Poly.atom("threadIdx.x"), Poly.atom("blockDim.x"))]


def misses_elements(f: KernelFacts, binder: Binder, reads: list[Access], n: Poly) -> str | None:
    """Why the launch may not visit every input element below n, or None. The template sums exactly
    x[0..n); a baseline that skips a few (a grid of n / block blocks, rounding down, leaves a tail
    of fewer than a block) differs by less than the tolerance of a sum (red team round 103)."""
    launch = binder.launcher.launch
    block = block_size(binder.launcher.facts, launch, binder.launcher.config_read) if launch is not None else None
    grid = block_size(binder.launcher.facts, launch, binder.launcher.config_read, 0) if launch is not None else None
    # the same strides with the launch's own sizes written as numbers (`i += 256` in a 256-thread block)
    every = list(_EVERY_ELEMENT)
    if block is not None and block.is_const:
        every.append((Poly.atom("threadIdx.x"), block))
        if grid is not None and grid.is_const:
            every.append((Poly.atom("blockIdx.x") * block + Poly.atom("threadIdx.x"), block * grid))
    for a in reads:
        loop = next((lp for lp in reversed(a.ctx.loops) if lp.var and a.offset == Poly.atom(f"L:{lp.var}")), None)
        if loop is not None:
            if (loop_start(f, loop), loop_step(f, loop)) not in every:
                return "its loop over the input is not shown to visit every element (a grid- or block-stride loop)"
            continue
        # blockIdx.x * blockDim.x + threadIdx.x, or the block's size written as a number (`* 512`)
        spellings = [_GLOBAL_INDEX] + ([Poly.atom("blockIdx.x") * block + Poly.atom("threadIdx.x")]
                                       if block is not None and block.is_const else [])
        if a.offset not in spellings:
            return "reads the input at an index not shown to cover every element (blockIdx.x * blockDim.x + threadIdx.x)"
        names = [p.name for p in binder.kernel.sig.params]
        bound = next((Name(name) for name in names if n == Poly.atom(f"p:{name}")), None)
        if bound is None or launch is None or not grid_reaches(binder.launcher.facts, launch, binder.kernel.sig.params, bound,
                                                               binder.launcher.config_read):
            return ("is launched with a grid not shown to reach every element (grid * block == n, or grid == "
                    "(n + block - 1) / block)")
    return None


class _SumFlow:
    """Which locals and shared arrays carry (partial sums of) the input, and whether only additions
    combine them."""

    def __init__(self, f: KernelFacts, src: Binding, n: Poly) -> None:
        self.f, self.src, self.n = f, src, n
        self.vars: set[str] = set()
        self.arrays: set[str] = set()
        changed = True
        while changed:
            changed = False
            for a in f.assigns:
                if a.value is not None and a.binding.key not in self.vars and self.tainted(a.value):
                    self.vars.add(a.binding.key)
                    changed = True
            for acc in f.accesses:
                if acc.kind == "store" and acc.array is not None and acc.array.param is None and \
                        acc.value is not None and acc.array.key not in self.arrays and self.tainted(acc.value):
                    self.arrays.add(acc.array.key)
                    changed = True

    def tainted(self, e: Expr) -> bool:
        for sub in walk_expr(self.f.resolve(e)):
            b = self.f.binding(sub)
            if b is not None and b.key in self.vars:
                return True
            t = read_target(self.f, sub)
            if t is not None and (t[0] is self.src or t[0].key in self.arrays):
                return True
        return False

    def additive(self, e: Expr) -> bool:
        e = strip_casts(self.f.resolve(e))
        if not self.tainted(e):
            return is_zero_literal(e)
        if isinstance(e, Name):
            return True
        if read_target(self.f, e) is not None:
            return True
        if isinstance(e, Binary) and e.op == "+":
            return self.additive(e.left) and self.additive(e.right)
        if isinstance(e, Ternary):  # a select on the input's own values is a masked sum (round 43)
            # A select on anything but the thread's place in its block (`blockIdx.x != k ? partial
            # : 0`, `i != skip ? x[i] : 0`) drops part of the input; the loads' own bounds are
            # checked where they are read (round 45).
            return not self.tainted(e.cond) and (within_block(self.f, e.cond) or self.guards_loads(e)) \
                and self.additive(e.then) and self.additive(e.other)
        if isinstance(e, Call) and call_name(e) in _SHUFFLES and len(e.args) >= 2:
            return self.additive(e.args[1])
        return False

    def guards_loads(self, e: Ternary) -> bool:
        """A select that is the element bound of a load in its branches (`i < n ? x[i] : 0`)."""
        offsets = [t[1] for branch in (e.then, e.other) for sub in walk_expr(self.f.resolve(branch))
                   if (t := read_target(self.f, sub)) is not None and t[0] is self.src]
        return is_element_bound(self.f, e.cond, True, offsets, self.n)

    def problem(self) -> str | None:
        for a in self.f.assigns:
            if a.binding.key not in self.vars:
                continue
            if a.op in ("decl", "=", "+="):
                if a.value is None or not self.additive(a.value):
                    return f"{a.binding.name} combines input values with something other than +"
            else:
                return f"{a.binding.name} is updated with {a.op}"
        for acc in self.f.accesses:
            if acc.kind == "store" and acc.array is not None and acc.array.key in self.arrays:
                if acc.op not in ("=", "+=") or acc.value is None or not self.additive(acc.value):
                    return f"{acc.array.name} combines input values with something other than +"
        return None


_BLOCK_LOCAL = {"threadIdx", "blockDim", "warpSize"}


def within_block(f: KernelFacts, cond: Expr) -> bool:
    """Whether a condition reads only the thread's place in its block (threadIdx, blockDim,
    warpSize, constants): the leader or lane tests of a tree reduction, never a choice of which
    blocks or elements count."""
    for sub in walk_expr(f.resolve(cond)):
        if isinstance(sub, Member):
            if not (isinstance(sub.base, Name) and sub.base.id in _BLOCK_LOCAL):
                return False
        elif isinstance(sub, Name):
            if sub.id not in _BLOCK_LOCAL:
                return False
        elif isinstance(sub, Index | Call):
            return False
    return True


def is_element_bound(f: KernelFacts, cond: Expr, holds: bool, offsets: list[Poly], n: Poly) -> bool:
    """Whether a condition (where it evaluates to `holds`) says only `offset < n` of loads at
    these offsets: the bound the template keeps, since it sums exactly x[0..n). An index mask
    (`i != skip`), a second bound (`i < valid`), a bit test or a flag selects only part of the
    input (red team rounds 45, 112)."""
    return says_only_bounds(f, cond, holds, [(off, n) for off in offsets])


def match(f: KernelFacts, binder: Binder) -> Match | Mismatch:
    def no(reason: str) -> Mismatch:
        return Mismatch(NAME, reason)

    if (why := unreadable_access(f)) is not None:
        return no(why)
    reads = param_arrays(f, "read")
    writes = [a for a in param_arrays(f) if a.kind in ("store", "atomic")]
    if not reads or not writes:
        return no("expects loads of an input array and a write of one result")
    src = reads[0].array
    out = writes[0].array
    if any(a.array is not src for a in reads) or any(a.array is not out for a in writes) or src is out:
        return no("expects loads from one array and writes to another")
    if not (is_float_pointer(src) and is_float_pointer(out, writable=True)):
        return no("not fp32 arrays")
    assert src is not None and out is not None
    kinds = {a.kind for a in writes}
    if kinds == {"atomic"}:
        if any(a.op != "atomicAdd" for a in writes):
            return no("combines results with an atomic other than atomicAdd")
        semantics = "accumulate"
    elif kinds == {"store"}:
        if any(a.op != "=" for a in writes):
            return no("updates the result with a compound store")
        semantics = "overwrite"
    else:
        return no("mixes atomics and stores on the result")
    if any(a.offset is None or not a.offset.is_zero for a in writes):
        return no("writes more than one result element")
    if len({a.offset for a in reads}) != len(reads):
        return no("loads the same element twice (it would be counted twice)")
    bounds = {element_bound(f, a) for a in reads}
    if len(bounds) != 1 or None in bounds:
        return no("cannot tell the element count from the guards of the loads")
    (n,) = bounds
    assert n is not None
    offsets = [a.offset for a in reads if a.offset is not None]
    if not all(is_element_bound(f, c.expr, c.holds, [a.offset], n) for a in reads for c in a.ctx.conds):
        return no("sums only the input elements a condition selects (a mask or a second bound)")
    if any(not within_block(f, c.expr) and not is_element_bound(f, c.expr, c.holds, offsets, n)
           for w in writes for c in w.ctx.conds):
        return no("adds its result only where a condition beyond the thread's place in its block holds")
    if (why := misses_elements(f, binder, reads, n)) is not None:
        return no(why)
    flow = _SumFlow(f, src, n)
    if (why := flow.problem()) is not None:
        return no(why)
    # A condition that reads the input's values around a load or a write sums only some of them
    # (`if (!isnan(v)) atomicAdd(...)`): not a plain sum (red team round 43).
    if any(flow.tainted(c.expr) for a in [*reads, *writes] for c in a.ctx.conds):
        return no("sums only the input values a condition on them selects")
    for w in writes:
        if w.value is None or not flow.tainted(w.value) or not flow.additive(w.value):
            return no("the result is not a sum of the input")
    mapped = role_texts(binder, {"in": src, "out": out}, {"n": n})
    if isinstance(mapped, str):
        return no(mapped)
    roles, described = mapped
    m = Match(NAME, f.sig.name, binder.launcher, roles, described, {},
              detail=f"{out.name}[0] {'+' if semantics == 'accumulate' else ''}= sum of {src.name}[0..n) (n={n})",
              polys={"n": n})
    m.placeholders["_semantics"] = semantics
    if semantics == "overwrite":
        # on the launch's own stream, so the template's atomics come after it (red team round 81)
        stream = to_c(binder.launcher.stream) if binder.launcher.stream is not None else "0"
        m.zeroing.append(f"::cudaMemsetAsync({roles['out']}, 0, sizeof(float), {stream});")
    return m


def configs(m: Match, sms: int) -> list[Config]:
    n = m.sizes.get("n")
    out = []
    for block, bps in CONFIGS:
        blocks = None if n is None else max(1, min(bps * sms, ceil_div(max(n // 4, 1), block)))
        out.append(Config(
            template="reduction_warp_shuffle", technique="warp-shuffle reduction",
            params=(("BLOCK", str(block)), ("BLOCKS_PER_SM", str(bps))), threads=block,
            smem_bytes=4 * (block // 32), min_registers=20, blocks=blocks, prior=_PRIOR,
            tags=frozenset({"warp-reduction", "vectorized", "parallelism"}), best_known=(block, bps) == CONFIGS[0]))
    return out
