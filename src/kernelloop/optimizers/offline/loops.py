"""The loop tier: a kernel whose every thread runs a loop over the fast index of what it stores, one
iteration after another, gets that loop's iterations spread across the lanes of a block.

`j = blockIdx.x * blockDim.x + threadIdx.x; for (int i = 1; i <= nx; ++i) out[i + nx * j] = ...;`
(a Fortran loop nest ported as it was, the contiguous index kept inside the thread): the 32 threads
of a warp store 32 elements `nx` apart in each iteration, one memory sector each. The rewrite
launches, for every thread of the baseline's launch, a block of lanes that share its iterations
(lane l takes i = first + l, first + l + lanes, ...), so a warp stores 32 neighbouring elements. The
baseline's thread is named by the block's index (x, y and z: its global coordinate along each axis),
and the kernel reads its old coordinates from there, so every expression stays as written.

Taken only where the iterations are independent of each other, so that their order cannot matter:
nothing the loop assigns outlives an iteration (every variable it assigns is declared in it), it
leaves by no `break`, `return` or `goto`, every store in the kernel is in the loop and moves with
its index one element at a time, no array it stores is read, and nothing depends on which threads
share a block or a warp (no shared memory, barriers, warp intrinsics). The baseline's kernel and
launch stay for launches the new one cannot make (a baseline's thread grid wider than the new grid
allows). The verifier decides whether the result is the same and faster.
"""

from __future__ import annotations

import re

from ...program.scanner import strip_comments
from .axes import _BUILTIN, meaning_may_change
from .facts import collect_facts
from .launch_guard import BaselineLaunch
from .launcher import EditablePart, _closing, statements_under
from .rowwarp import LaunchSite, NotARowKernel, Rewrite, buffers_apart, tier_rewrites, walk_expr_in
from .symbolic import Poly
from .syntax import Assign, Block, Decl, Expr, For, If, Index, Jump, Name, Num, Postfix, Return, Unary, to_c, walk_expr

# lanes per baseline thread: four warps first (a loop of a few hundred iterations fills them), then one
LOOP_LANES = (128, 32)
_RENAMED = {"threadIdx": "kl_tid", "blockIdx": "kl_bid", "blockDim": "kl_ob", "gridDim": "kl_og"}
_THREAD_ATOMS = frozenset(f"{b}.{a}" for b in ("threadIdx", "blockIdx", "blockDim", "gridDim") for a in "xyz")
_BLOCK_BOUND = re.compile(r"\b(?:__shared__|__syncthreads\w*|__cluster_dims__|__threadfence_block)\b")


def _early_exit(s) -> bool:
    """`if (...) return;`: a thread of the baseline's launch with no work."""
    return isinstance(s, If) and s.other is None and (
        isinstance(s.then, Return) or (isinstance(s.then, Block) and len(s.then.body) == 1
                                       and isinstance(s.then.body[0], Return))) and \
        (s.then.value is None if isinstance(s.then, Return) else s.then.body[0].value is None)


def _loop_variable(loop: For) -> tuple[str, str]:
    """The loop's variable and its type: `for (T i = A; i < B or i <= B; ++i, i++ or i += 1)`."""
    init = loop.init
    if not (isinstance(init, Decl) and len(init.declarators) == 1 and init.declarators[0].init is not None
            and not init.declarators[0].pointer and not init.declarators[0].array):
        raise NotARowKernel("has a last loop that declares no counter of its own")
    name = init.declarators[0].name
    cond, step = loop.cond, loop.step
    if not (cond is not None and cond.__class__.__name__ == "Binary" and cond.op in ("<", "<=")  # type: ignore[attr-defined]
            and cond.left == Name(name)):  # type: ignore[attr-defined]
        raise NotARowKernel(f"has a last loop whose condition is not {name} < or <= a bound")
    if not (isinstance(step, (Unary, Postfix)) and step.op == "++" and step.operand == Name(name)) and \
            not (isinstance(step, Assign) and step.op == "+=" and step.target == Name(name)
                 and isinstance(step.value, Num) and step.value.text == "1"):
        raise NotARowKernel(f"has a last loop that does not step {name} by one")
    return name, init.type


def _assigned_names(e: Expr) -> list[str]:
    out = []
    for x in walk_expr(e):
        if isinstance(x, Assign) and isinstance(x.target, Name):
            out.append(x.target.id)
        elif isinstance(x, (Unary, Postfix)) and x.op in ("++", "--") and isinstance(x.operand, Name):
            out.append(x.operand.id)
    return out


