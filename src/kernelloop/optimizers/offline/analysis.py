"""Analysis of a baseline: for each launcher the harness calls, the kernel it launches and the
family (with argument roles) that kernel's structure matches, or why none does.

Nothing here looks at a name: launchers are found by what the harness calls, kernels by what
the launchers launch, families by the shape of the kernel body.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ...errors import KernelloopError
from ...program.init import type_aliases
from ...program.split import split_program
from .cparse import UNKNOWN_NAMES, called_names, declared_names
from .facts import ATOMICS, KernelFacts, collect_facts
from .families import FAMILIES, FAMILY_NAMES
from .families.base import Match, Mismatch
from .launcher import Binder, EditablePart, Function, read_editable, statement_exprs
from .sizes import constants, role_values
from .syntax import Assign, Binary, Call, Cast, Expr, Index, Name, Num, Ternary, Unary, call_name, walk_expr


@dataclass
class KernelVerdict:
    launcher: str
    kernel: str | None
    match: Match | None = None
    mismatches: list[Mismatch] = field(default_factory=list)
    problem: str | None = None  # the launcher or kernel could not be read at all


@dataclass
class Analysis:
    part: EditablePart
    verdicts: list[KernelVerdict]

    @property
    def matches(self) -> list[Match]:
        return [v.match for v in self.verdicts if v.match is not None]

    def no_fit_message(self) -> str:
        """One line: why no template fits any launcher of this editable part."""
        if not self.verdicts:
            if self.part.harness_launched:
                return (f"no template fits: the harness launches kernel {', '.join(self.part.harness_launched)} itself "
                        "(the templates replace a launcher in the editable part, which must choose the grid)")
            unread = f" ({'; '.join(self.part.problems)})" if self.part.problems else ""
            return f"no template fits: the harness calls no launcher the editable part defines and the analysis can read{unread}"
        parts = []
        for v in self.verdicts:
            if v.problem:
                parts.append(f"launcher {v.launcher} {v.problem}")
                continue
            reasons = "; ".join(f"{m.family}: {m.reason}" for m in v.mismatches)
            parts.append(f"kernel {v.kernel}'s structure matches none of {', '.join(FAMILY_NAMES)} ({reasons})")
        return "no template fits: " + " | ".join(parts)


def _known_by_spelling() -> frozenset[str]:
    """Every call name a tier or family reads by its spelling (a math function, an atomic)."""
    from .families.matmul import _EPILOGUE_CALLS
    from .families.softmax import _EXP
    from .families.stencil import _PURE_MATH
    from .rowwarp import _MAX_CALLS, PURE_FUNCTIONS

    return frozenset(PURE_FUNCTIONS | set(_MAX_CALLS) | ATOMICS | set(_EXP) | _PURE_MATH | set(_EPILOGUE_CALLS))


def without_shadowed(part: EditablePart, editable: str, preamble: str) -> EditablePart:
    """The part without the functions whose names may not mean what the tiers read them as (red
    team round 86): one that calls a name the tiers read by its spelling (`max`, `exp`,
    `atomicAdd`) which the program declares itself, anywhere (a namespace's own `max`, a
    using-declaration, a macro, the frozen part); and one whose own name the frozen part also
    declares (an overload or template there may be what a launch or call means)."""
    declared = declared_names(f"{preamble}\n{editable}")
    shadowed = _known_by_spelling() & declared if UNKNOWN_NAMES not in declared else _known_by_spelling()
    frozen = declared_names(preamble)
    kept: dict[str, Function] = {}
    problems = list(part.problems)
    for name, fn in part.functions.items():
        calls = {call_name(e) for s in statement_exprs(fn.body) for e in walk_expr(s) if isinstance(e, Call)}
        mine = sorted(c for c in calls if c in shadowed)
        if name in frozen or UNKNOWN_NAMES in frozen:
            problems.append(f"{name}: the frozen part declares a function or name {name} too (an overload or "
                            "template there may be the one a call means); not read")
        elif mine and (fn.is_kernel or "__device__" in fn.sig.qualifiers):
            problems.append(f"{name}: calls {mine[0]}, which the program declares itself (the tiers would read it "
                            f"as the library's {mine[0]}); not read")
        else:
            kept[name] = fn
    launchers = [lau for lau in part.launchers if lau.fn.name in kept]
    return EditablePart(part.items, kept, launchers, part.harness_launched, problems, part.harness_referenced)


def names_the_rewrite_adds(editable: str, preamble: str, harness: str, source: str) -> list[str]:
    """Names a rewrite's text (a whole program) calls that the baseline did not, and that the program
    declares itself (red team round 87): the rewrite's `fmaxf(m, ...)` or a template's `expf(...)`,
    written inside the program's namespace, would call the namespace's own overload, not the
    library's. A rewrite that adds one is not proposed."""
    # the editable parts: a call the harness makes at file scope says nothing of what a call in the
    # program's namespace means
    try:
        rewritten = split_program(source, "rewrite.cu").editable  # a whole program
    except KernelloopError:
        rewritten = source  # the editable part alone
    added = called_names(rewritten) - called_names(editable)
    declared = declared_names(f"{preamble}\n{editable}")
    return sorted(added if UNKNOWN_NAMES in declared else added & declared)


