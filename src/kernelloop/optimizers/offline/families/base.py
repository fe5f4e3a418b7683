"""What every family module provides, and the helpers their matchers share.

A family module recognizes one kind of kernel by the structure of its body (`match`), maps the
launcher's arguments to the roles of the templates' canonical interface, and lists the
template configurations (meta-parameters) that fit it, with what the cost model needs to
rank them (`configs`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from ..facts import Access, Binding, KernelFacts
from ..launcher import Binder, Launcher
from ..symbolic import Poly, split_thread
from ..syntax import Call, Cast, Expr, Index, Name, Num, Unary, call_name, strip_casts, to_c  # noqa: F401 - re-exported


@dataclass
class Match:
    family: str
    kernel: str
    launcher: Launcher
    roles: dict[str, str]  # canonical role -> C text in the launcher's scope
    described: dict[str, str]  # role -> what it is, for the notes
    sizes: dict[str, int | None]  # integer roles the harness fixes
    detail: str  # one line: what was recognized
    polys: dict[str, Poly] = field(default_factory=dict)  # integer roles as kernel-side polynomials
    placeholders: dict[str, str] = field(default_factory=dict)  # template values taken from the baseline
    zeroing: list[str] = field(default_factory=list)  # statements to run before the template
    # C conditions, in the launcher's scope, under which the template computes what the baseline
    # does (a grid that rounds down covers all only where its tile divides the size); beyond them
    # the candidate launches the baseline
    conditions: list[str] = field(default_factory=list)

    def size(self, role: str, default: int) -> int:
        v = self.sizes.get(role)
        return v if v is not None and v > 0 else default


@dataclass
class Mismatch:
    family: str
    reason: str


@dataclass(frozen=True)
class Config:
    """One template instantiation the ranking can choose."""

    template: str
    technique: str
    params: tuple[tuple[str, str], ...]  # searched meta-parameters, in label order
    threads: int  # per block
    smem_bytes: int  # static shared memory per block
    min_registers: int  # an optimistic lower bound (ptxas gives the real count)
    blocks: int | None  # grid size for the harness's problem; None when unknown
    prior: float  # expected speedup over a naive baseline (from the GPU-verified exemplars)
    tags: frozenset[str]  # what the technique fixes, matched against the diagnosis
    best_known: bool = False  # the configuration the exemplar measured
    memory_bound: bool = True  # occupancy hides its latency (not an ILP-by-design kernel)
    label_override: str = ""

    @property
    def label(self) -> str:
        if self.label_override:
            return self.label_override
        return f"{self.technique} " + " ".join(f"{k}={v}" for k, v in self.params)

    def values(self) -> dict[str, str]:
        return dict(self.params)


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


# -- shared matcher helpers ------------------------------------------------------------------------

def param_arrays(f: KernelFacts, kind: str | None = None) -> list[Access]:
    return [a for a in f.accesses if a.array is not None and a.array.param is not None
            and (kind is None or a.kind == kind)]


def unreadable_access(f: KernelFacts) -> str | None:
    """Why some access cannot be analysed (unknown array, reinterpreted, non-affine index)."""
    for a in f.accesses:
        if a.array is None:
            return f"accesses memory the kernel does not name ({a.kind})"
        if a.array.param is not None and a.reinterpreted:
            return f"reads {a.array.name} through a cast to another element type"
        if a.array.param is not None and a.offset is None:
            return f"indexes {a.array.name} with a non-polynomial expression"
    return None


def is_float_pointer(b: Binding | None, *, const_ok: bool = True, writable: bool = False) -> bool:
    if b is None or b.param is None or b.param.pointer != 1 or b.param.base != "float":
        return False
    return not (writable and b.param.const)



def read_target(f: KernelFacts, e: Expr) -> tuple[Binding, Poly] | None:
    """(array, element offset) when `e` (resolved or not) is one load: x[i], *p, __ldg(&x[i])."""
    e = strip_casts(f.resolve(e))
    if isinstance(e, Index):
        base, off, re_ = f.array_of(e.base)
        idx = f.poly(e.index)
        if base is None or off is None or idx is None or re_:
            return None
        return base, off + idx
    if isinstance(e, Unary) and e.op == "*":
        base, off, re_ = f.array_of(e.operand)
        return None if base is None or off is None or re_ else (base, off)
    if isinstance(e, Call) and call_name(e) in ("__ldg", "__ldca", "__ldcg", "__ldcs") and len(e.args) == 1:
        base, off, re_ = f.array_of(e.args[0])
        return None if base is None or off is None or re_ else (base, off)
    return None


def is_zero_literal(e: Expr) -> bool:
    e = strip_casts(e)
    return isinstance(e, Num) and e.value == 0


def coordinate_form(offset: Poly,
                    stride_key: tuple[str, ...] | None = None) -> tuple[tuple[str, ...], Poly, Poly] | None:
    """offset = major * S + minor with S one uniform monomial and major/minor thread coordinates:
    returns (S, major, minor)."""
    groups = split_thread(offset)
    if len(groups) != 2 or () not in groups:
        return None
    (key,) = [k for k in groups if k != ()]
    if stride_key is not None and key != stride_key:
        return None
    return key, groups[key], groups[()]


def is_coordinate(p: Poly) -> bool:
    """A per-thread value with no constant offset (row, col, i)."""
    return not p.is_zero and not p.is_const and p.const_value == 0


def role_texts(binder: Binder, pointers: dict[str, Binding],
               ints: dict[str, Poly]) -> tuple[dict[str, str], dict[str, str]] | str:
    """C texts of the roles in the launcher's scope, and their descriptions; or why not."""
    roles: dict[str, str] = {}
    described: dict[str, str] = {}
    for role, b in pointers.items():
        text = binder.pointer_text(b.name)
        if text is None:
            return f"cannot map kernel parameter {b.name} to a launcher argument"
        roles[role], described[role] = text, text
    for role, p in ints.items():
        text = binder.int_text(p)
        if text is None:
            return f"cannot express {role} = {p} with the launcher's arguments"
        roles[role], described[role] = text, text
    return roles, described