def check_independent(site: LaunchSite) -> tuple[For, str, str, set[str]]:
    """The kernel's loop whose iterations may run side by side, its variable and type, and the parameters it stores;
    raises NotARowKernel."""
    body = site.kernel.body.body
    if not body or not isinstance(body[-1], For):
        raise NotARowKernel("does not end in a loop")
    loop = body[-1]
    for s in body[:-1]:
        if not (isinstance(s, Decl) or _early_exit(s)):
            raise NotARowKernel("does more before its loop than declare values and return early")
    name, vtype = _loop_variable(loop)
    if not isinstance(loop.body, Block):
        raise NotARowKernel("has a loop whose body is not a block")
    declared = {d.name for s in statements_under(loop.body) if isinstance(s, Decl) for d in s.declarators}
    for s in statements_under(loop.body):
        if isinstance(s, Return) or (isinstance(s, Jump) and s.kind != "continue"):
            raise NotARowKernel("leaves its loop early (break, return or goto): the iterations are not independent")
    carried = sorted({n for e in walk_expr_in(loop.body) for n in _assigned_names(e)} - declared)
    if carried:
        raise NotARowKernel(f"assigns {carried[0]} in its loop, which outlives an iteration")
    if any(isinstance(x, Index) and isinstance(x.base, Name) and x.base.id == name
           for e in walk_expr_in(loop.body) for x in walk_expr(e)):
        raise NotARowKernel(f"indexes its loop counter {name}")  # (an array named like it: not read)
    facts = collect_facts(site.kernel.sig, site.kernel.body, site.constants)
    atom = next((a for a in sorted({a for acc in facts.accesses if acc.offset is not None
                                    for m, _ in acc.offset.terms for a in m}) if a.split("#")[0] == f"L:{name}"), None)
    stores = [a for a in facts.accesses if a.kind == "store"]
    if atom is None or not stores:
        raise NotARowKernel("stores nothing its loop counter moves")
    stored = {a.array.name for a in stores if a.array is not None}
    for a in stores:
        if a.array is None or a.array.param is None or a.offset is None:
            raise NotARowKernel("stores where its index cannot be read")
        # where the thread and the counter alone say (red team round 136: an inner loop's index, a value loaded)
        other = sorted({x for m, _ in a.offset.terms for x in m} - {atom} - _THREAD_ATOMS
                       - {x for m, _ in a.offset.terms for x in m if x.startswith("p:")})
        if other:
            raise NotARowKernel(f"stores to {a.array.name} at an element that moves with more than its thread and "
                                f"the counter ({other[0]})")
        step = Poly._from({tuple(x for x in m if x != atom): c for m, c in a.offset.terms if m.count(atom) == 1})
        if step != Poly.const(1) or any(m.count(atom) > 1 for m, _ in a.offset.terms):
            raise NotARowKernel(f"stores to {a.array.name} at a place its loop counter does not move one by one")
        lane = Poly._from({tuple(x for x in m if x != "threadIdx.x"): c for m, c in a.offset.terms
                           if m.count("threadIdx.x") == 1})
        if lane == Poly.const(1):
            raise NotARowKernel("already stores neighbouring elements from neighbouring threads")
    if any(a.kind == "read" and a.array is not None and a.array.name in stored for a in facts.accesses):
        raise NotARowKernel("reads an array it stores: an iteration may read what another wrote")
    return loop, name, vtype, stored


def _matching(text: str, start: int) -> int:
    """The index just past the bracket that closes the one at START (launcher._closing)."""
    end = _closing(text, start)
    if end is None:
        raise NotARowKernel("has brackets that do not match")
    return end + 1


def _split_header(header: str) -> list[str]:
    parts, depth, last = [], 0, 0
    for k, ch in enumerate(header):
        depth += ch in "([{"
        depth -= ch in ")]}"
        if ch == ";" and depth == 0:
            parts.append(header[last:k])
            last = k + 1
    return [*parts, header[last:]]