_WIDE_FLOATS = frozenset(["float", "double"])  # what the templates and the tiers' combines compute in
_FLOATS = _WIDE_FLOATS | {"__half", "half", "__nv_bfloat16", "nv_bfloat16"}
# Calls whose result is a floating value.
_FLOAT_MATH = frozenset("""
    expf exp __expf exp2f exp2 expm1f logf log __logf log2f log2 log10f log10 log1pf sqrtf sqrt rsqrtf rsqrt
    cbrtf powf pow __powf sinf cosf tanf sin cos tan __sinf __cosf tanhf tanh erff erf erfcf fabsf fabs
    fmaxf fminf fmax fmin floorf floor ceilf ceil roundf round truncf fmodf fmaf fma __fdividef __frcp_rn
    __fsqrt_rn __fmul_rn __fadd_rn __fmaf_rn __int2float_rn __half2float __bfloat162float copysignf
""".split())


def value_conversion(facts: KernelFacts, aliases: dict[str, str] | None = None) -> str | None:
    """Why the kernel narrows a floating value (to an integer, or to a 16-bit float) somewhere the
    rewrites would not: a template computes in float, the row tier splits an accumulation over
    lanes, and inlining a local drops its type (red team rounds 88, 89: `C = (int)acc`, `const int
    whole = acc; C = whole;`, an `int s` summing floats, `(__nv_bfloat16)acc`), or None. Indices
    are not values: a cast inside `A[...]` is not looked at."""
    def canon(ctype: str) -> str:  # `sample_t` (typedef float): float
        ctype = " ".join(ctype.replace("const ", "").split())
        return " ".join((aliases or {}).get(ctype, ctype).replace("const ", "").split())

    def floating(e: Expr | None) -> bool:
        for x in _value_exprs(e):
            if isinstance(x, Num) and x.is_float:
                return True
            if isinstance(x, Index) and isinstance(x.base, Name):
                b = facts.binding(x.base)
                if b is not None and canon(b.type) in _FLOATS:
                    return True
            if isinstance(x, Name):
                b = facts.binding(x)
                if b is not None and not b.pointer and canon(b.type) in _FLOATS:
                    return True
            if isinstance(x, Call) and call_name(x) in _FLOAT_MATH:
                return True
        return False

    def narrowing_cast(e: Expr | None) -> Cast | None:
        return next((x for x in _value_exprs(e) if isinstance(x, Cast)
                     and canon(x.type) not in _WIDE_FLOATS and floating(x.operand)), None)

    for a in facts.assigns:
        if a.value is None or a.binding.pointer or a.binding.array:
            continue
        cast = narrowing_cast(a.value)
        if cast is not None:
            return f"converts a value to {cast.type} ({a.binding.name})"
        if canon(a.binding.type) not in _WIDE_FLOATS and floating(a.value):
            return f"keeps a floating value in {a.binding.name}, a {a.binding.type}"
    for access in facts.accesses:
        if access.kind not in ("store", "atomic") or access.value is None:
            continue
        cast = narrowing_cast(access.value)
        if cast is not None:
            return f"stores a value converted to {cast.type}"
        if access.array is not None and canon(access.array.type) not in _WIDE_FLOATS and floating(access.value):
            return f"stores a floating value into {access.array.name}, a {access.array.type} array"
    return None


