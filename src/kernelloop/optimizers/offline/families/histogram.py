"""Byte histogram: atomicAdd(&bins[x[i]], 1) for every i < n, x an array of unsigned bytes.

Roles: the indexed array is the bins (256 of them, one per byte value), the array whose
elements are the bin numbers is the input, the guard (or loop bound) on i is the count. The
kernel adds to the bins; whether they start from zero is the launcher's business, and its
zeroing is copied as written.
"""

from __future__ import annotations

from ..facts import KernelFacts
from ..launcher import Binder
from ..syntax import Binary, Call, Expr, Index, Unary
from .base import (
    Config,
    Match,
    Mismatch,
    ceil_div,
    is_zero_literal,
    param_arrays,
    read_target,
    role_texts,
    strip_casts,
    unreadable_access,
)
from .reduction import element_bound, is_element_bound, misses_elements

NAME = "histogram"
ROLES = ("in", "bins", "n")
INT_ROLES = ("n",)
_BYTES = ("unsigned char", "uint8_t", "std::uint8_t")
_BIN_TYPES = {"unsigned int": "unsigned int", "unsigned": "unsigned int", "uint32_t": "unsigned int",
              "int": "int", "int32_t": "int"}
# (BLOCK, per-warp copies?, BLOCKS_PER_SM); first: the exemplar (568x on an H200)
CONFIGS = [(256, True, 4), (512, True, 4), (256, True, 8), (256, True, 2), (256, False, 4), (512, False, 4)]
_PRIOR = 100.0


def _bin_index(e: Expr) -> Expr | None:
    """X for &bins[X] or bins + X."""
    e = strip_casts(e)
    if isinstance(e, Unary) and e.op == "&" and isinstance(e.operand, Index):
        return e.operand.index
    if isinstance(e, Binary) and e.op == "+":
        return e.right
    return None


def match(f: KernelFacts, binder: Binder) -> Match | Mismatch:
    def no(reason: str) -> Mismatch:
        return Mismatch(NAME, reason)

    atomics = param_arrays(f, "atomic")
    if len(atomics) != 1 or atomics[0].op != "atomicAdd" or param_arrays(f, "store"):
        return no("expects exactly one atomicAdd into the bins and no other writes")
    atomic = atomics[0]
    bins = atomic.array
    assert isinstance(atomic.node, Call) and bins is not None
    index = _bin_index(atomic.node.args[0])
    value = strip_casts(atomic.value) if atomic.value is not None else None
    if index is None or value is None or is_zero_literal(value) or getattr(value, "value", None) != 1:
        return no("the atomic does not add 1 to bins[value]")
    src = read_target(f, index)
    if src is None:
        return no("the bin number is not a loaded value")
    data, _ = src
    reads = param_arrays(f, "read")
    if len(reads) != 1 or reads[0].array is not data:
        return no("reads more than the one byte array")
    if (why := unreadable_access(f)) is not None and "non-polynomial" not in why:
        return no(why)
    if data.param is None or data.param.pointer != 1 or data.param.base not in _BYTES:
        return no("the bin numbers are not unsigned bytes")
    if bins.param is None or bins.param.pointer != 1 or bins.param.const or bins.param.base not in _BIN_TYPES:
        return no("the bins are not 32-bit integer counters")
    n = element_bound(f, reads[0])
    if n is None:
        return no("cannot tell the element count from the guards of the loads")
    # the template counts every byte below n: each condition the load and the count run under must
    # say only that, and the launch must reach every byte (red team round 111: `i < n && i < (1 <<
    # 29)`, and a grid capped at 2^21 blocks, counted the same at every size the harness runs)
    load = reads[0]
    assert load.offset is not None
    if not all(is_element_bound(f, c.expr, c.holds, [load.offset], n) for c in (*load.ctx.conds, *atomic.ctx.conds)):
        return no("counts only the bytes a condition selects (a mask or a second bound)")
    if (why := misses_elements(f, binder, reads, n)) is not None:
        return no(why)
    mapped = role_texts(binder, {"in": data, "bins": bins}, {"n": n})
    if isinstance(mapped, str):
        return no(mapped)
    roles, described = mapped
    m = Match(NAME, f.sig.name, binder.launcher, roles, described, {},
              detail=f"{bins.name}[{data.name}[i]] += 1 for i < n (n={n}, 256 bins)",
              polys={"n": n})
    m.placeholders["BIN_T"] = _BIN_TYPES[bins.param.base]
    return m


def configs(m: Match, sms: int) -> list[Config]:
    n = m.sizes.get("n")
    out = []
    for block, per_warp, bps in CONFIGS:
        copies = block // 32 if per_warp else 1
        blocks = None if n is None else max(1, min(bps * sms, ceil_div(max(n // 16, 1), block)))
        out.append(Config(
            template="histogram_privatized", technique="privatized histogram",
            params=(("BLOCK", str(block)), ("COPIES", "kl_block / 32" if per_warp else "1"),
                    ("BLOCKS_PER_SM", str(bps))),
            threads=block, smem_bytes=copies * 256 * 4, min_registers=20, blocks=blocks,
            prior=_PRIOR * (1.0 if per_warp else 0.7),  # per-warp copies also spread hot-bin contention
            tags=frozenset({"privatization", "vectorized"}), best_known=(block, per_warp, bps) == CONFIGS[0],
            label_override=f"privatized histogram BLOCK={block} SUBHIST={'warp' if per_warp else 'block'} "
                           f"BLOCKS_PER_SM={bps}"))
    return out