def spread_kernel(site: LaunchSite, name: str, vtype: str) -> str:
    """The kernel with its last loop's iterations spread over the block's lanes, and the baseline's thread
    coordinates read from the block's index (kl_og, kl_ob: the baseline's grid and block, passed in)."""
    text = strip_comments(site.kernel.item.text).rstrip()
    head_end = text.index("{")  # a kernel's head holds no brace
    head, body = text[:head_end], text[head_end:]
    head = re.sub(r"__launch_bounds__\s*\([^()]*\)", "", head)  # the block's shape is the rewrite's
    close = head.rindex(")")
    head = head[:close] + ", const dim3 kl_og, const dim3 kl_ob" + head[close:]
    body = _BUILTIN.sub(lambda m: f"{_RENAMED[m.group(1)]}{m.group(2)}{m.group(3)}", body)
    # the last `for` at the body's top level, which check_independent found the kernel's last statement
    depth, last_for = 0, None
    for m in re.finditer(r"[{}]|\bfor\s*\(", body):
        if m.group(0) == "{":
            depth += 1
        elif m.group(0) == "}":
            depth -= 1
        elif depth == 1:
            last_for = m
    if last_for is None:
        raise NotARowKernel("has no loop at its top level")
    paren = last_for.end() - 1
    header_end = _matching(body, paren)
    init, cond, _ = _split_header(body[paren + 1:header_end - 1])
    lhs, _, first = init.partition("=")
    block_start = body.index("{", header_end)
    if body[header_end:block_start].strip():
        raise NotARowKernel("has a loop whose body is not a block")
    block_end = _matching(body, block_start)
    if body[block_end:].strip() != "}":
        raise NotARowKernel("has code after its last loop")
    loop = (f"for ({lhs.strip()} = ({first.strip()}) + ({vtype})kl_lane; {cond.strip()}; {name} += ({vtype})kl_lanes) "
            f"do {body[block_start:block_end]} while (0);")
    prologue = ("\n  // the baseline's thread this block stands for, and this lane's share of its loop\n"
                "  const unsigned kl_lane = threadIdx.x, kl_lanes = blockDim.x;\n"
                "  const uint3 kl_tid = make_uint3(blockIdx.x % kl_ob.x, blockIdx.y % kl_ob.y, blockIdx.z % kl_ob.z);\n"
                "  const uint3 kl_bid = make_uint3(blockIdx.x / kl_ob.x, blockIdx.y / kl_ob.y, blockIdx.z / kl_ob.z);")
    return head + "{" + prologue + body[1:last_for.start()] + loop + "\n}\n"


def spread_launch(site: LaunchSite, lanes: int, apart: list[str]):
    """The launch: a block of LANES lanes for each thread of the baseline's launch, the grid its thread grid, where
    the buffers it stores are none of the others (APART: rowwarp.buffers_apart's conditions)."""
    launch = site.stmt.expr

    def new_launch(base: BaselineLaunch, kernel: str) -> tuple[str, str, str, list[str]]:
        g, b = base.grid, base.block
        args = ", ".join([*(to_c(a) for a in launch.args), g, b])
        grid = f"dim3({g}.x * {b}.x, {g}.y * {b}.y, {g}.z * {b}.z)"
        # a thread grid the new grid cannot hold (y and z up to 65535 blocks) keeps the baseline's launch
        fits = [f"(unsigned long long){g}.x * {b}.x <= 2147483647ull", f"(unsigned long long){g}.y * {b}.y <= 65535ull",
                f"(unsigned long long){g}.z * {b}.z <= 65535ull"]
        call = f"{kernel}<<<{grid}, dim3({lanes}), 0{base.stream}>>>({args});"
        return call, grid, f"dim3({lanes})", [*fits, *apart]
    return new_launch


def loop_rewrites(part: EditablePart, harness: str, preamble: str = "") -> tuple[list[Rewrite], list[str]]:
    """A rewrite per lane count for every launch of a kernel whose loop the loop tier may spread (tier_rewrites)."""
    def rewrites_of(site: LaunchSite) -> list[Rewrite]:
        kernel = site.kernel.name
        if (why := meaning_may_change(site, preamble)) is not None:
            raise NotARowKernel(why)
        if (found := _BLOCK_BOUND.search(strip_comments(site.kernel.item.text))) is not None:
            raise NotARowKernel(f"uses {found.group(0)}, which depends on which threads share a block")
        _, name, vtype, stored = check_independent(site)
        # a stored buffer handed as another parameter too is read through that one (red team rounds 135-141): refused
        # where one variable hands both, else the launch runs only where the addresses differ
        apart = buffers_apart(site, stored, set())
        text = spread_kernel(site, name, vtype)
        return [Rewrite(
            label=f"loop tier: the {name} loop of {kernel} spread over {lanes} lanes",
            **site.beside(text, spread_launch(site, lanes, apart)), kernel=kernel, launcher=site.launcher.name,
            detail=f"each thread of kernel {kernel} ran its loop over {name}, the fast index of what it stores, one "
                   f"iteration after another; a block of {lanes} lanes now shares each thread's iterations, so a warp "
                   "stores neighbouring elements") for lanes in LOOP_LANES]
    return tier_rewrites(part, harness, preamble, "loop", rewrites_of)
