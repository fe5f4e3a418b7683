"""The row tier over grid-stride loops: a kernel whose threads walk its rows in a grid-stride
loop, one row per iteration, becomes one whose warps do, the 32 lanes of a warp splitting each
row's loops.

    for (int row = blockIdx.x * blockDim.x + threadIdx.x; row < N; row += blockDim.x * gridDim.x) {
        float s = 0.0f;
        for (int c = 0; c < C; c++) s += x[row * C + c] * x[row * C + c];
        ...
    }

is the thread-per-row kernel of the row tier (rowwarp) with its rows dealt out by a loop instead
of by the grid, and as slow for the same reason: neighbouring threads read addresses a row apart.
Taken only where both readings hold:
- the grid-stride loop is one whose iterations any grid runs alike (gridstride.GridStridePlanner
  .read_loop: the kernel is the loop, the built-ins only in its start and step, nothing carried
  between iterations, nothing ending it early, a parameter or a constant as its bound, a counter of
  32 bits or more);
- the kernel read one row per thread (`T row = <global index>; if (row < N) <body>`, what it
  computes for a grid with a thread for every row) is one the row tier may rewrite (rowwarp
  .ItemPlanner: every row loop a reduction or a map, the per-row statements the same in every
  lane).
The rewrite is the row tier's kernel with the `if` turned back into a loop, over warps:
`for (T row = warp; row < N; row += warps)`; the launch has a warp for every row (at most
MOST_WARPS, never a grid wider than a launch allows) in blocks of the row tier's size, and runs
only where the counter, stepped by that many warps, cannot pass its type's largest value (the
kernel asserts the types the launcher's check assumes); elsewhere the baseline's launch runs as
written. The verifier decides whether the result is the same and faster.
"""

from __future__ import annotations

from .cparse import ParseError
from .facts import collect_facts
from .gridstride import WIDE_THREADS, GridStrideLoop, GridStridePlanner, counted_items, launch_arguments_checked
from .launch_guard import BaselineLaunch
from .launcher import EditablePart, Function, function_from_text
from .rowwarp import (
    WARP,
    LaunchSite,
    NotARowKernel,
    Rewrite,
    RowPlan,
    apply_edits,
    buffers_apart,
    integer_asserts,
    launch_block,
    long_rows,
    loop_kinds,
    map_buffers,
    plan_row_warp,
    rewrite_kernel,
    tier_rewrites,
)
from .syntax import Empty, If, Launch, Return, to_c
from .whileloop import for_form

MOST_WARPS = WIDE_THREADS // WARP  # the grid tier's widest launch, in warps


def one_row_per_thread(fn: Function, loop: GridStrideLoop) -> str:
    """FN's text with its grid-stride loop written as the thread-per-row kernel it is under a grid
    of a thread per row: the declarations of the loop's start and stride left out (read nowhere but
    its header), the header `T row = <global index>; if (row < N)`."""
    body = fn.item.text[len(fn.head):]
    for_loop = loop.loop
    edits = [(d.span[0], d.span[1], "") for d in loop.header_declarations]  # type: ignore[attr-defined]
    edits.append((for_loop.span[0], for_loop.body.span[0],  # type: ignore[attr-defined]
                   f"{loop.counter_type} {loop.counter} = blockIdx.x * blockDim.x + threadIdx.x; "
                   f"if ({to_c(for_loop.cond)}) "))  # type: ignore[arg-type]
    return fn.head + apply_edits(body, edits)


