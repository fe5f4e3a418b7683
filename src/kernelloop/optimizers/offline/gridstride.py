"""The grid tier: a grid-stride kernel launched on fewer threads than it has elements gets a grid
that gives each thread about one element.

`for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)`
visits every `i` below `n` whatever the grid, so the grid is a performance choice only, and a
launcher that fixes it (`dim3 grid(32)`, a constant sized for another GPU) leaves most of the
GPU idle. The rewrite keeps the kernel's text and launches it on enough blocks to cover `n`
(never fewer than the baseline's), capped at WIDE_THREADS threads.

Taken only where the iterations are independent of each other and of the thread that runs them,
so any grid computes the same result:
- the kernel is the loop (declarations of its start and stride before it, and of values no
  thread writes); the loop starts at the global x index, steps by the grid's x width, ends at
  `i < bound` with the bound a parameter or a constant, and nothing in its body ends it early
  or assigns its counter;
- the body reads no CUDA built-in (the kernel is read with the program's macros expanded; a
  helper may read none), no shared memory, calls
  only math functions and the program's pure helpers, uses no atomics and no warp or inline
  assembly, and assigns no variable declared outside it (no value carried between iterations);
- every array the body stores is a parameter (or a local array declared inside the body; no
  local is static), and each iteration touches its own elements of it only: every access has the
  form `c * i + d + u` with one `c` for all, `u` the same uniform value, and the constants `d`
  spanning less than `|c|`;
- no name computed from the thread's coordinates (the start, the stride, a copy of either) is
  read in the body;
- the launch's arguments only compute values (the guard evaluates them too), and a stored
  buffer and another parameter's come from one launcher variable only as the same buffer updated
  in place (every access of both at the iteration's own elements); the guard also asks that the
  addresses differ when the launch runs (a buffer the harness hands twice). Overlapping but
  unequal buffers handed by the harness itself are not detected (docs/verifier.md).
The counter must not wrap with the wider stride: the rewritten launch runs only where the
bound plus the new thread count stays within the counter's type (the kernel asserts the types
the launcher assumed, so the compiler, not a spelling, decides them); elsewhere, and wherever
the baseline's own launch is illegal, the baseline's launch runs as written. The verifier
decides whether the result is the same and faster.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ...program.scanner import strip_comments
from .axes import _WARP_BOUND
from .conditions import loop_step
from .facts import Binding, KernelFacts, collect_facts, integer_of, lvalue_names
from .launch_guard import BaselineLaunch
from .launcher import EditablePart, Function, grid_reaches, statements_under
from .rowwarp import (
    LaunchSite,
    NotARowKernel,
    Rewrite,
    LaunchBlock,
    _global_x,
    apply_edits,
    block_proof,
    index_form,
    launch_block,
    buffers_apart,
    effect_free_calls,
    in_place_parameters,
    integer_asserts,
    tier_rewrites,
    walk_expr_in,
)
from .symbolic import Poly, is_uniform
from .syntax import Assign, Binary, Call, Decl, Empty, For, Launch, Name, Postfix, Return, Stmt, Unary, to_c, walk_expr
from .whileloop import for_form

# The rewritten launch's threads at most: 64 waves of a large GPU's resident threads (an H200's
# 132 SMs x 2048), more than enough to hide latency, and far enough below 2^31 that an `int`
# counter may still count to within WIDE_THREADS of INT_MAX.
WIDE_THREADS = 1 << 24
_BUILTIN_WORDS = re.compile(r"\b(threadIdx|blockIdx|blockDim|gridDim|warpSize)\b")


@dataclass(frozen=True)
class GridStridePlan:
    loop: For
    counter: str  # its name
    counter_type: str  # as declared
    counter_kind: tuple[int, bool]  # (bits, signed)
    bound_param: str | None  # the parameter the counter stays below, or
    bound_value: int | None  # the constant it does
    bound_kind: tuple[int, bool] | None  # the parameter's (bits, signed)
    stored: frozenset[str] = frozenset()  # the pointer parameters the loop stores through
    # pointer parameters every access of which is at the iteration's own elements of the stored ones
    own_only: frozenset[str] = frozenset()


@dataclass(frozen=True)
class GridStrideLoop:
    """A kernel's grid-stride loop as GridStridePlanner.read_loop reads it (GridStridePlan's fields)."""
    loop: For
    counter: str
    counter_type: str
    counter_kind: tuple[int, bool]
    bound_param: str | None
    bound_value: int | None
    bound_kind: tuple[int, bool] | None
    # the declarations before the loop of its start and stride (`int idx = ...; int stride = ...;`),
    # read nowhere but in its header
    header_declarations: tuple[Decl, ...] = ()


def _stride() -> Poly:
    return Poly.atom("blockDim.x") * Poly.atom("gridDim.x")


class GridStridePlanner:
    def __init__(self, fn: Function, facts: KernelFacts, helpers: frozenset[str], block: LaunchBlock = None) -> None:
        self.fn, self.f, self.helpers = fn, facts, helpers
        self.inside: set[str] = set()  # keys of what the loop's body declares
        self.block = block  # the launch's block (rowwarp.launch_block); the rewrite keeps it
        # the loop's start and step as read: with blockDim.x, or with the launch's constant block K
        self.start, self.strides = _global_x(), (_stride(),)

    @staticmethod
    def fail(why: str):
        raise NotARowKernel(why)

    def plan(self) -> GridStridePlan:
        loop = self.read_loop()
        counter_b = self.f.declared[id(loop.loop.init.declarators[0])]  # type: ignore[union-attr]
        stored, own_only = self.own_elements(counter_b)
        return GridStridePlan(loop.loop, loop.counter, loop.counter_type, loop.counter_kind, loop.bound_param,
                              loop.bound_value, loop.bound_kind, stored, own_only)

    def read_loop(self) -> GridStrideLoop:
        """The kernel as one grid-stride loop whose iterations any grid runs alike: every check of
        the module docstring but which elements an iteration touches (own_elements)."""
        top = [s for s in self.fn.body.body if not isinstance(s, Empty)]
        while top and isinstance(top[-1], Return) and top[-1].value is None:
            top.pop()
        loops = [s for s in top if isinstance(s, For)]
        if len(loops) != 1 or top[-1] is not loops[0]:
            self.fail("is not one grid-stride loop (the loop the last statement, only declarations before it)")
        loop = loops[0]
        before = top[:-1]
        if not all(isinstance(s, Decl) for s in before):
            self.fail("does more than declare values before its grid-stride loop")
        counter, counter_type = self.counter(loop)
        counter_b = self.f.declared[id(loop.init.declarators[0])]  # type: ignore[union-attr]
        facts_loop = next((x for x in self.f.loops if x.cond is loop.cond and x.step is loop.step), None)
        if facts_loop is None or facts_loop.written_in_body or facts_loop.may_end_early or counter_b.assignments != 1:
            self.fail("has a grid-stride loop whose counter is assigned in its body, or that may end early")
        if loop_step(self.f, facts_loop) not in self.strides:
            self.fail("has a loop that does not step by the grid's width (blockDim.x * gridDim.x)")
        bound = self.bound(loop, counter_b)
        counter_kind = integer_of(counter_type)
        if counter_kind is None or counter_kind[0] < 32:
            self.fail(f"counts with {counter_type or '?'}, not an integer type of 32 bits or more")
        header_declarations = self.thread_free(before, loop)
        self.no_carried_values(loop)
        param, value, kind = bound
        return GridStrideLoop(loop, counter, counter_type, counter_kind, param, value, kind, header_declarations)

    def counter(self, loop: For) -> tuple[str, str]:
        init = loop.init
        if not isinstance(init, Decl) or len(init.declarators) != 1 or init.declarators[0].init is None \
                or init.declarators[0].pointer or init.declarators[0].array:
            self.fail("has a loop whose counter is not declared in its header")
        d = init.declarators[0]  # type: ignore[union-attr]
        p = self.f.poly(d.init)  # type: ignore[arg-type]
        start, k = index_form(p) if p is not None else (_global_x(), None)
        if p != start:
            self.fail("has a loop that does not start at the global index (blockIdx.x * blockDim.x + threadIdx.x)")
        if k is not None:  # blockIdx.x * K + threadIdx.x: the global index where the launch's block is K
            if (why := block_proof(d.name, k, self.block)) is not None:
                self.fail(why)
            self.start, self.strides = start, (_stride(), Poly.atom("gridDim.x").scale(k))
        words = init.type.split()  # type: ignore[union-attr]
        return d.name, " ".join(w for w in words if w not in ("const", "volatile", "register"))

    def bound(self, loop: For, counter: Binding) -> tuple[str | None, int | None, tuple[int, bool] | None]:
        c = loop.cond
        if isinstance(c, Binary) and c.op == ">":
            c = Binary("<", c.right, c.left)
        if not (isinstance(c, Binary) and c.op == "<" and self.f.binding(self.f.without_kept_casts(c.left)) is counter):
            self.fail("has a grid-stride loop whose condition is not `counter < bound`")
        right = self.f.without_kept_casts(c.right)  # type: ignore[union-attr]
        p = self.f.poly(right)
        if p is not None and p.is_const:
            return None, p.const_value, None
        b = self.f.binding(right) if isinstance(right, Name) else None
        if b is None or b.param is None or b.assignments or b.pointer:
            self.fail(f"runs its grid-stride loop to {to_c(c.right)}, not to a parameter or a constant")  # type: ignore[union-attr]
        kind = integer_of(b.param.base)  # type: ignore[union-attr]
        if kind is None:
            self.fail(f"runs its grid-stride loop to {b.name}, whose type {b.param.type} is no integer type "  # type: ignore[union-attr]
                      "known here")
        return b.name, None, kind

    def thread_free(self, before: list[Stmt], loop: For) -> tuple[Decl, ...]:
        """The CUDA built-ins appear only in the loop's start and step and in declarations of the
        two (each equal to the global index or the grid's width, and read nowhere but the header);
        nothing reads them through a macro, a helper, warp intrinsics or assembly. Returns those
        declarations."""
        body_text = strip_comments(self.fn.item.text[len(self.fn.head):])
        allowed: list[tuple[int, int]] = [(loop.span[0], loop.body.span[0])]  # type: ignore[attr-defined]
        # names computed from the thread's coordinates, directly or through another such name (red
        # team round 135: `const int threads = step;` read in the body)
        header_names: set[str] = set()
        header_declarations: list[Decl] = []
        for s in before:
            for d in s.declarators:  # type: ignore[attr-defined]
                named = {x.id for x in walk_expr(d.init) if isinstance(x, Name)} if d.init is not None else set()
                if d.array or d.pointer:
                    named |= {x.id for size in d.array if size is not None for x in walk_expr(size) if isinstance(x, Name)}
                if named & ({"threadIdx", "blockIdx", "blockDim", "gridDim", "warpSize"} | header_names):
                    if d.array or d.pointer or self.f.poly(d.init) not in (self.start, *self.strides) or \
                            len(s.declarators) != 1:  # type: ignore[attr-defined]
                        self.fail(f"computes {d.name} from the thread's coordinates, besides the loop's start and step")
                    allowed.append(s.span)  # type: ignore[attr-defined]
                    header_names.add(d.name)
                    header_declarations.append(s)  # type: ignore[arg-type]
        masked = list(body_text)
        for start, end in allowed:
            masked[start:end] = " " * (end - start)
        if (word := _BUILTIN_WORDS.search("".join(masked))) is not None:
            self.fail(f"uses {word.group(1)} besides the grid-stride loop's start and step")
        inside = body_text[loop.body.span[0]:loop.body.span[1]]  # type: ignore[attr-defined]
        if any(re.search(rf"(?<![\w.]){re.escape(n)}\b", inside) for n in header_names):
            self.fail("reads the loop's start or stride inside the loop")
        if (found := _WARP_BOUND.search(body_text)) is not None:
            self.fail(f"uses {found.group(0)}")
        if any(b.shared for b in self.f.bindings):
            self.fail("uses shared memory")
        if (why := effect_free_calls(self.fn, self.f, self.helpers)) is not None:
            self.fail(why)
        return tuple(header_declarations)

    def no_carried_values(self, loop: For) -> None:
        """No variable declared outside the loop's body is assigned (but the counter, by the step):
        an iteration leaves nothing behind for the next one its thread runs."""
        inside = {self.f.declared[id(d)].key for d in _declarators(loop.body) if id(d) in self.f.declared}
        self.inside = inside
        counter = self.f.declared[id(loop.init.declarators[0])].key  # type: ignore[union-attr]
        for b in self.f.bindings:
            if b.key not in inside and b.key != counter and b.assignments:
                self.fail(f"assigns {b.name}, declared outside its grid-stride loop (a value carried between "
                          "iterations)")
        for x in walk_expr_in(loop.body):
            targets = [x.target] if isinstance(x, Assign) else \
                [x.operand] if isinstance(x, (Unary, Postfix)) and x.op in ("++", "--") else []
            for t in targets:
                for name in lvalue_names(t):
                    b = self.f.binding(name)
                    if b is None:
                        self.fail(f"assigns {name.id}, which it does not declare")
                    elif b.key not in inside:
                        self.fail(f"assigns {name.id}, declared outside its grid-stride loop")

    def own_elements(self, counter: Binding) -> tuple[frozenset[str], frozenset[str]]:
        """Each iteration touches only its own elements of every array the kernel stores; returns the
        stored parameters and the pointer parameters accessed only at those elements (either may be
        handed the other's buffer: an update in place)."""
        atom = (f"L:{counter.key}",)
        stored: dict[str, Binding] = {}
        if any(b.persistent for b in self.f.bindings):
            self.fail("declares a static local (a value kept between threads and calls)")
        for a in self.f.accesses:
            if a.kind not in ("store", "atomic"):
                continue
            if a.array is None or a.array.param is None or a.array.assignments:
                if a.array is not None and a.array.array and not a.array.shared and a.array.key in self.inside:
                    continue  # a local array declared in the body is the iteration's own
                # a local array declared before the loop carries values between iterations (red team round 135)
                self.fail(f"stores through {to_c(a.node)[:40]}, which is neither a parameter's array nor an array "
                          "declared inside the loop")
            stored[a.array.key] = a.array
        if not stored:
            self.fail("stores nothing")
        if any(a.array is None for a in self.f.accesses):
            # through a struct's pointer or a global: which buffer it is cannot be told (round 136)
            self.fail("reads memory it cannot name (a global, a pointer inside a struct)")
        patterns: set[tuple[int, Poly]] = set()  # (c, u) of the stored arrays' elements c * i + u
        for key, b in stored.items():
            offsets = [a for a in self.f.accesses if a.array is not None and a.array.key == key]
            slot: int | None = None
            rests: list[Poly] = []
            for a in offsets:
                if a.offset is None or a.reinterpreted:
                    self.fail(f"accesses {b.name} at an index not read as a polynomial, or as another type")
                assert a.offset is not None
                c = sum(coef for m, coef in a.offset.terms if m == atom)
                if any(atom[0] in m and m != atom for m, _ in a.offset.terms) or c == 0:
                    self.fail(f"accesses {b.name} at {to_c(a.node)[:40]}, not moving one-to-one with the counter")
                if slot is not None and c != slot:
                    self.fail(f"accesses {b.name} with different strides of the counter")
                slot = c
                rest = a.offset - Poly.atom(atom[0]).scale(c)
                if not is_uniform(rest):
                    self.fail(f"accesses {b.name} at {to_c(a.node)[:40]}, which depends on more than the counter")
                rests.append(rest)
            assert slot is not None
            spread = [r - rests[0] for r in rests]
            if not all(d.is_const or d.is_zero for d in spread):
                self.fail(f"accesses {b.name} at offsets that differ by more than constants")
            values = [0 if d.is_zero else d.const_value for d in spread]
            if max(values) - min(values) >= abs(slot):
                self.fail(f"accesses {b.name} at elements another iteration stores")
            patterns.add((slot, rests[0]))
        own_only = in_place_parameters(self.fn.sig.params, [a for a in self.f.accesses if a.kind in ("store", "atomic")],
                                       self.f.accesses)
        return frozenset(b.name for b in stored.values()), frozenset(own_only)


def _pattern(offset: Poly, counter_atom: str) -> tuple[int, Poly] | None:
    """(c, u) of an offset c * i + u with u free of the counter, or None."""
    c = sum(coef for m, coef in offset.terms if m == (counter_atom,))
    if c == 0 or any(counter_atom in m and m != (counter_atom,) for m, _ in offset.terms):
        return None
    return c, offset - Poly.atom(counter_atom).scale(c)


def _declarators(s: Stmt | None):
    return (d for x in statements_under(s) if isinstance(x, Decl) for d in x.declarators)


def plan_grid_stride(fn: Function, helpers: frozenset[str] = frozenset(),
                     constants: dict[str, int] | None = None, launch: LaunchBlock = None) -> GridStridePlan:
    """FN read with the program's macros expanded (launcher.expanded_function, as LaunchSite has it)."""
    if not fn.is_kernel:
        raise NotARowKernel("is not a kernel")
    # a pure helper returns to its caller (it may not leave the loop another way)
    return GridStridePlanner(fn, collect_facts(fn.sig, fn.body, constants, helpers), helpers, launch).plan()


_KEYWORDS = {(8, True): "signed char", (8, False): "unsigned char", (16, True): "short", (16, False): "unsigned short",
             (32, True): "int", (32, False): "unsigned int", (64, True): "long long", (64, False): "unsigned long long"}


def asserted_kernel(fn: Function, plan: GridStridePlan) -> str:
    """The kernel as written, with the compiler asserting, before the loop, the integer types the
    launch's guard assumes for the counter and the bound."""
    body = fn.item.text[len(fn.head):]
    checks = [(plan.counter_type, plan.counter_kind)]
    if plan.bound_param is not None:
        checks.append((f"decltype({plan.bound_param})", plan.bound_kind))  # type: ignore[arg-type]
    start = plan.loop.span[0]  # type: ignore[attr-defined]
    return fn.head + apply_edits(body, [(start, start, integer_asserts(checks) + " ")])


def counted_items(site: LaunchSite, loop: GridStrideLoop | GridStridePlan) -> tuple[str, int]:
    """What a launch of SITE hands the loop as its bound, as C (an unsigned long long: the bound
    parameter's launch argument in the parameter's own type, 0 where not positive, or the constant),
    and the largest value the loop's counter holds."""
    launch = site.stmt.expr
    assert isinstance(launch, Launch)
    if loop.bound_param is not None:
        position = [p.name for p in site.kernel.sig.params].index(loop.bound_param)
        ctype = _KEYWORDS[loop.bound_kind]  # type: ignore[index]
        value = f"(({ctype})({to_c(launch.args[position])}))"
        items = f"({value} > ({ctype})0 ? (unsigned long long){value} : 0ULL)"
    else:
        items = f"{max(loop.bound_value or 0, 0)}ULL"
    bits, signed = loop.counter_kind
    return items, (1 << (bits - 1)) - 1 if signed else (1 << bits) - 1


def widened_launch(site: LaunchSite, plan: GridStridePlan):
    """The kernel launched on enough blocks of the baseline's block to cover its bound, never fewer
    than the baseline's, at most WIDE_THREADS threads; only where the counter cannot wrap."""
    launch = site.stmt.expr
    assert isinstance(launch, Launch)
    args = [to_c(a) for a in launch.args]
    distinct = buffers_apart(site, plan.stored, plan.own_only)
    items, limit = counted_items(site, plan)

    def new_launch(base: BaselineLaunch, kernel: str) -> tuple[str, str, str, list[str], str]:
        declarations = (
            f"const unsigned long long kl_items = {items}; "
            f"const unsigned long long kl_per_block = {base.block}.x ? (unsigned long long){base.block}.x : 1ULL; "
            f"const unsigned long long kl_wanted = ((kl_items < {WIDE_THREADS}ULL ? kl_items : {WIDE_THREADS}ULL) "
            f"+ kl_per_block - 1ULL) / kl_per_block; "
            f"const unsigned long long kl_blocks = kl_wanted > {base.grid}.x ? kl_wanted : {base.grid}.x; "
            f"const unsigned long long kl_threads = kl_blocks * kl_per_block;")
        grid = f"dim3((unsigned int)kl_blocks, {base.grid}.y, {base.grid}.z)"
        statement = f"{kernel}<<<{grid}, {base.block}, {base.shmem}{base.stream}>>>({', '.join(args)});"
        conditions = ["kl_threads <= 2147483647ULL",
                      f"kl_items == 0ULL || kl_items - 1ULL <= {limit}ULL - kl_threads", *distinct]
        return statement, grid, f"{base.block}", conditions, declarations
    return new_launch


def launch_arguments_checked(site: LaunchSite) -> None:
    """The rewritten launch evaluates its arguments in its guard too (the bound, the buffers'
    addresses): each must compute a value and do nothing else (red team round 135: `n--` was
    evaluated three times, a host helper's `take(&left)` as often)."""
    launch = site.stmt.expr
    assert isinstance(launch, Launch)
    for a in launch.args:
        for x in walk_expr(a):
            if isinstance(x, (Assign, Call, Launch)) or (isinstance(x, (Unary, Postfix)) and x.op in ("++", "--")):
                raise NotARowKernel(f"is launched with an argument that does more than compute a value ({to_c(a)})")


def grid_rewrites(part: EditablePart, harness: str, preamble: str = "") -> tuple[list[Rewrite], list[str]]:
    """A rewrite for every launch of a grid-stride kernel whose launch is not shown to cover its
    bound (tier_rewrites)."""
    def rewrites_of(site: LaunchSite) -> list[Rewrite]:
        name = site.kernel.name
        kernel = for_form(site.kernel) or site.kernel  # a counted `while` read as its `for`
        plan = plan_grid_stride(kernel, site.helpers, site.constants, launch_block(site))
        lau = next((x for x in part.launchers if x.fn is site.launcher), None)
        launch = site.stmt.expr
        assert isinstance(launch, Launch)
        launch_arguments_checked(site)
        bound = Name(plan.bound_param) if plan.bound_param is not None else None
        if lau is not None and bound is not None and grid_reaches(lau.facts, launch, site.kernel.sig.params, bound):
            raise NotARowKernel(f"is launched with a thread for each of its {plan.bound_param} elements already")
        return [Rewrite(
            label=f"grid tier: {name} on a grid covering its elements",
            **site.beside(asserted_kernel(kernel, plan), widened_launch(site, plan)),
            kernel=name, launcher=site.launcher.name,
            detail=f"kernel {name} is a grid-stride loop over {plan.bound_param or plan.bound_value} elements "
                   f"launched on a grid not shown to cover them; the same kernel on enough blocks for about one "
                   f"element per thread (at most {WIDE_THREADS} threads, never fewer than before)")]
    return tier_rewrites(part, harness, preamble, "grid", rewrites_of)