@dataclass
class ElementValue:
    """A stored value read as an elementwise function of one loaded element and uniform values."""

    text: str  # C text with the load replaced by `load_text` (types and arithmetic as written)
    scalars: list[Binding]  # the kernel's non-array parameters it names, in order of first use
    plain: bool  # the value is the load itself (through value-keeping casts at most)


def elementwise_value(f: KernelFacts, value: Expr, array: Binding, offset: Poly, load_text: str,
                      scalar_name: Callable[[int, Binding], str] | None = None) -> ElementValue | str:
    """The stored VALUE as an expression of the one element ARRAY[OFFSET] and of values every
    thread shares (non-array kernel parameters, the program's constants, literals, locals computed
    from those alone, side-effect-free math), as C text over LOAD_TEXT; or one line saying why not
    (it reads another element or array, depends on the thread's coordinates, ...). A local is
    written out as `((type)(its value))`: its own conversion is kept, so the arithmetic and types
    are the kernel's own; SCALAR_NAME(i, parameter) names the i-th scalar parameter in the text (its own
    name by default). Shared by the transpose family and the transpose tier."""
    from ..facts import SIDE_EFFECT_FREE
    from ..syntax import Binary, Member, Ternary

    scalars: list[Binding] = []
    loads = 0

    def text(e: Expr, depth: int = 0) -> str:
        nonlocal loads
        if depth > 32:
            raise _Refused("the stored value is too deep to read")
        target = read_target(f, e) if isinstance(e, (Index, Unary, Call)) else None
        if target is not None:
            if target[0] is not array or target[1] != offset:
                raise _Refused(f"the stored value reads {target[0].name} at another element (not one loaded value)"
                               if target[0] is array else f"the stored value reads a second array, {target[0].name}")
            loads += 1
            return load_text
        if isinstance(e, Num):
            return to_c(e)
        if isinstance(e, Member):
            raise _Refused("the stored value depends on the thread's coordinates")
        if isinstance(e, Name):
            b = f.binding(e)
            if b is None:
                if e.id in f.constants:
                    return e.id
                raise _Refused(f"the stored value names {e.id}, which is neither a parameter nor a constant")
            if b.pointer or b.array or b.shared:
                raise _Refused(f"the stored value reads array {b.name} other than through the one load")
            if b.param is not None:
                if b not in scalars:
                    scalars.append(b)
                return scalar_name(scalars.index(b), b) if scalar_name is not None else e.id
            if b.init is None or b.assignments or b.loop_var or b.persistent:
                raise _Refused(f"the stored value names {b.name}, which is not one value fixed at its declaration")
            inner = text(b.init, depth + 1)
            return f"({inner})" if b.type in ("auto", "const auto") else f"(({b.type})({inner}))"
        if isinstance(e, Cast):
            return f"(({e.type})({text(e.operand, depth + 1)}))"
        if isinstance(e, Unary) and e.op in ("-", "+", "!", "~"):
            return f"({e.op}{text(e.operand, depth + 1)})"
        if isinstance(e, Binary) and e.op in ("+", "-", "*", "/", "%", "<<", ">>", "&", "|", "^", "<", ">", "<=",
                                              ">=", "==", "!=", "&&", "||"):
            return f"({text(e.left, depth + 1)} {e.op} {text(e.right, depth + 1)})"
        if isinstance(e, Ternary):
            return f"({text(e.cond, depth + 1)} ? {text(e.then, depth + 1)} : {text(e.other, depth + 1)})"
        if isinstance(e, Call) and isinstance(e.func, Name) and len(e.args) == 1 and not e.targs and \
                e.func.id in {t.name for t in f.sig.template if t.kind == "type"}:
            return f"(({e.func.id})({text(e.args[0], depth + 1)}))"  # `T(x * scale)`: a cast to the element type
        if isinstance(e, Call) and call_name(e) in SIDE_EFFECT_FREE and isinstance(e.func, Name):
            targs = f"<{e.targs}>" if e.targs else ""
            return f"{e.func.id}{targs}({', '.join(text(a, depth + 1) for a in e.args)})"
        raise _Refused(f"the stored value is not arithmetic of the load and uniform values ({to_c(e)})")

    try:
        out = text(value)
    except _Refused as exc:
        return str(exc)
    if loads == 0:
        return "the stored value does not read the loaded element"
    return ElementValue(out, scalars, read_target(f, f.without_kept_casts(value)) is not None)


class _Refused(Exception):
    pass
