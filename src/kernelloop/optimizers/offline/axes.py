"""The axis tier: a kernel of two- or three-dimensional blocks whose x thread axis walks its
arrays' slow index gets that axis swapped with the one that walks the fast index.

`row = blockIdx.x * blockDim.x + threadIdx.x; col = blockIdx.y * blockDim.y + threadIdx.y;
out[row * cols + col] = ...`: the 32 threads of a warp take consecutive `threadIdx.x`, so every
warp's access touches 32 elements a row apart, one memory sector each. The rewrite is a renaming:
a copy of the kernel reads `threadIdx.y` where it read `threadIdx.x` and the other way round (the
same for blockIdx, blockDim and gridDim), and is launched with the grid's and the block's x and y
swapped. Every thread then computes what the thread with the swapped coordinates computed before,
the blocks hold the same threads, and a warp now takes consecutive `col`s.

Taken only where the renaming keeps the kernel's meaning: nothing in it depends on which threads
share a warp (no warp intrinsics, `warpSize`, `volatile` warp-synchronous code or inline
assembly), and every use of a built-in is in its own text (no macro or device function of the
program reads one). The baseline's kernel and launch stay for launches the swapped one cannot
make (a grid of more than 65535 blocks along x, which would be the new y; along z, a block of
more than 64 threads along x), and run where the baseline's own launch is not legal, so both fail
alike. The checks read the kernel with the program's macros expanded, and it may call only math,
loads, atomics, barriers and the program's pure helpers. The verifier decides whether the result is the same and faster.
"""

from __future__ import annotations

import re

from ...program.macros import expand, program_macros
from ...program.scanner import strip_comments
from .facts import ATOMICS, SIDE_EFFECT_FREE, collect_facts
from .launch_guard import BaselineLaunch
from .launcher import EditablePart, launch_extent
from .rowwarp import LaunchSite, NotARowKernel, Rewrite, tier_rewrites
from .symbolic import Poly
from .syntax import to_c

_BUILTIN = re.compile(r"\b(threadIdx|blockIdx|blockDim|gridDim)(\s*\.\s*)([xyz])\b")
_BUILTIN_NAME = re.compile(r"\b(?:threadIdx|blockIdx|blockDim|gridDim)\b")
# what depends on which threads share a warp, or hides what the code does
_WARP_BOUND = re.compile(r"\b(?:__shfl\w*|__ballot\w*|__any\w*|__all\w*|__activemask|__syncwarp|__match_\w*|"
                         r"__reduce_\w*_sync|warpSize|volatile|asm|cooperative_groups|__lanemask\w*|"
                         r"thread_block\w*|tiled_partition|coalesced_threads|this_thread_block|this_grid|"
                         r"grid_group|thread_rank|thread_index|group_index|meta_group_\w*)\b")


def _coefficient(offset: Poly, atom: str) -> Poly:
    """The part of OFFSET that moves with ATOM (its coefficient, where ATOM appears once)."""
    terms: dict[tuple[str, ...], int] = {}
    for m, c in offset.terms:
        if m.count(atom) == 1:
            rest = tuple(a for a in m if a != atom)
            terms[rest] = terms.get(rest, 0) + c
    return Poly._from(terms)


def _moves_across(offset: Poly) -> bool:
    """Whether OFFSET moves with the y or z thread index too (a two-dimensional access)."""
    return any(not _coefficient(offset, f"threadIdx.{axis}").is_zero for axis in ("y", "z"))


def fast_axis(site: LaunchSite) -> str:
    """The thread axis (y or z) that walks the fast index of every store, where x walks a slower
    one; raises NotARowKernel where the swap would not help or may change the kernel's meaning."""
    fn = site.kernel
    # where its stores go says whether the swap helps (its meaning does not depend on reading them)
    facts = collect_facts(fn.sig, fn.body, site.constants)
    stores = [a for a in facts.accesses if a.kind in ("store", "atomic") and a.array is not None
              and a.array.param is not None]
    if not stores or any(a.offset is None for a in stores):
        raise NotARowKernel("has no store, or a store whose index is not read as a polynomial")
    x = [_coefficient(a.offset, "threadIdx.x") for a in stores]  # type: ignore[arg-type]
    loads = [a for a in facts.accesses if a.kind == "read" and a.array is not None and a.array.param is not None
             and a.offset is not None]
    if any(c == Poly.const(1) or c.is_zero for c in x) or \
            any(_coefficient(a.offset, "threadIdx.x") == Poly.const(1) and _moves_across(a.offset)  # type: ignore[arg-type]
                for a in loads):
        # a transpose reads along x what it writes across: the swap would only move the strided side.
        # A load that moves along x alone (`x[i]` of an outer product) is one address per warp after it.
        raise NotARowKernel("already gives neighbouring threads along x neighbouring elements (or the same one)")
    for axis in ("y", "z"):
        if all(_coefficient(a.offset, f"threadIdx.{axis}") == Poly.const(1) for a in stores):  # type: ignore[arg-type]
            return axis
    raise NotARowKernel("has no thread axis that walks the fast index of every store")


# What the swapped copy may call: math and conversions, loads, atomics, barriers, and the program's
# pure helpers (rowwarp.pure_helpers: no built-ins, no memory written, only such calls themselves).
_CALLABLE = SIDE_EFFECT_FREE | ATOMICS | frozenset([
    "__syncthreads", "__syncthreads_count", "__syncthreads_and", "__syncthreads_or", "__threadfence",
    "__threadfence_block", "__stcs", "__stcg", "__stwt", "__stwb", "dim3", "unsigned", "long", "short", "char", "bool", "size_t",
    "int64_t", "int32_t", "uint32_t", "uint64_t", "reinterpret_cast", "const_cast", "sizeof"])