def _value_exprs(e: Expr | None):
    """E and its sub-expressions where a value is computed, not an address (`A[...]`'s index is
    skipped; the loaded element is a value)."""
    if e is None:
        return
    yield e
    if isinstance(e, Index):
        return
    children: list[Expr] = []
    if isinstance(e, (Cast, Unary)):
        children = [e.operand]
    elif isinstance(e, Binary):
        children = [e.left, e.right]
    elif isinstance(e, Ternary):
        children = [e.then, e.other]
    elif isinstance(e, Call):
        children = list(e.args)
    elif isinstance(e, Assign):
        children = [e.value]
    for child in children:
        yield from _value_exprs(child)


def without_narrowing(part: EditablePart, editable: str, preamble: str) -> EditablePart:
    """The part without the kernels and device functions whose arithmetic narrows a floating value
    (value_conversion): neither a family nor a tier reads them."""
    program_constants = constants(preamble, editable)
    aliases = type_aliases(f"{preamble}\n{editable}")
    kept: dict[str, Function] = {}
    problems = list(part.problems)
    for name, fn in part.functions.items():
        device = fn.is_kernel or "__device__" in fn.sig.qualifiers
        why = value_conversion(collect_facts(fn.sig, fn.body, program_constants), aliases) if device else None
        if why is not None:
            problems.append(f"{name}: {why}; the rewrites compute in float, so it is not read")
        else:
            kept[name] = fn
    launchers = [lau for lau in part.launchers if lau.fn.name in kept]
    return EditablePart(part.items, kept, launchers, part.harness_launched, problems, part.harness_referenced)


def analyze(editable: str, harness: str, exported: list[str], preamble: str) -> Analysis:
    part = without_narrowing(without_shadowed(read_editable(editable, harness, exported), editable, preamble),
                             editable, preamble)
    program_constants = constants(preamble, editable)
    verdicts: list[KernelVerdict] = []
    for lau in part.launchers:
        verdict = KernelVerdict(launcher=lau.fn.name, kernel=lau.kernel)
        verdicts.append(verdict)
        if lau.problem:
            verdict.problem = lau.problem
            continue
        kernel = part.functions.get(lau.kernel or "")
        if kernel is None or not kernel.is_kernel:
            unread = next((p for p in part.problems if p.startswith(f"{lau.kernel}:")), None)
            verdict.problem = (f"launches {lau.kernel}, which could not be read ({unread.split(': ', 1)[1]})" if unread
                               else f"launches {lau.kernel}, which is not a kernel defined in the editable part")
            continue
        if len(lau.args) != len(kernel.sig.params):
            verdict.problem = f"passes {len(lau.args)} arguments to {kernel.name}, which takes {len(kernel.sig.params)}"
            continue
        facts = collect_facts(kernel.sig, kernel.body, program_constants)
        binder = Binder(lau, kernel)
        for family in FAMILIES:
            try:
                result = family.match(facts, binder)
            except Exception as exc:  # a shape the matcher did not foresee: that family does not fit
                result = Mismatch(family.NAME, f"analysis failed ({type(exc).__name__})")
            if isinstance(result, Match):
                result.sizes = role_values(result.polys, lau, [p.name for p in kernel.sig.params], preamble, harness)
                result.zeroing = [z.text for z in lau.zeroing] + result.zeroing
                verdict.match = result
                break
            verdict.mismatches.append(result)
    return Analysis(part=part, verdicts=verdicts)
