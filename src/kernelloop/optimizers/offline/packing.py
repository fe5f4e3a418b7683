"""The block tier: a kernel launched on blocks too small to fill the GPU runs the same threads
packed into blocks of PACKED_BLOCK.

`add<<<N, 1>>>(...)` (one thread a block, as a first CUDA program writes it) or blocks of a few
threads leave most of every SM idle: an SM holds at most 16 to 32 blocks, so blocks of one thread
keep 16 to 32 of its 1536 to 2048 thread slots busy, and each warp runs one lane. The rewrite is a
renaming: a copy of the kernel numbers its threads across the whole grid (`t = blockIdx.x *
blockDim.x + threadIdx.x` of the new launch), stops past the old launch's `grid.x * B` threads,
and reads `blockIdx.x` as `t / B`, `threadIdx.x` as `t % B`, `blockDim.x` as B and `gridDim.x`
as the old grid's x; y and z stay as they were (the old block is B x 1 x 1, the grid keeps its y
and z). Every thread of the old launch runs once, with the coordinates it had.

Taken only where nothing in the kernel depends on which threads share a block or a warp: no
shared memory, barriers, cluster dimensions or `__launch_bounds__`, nothing warp-synchronous
(axes.meaning_may_change: no warp intrinsics, `warpSize`, `volatile` or inline assembly; every
built-in read in the kernel's own text through .x, .y or .z, none through a macro or a helper;
only math, loads, atomics and the program's pure helpers called). Proposed only where the launch's
block is a constant of at most PACK_AT_MOST threads along x and one along y and z; the rewritten
launch runs where the block is that at run time and both launches are legal, the baseline's as
written everywhere else. The verifier decides whether the result is the same and faster.
"""

from __future__ import annotations

import re
from dataclasses import replace

from ...program.scanner import strip_comments
from .axes import _BUILTIN, meaning_may_change
from .facts import collect_facts
from .launch_guard import BaselineLaunch
from .launcher import EditablePart, launch_extent
from .rowwarp import LaunchSite, NotARowKernel, Rewrite, launch_block, tier_rewrites
from .syntax import to_c

PACKED_BLOCK = 256  # threads of a packed block: 8 warps, a whole number of them on every SM
# Blocks of at most this many threads are packed: below a warp, lanes idle in every warp; at a warp,
# the blocks-per-SM limit (16 on sm_86/sm_89, 32 on sm_80/sm_90) caps occupancy at a third to a half.
PACK_AT_MOST = 32
# what a block shares or is declared for: shared memory, its barriers, a cluster's shape, a block size
# the kernel is compiled for
_BLOCK_SHARED = re.compile(r"\b(?:__shared__|__syncthreads\w*|__cluster_dims__|__launch_bounds__)\b")
_NAMES = ("kl_t", "kl_bx", "kl_tx", "kl_bdx", "kl_gdx", "kl_threads")


def packable_block(site: LaunchSite) -> int:
    """The launch's block along x where it is a constant of at most PACK_AT_MOST threads and one
    along y and z; raises NotARowKernel otherwise."""
    lau = next((x for x in site.part.launchers if x.fn is site.launcher), None)
    launch = site.stmt.expr
    # each extent a number, the program's integer macros and constants read as theirs (`#define THREADS 32`)
    extents = launch_block(site)
    if lau is None or extents is None or isinstance(extents, str):
        raise NotARowKernel(extents if isinstance(extents, str) else "is launched where its launcher's values cannot "
                            "be read")
    facts = replace(lau.facts, constants={**site.constants, **lau.facts.constants})
    x, y, z = extents
    if (y, z) != (1, 1):
        raise NotARowKernel(f"is launched with blocks of {x} x {y} x {z} threads (the block tier packs x only)")
    if not 1 <= x <= PACK_AT_MOST:
        raise NotARowKernel(f"is launched with blocks of {x} threads already (the block tier packs blocks of at "
                            f"most {PACK_AT_MOST})")
    grid = [facts.poly(launch_extent(facts, launch.config[0], axis)) for axis in "xyz"]  # type: ignore[attr-defined]
    if all(g is not None and g.is_const for g in grid) and \
            x * grid[0].const_value * grid[1].const_value * grid[2].const_value < PACKED_BLOCK:  # type: ignore[union-attr]
        raise NotARowKernel("is launched on fewer threads in all than one packed block holds: nothing to pack")
    return x


def block_free(site: LaunchSite, preamble: str) -> None:
    """Nothing in the kernel depends on which threads share a block or a warp (module docstring)."""
    if (why := meaning_may_change(site, preamble)) is not None:
        raise NotARowKernel(why)
    text = strip_comments(site.kernel.item.text)
    facts = collect_facts(site.kernel.sig, site.kernel.body, site.constants)
    if (found := _BLOCK_SHARED.search(text)) is not None or any(b.shared for b in facts.bindings):
        raise NotARowKernel(f"uses {found.group(0) if found else 'shared memory'}, which depends on its block")
    if any(re.search(rf"\b{n}\b", text) for n in _NAMES):
        raise NotARowKernel("already names kl_t, kl_bx, kl_tx, kl_bdx, kl_gdx or kl_threads")