_NOT_CALLS = frozenset(["if", "for", "while", "switch", "return", "do", "else", "case", "__launch_bounds__",
                        "__global__", "__device__", "__host__", "alignas", "decltype"])
_CALL = re.compile(r"\b([A-Za-z_][\w:]*)\s*(?:<[^<>()]*>)?\s*\(")


def meaning_may_change(site: LaunchSite, preamble: str) -> str | None:
    """Why swapping the built-ins in the kernel's own text might not rename every read of them, or
    might change which threads share a warp in a way that matters; None when it cannot. Read with
    the program's macros expanded (red team round 114: a macro naming a macro that reads blockIdx.x,
    a device function calling one that does, a warp shuffle in a helper)."""
    fn = site.kernel
    text = strip_comments(fn.item.text)
    if re.search(r"\b__cluster_dims__\b", text):  # a cluster's shape is the grid's, along x (round 115)
        return "declares __cluster_dims__, whose shape the swap would not carry"
    editable = "\n".join(item.text for item in site.part.items)
    expanded = expand(text, program_macros(preamble, editable))
    if expanded is None:
        return "uses a macro that cannot be read for sure"
    if (found := _WARP_BOUND.search(expanded)) is not None:
        return f"uses {found.group(0)}, which depends on which threads share a warp"
    own = [(m.group(1), m.group(3)) for m in _BUILTIN.finditer(text)]
    if len(_BUILTIN_NAME.findall(text)) != len(own):
        # `const uint3 t = threadIdx;`: a component the renaming would not reach
        return "reads a built-in other than through its .x, .y or .z"
    if [(m.group(1), m.group(3)) for m in _BUILTIN.finditer(expanded)] != own or \
            len(_BUILTIN_NAME.findall(expanded)) != len(own):
        return "uses a macro that reads or drops a thread's coordinates"
    body = expanded[expanded.index("{"):] if "{" in expanded else expanded
    for name in sorted({m.group(1) for m in _CALL.finditer(body)} - _NOT_CALLS):
        bare = name.removeprefix("::").removeprefix("std::")
        if bare not in _CALLABLE and name not in site.helpers and bare != fn.name:
            return f"calls {name}, which may read a thread's coordinates or depend on its warp"
    return None


def swapped_kernel(site: LaunchSite, axis: str) -> str:
    """The kernel with the x and AXIS built-ins swapped."""
    text = strip_comments(site.kernel.item.text)
    swap = {"x": axis, axis: "x"}
    return _BUILTIN.sub(lambda m: f"{m.group(1)}{m.group(2)}{swap.get(m.group(3), m.group(3))}", text)


def _swap(dim: str, axis: str) -> str:
    parts = {"x": f"{dim}.x", "y": f"{dim}.y", "z": f"{dim}.z"}
    parts["x"], parts[axis] = parts[axis], parts["x"]
    return f"dim3({parts['x']}, {parts['y']}, {parts['z']})"


def swapped_launch(site: LaunchSite, axis: str):
    """The swapped copy's launch: the baseline's grid and block with x and AXIS swapped (run only
    where both launches are legal: red team round 114, a grid of 68750 blocks along y failed as the
    baseline launched it, and ran swapped; see LaunchSite.assemble_beside)."""
    launch = site.stmt.expr
    args = ", ".join(to_c(a) for a in launch.args)

    def new_launch(base: BaselineLaunch, kernel: str) -> tuple[str, str, str, list[str]]:
        grid, block = _swap(base.grid, axis), _swap(base.block, axis)
        return f"{kernel}<<<{grid}, {block}, {base.shmem}{base.stream}>>>({args});", grid, block, []
    return new_launch


def axis_rewrites(part: EditablePart, harness: str, preamble: str = "") -> tuple[list[Rewrite], list[str]]:
    """A rewrite for every launch of a kernel whose x axis the axis tier may swap (tier_rewrites)."""
    def rewrites_of(site: LaunchSite) -> list[Rewrite]:
        name = site.kernel.name
        if (why := meaning_may_change(site, preamble)) is not None:
            raise NotARowKernel(why)
        axis = fast_axis(site)
        lau = next((x for x in part.launchers if x.fn is site.launcher), None)
        launch = site.stmt.expr
        block = None if lau is None else lau.facts.poly(launch_extent(lau.facts, launch.config[1], axis))  # type: ignore[attr-defined]
        if block is not None and block.is_const and block.const_value <= 1:
            raise NotARowKernel(f"is launched with one thread along {axis}: swapping gives a warp no neighbours")
        return [Rewrite(
            label=f"axis tier: {name} with its x and {axis} thread axes swapped",
            **site.beside(swapped_kernel(site, axis), swapped_launch(site, axis)),
            kernel=name, launcher=site.launcher.name,
            detail=f"kernel {name} walked its arrays' slow index with threadIdx.x and the fast one with "
                   f"threadIdx.{axis}; a copy with the two axes swapped, launched with the grid's and the block's "
                   f"x and {axis} swapped, computes the same elements, a warp on neighbouring ones")]
    return tier_rewrites(part, harness, preamble, "axis", rewrites_of)