def plan_row_stride(site: LaunchSite) -> tuple[RowPlan, GridStrideLoop, Function]:
    """The row tier's plan of the launched kernel read one row per thread (its `stride_guard` the
    `if` in its loop's place), the loop as read, and the kernel so read; NotARowKernel says why not."""
    fn = for_form(site.kernel) or site.kernel  # a counted `while` read as its `for`
    if not fn.is_kernel:
        raise NotARowKernel("is not a kernel")
    block = launch_block(site)
    loop = GridStridePlanner(fn, collect_facts(fn.sig, fn.body, site.constants, site.helpers), site.helpers,
                             block).read_loop()
    if getattr(loop.loop.body, "span", None) is None:
        raise NotARowKernel("has a grid-stride loop whose body cannot be placed")
    try:
        read = function_from_text(fn, one_row_per_thread(fn, loop))
    except ParseError as exc:
        raise NotARowKernel(f"cannot be read one row per thread ({exc})") from None
    if isinstance(read, str):
        raise NotARowKernel(read)
    plan = plan_row_warp(read, site.helpers, site.constants, block)
    top = [s for s in read.body.body if not isinstance(s, Empty)]
    while top and isinstance(top[-1], Return) and top[-1].value is None:  # a `return;` after the loop
        top.pop()
    # the planner's index must be the counter this reading declared, the `if` the last statement
    if plan.index.declarators[0].name != loop.counter or plan.index_offset or plan.index_block is not None \
            or len(top) < 2 or top[-2] is not plan.index or not isinstance(top[-1], If) or top[-1].other is not None:
        raise NotARowKernel("cannot be read one row per thread")
    plan.stride_guard = top[-1]
    return plan, loop, read


def row_stride_launch(site: LaunchSite, loop: GridStrideLoop, plan: RowPlan, conditions: list[str]):
    """The rewritten kernel launched with a warp per row (at most MOST_WARPS) in blocks of the
    plan's size; only where the counter stepped by the launch's warps stays within its type."""
    launch = site.stmt.expr
    assert isinstance(launch, Launch)
    args = [to_c(a) for a in launch.args]
    rows, limit = counted_items(site, loop)
    per_block = plan.block // WARP

    def new_launch(base: BaselineLaunch, kernel: str) -> tuple[str, str, str, list[str], str]:
        declarations = (
            f"const unsigned long long kl_rows = {rows}; "
            f"const unsigned long long kl_blocks = ((kl_rows < {MOST_WARPS}ULL ? kl_rows : {MOST_WARPS}ULL) "
            f"+ {per_block - 1}ULL) / {per_block}ULL; "
            f"const unsigned long long kl_warps = kl_blocks * {per_block}ULL;")
        grid = "dim3((unsigned int)kl_blocks)"
        statement = f"{kernel}<<<{grid}, {plan.block}, {base.shmem}{base.stream}>>>({', '.join(args)});"
        needed = ["kl_blocks >= 1ULL", "kl_blocks <= 2147483647ULL",
                  f"kl_rows - 1ULL <= {limit}ULL - kl_warps", *conditions]
        return statement, grid, f"dim3({plan.block})", needed, declarations
    return new_launch


def asserted(kernel_text: str, fn: Function, loop: GridStrideLoop) -> str:
    """KERNEL_TEXT (FN rewritten) with the compiler asserting, first in its body, the integer types
    the launch's check assumes for the counter and the bound."""
    checks = [(loop.counter_type, loop.counter_kind)]
    if loop.bound_param is not None:
        checks.append((f"decltype({loop.bound_param})", loop.bound_kind))  # type: ignore[arg-type]
    at = kernel_text.index("{", len(fn.head)) + 1
    return kernel_text[:at] + " " + integer_asserts(checks) + kernel_text[at:]


def row_stride_rewrites(part: EditablePart, harness: str, preamble: str = "") -> tuple[list[Rewrite], list[str]]:
    """A rewrite for every launch of a grid-stride row kernel (tier_rewrites)."""
    def rewrites_of(site: LaunchSite) -> list[Rewrite]:
        name = site.kernel.name
        plan, loop, read = plan_row_stride(site)
        launch_arguments_checked(site)
        stored, in_place = map_buffers(read, plan)
        apart = buffers_apart(site, stored, in_place)
        kernel_text = asserted(rewrite_kernel(read, plan), read, loop)
        return [Rewrite(
            label=f"row tier: one warp per row of {name} (grid-stride)",
            **site.beside(kernel_text, row_stride_launch(site, loop, plan, [*apart, *long_rows(site, plan)])),
            kernel=name, launcher=site.launcher.name,
            detail=f"kernel {name} walks its rows in a grid-stride loop, a row per thread; its {len(plan.loops)} "
                   f"row loop(s) ({loop_kinds(plan)}) are split across the 32 lanes of a warp, the grid's warps taking the "
                   f"rows in turn, a warp for each of {loop.bound_param or loop.bound_value} rows "
                   f"(at most {MOST_WARPS}), {plan.block} threads per block")]
    return tier_rewrites(part, harness, preamble, "grid-stride row", rewrites_of)
