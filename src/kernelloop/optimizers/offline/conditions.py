"""Guards: which bounds hold where an access happens, and evaluating conditions on sample cells.

`if (row < rows && col < cols)`, `if (row >= rows || col >= cols) return;` and
`(i < n) ? in[i] : 0.0f` all leave the same facts behind: row < rows, col < cols, i < n.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .facts import Context, KernelFacts, Loop
from .symbolic import Poly, is_uniform
from .syntax import Assign, Binary, Expr, Unary

_NEGATE = {"<": ">=", ">=": "<", ">": "<=", "<=": ">", "==": "!=", "!=": "=="}
_FLIP = {"<": ">", ">": "<", "<=": ">=", ">=": "<=", "==": "==", "!=": "!="}


@dataclass(frozen=True)
class Comparison:
    diff: Poly  # left - right
    op: str  # the relation `diff op 0` holds


def literals(f: KernelFacts, expr: Expr, holds: bool) -> list[Comparison]:
    """The comparisons that certainly hold when `expr` evaluates to `holds`."""
    if isinstance(expr, Unary) and expr.op == "!":
        return literals(f, expr.operand, not holds)
    if isinstance(expr, Binary):
        if (expr.op == "&&" and holds) or (expr.op == "||" and not holds):
            return literals(f, expr.left, holds) + literals(f, expr.right, holds)
        if expr.op in _NEGATE:
            left, right = f.poly(expr.left), f.poly(expr.right)
            if left is None or right is None:
                return []
            return [Comparison(left - right, expr.op if holds else _NEGATE[expr.op])]
    return []


def exact_literals(f: KernelFacts, expr: Expr, holds: bool) -> list[Comparison] | None:
    """The comparisons that hold when `expr` evaluates to `holds` and, together, say all it says;
    None when part of it is not a comparison of polynomials (a flag, a mask, a bit test, a call:
    `literals` would drop it, and with it a limit on what runs; red team round 112)."""
    if isinstance(expr, Unary) and expr.op == "!":
        return exact_literals(f, expr.operand, not holds)
    if isinstance(expr, Binary):
        if (expr.op == "&&" and holds) or (expr.op == "||" and not holds):
            left, right = exact_literals(f, expr.left, holds), exact_literals(f, expr.right, holds)
            return None if left is None or right is None else left + right
        if expr.op in _NEGATE:
            left_p, right_p = f.poly(expr.left), f.poly(expr.right)
            if left_p is None or right_p is None:
                return None
            return [Comparison(left_p - right_p, expr.op if holds else _NEGATE[expr.op])]
    return None


def context_literals(f: KernelFacts, ctx: Context) -> list[Comparison]:
    out: list[Comparison] = []
    for c in ctx.conds:
        out += literals(f, c.expr, c.holds)
    return out


def upper_bound_from(lits: list[Comparison], coord: Poly) -> Poly | None:
    """X with `coord < X` among the literals (coord <= Y gives Y + 1)."""
    for lit in lits:
        for sign in (1, -1):
            rest = lit.diff - coord.scale(sign)
            if not is_uniform(rest):
                continue
            op = lit.op if sign == 1 else _FLIP[lit.op]
            bound = -rest if sign == 1 else rest  # coord `op` bound
            if op == "<":
                return bound
            if op == "<=":
                return bound + Poly.const(1)
    return None


def upper_bound(f: KernelFacts, ctx: Context, coord: Poly) -> Poly | None:
    return upper_bound_from(context_literals(f, ctx), coord)


def loop_var_atom(loop: Loop) -> str | None:
    return f"L:{loop.var}" if loop.var else None


def loop_bound(f: KernelFacts, loop: Loop) -> Poly | None:
    """X for `for (k = ...; k < X; ...)`."""
    atom = loop_var_atom(loop)
    if atom is None or loop.cond is None or loop.written_in_body or loop.may_end_early:
        return None
    return upper_bound_from(literals(f, loop.cond, True), Poly.atom(atom))


def loop_start(f: KernelFacts, loop: Loop) -> Poly | None:
    return None if loop.init is None else f.poly(loop.init)


def loop_step(f: KernelFacts, loop: Loop) -> Poly | None:
    """X for `k += X` or `k = k + X` (1 for `++k`)."""
    if loop.unit_step:
        return Poly.const(1)
    step = loop.step
    if isinstance(step, Assign) and step.op == "+=":
        return f.poly(step.value)
    if isinstance(step, Assign) and step.op == "=" and isinstance(step.value, Binary) and step.value.op == "+" and \
            f.poly(step.value.left) == f.poly(step.target):
        return f.poly(step.value.right)
    return None


# -- evaluation on sample values ---------------------------------------------------------------

def realize(coords: Mapping[Poly, int]) -> dict[str, int] | None:
    """Values of the built-ins that make each thread coordinate take its given value (one thread
    of a 1024-wide block, block 0), or None when a coordinate has no free unit-coefficient atom."""
    values: dict[str, int] = {}
    for axis in "xyz":
        values[f"blockDim.{axis}"] = 1024
        values[f"gridDim.{axis}"] = 1024
        values[f"blockIdx.{axis}"] = 0
        values[f"threadIdx.{axis}"] = 0
    chosen: dict[Poly, str] = {}
    for coord in coords:
        free = [m[0] for m, c in coord.terms if len(m) == 1 and c == 1
                and (m[0].startswith("threadIdx.") or m[0].startswith("t:"))]
        free = [a for a in free if a not in chosen.values()]
        if not free:
            free = [m[0] for m, c in coord.terms if len(m) == 1 and c == 1 and m[0].startswith("blockIdx.")]
        if not free:
            return None
        chosen[coord] = free[0]
    for coord, atom in chosen.items():
        values[atom] = coords[coord]
    for coord, want in coords.items():
        if coord.evaluate(values) != want:
            return None
    return values


def evaluate(f: KernelFacts, expr: Expr, values: Mapping[str, int]) -> bool | None:
    """The truth of a condition under `values` for the atoms, or None when it cannot be told."""
    if isinstance(expr, Unary) and expr.op == "!":
        inner = evaluate(f, expr.operand, values)
        return None if inner is None else not inner
    if isinstance(expr, Binary) and expr.op in ("&&", "||"):
        a = evaluate(f, expr.left, values)
        if a is None:
            return None
        if (expr.op == "&&" and not a) or (expr.op == "||" and a):
            return a
        return evaluate(f, expr.right, values)
    if isinstance(expr, Binary) and expr.op in _NEGATE:
        left, right = f.poly(expr.left), f.poly(expr.right)
        if left is None or right is None:
            return None
        d = (left - right).evaluate(values)
        if d is None:
            return None
        return {"<": d < 0, "<=": d <= 0, ">": d > 0, ">=": d >= 0, "==": d == 0, "!=": d != 0}[expr.op]
    resolved = f.resolve(expr)
    if resolved is not expr and resolved != expr:
        return evaluate(f, resolved, values)
    p = f.poly(expr)
    v = None if p is None else p.evaluate(values)
    return None if v is None else v != 0


def context_holds(f: KernelFacts, ctx: Context, values: Mapping[str, int]) -> bool | None:
    unknown = False
    for c in ctx.conds:
        v = evaluate(f, c.expr, values)
        if v is None:
            unknown = True
        elif v != c.holds:
            return False
    return None if unknown else True