def packed_kernel(site: LaunchSite, block: int) -> str:
    """The kernel numbering its threads across the grid, reading the old launch's coordinates."""
    text = strip_comments(site.kernel.item.text)
    name = re.search(rf"\b{re.escape(site.kernel.name)}\s*(?:<[^<>]*>)?\s*\(", text)
    if name is None:
        raise NotARowKernel("has a declaration the block tier cannot read")
    depth, close = 0, -1
    for k in range(name.end() - 1, len(text)):
        depth += {"(": 1, ")": -1}.get(text[k], 0)
        if depth == 0:
            close = k
            break
    opening = text.find("{", close)
    if close < 0 or opening < 0 or text[close + 1:opening].strip():
        raise NotARowKernel("has a declaration the block tier cannot read")
    params = text[name.end():close]
    extra = "const unsigned int kl_gdx, const unsigned long long kl_threads"
    head = text[:name.end()] + (extra if params.strip() in ("", "void") else f"{params}, {extra}") + ")"
    renames = {("blockIdx", "x"): "kl_bx", ("threadIdx", "x"): "kl_tx", ("blockDim", "x"): "kl_bdx",
               ("gridDim", "x"): "kl_gdx"}
    body = _BUILTIN.sub(lambda m: renames.get((m.group(1), m.group(3)), m.group(0)), text[opening + 1:])
    coordinates = {"kl_bx": f"(unsigned int)(kl_t / {block}ULL)", "kl_tx": f"(unsigned int)(kl_t % {block}ULL)",
                   "kl_bdx": f"{block}u"}
    used = [f"{n} = {v}" for n, v in coordinates.items() if re.search(rf"\b{n}\b", body)]
    prologue = (f"\n  // kernelloop block tier: the old launch's blocks of {block} thread(s), packed {PACKED_BLOCK} "
                "threads to a block\n"
                "  const unsigned long long kl_t = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
                "  if (kl_t >= kl_threads) return;\n"
                + (f"  const unsigned int {', '.join(used)};\n" if used else ""))
    return head + " {" + prologue + body


def packed_launch(site: LaunchSite, block: int):
    """The packed copy's launch: enough blocks of PACKED_BLOCK for the old launch's threads, the
    grid's y and z as they were; only where the block is BLOCK x 1 x 1 at run time."""
    args = [to_c(a) for a in site.stmt.expr.args]  # type: ignore[attr-defined]

    def new_launch(base: BaselineLaunch, kernel: str) -> tuple[str, str, str, list[str], str]:
        declarations = (f"const unsigned long long kl_threads = (unsigned long long){base.grid}.x * {base.block}.x; "
                        f"const unsigned long long kl_blocks = (kl_threads + {PACKED_BLOCK - 1}ULL) / {PACKED_BLOCK}ULL;")
        grid = f"dim3((unsigned int)kl_blocks, {base.grid}.y, {base.grid}.z)"
        statement = (f"{kernel}<<<{grid}, dim3({PACKED_BLOCK}), {base.shmem}{base.stream}>>>"
                     f"({', '.join([*args, f'{base.grid}.x', 'kl_threads'])});")
        conditions = [f"{base.block}.x == {block}u && {base.block}.y == 1u && {base.block}.z == 1u",
                      "kl_blocks >= 1ULL && kl_blocks <= 2147483647ULL"]
        return statement, grid, f"dim3({PACKED_BLOCK})", conditions, declarations
    return new_launch


def packing_rewrites(part: EditablePart, harness: str, preamble: str = "") -> tuple[list[Rewrite], list[str]]:
    """A rewrite for every launch, on blocks of at most PACK_AT_MOST threads, of a kernel whose
    threads do not depend on their block (tier_rewrites)."""
    def rewrites_of(site: LaunchSite) -> list[Rewrite]:
        name = site.kernel.name
        block = packable_block(site)
        block_free(site, preamble)
        return [Rewrite(
            label=f"block tier: {name} packed into blocks of {PACKED_BLOCK}",
            **site.beside(packed_kernel(site, block), packed_launch(site, block)),
            kernel=name, launcher=site.launcher.name,
            detail=f"kernel {name} was launched on blocks of {block} thread(s), which leave most of every SM idle; "
                   f"a copy that numbers its threads across the grid and reads each one's old coordinates runs the "
                   f"same threads {PACKED_BLOCK} to a block")]
    return tier_rewrites(part, harness, preamble, "block", rewrites_of)
