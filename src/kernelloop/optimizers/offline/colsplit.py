"""The column tier: a kernel that gives each thread one item and reduces a long loop for it, with
reads already coalesced, gets several threads per item.

Column sums, bias gradients (`dbias[c] += sum over rows of dout[r * OC + c]`), transposed
matrix-vector products (`y[j] = sum_i A[i * n + j] * x[i]`), per-feature statistics over a
batch: written one thread per column, neighbouring threads read neighbouring elements, so every
load coalesces, but there are only as many threads as columns (a few thousand: a few SMs of a
GPU with a hundred), each walking a loop of thousands of dependent-free loads. The rewrite keeps
the loads coalesced and multiplies the parallelism: a block is 32 items by S slices
(`threadIdx.x` the item, `threadIdx.y` the slice), each thread takes every S-th iteration of the
loop, writes its partial results to shared memory, and the last of an item's S threads to arrive
(a shared-memory counter, with block-scope fences on both sides) combines the partials in a
fixed order and runs the rest of the kernel. There is no block-wide barrier after the kernel's
own code starts, so early `return`s and guards of any shape keep working.

It is taken only where it provably keeps the kernel's meaning: the kernel is one the row tier's
recogniser accepts (rowwarp.py: the thread index is used only as the item, loops only reduce
or map, no shared memory, barriers, atomics or other built-ins), it has exactly one loop and
that loop reduces (sums, max, min), its loads are coalesced across threads (otherwise the row
tier applies), it stores nothing before the loop, and the loop is not a short fixed one. The
verifier still decides whether the result is the same and faster.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from .facts import collect_facts
from .launch_guard import BaselineLaunch
from .launcher import EditablePart, Function
from .rowwarp import (
    BIT_KINDS,
    ITEM_COUNT,
    _exact,
    _plus,
    ItemPlanner,
    LaunchBlock,
    LaunchSite,
    number_asserts,
    NotARowKernel,
    Rewrite,
    RowPlan,
    apply_edits,
    bit_identity,
    extreme_of,
    launch_block,
    loop_name,
    loop_start,
    rounded_launch,
    tier_rewrites,
    with_item_count,
)
from .syntax import ExprStmt, Launch, Num, to_c

ITEMS_PER_BLOCK = 32  # threadIdx.x: one item each, so a warp's loads stay one coalesced row of items
SPLITS = (32, 8)  # threads per item, tried in this order: more parallelism first
MIN_FIXED_TRIP = 64  # a loop bounded by a literal below this is too short to split


def plan_column_split(fn: Function, helpers: frozenset[str] = frozenset(),
                      constants: dict[str, int] | None = None, launch: LaunchBlock = None) -> RowPlan:
    if not fn.is_kernel:
        raise NotARowKernel("is not a kernel")
    planner = ItemPlanner(fn, collect_facts(fn.sig, fn.body, constants), helpers, launch)
    plan = planner.recognise()
    if plan.index_block is not None and plan.index_with_block_dim is None:
        # the rewrite launches blocks of 32 x split: the index must read the new block, not K
        planner.fail(f"writes its block size {plan.index_block} in its thread index in a form the column tier cannot "
                     "replace by blockDim.x (the rewrite launches other blocks)")
    if planner.uncoalesced():
        planner.fail("reads its loop with a stride across threads (the row tier's case, not a column's)")
    if len(plan.loops) != 1 or plan.loops[0].kind != "reduce":
        planner.fail(f"has {len(plan.loops)} loop(s), not exactly one loop that only reduces")
    if plan.loops[0].partners:
        planner.fail("keeps where its maximum or minimum was seen (an argmax: the column tier combines sums, "
                     "maxima and minima)")
    loop = plan.loops[0].stmt
    bound = loop.cond.right if loop.cond is not None else None  # type: ignore[union-attr]
    if isinstance(bound, Num) and not bound.is_float and _literal(bound.text) < MIN_FIXED_TRIP:
        planner.fail(f"has a loop of at most {bound.text} iterations, too short to share")
    if any(store.span[0] < loop.span[0] for store in plan.lane0_stores):
        planner.fail("stores before its loop")
    return plan


def _literal(text: str) -> int:
    try:
        return int(re.sub(r"[uUlL]+$", "", text), 0)
    except ValueError:
        return MIN_FIXED_TRIP


def split_limit(fn: Function) -> int:
    """The most threads per item the kernel's own __launch_bounds__ allows (1024 / 32 without)."""
    bounds = re.search(r"__launch_bounds__\s*\(\s*([^,)]*)", fn.head)
    if not bounds:
        return 1024 // ITEMS_PER_BLOCK
    if not bounds.group(1).strip().isdigit():
        raise NotARowKernel(f"declares __launch_bounds__({bounds.group(1).strip()}), which may be below a block "
                            f"of {ITEMS_PER_BLOCK} x 2")
    return int(bounds.group(1)) // ITEMS_PER_BLOCK


