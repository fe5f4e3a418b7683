"""The atomics tier: a kernel whose threads add integers into small tables with global atomics
(class counts, label statistics, bincounts, histograms of any bin rule) gets a private copy of each
table's first entries in every block's shared memory, and fewer blocks that each run many of the
baseline's blocks.

`atomicAdd(&counts[label], 1)` from every thread of a large grid sends every add to the few L2
lines the table lives in, where they wait on each other. Rewritten, a block first sets its private
tables to the operation's identity, then runs the kernel's body once for each of the baseline's
blocks it takes (`blockIdx.x` read as that block's number, `gridDim.x` as the baseline's grid), each
add that falls inside the private table going to shared memory (an index outside it, or a negative
one, still goes to the global table, exactly as before); at the end the block adds every private
entry that changed into the global table, one atomic per entry.

Exact, not approximate: the operations are integer additions (and OR, AND, XOR, max, min), each
associative and commutative in the machine's own arithmetic (two's complement wraps alike in any
order), so every entry ends at the same value whatever the grouping; an entry the baseline never
touched stays at its identity and is never written, so no address is written that the baseline
did not write. Taken only where nothing can tell the grouping: the table is a pointer parameter of
an integer type reached only through these atomics, each a statement of its own (its old value
unused), one operation per table; the kernel's threads are independent (no shared memory, barriers,
warp intrinsics, inline assembly, static locals, only math functions, device assertions and pure
helpers called, no other atomics), so running a block's body several times over in one block
computes what the baseline's blocks did. The verifier still decides whether it is right and faster.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ...program.scanner import strip_comments, without_literals
from .axes import _WARP_BOUND
from .facts import KernelFacts, collect_facts
from .launch_guard import BaselineLaunch
from .launcher import EditablePart, Function, statements_under
from .rowwarp import (
    KERNEL_CHECKS,
    SIDE_EFFECT_FREE,
    LaunchSite,
    NotARowKernel,
    Rewrite,
    apply_edits,
    buffers_apart,
    tier_rewrites,
    with_item_count,
)
from .gridstride import launch_arguments_checked
from .sizes import is_integer_type
from .syntax import Binary, Call, Expr, ExprStmt, Index, Name, Unary, call_name, strip_casts, to_c, walk_expr

# The private tables' shared memory per block: a quarter of what any GPU since Volta gives one block
# by default (48 KB), so several blocks still fit on an SM.
PRIVATE_BYTES = 12288
# The rewritten launch's blocks at most: about 8 resident blocks on each SM of the largest GPUs
# (an H200's 132), enough to fill any of them; each runs its share of the baseline's blocks.
GRID_CAP = 1056
GRID_PARAM = "kl_grid_x"  # the baseline's grid.x, passed to the rewritten kernel
# operation -> its identity, as C for an element type KlE (kl_integer: bits and signedness)
OPERATIONS = {
    "atomicAdd": "KlE(0)",
    "atomicOr": "KlE(0)",
    "atomicXor": "KlE(0)",
    "atomicAnd": "KlE(~KlE(0))",
    "atomicMax": "(::kl_integer<KlE>::is_signed ? KlE(KlE(1) << (::kl_integer<KlE>::bits - 1)) : KlE(0))",
    "atomicMin": "(::kl_integer<KlE>::is_signed ? KlE(~KlE(KlE(1) << (::kl_integer<KlE>::bits - 1))) : KlE(~KlE(0)))",
}
_BUILTIN_USE = re.compile(r"\b(blockIdx|gridDim)\b(?!\s*\.\s*[xyz]\b)")
_BLOCK_X = re.compile(r"\bblockIdx\s*\.\s*x\b")
_GRID_X = re.compile(r"\bgridDim\s*\.\s*x\b")


@dataclass(frozen=True)
class PrivateAdd:
    statement: ExprStmt  # `atomicOp(&table[index], value);`
    index: Expr
    value: Expr


@dataclass(frozen=True)
class Table:
    name: str  # the pointer parameter
    op: str  # the atomic function every add into it calls
    adds: tuple[PrivateAdd, ...]


def _target(e: Expr) -> tuple[str, Expr] | None:
    """(table, index) for `&table[index]`, `table + index` or `table` (index 0)."""
    e = strip_casts(e)
    if isinstance(e, Unary) and e.op == "&" and isinstance(strip_casts(e.operand), Index):
        ix = strip_casts(e.operand)
        assert isinstance(ix, Index)
        base = strip_casts(ix.base)
        return (base.id, ix.index) if isinstance(base, Name) else None
    if isinstance(e, Name):
        return e.id, Name("0")
    if isinstance(e, Binary) and e.op == "+" and isinstance(strip_casts(e.left), Name):
        return strip_casts(e.left).id, e.right
    return None


class PrivatizationPlanner:
    def __init__(self, fn: Function, facts: KernelFacts, helpers: frozenset[str]) -> None:
        self.fn, self.f, self.helpers = fn, facts, helpers
        self.body_text = fn.item.text[len(fn.head):]

    @staticmethod
    def fail(why: str):
        raise NotARowKernel(why)

    def plan(self) -> list[Table]:
        code = without_literals(strip_comments(self.body_text))
        if (found := _WARP_BOUND.search(code)) is not None:
            self.fail(f"uses {found.group(0)}")
        if (found := _BUILTIN_USE.search(code)) is not None:
            self.fail(f"uses {found.group(1)} other than by its .x, .y or .z")
        if any(b.shared for b in self.f.bindings):
            self.fail("uses shared memory")
        if any(b.persistent for b in self.f.bindings):
            self.fail("declares a static local (a value kept between threads and calls)")
        type_params = {t.name for t in self.fn.sig.template if t.kind == "type"}
        impure = sorted(c for c in self.f.calls if c not in SIDE_EFFECT_FREE and c not in self.helpers
                        and c not in type_params and c not in KERNEL_CHECKS and c not in OPERATIONS)
        if impure:
            self.fail(f"calls {impure[0]} (only math functions, pure helpers and integer atomics are allowed)")
        atomics = [a for a in self.f.accesses if a.kind == "atomic"]
        if not atomics:
            self.fail("uses no atomics")
        adds = self.adds()
        if len(adds) != len(atomics) or len(adds) != sum(
                1 for s in statements_under(self.fn.body) for x in _exprs(s) for y in walk_expr(x)
                if isinstance(y, Call) and call_name(y) in OPERATIONS):
            self.fail("uses an atomic's old value, or an atomic the tier cannot read")
        tables: dict[str, list[tuple[str, PrivateAdd]]] = {}
        for op, add, table in adds:
            tables.setdefault(table, []).append((op, add))
        out = []
        for name, found in tables.items():
            ops = {op for op, _ in found}
            if len(ops) != 1:
                self.fail(f"combines {name} with several atomic operations ({', '.join(sorted(ops))})")
            param = next((p for p in self.fn.sig.params if p.name == name), None)
            b = self.f.params.get(name)
            if param is None or b is None or param.pointer != 1 or b.assignments or "&" in param.type:
                self.fail(f"adds into {name}, which is not a pointer parameter left as the caller gave it")
            assert param is not None
            if not is_integer_type(param.base) or param.const:
                self.fail(f"adds into {name}, whose element type {param.base} is not a known integer type")
            mine = [a for a in self.f.accesses if a.array is not None and a.array.name == name]
            if any(a.kind != "atomic" or a.reinterpreted for a in mine):
                self.fail(f"reads or stores {name} besides its atomics")
            self.only_in_adds(name, [add for _, add in found])
            out.append(Table(name, next(iter(ops)), tuple(add for _, add in found)))
        return sorted(out, key=lambda t: [p.name for p in self.fn.sig.params].index(t.name))

    def adds(self) -> list[tuple[str, PrivateAdd, str]]:
        """Every statement that is one integer atomic into a named pointer: (op, the add, table)."""
        out = []
        for s in statements_under(self.fn.body):
            if not isinstance(s, ExprStmt):
                continue
            e = s.expr
            op = call_name(e)
            if op not in OPERATIONS or not isinstance(e, Call) or len(e.args) != 2:
                continue
            target = _target(e.args[0])
            if target is None:
                self.fail(f"makes an atomic into {to_c(e.args[0])[:40]}, not a parameter's element")
            table, index = target  # type: ignore[misc]
            out.append((op, PrivateAdd(s, index, e.args[1]), table))
        return out

    def only_in_adds(self, name: str, adds: list[PrivateAdd]) -> None:
        """NAME appears in the kernel's code only as the table of its atomics (not passed to a helper,
        copied into a local or compared)."""
        masked = list(self.body_text)
        for add in adds:
            start, end = add.statement.span
            masked[start:end] = " " * (end - start)
        if re.search(rf"(?<![\w.]){re.escape(name)}\b", without_literals(strip_comments("".join(masked)))):
            self.fail(f"uses {name} besides its atomics")
        for add in adds:
            if any(isinstance(x, Name) and x.id == name for e in (add.index, add.value) for x in walk_expr(e)):
                self.fail(f"reads {name} inside an atomic into it")


def _exprs(s):
    """The expressions a statement holds itself (not its sub-statements')."""
    for attr in ("expr", "cond", "step", "value"):
        e = getattr(s, attr, None)
        if isinstance(e, Expr):
            yield e
    for d in getattr(s, "declarators", ()) or ():
        if d.init is not None:
            yield d.init
        yield from (x for x in d.array if x is not None)


def plan_privatization(fn: Function, helpers: frozenset[str] = frozenset(),
                       constants: dict[str, int] | None = None) -> list[Table]:
    """FN read with the program's macros expanded (launcher.expanded_function, as LaunchSite has it)."""
    if not fn.is_kernel:
        raise NotARowKernel("is not a kernel")
    return PrivatizationPlanner(fn, collect_facts(fn.sig, fn.body, constants, helpers), helpers).plan()


def private_helpers(ops: list[str]) -> str:
    """The element type a table points to, and for each of OPS the atomic that adds into a private
    table where the index falls inside it, else into the global table as the baseline did."""
    return (
        "template <class KlT> struct kl_element;\n"
        "template <class KlT> struct kl_element<KlT&> { typedef KlT type; };\n"
        + "\n".join(
            f"template <class KlE, class KlI, class KlV> static __device__ __forceinline__ void kl_private_{op}("
            f"KlE* kl_table, KlE* kl_private, unsigned int kl_bins, KlI kl_index, KlV kl_value) {{ "
            f"if ((unsigned long long)kl_index < (unsigned long long)kl_bins) {op}(&kl_private[kl_index], kl_value); "
            f"else {op}(&kl_table[kl_index], kl_value); }}"
            for op in dict.fromkeys(ops)))


def private_kernel(fn: Function, tables: list[Table]) -> str:
    """The kernel with private tables: its body, as written but for the adds and blockIdx.x/gridDim.x,
    run by a lambda once for each baseline block this block takes."""
    body = fn.item.text[len(fn.head):]
    edits = []
    for k, t in enumerate(tables):
        for add in t.adds:
            start, end = add.statement.span
            edits.append((start, end, f"kl_private_{t.op}({t.name}, kl_private{k}, kl_bins, ({to_c(add.index)}), "
                                      f"({to_c(add.value)}));"))
    rewritten = apply_edits(body, edits)
    code = strip_comments(rewritten)
    open_at, close_at = code.index("{"), code.rindex("}")
    inner = _GRID_X.sub(GRID_PARAM, _BLOCK_X.sub("kl_block_x", code[open_at:close_at + 1]))
    types = [f"typename kl_element<decltype(*{t.name})>::type" for t in tables]
    lines = [f"typedef {ty} kl_type{k};" for k, ty in enumerate(types)]
    lines += [f'static_assert(::kl_integer<kl_type{k}>::bits >= 32, "kernelloop: {t.name} holds 32- or 64-bit '
              f'integers");' for k, t in enumerate(tables)]
    size = " + ".join(f"sizeof(kl_type{k})" for k in range(len(tables)))
    lines.append(f"constexpr unsigned int kl_bins = (unsigned int)({PRIVATE_BYTES} / ({size}));")
    lines += [f"__shared__ kl_type{k} kl_private{k}[kl_bins];" for k in range(len(tables))]
    lines.append("const unsigned int kl_threads = blockDim.x * blockDim.y * blockDim.z;")
    lines.append("const unsigned int kl_thread = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);")

    def identity(k: int, t: Table) -> str:
        return OPERATIONS[t.op].replace("KlE", f"kl_type{k}")
    lines.append("for (unsigned int kl_j = kl_thread; kl_j < kl_bins; kl_j += kl_threads) { "
                 + " ".join(f"kl_private{k}[kl_j] = {identity(k, t)};" for k, t in enumerate(tables)) + " }")
    lines.append("__syncthreads();")
    lines.append(f"{{ const auto kl_run_block = [&](const unsigned int kl_block_x) {inner};")
    lines.append(f"  for (unsigned int kl_b = blockIdx.x; kl_b < {GRID_PARAM}; kl_b += gridDim.x) kl_run_block(kl_b); }}")
    lines.append("__syncthreads();")
    lines.append("for (unsigned int kl_j = kl_thread; kl_j < kl_bins; kl_j += kl_threads) { "
                 + " ".join(f"if (kl_private{k}[kl_j] != {identity(k, t)}) {t.op}(&{t.name}[kl_j], kl_private{k}[kl_j]);"
                            for k, t in enumerate(tables)) + " }")
    head = with_item_count(fn.head, f"unsigned int {GRID_PARAM}")
    return head + " {\n  " + "\n  ".join(lines) + "\n}\n"


def private_launch(site: LaunchSite, tables: list[Table]):
    """The kernel on at most GRID_CAP blocks along x, the baseline's grid.x passed for its blocks."""
    launch = site.stmt.expr
    args = [to_c(a) for a in launch.args]  # type: ignore[attr-defined]
    apart = buffers_apart(site, [t.name for t in tables], [])

    def new_launch(base: BaselineLaunch, kernel: str) -> tuple[str, str, str, list[str], str]:
        declarations = (f"const unsigned int kl_baseline_x = (unsigned int)({base.grid}).x; "
                        f"const unsigned int kl_private_x = kl_baseline_x < {GRID_CAP}u ? kl_baseline_x : {GRID_CAP}u;")
        grid = f"dim3(kl_private_x, ({base.grid}).y, ({base.grid}).z)"
        statement = f"{kernel}<<<{grid}, {base.block}, {base.shmem}{base.stream}>>>({', '.join([*args, 'kl_baseline_x'])});"
        return statement, grid, f"{base.block}", ["kl_baseline_x <= 2147483647u", *apart], declarations
    return new_launch


def privatization_rewrites(part: EditablePart, harness: str, preamble: str = "") -> tuple[list[Rewrite], list[str]]:
    """A rewrite for every launch of a kernel whose integer atomics the tier may privatise."""
    def rewrites_of(site: LaunchSite) -> list[Rewrite]:
        name = site.kernel.name
        tables = plan_privatization(site.kernel, site.helpers, site.constants)
        launch_arguments_checked(site)
        kernel_text = private_helpers([t.op for t in tables]) + "\n\n" + private_kernel(site.kernel, tables)
        described = ", ".join(f"{t.name} ({t.op}, {len(t.adds)} site{'s' if len(t.adds) > 1 else ''})" for t in tables)
        return [Rewrite(
            label=f"atomics tier: private tables for {name}",
            **site.beside(kernel_text, private_launch(site, tables)),
            kernel=name, launcher=site.launcher.name,
            detail=f"kernel {name} adds integers into {described} with global atomics; each block keeps "
                   f"private copies of their first entries in shared memory ({PRIVATE_BYTES} bytes), runs "
                   f"several of the baseline's blocks (at most {GRID_CAP} blocks) and adds what changed once")]
    return tier_rewrites(part, harness, preamble, "atomics", rewrites_of)
