"""Analysis of a baseline: for each launcher the harness calls, the kernel it launches and the
family (with argument roles) that kernel's structure matches, or why none does.

Nothing here looks at a name: launchers are found by what the harness calls, kernels by what
the launchers launch, families by the shape of the kernel body.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from ...errors import KernelloopError
from ...program.init import type_aliases, without_alias_definitions
from ...program.macros import expand, program_macros
from ...program.phases import unread_spelling
from ...program.scanner import function_name, preprocessed, scoped_items, strip_comments, without_literals
from ...program.split import split_program
from .cparse import UNKNOWN_NAMES, called_names, declared_names
from .instantiate import instantiate
from .facts import ATOMICS, SIDE_EFFECT_FREE, KernelFacts, ScalarAssign, collect_facts, returning_helpers
from .families import FAMILIES, FAMILY_NAMES
from .families.base import Match, Mismatch
from .launch_words import program_names, read_config, reading_problem
from .launcher import Binder, EditablePart, Function, read_editable, statement_exprs
from .sizes import integral_constants, known_constants, role_values
from .thread_reads import thread_reads
from .syntax import Assign, Binary, Call, Expr, Member, Name, Unary, call_name, to_c, walk_expr
from .valuetype import ValueTypes, kind


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
    # the part with the kernels whose arithmetic converts values kept (without_narrowing drops them
    # for the families and the tiers that recompute a kernel's arithmetic): a tier that keeps every
    # expression of the kernel as written reads these too
    part_as_written: EditablePart | None = None

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
    from .rowwarp import _MAX_CALLS, SIDE_EFFECT_FREE

    return frozenset(SIDE_EFFECT_FREE | set(_MAX_CALLS) | ATOMICS | set(_EXP) | _PURE_MATH | set(_EPILOGUE_CALLS))


def program_declarations(preamble: str, editable: str) -> set[str]:
    """Every name the program's code before the harness declares, read as written and as the
    compiler reads it, its macros expanded (red team rounds 143-145: `#define COMPAT_CLAMP max`,
    `COMPAT_DECL(max) {...}`, `#define COMPAT_DEFINE COMPAT_DECL` each declared a `max` the text
    did not show); UNKNOWN_NAMES (any name) where the expansion cannot be read for sure."""
    code = f"{preamble}\n{editable}"
    found = declared_names(code) | macro_words(code)
    lines = re.sub(r"^[ \t]*#.*(?:\\\n.*)*$", "", strip_comments(code), flags=re.M)
    expanded = expand(lines, program_macros(preamble, editable))
    return found | ({UNKNOWN_NAMES} if expanded is None else declared_names(expanded))


def macro_words(code: str) -> set[str]:
    """The names a `#define` of CODE stands for where its body is only a name (`max`, `::ns::max`):
    a declaration may get its name through it (red team round 143: `#define COMPAT_CLAMP max`
    then `int COMPAT_CLAMP(short, int)` declares `max`, which declared_names, reading before
    macros, sees as COMPAT_CLAMP), and every name handed to a function-like macro where it is used.
    A body that computes (`sqrtf(2.0f / M_PI)`) names no declaration; what a body declares,
    declared_names reads."""
    text = without_literals(preprocessed(code))
    bodies = re.findall(r"^[ \t]*#[ \t]*define[ \t]+\w+(?:\([^)]*\))?(.*)$", text, re.M)
    words = {w for body in bodies if _ONLY_A_NAME.fullmatch(body.strip()) for w in re.findall(r"[A-Za-z_]\w*", body)}
    # every name handed to a function-like macro, wherever it is used: its body may declare it
    # (red team round 144: `COMPAT_DECL(max) { ... }`, read as a definition of COMPAT_DECL)
    functional = set(re.findall(r"^[ \t]*#[ \t]*define[ \t]+(\w+)\(", text, re.M))
    code_lines = re.sub(r"^[ \t]*#.*$", "", text, flags=re.M)
    for m in re.finditer(r"\b([A-Za-z_]\w*)\s*\(", code_lines):
        if m.group(1) in functional:
            depth, end = 0, len(code_lines)
            for i in range(m.end() - 1, len(code_lines)):
                depth += code_lines[i] == "("
                depth -= code_lines[i] == ")"
                if depth == 0:
                    end = i
                    break
            words |= set(re.findall(r"[A-Za-z_]\w*", code_lines[m.end():end]))
    return words


_ONLY_A_NAME = re.compile(r"(?:::\s*)?[A-Za-z_]\w*(?:\s*::\s*[A-Za-z_]\w*)*")


def without_shadowed(part: EditablePart, editable: str, preamble: str) -> EditablePart:
    """The part without the functions whose names may not mean what the tiers read them as (red
    team round 86): one that calls a name the tiers read by its spelling (`max`, `exp`,
    `atomicAdd`) which the program declares itself, anywhere (a namespace's own `max`, a
    using-declaration, a macro, the frozen part); and one whose own name the frozen part also
    declares (an overload or template there may be what a launch or call means)."""
    declared = program_declarations(preamble, editable)
    shadowed = _known_by_spelling() & declared if UNKNOWN_NAMES not in declared else _known_by_spelling()
    frozen = declared_names(preamble)
    besides = _declared_besides_definitions(part)
    spelled = _named_other_than_called(part, editable)
    kept: dict[str, Function] = {}
    problems = list(part.problems)
    for name, fn in part.functions.items():
        calls = {call_name(e) for s in statement_exprs(fn.body) for e in walk_expr(s) if isinstance(e, Call)}
        mine = sorted(c for c in calls if c in shadowed)
        if name in frozen or UNKNOWN_NAMES in frozen:
            problems.append(f"{name}: the frozen part declares a function or name {name} too (an overload or "
                            "template there may be the one a call means); not read")
        elif name in besides or UNKNOWN_NAMES in besides:
            problems.append(f"{name}: the editable part declares {name} as something else too (a variable, a "
                            "type, a member, a parameter or a local may be what a call means); not read")
        elif name in spelled:
            problems.append(f"{name}: the editable part spells {name} other than as a plain call or its definition "
                            "(a template parameter, a default argument, a capture, a qualified or member call may "
                            "be what a call means); not read")
        elif mine and (fn.is_kernel or "__device__" in fn.sig.qualifiers):
            problems.append(f"{name}: calls {mine[0]}, which the program declares itself (the tiers would read it "
                            f"as the library's {mine[0]}); not read")
        else:
            kept[name] = fn
    launchers = [lau for lau in part.launchers if lau.fn.name in kept]
    return EditablePart(part.items, kept, launchers, part.harness_launched, problems, part.harness_referenced)


def without_unread_spelling(part: EditablePart, editable: str, harness: str, preamble: str) -> EditablePart:
    """The part without its device functions where the program is spelled so that its readers may
    not read what the compiler builds (program.phases: a line splice inside a name, a vertical tab
    in a directive; red team round 130)."""
    why = next((f"the {where}'s {why}" for where, text in (("frozen preamble", preamble), ("editable part", editable),
                                                         ("harness", harness)) if (why := unread_spelling(text))),
               None)
    if why is None:
        return part
    kept = {name: fn for name, fn in part.functions.items()
            if not (fn.is_kernel or "__device__" in fn.sig.qualifiers)}
    problems = list(part.problems) + [f"{name}: {why}; not read" for name in part.functions if name not in kept]
    launchers = [lau for lau in part.launchers if lau.fn.name in kept]
    return EditablePart(part.items, kept, launchers, part.harness_launched, problems, part.harness_referenced)


def without_hidden_thread_reads(part: EditablePart, editable: str, preamble: str) -> EditablePart:
    """The part without the device functions whose code may read where their thread runs other
    than in their own text (thread_reads; red team round 126: a parameter's conversion, a default
    argument, a macro, a class's operator reading blockIdx.x, which the axis tier's renaming and
    the row tier's reading of the thread index never saw): every one of them where code a kernel
    may run without naming it does; else a function that names a helper or macro that does."""
    reads = thread_reads(f"{preamble}\n{editable}", {name for name, fn in part.functions.items() if fn.is_kernel})
    kept: dict[str, Function] = {}
    problems = list(part.problems)
    for name, fn in part.functions.items():
        device = fn.is_kernel or "__device__" in fn.sig.qualifiers
        named = reads.named_by(fn.item.text) if device else None
        if device and reads.implicit:
            problems.append(f"{name}: {reads.implicit}; not read")
        elif named is not None:
            problems.append(f"{name}: calls or names {named}, which reads where its thread runs (a built-in, in a "
                            "helper or macro the tiers do not rename); not read")
        else:
            kept[name] = fn
    launchers = [lau for lau in part.launchers if lau.fn.name in kept]
    return EditablePart(part.items, kept, launchers, part.harness_launched, problems, part.harness_referenced)


def _declared_besides_definitions(part: EditablePart) -> set[str]:
    """Every name the editable part declares other than as the name a function definition defines:
    variables (a `__device__` functor or function pointer named like a helper: red team round
    124), types, members, using-declarations, macros, parameters and locals. A call of such a name
    may reach it rather than the function of that name the tiers read. Each definition's name is
    respelled, not blanked, so the parser reads the text whole."""
    texts = []
    for k, item in enumerate(part.items):
        name = function_name(item) if item.is_function_definition else None
        if name:
            head = re.sub(rf"(?<![\w:]){re.escape(name)}(?=\s*[<(])", f"kl_defined_{k}", item.head, count=1)
            texts.append(head + item.text[len(item.head):])
        elif not _EXPLICIT_INSTANTIATION.match(strip_comments(item.text)):
            # a prototype counts too: `RowLimit row_limit(kRows);` reads as one and is a variable
            texts.append(item.text)
    return declared_names("\n".join(texts))


def _named_other_than_called(part: EditablePart, editable: str) -> set[str]:
    """The part's device helpers whose names its code spells anywhere other than as a plain call or
    a definition, `name(` or `name<...>(` with nothing qualifying it: a template parameter
    (`typename row_limit = RowLimit`), a parameter with a default, a lambda capture, a member call,
    a qualified call. The declaration kinds a parser lists miss some of these, and a call may then
    reach what they name rather than the function the tiers read (red team round 125)."""
    code = without_literals(editable)
    found: set[str] = set()
    for name in [n for n, fn in part.functions.items() if not fn.is_kernel and "__device__" in fn.sig.qualifiers]:
        for m in re.finditer(rf"(?<![\w$]){re.escape(name)}(?![\w$])", code):
            before = code[:m.start()].rstrip()
            after = code[m.end():]
            called = _called_here(after)
            if not called or before.endswith((".", "->", "::", "&", "~")):
                found.add(name)
                break
    return found


def _called_here(after: str) -> bool:
    """Whether the text after a name makes it a call: `(`, or a template argument list (any nesting
    of `<>` and `()`: `<sizeof(float)>`, `<W<W<float>>>`, red team round 126) and then `(`."""
    k = len(after) - len(after.lstrip())
    if after[k:k + 1] == "<":
        opened: list[str] = []  # inside parentheses `<` and `>` compare
        for k in range(k, len(after)):
            c = after[k]
            if c == "(" or (c == "<" and opened[-1:] != ["("]):
                opened.append(c)
            elif (c == ")" and opened[-1:] == ["("]) or (c == ">" and opened[-1:] == ["<"]):
                opened.pop()
                if not opened:
                    break
            elif c in ";{})":
                return False
        else:
            return False
        k += 1
        k += len(after[k:]) - len(after[k:].lstrip())
    return after[k:k + 1] == "("


_EXPLICIT_INSTANTIATION = re.compile(r"\s*(?:extern\s+)?template\s+(?!<)")


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
    declared = program_declarations(preamble, editable)
    clashes = set(added if UNKNOWN_NAMES in declared else added & declared)
    # The names a rewrite makes up for itself (its traits `kl_number`, `kl_same_type`, their
    # parameters, its locals `kl_lane`, `kl_offset`): the program must name none of them, anywhere,
    # nor define a macro of that kind (red team round 132: a program that specialised `kl_number`
    # for its own class, or defined it as a macro, made the rewrite's type assertion hold for it).
    program = without_literals(strip_comments(f"{preamble}\n{editable}\n{harness}"))
    named = set(re.findall(r"\b[A-Za-z_]\w*", program))
    in_rewrite = {n for n in re.findall(r"\b[A-Za-z_]\w*", without_literals(strip_comments(rewritten)))
                  if _MADE_UP.match(n)}
    made_up = in_rewrite - set(re.findall(r"\b[A-Za-z_]\w*", without_literals(strip_comments(editable))))
    clashes |= (made_up | (_TIER_HELPERS & in_rewrite)) & named
    # a macro of the program named like a name the rewrite uses, where the part's own code (its
    # directives aside) never used it: `#define kl_lane 0` (a macro the part calls, `KL_EXT_CHECK`, is its own)
    own_code = re.sub(r"^[ \t]*#.*$", "", without_literals(preprocessed(editable)), flags=re.M)
    used = set(re.findall(r"\b[A-Za-z_]\w*", own_code))
    program_macros = {m.group(1) for m in re.finditer(r"^[ \t]*#[ \t]*define[ \t]+(\w+)", preprocessed(
        f"{preamble}\n{editable}\n{harness}"), re.M)}
    clashes |= {m for m in program_macros if m in in_rewrite and m not in used}
    # Names whose meaning CUDA and C++ fix, which the rewrites' own text relies on: the program may
    # neither define a macro of one nor declare one (a built-in variable or type anywhere, a function
    # the rewrite calls) (red team round 134: `#define blockDim (FixedBlock{})` gave the row tier's
    # own `blockDim.x` the program's 128 where it launched 256).
    identifiers = set(re.findall(r"\b[A-Za-z_]\w*", without_literals(strip_comments(rewritten))))
    calls = called_names(rewritten)
    clashes |= {m for m in program_macros if m in identifiers and _relied_on(m)}
    # declared: a built-in variable, or a function the rewrite calls (the declared names hold every name
    # a function-like macro is handed, `CHECK(err == cudaSuccess)`: a type or runtime name is only
    # checked as a macro of its own)
    # A host function's own locals (a launcher's `dim3 blockDim(...)`) are no device code's names.
    device_visible = declared_names("\n".join([preamble] + [item.text for item in scoped_items(editable)
                                                             if not (item.is_function_definition
                                                                     and not item.is_device_item)]))
    code, before = without_literals(strip_comments(rewritten)), without_literals(strip_comments(editable))

    def count_calls(name: str, text: str, qualifier: str) -> int:
        return len(re.findall(rf"(?<![\w.:]){qualifier}{re.escape(name)}\s*(?:<[^<>;]*>)?\s*\(", text))

    clashes |= {n for n in device_visible if n in _BUILTIN_VARIABLES and n in identifiers}
    # a function the program declares that the rewrite calls unqualified, or as `::name`, more often
    # than the part did (the part's own calls and definitions, copied, keep their meaning). A
    # declaration anywhere counts for `::name` too: what the global namespace holds is not read
    # from the program's blocks (red team rounds 138, 141, 142: the program's `max` reached it
    # as a global template, through an inline namespace reopened without `inline`, and through a
    # nested opener `namespace compat::detail`)
    clashes |= {n for n in declared if _is_function(n) and n in calls
                and count_calls(n, code, "") > count_calls(n, before, "")}
    qualified = set(re.findall(r"(?<![\w.:])::\s*([A-Za-z_]\w*)\s*(?:<[^<>;]*>)?\s*\(", code))
    clashes |= {n for n in qualified if _is_function(n) and (n in declared or UNKNOWN_NAMES in declared)
                and count_calls(n, code, r"::\s*") > count_calls(n, before, r"::\s*")}
    return sorted(clashes)


# CUDA's built-in variables and the types and runtime names the rewrites write themselves
_BUILTIN_VARIABLES = frozenset({"threadIdx", "blockIdx", "blockDim", "gridDim", "warpSize"})
_RELIED_NAMES = _BUILTIN_VARIABLES | frozenset({"dim3", "uint3", "size_t",
                           "cudaFuncAttributes", "cudaFuncGetAttributes", "cudaGetDevice", "cudaSuccess",
                           "static_assert",
                           "decltype", "sizeof", "signed", "unsigned", "char", "short", "int", "long", "float",
                           "double", "bool", "const", "constexpr", "true", "false", "void", "auto", "struct",
                           "template", "class", "typename", "static", "if", "else", "for", "return"})


def _is_function(name: str) -> bool:
    return name in SIDE_EFFECT_FREE or name in ATOMICS or (name.startswith("__") and name not in _RELIED_NAMES)


def _relied_on(name: str) -> bool:
    """A name whose meaning CUDA or C++ fixes: a built-in variable, type or keyword the rewrites
    write, an intrinsic (`__shfl_xor_sync`), a math function the tiers read (`fmaxf`, `min`), an atomic."""
    return name in _RELIED_NAMES or _is_function(name)


# The names the tiers' rewrites make up begin so (`kl_lane`, `kl_number`, `KlT`).
_MADE_UP = re.compile(r"(?:kl|Kl|KL)_|Kl[A-Z]")
# The helpers a rewrite defines before the program's own code: named by the program, they may be its own.
_TIER_HELPERS = frozenset({"kl_number", "kl_integer", "kl_same_type", "kl_lib", "kl_kernel_takes", "KlT", "KlA",
                           "KlB"})


def value_conversion(facts: KernelFacts, types: ValueTypes) -> str | None:
    """Why the kernel keeps or converts a value somewhere the float rewrites would not, or None: a
    template computes in float, the row tier splits an accumulation over lanes, and inlining a
    local drops its type (red team rounds 88-90: `C = (int)acc`, `const int whole = acc;`, an `int
    s` summing floats however they are loaded, `(__nv_bfloat16)acc`). Types are proven, not read
    from spelling (valuetype): a place of an integer, 16-bit or unknown type takes only a value
    proven integral or of its own type. Indices are not values: `A[...]`'s index is not looked at."""
    for a in facts.assigns:
        if a.binding.pointer or a.binding.array:
            continue
        if a.op not in ("=", "decl") and kind(types.of_binding(a.binding, 0)) == "bool":
            # `s -= b` is an exclusive or, `s += b` an or, each step: no sum the tiers could split
            return f"updates {a.binding.name}, a bool, with {a.op}"
        if a.value is None:
            continue
        converted = types.conversion(a.value)
        if converted is not None:
            return f"converts a value to {converted[0]} ({a.binding.name})"
        # a declaration converts once, the same in every lane; an update converts at each step
        if not types.fits(types.of_binding(a.binding, 0), a.value, modular=_modular_update(facts, a)):
            return f"keeps {_describe(types, a.value)} in {a.binding.name}, of type {a.binding.type}"
    for access in facts.accesses:
        if access.kind not in ("store", "atomic") or access.value is None:
            continue
        converted = types.conversion(access.value)
        if converted is not None:
            return f"stores a value converted to {converted[0]}"
        modular = access.op in ("+=", "-=", "atomicAdd", "atomicSub", "atomicAdd_block", "atomicAdd_system")
        if not types.fits(types.of(access.node), access.value, modular=modular):
            where = access.array.name if access.array is not None else to_c(access.node)
            return f"stores {_describe(types, access.value)} into {where}, of type {types.of(access.node) or 'unknown'}"
    for e in (x for s in statement_exprs(facts.body) for x in walk_expr(s)):
        if isinstance(e, Unary) and e.op == "&" and isinstance(e.operand, Name):
            b = facts.binding(e.operand)
            if b is not None and not b.pointer and not b.array:
                return f"takes the address of {b.name} (a value changed through a pointer is not followed)"
        if isinstance(e, Assign) and isinstance(e.target, Member):
            if not types.fits(types.of(e.target), e.value) or types.conversion(e.value) is not None:
                return f"keeps {_describe(types, e.value)} in {to_c(e.target)}"
    return None


def _modular_update(facts: KernelFacts, a: ScalarAssign) -> bool:
    """Whether the assignment keeps a value converted once or a wrapped sum: a declaration, a
    `+=`/`-=`, or the `x = x + v`, `x = v + x`, `x = x - v` those spell (C defines `x += v` as `x =
    x + v`; a grid-stride `while` steps its counter so)."""
    if a.op in ("decl", "+=", "-="):
        return True
    if a.op != "=" or not isinstance(a.value, Binary) or a.value.op not in ("+", "-"):
        return False
    sides = (a.value.left, a.value.right) if a.value.op == "+" else (a.value.left,)
    return any(facts.binding(side) is a.binding for side in sides)


def _describe(types: ValueTypes, value: Expr) -> str:
    t = types.of(value)
    return f"a value of type {t}" if t is not None else f"a value of a type not proven ({to_c(value)[:60]})"


def verified_type_arguments(part: EditablePart, declared: set[str] | frozenset[str] = frozenset()) -> dict[str, dict[str, str]]:
    """For each template kernel that every launch in the part's launchers instantiates with the same
    built-in types, its type parameters' types there: `scalar_t` is float where the harness's
    wrapper calls `launch<float>` and the launcher launches `kernel<scalar_t>` (kept-aside set 13's
    group norm, a PyTorch extension's `static_cast<scalar_t>(n)`, read as a conversion to an
    unknown type). The tiers rewrite only that instantiation (`if constexpr`); every other keeps
    the kernel as written. A kernel launched with other arguments anywhere, or through a template
    launcher the harness reaches with none, gets none. The standard integer aliases (`int64_t`,
    `size_t`) count as built-in where the program (DECLARED: the names it declares) names none of
    them itself."""
    from ...program.scanner import split_top_level
    from .rowwarp import _KEYWORD_TYPE, launches_in

    found: dict[str, dict[str, str] | None] = {}
    for lau in part.launchers:
        outer: dict[str, str] = {}
        if lau.fn.sig.template:
            args = split_top_level(lau.template_args) if lau.template_args is not None else []
            if len(args) != len(lau.fn.sig.template):
                outer = {p.name: "" for p in lau.fn.sig.template}  # no instantiation known
            else:
                outer = {p.name: a.strip() for p, a in zip(lau.fn.sig.template, args, strict=True)}
        for stmt in launches_in(lau.fn.body):
            launch = stmt.expr
            name = to_c(launch.kernel).split("::")[-1].split("<")[0].strip()
            kernel = part.functions.get(name)
            if kernel is None or not kernel.sig.template:
                continue
            spelled = launch.targs or (to_c(launch.kernel).split("<", 1)[1].rsplit(">", 1)[0]
                                       if "<" in to_c(launch.kernel) else "")
            targs = split_top_level(spelled) if spelled.strip() else []
            mapping: dict[str, str] | None = {}
            if len(targs) != len(kernel.sig.template):
                mapping = None
            else:
                for param, arg in zip(kernel.sig.template, targs, strict=True):
                    arg = " ".join(outer.get(arg.strip(), arg.strip()).split())
                    if param.kind != "type":
                        continue
                    standard = _STANDARD_INTEGER.fullmatch(arg) is not None and arg.split("::")[-1] not in declared
                    if not arg or not (standard or (_KEYWORD_TYPE.fullmatch(arg) and "::" not in arg)):
                        mapping = None
                        break
                    mapping[param.name] = arg
            if name in found and found[name] != mapping:
                mapping = None
            found[name] = mapping
    return {name: mapping for name, mapping in found.items() if mapping}


_STANDARD_INTEGER = re.compile(r"(?:std::)?(?:u?int(?:8|16|32|64)_t|size_t)")


def without_narrowing(part: EditablePart, editable: str, preamble: str) -> EditablePart:
    """The part without the kernels and device functions whose arithmetic converts a value the
    float rewrites would keep (value_conversion): neither a family nor a tier reads them."""
    program_constants = known_constants(preamble, editable)
    program = f"{preamble}\n{editable}"
    aliases = _unambiguous_aliases(program)
    integral = integral_constants(preamble, editable)
    declared = declared_names(program)
    returns = {name: ("" if any(t.kind == "type" and t.name in fn.sig.return_type.split() for t in fn.sig.template)
                      else fn.sig.return_type) for name, fn in part.functions.items()}
    # a function the frozen part declares (or the part's own, declared twice) returns what its
    # declaration says, which is not read: unknown
    foreign = frozenset(declared - set(returns))
    instantiated = verified_type_arguments(part, declared)
    kept: dict[str, Function] = {}
    problems = list(part.problems)
    for name, fn in part.functions.items():
        device = fn.is_kernel or "__device__" in fn.sig.qualifiers
        why = None
        if device:
            facts = collect_facts(fn.sig, fn.body, program_constants)
            why = value_conversion(facts, ValueTypes(facts, aliases, integral, returns, foreign,
                                                     instantiated.get(name, {})))
        if why is not None:
            problems.append(f"{name}: {why}; the rewrites compute in float, so it is not read")
        else:
            kept[name] = fn
    launchers = [lau for lau in part.launchers if lau.fn.name in kept]
    return EditablePart(part.items, kept, launchers, part.harness_launched, problems, part.harness_referenced)


def _unambiguous_aliases(program: str) -> dict[str, str]:
    """The program's type aliases, less a name declared any other way too (a second alias in
    another namespace or function, a macro `#define acc_t float`, a variable, a parenthesized or
    listed declarator), as the parser reads the program with the alias definitions left out:
    which declaration a kernel sees is not read."""
    found = type_aliases(program)
    once = {name for name in found
            if len(re.findall(rf"\b(?:typedef\s+[\w\s:]+?\s+{re.escape(name)}\s*;|using\s+{re.escape(name)}\s*=)",
                              strip_comments(program))) == 1}
    elsewhere = declared_names(without_alias_definitions(program))
    if UNKNOWN_NAMES in elsewhere:
        return {}
    return {k: v for k, v in found.items() if k in once and k not in elsewhere}


def analyze(editable: str, harness: str, exported: list[str], preamble: str) -> Analysis:
    part = without_shadowed(without_unread_spelling(read_editable(editable, harness, exported, preamble), editable,
                                                    harness, preamble), editable, preamble)
    as_written = without_hidden_thread_reads(part, editable, preamble)
    part = without_hidden_thread_reads(without_narrowing(part, editable, preamble), editable, preamble)
    program_constants = known_constants(preamble, editable)
    verdicts: list[KernelVerdict] = []
    names = program_names(part, editable, preamble)
    instantiated = verified_type_arguments(part, declared_names(f"{preamble}\n{editable}"))
    returning = returning_helpers({n: (fn.body, fn.is_kernel, [p.type for p in fn.sig.params])
                                   for n, fn in part.functions.items()})
    # a launcher of several launches: each launch on its own, in place (launcher.Launcher.per_launch)
    for lau in [view for whole in part.launchers for view in (whole.per_launch or [whole])]:
        verdict = KernelVerdict(launcher=lau.fn.name, kernel=lau.kernel)
        verdicts.append(verdict)
        if lau.problem:
            verdict.problem = lau.problem
            continue
        misread = reading_problem(lau, names)
        if misread:
            verdict.problem = misread
            continue
        lau.config_read = read_config(lau, names)
        kernel = part.functions.get(lau.kernel or "")
        if kernel is None or not kernel.is_kernel:
            unread = next((p for p in part.problems if p.startswith(f"{lau.kernel}:")), None)
            verdict.problem = (f"launches {lau.kernel}, which could not be read ({unread.split(': ', 1)[1]})" if unread
                               else f"launches {lau.kernel}, which is not a kernel defined in the editable part")
            continue
        if len(lau.args) != len(kernel.sig.params):
            verdict.problem = f"passes {len(lau.args)} arguments to {kernel.name}, which takes {len(kernel.sig.params)}"
            continue
        if kernel.sig.template:  # a template kernel: read as the one instantiation the program launches
            read_as = instantiate(kernel.sig, kernel.body, instantiated.get(kernel.name) or {})
            if read_as is not None:
                kernel = replace(kernel, sig=read_as[0], body=read_as[1])
        facts = collect_facts(kernel.sig, kernel.body, program_constants, returning)
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
    return Analysis(part=part, verdicts=verdicts, part_as_written=as_written)