def rewrite_kernel(fn: Function, plan: RowPlan, split: int) -> str:
    body = fn.item.text[len(fn.head):]
    (loop,) = plan.loops
    s = loop.stmt
    items = ITEMS_PER_BLOCK
    accs = [(plan.bindings[key], kind) for key, kind in loop.accumulators.items()]
    open_brace = body.index("{") + 1
    shared = " ".join(f"__shared__ {b.type} kl_part_{b.name}[{split}][{items}];" for b, _ in accs)
    prologue = (f" // kernelloop column tier: {split} threads per item (threadIdx.y), the last to finish combines\n"
                f"  __shared__ unsigned int kl_arrived[{items}]; {shared}\n"
                f"  if (threadIdx.y == 0) kl_arrived[threadIdx.x] = 0u;\n"
                f"  ::__syncthreads();  // before any of the kernel's own code: every thread reaches it\n"
                f"  bool kl_owner = threadIdx.y == 0;  // who makes the per-item stores\n")
    edits: list[tuple[int, int, str]] = [(open_brace, open_brace, prologue)]
    header = f"for ({loop_start(s, 'threadIdx.y')}; {to_c(s.cond)}; {loop_name(s)} += {split}) "
    b_start, b_end = s.body.span  # type: ignore[attr-defined]
    before = [a for a in [number_asserts(b.name for b, _ in accs)] if a]
    publish: list[str] = []
    combine: list[str] = []
    for b, kind in accs:
        part = f"kl_part_{b.name}"
        publish.append(f"{part}[threadIdx.y][threadIdx.x] = {b.name};")
        if kind == "sum" or kind in BIT_KINDS:
            op = BIT_KINDS.get(kind, "+")
            start = bit_identity(kind, b.type) if kind in BIT_KINDS else "0"
            before.append(f"const {b.type} kl_{b.name}_before = {b.name}; {b.name} = {start};")
            combine.append(f"{{ {b.type} kl_total = {part}[0][threadIdx.x]; for (int kl_s = 1; kl_s < {split}; "
                           f"++kl_s) kl_total {op}= {part}[kl_s][threadIdx.x]; {b.name} = kl_{b.name}_before {op} kl_total; }}")
        else:
            # The partials meet as the row tier's lanes do (extreme_of): fmaxf/fminf for floats,
            # whatever their spelling, so a partial that saw no element (its seed, perhaps NaN: `m =
            # x[c]` read as the seed) is passed over as the loop passed over its own seed, where
            # `m < p` keeps it (red team round 109; round 148 for a float spelled `real` or `T`).
            update = f"{b.name} = {extreme_of(kind, b.type, b.name, _exact('kl_p'))};"
            combine.append(f"for (int kl_s = 0; kl_s < {split}; ++kl_s) {{ const {b.type} kl_p = {part}[kl_s][threadIdx.x]; "
                           f"{update} }}")
    f_start, f_end = s.span
    edits.append((f_start, f_end, "{ " + " ".join(before) + (" " if before else "") + header + body[b_start:b_end]
                  + "\n    " + " ".join(publish)
                  + "\n    ::__threadfence_block();  // the partials before the count"
                  + f"\n    if (::atomicAdd(&kl_arrived[threadIdx.x], 1u) != {split - 1}u) return;  // not the last"
                  + "\n    ::__threadfence_block();  // every partial is visible to the last"
                  + "\n    " + " ".join(combine) + "\n    kl_owner = true; }"))
    for store in plan.lane0_stores:
        st_start, st_end = store.span
        edits.append((st_start, st_end, f"{{ if (kl_owner) {{ {body[st_start:st_end]} }} }}"))
    index_name = plan.index.declarators[0].name
    index_start, index_end = plan.index.span
    guard = (f"\n  if ((long long){index_name}{_plus(-plan.index_offset)} >= {ITEM_COUNT}) return;  "
             "// items the baseline never had")
    if plan.index_block is not None:  # blocks of 32 x split now: the index reads them, not the baseline's K
        assert plan.index_with_block_dim is not None
        edits.append((index_start, index_end, plan.index_with_block_dim + guard))
    else:
        edits.append((index_end, index_end, guard))
    return with_item_count(fn.head) + apply_edits(body, edits)


def _launch_text(stmt: ExprStmt, split: int) -> Callable[[BaselineLaunch, str], tuple[str, str, str, list[str]]]:
    launch = stmt.expr
    assert isinstance(launch, Launch)
    return lambda base, kernel: rounded_launch(base, kernel, ITEMS_PER_BLOCK, f"dim3({ITEMS_PER_BLOCK}, {split})",
                                               [to_c(a) for a in launch.args])


def column_split_rewrites(part: EditablePart, harness: str, preamble: str = "") -> tuple[list[Rewrite], list[str]]:
    """Rewrites (one per split, most parallel first) for every launch of a kernel the column
    tier may rewrite (tier_rewrites)."""
    def rewrites_of(site: LaunchSite) -> list[Rewrite]:
        name = site.kernel.name
        plan = plan_column_split(site.kernel, site.helpers, site.constants, launch_block(site))
        limit = split_limit(site.kernel)
        splits = [s for s in SPLITS if s <= limit]
        if not splits:
            raise NotARowKernel(f"declares __launch_bounds__ below a block of {ITEMS_PER_BLOCK} x {min(SPLITS)}")
        texts = [(split, rewrite_kernel(site.kernel, plan, split)) for split in splits]
        kinds = ", ".join(sorted(set(plan.loops[0].accumulators.values())))
        return [Rewrite(
            label=f"column tier: {split} threads per item of {name}",
            **site.beside(kernel_text, _launch_text(site.stmt, split)),
            kernel=name, launcher=site.launcher.name,
            detail=f"kernel {name} gives each thread one item and reduces ({kinds}) over a loop read coalesced; "
                   f"{split} threads now share each item, each taking every {split}th iteration, and the last "
                   f"to finish combines their partial results ({ITEMS_PER_BLOCK} x {split} threads per block)")
            for split, kernel_text in texts]
    return tier_rewrites(part, harness, preamble, "column", rewrites_of)
