"""What every family module provides, and the helpers their matchers share.

A family module recognizes one kind of kernel by the structure of its body (`match`), maps the
launcher's arguments to the roles of the templates' canonical interface, and lists the
template configurations (meta-parameters) that fit it, with what the cost model needs to
rank them (`configs`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..facts import Access, Binding, KernelFacts
from ..launcher import Binder, Launcher
from ..symbolic import Poly, split_thread
from ..syntax import Call, Cast, Expr, Index, Num, Unary, call_name, strip_casts  # noqa: F401 - re-exported


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
