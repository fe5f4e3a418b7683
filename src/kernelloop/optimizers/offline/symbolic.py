"""Integer polynomials over named atoms: the normal form of index expressions.

`row * n + k` and `k + n * row` and `(size_t)row * n + k` all become the same polynomial, so
the family matchers compare access patterns, not spellings. Atoms are strings with a prefix
that says what they are:

    threadIdx.x, blockIdx.y, blockDim.x, gridDim.x   CUDA built-ins (per thread / per launch)
    p:NAME   a kernel parameter           g:NAME   a name from outside the kernel (a constant)
    L:KEY    a loop variable              v:KEY    a local assigned more than once
    t:TEXT   an opaque per-thread value   o:TEXT   an opaque uniform value (e.g. n / 4)

A thread coordinate is the per-thread part of an index: `split_thread` groups a polynomial by
its uniform monomials, so `row * n + col` with row = blockIdx.y*blockDim.y + threadIdx.y
reads as {n: row-poly, 1: col-poly}.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

Monomial = tuple[str, ...]  # sorted atom names; () is the constant term

BUILTIN_PREFIXES = ("threadIdx.", "blockIdx.", "blockDim.", "gridDim.")


def is_thread_atom(atom: str) -> bool:
    """Part of a thread coordinate: the built-ins (blockDim and gridDim included, since
    blockIdx.x * blockDim.x + threadIdx.x is one coordinate) and opaque per-thread values."""
    return atom.startswith(BUILTIN_PREFIXES) or atom.startswith("t:")


def is_uniform_atom(atom: str) -> bool:
    """A value every thread agrees on that the caller controls: parameters and constants."""
    return atom.startswith(("p:", "g:", "o:"))


@dataclass(frozen=True)
class Poly:
    terms: tuple[tuple[Monomial, int], ...] = ()

    # -- construction --
    @staticmethod
    def const(c: int) -> Poly:
        return Poly(((((), c),) if c else ()))

    @staticmethod
    def atom(name: str) -> Poly:
        return Poly((((name,), 1),))

    @staticmethod
    def _from(d: Mapping[Monomial, int]) -> Poly:
        return Poly(tuple(sorted((m, c) for m, c in d.items() if c)))

    def as_dict(self) -> dict[Monomial, int]:
        return dict(self.terms)

    # -- arithmetic --
    def __add__(self, other: Poly) -> Poly:
        d = self.as_dict()
        for m, c in other.terms:
            d[m] = d.get(m, 0) + c
        return Poly._from(d)

    def __neg__(self) -> Poly:
        return Poly(tuple((m, -c) for m, c in self.terms))

    def __sub__(self, other: Poly) -> Poly:
        return self + (-other)

    def __mul__(self, other: Poly) -> Poly:
        d: dict[Monomial, int] = {}
        for m1, c1 in self.terms:
            for m2, c2 in other.terms:
                m = tuple(sorted(m1 + m2))
                d[m] = d.get(m, 0) + c1 * c2
        return Poly._from(d)

    def scale(self, k: int) -> Poly:
        return Poly._from({m: c * k for m, c in self.terms})

    # -- queries --
    @property
    def is_zero(self) -> bool:
        return not self.terms

    @property
    def is_const(self) -> bool:
        return all(m == () for m, _ in self.terms)

    @property
    def const_value(self) -> int:
        return dict(self.terms).get((), 0)

    def atoms(self) -> set[str]:
        return {a for m, _ in self.terms for a in m}

    def coefficient(self, monomial: Monomial) -> int:
        return dict(self.terms).get(tuple(sorted(monomial)), 0)

    def without(self, monomial: Monomial) -> Poly:
        return Poly(tuple((m, c) for m, c in self.terms if m != tuple(sorted(monomial))))

    def substitute(self, values: Mapping[str, Poly]) -> Poly:
        """The polynomial with each atom in VALUES replaced by its polynomial."""
        out = Poly()
        for m, c in self.terms:
            term = Poly.const(c)
            for a in m:
                term = term * values.get(a, Poly.atom(a))
            out = out + term
        return out

    def evaluate(self, values: Mapping[str, int]) -> int | None:
        total = 0
        for m, c in self.terms:
            v = c
            for a in m:
                if a not in values:
                    return None
                v *= values[a]
            total += v
        return total

    def __str__(self) -> str:
        if not self.terms:
            return "0"
        parts = []
        for m, c in self.terms:
            names = "*".join(a.split(":", 1)[-1] for a in m)
            if not names:
                parts.append(str(c))
            elif c == 1:
                parts.append(names)
            elif c == -1:
                parts.append(f"-{names}")
            else:
                parts.append(f"{c}*{names}")
        return " + ".join(parts).replace("+ -", "- ")


def split_thread(p: Poly) -> dict[Monomial, Poly]:
    """Group by the non-thread part of each monomial: {uniform monomial: thread polynomial}."""
    groups: dict[Monomial, dict[Monomial, int]] = {}
    for m, c in p.terms:
        thread = tuple(a for a in m if is_thread_atom(a))
        rest = tuple(a for a in m if not is_thread_atom(a))
        g = groups.setdefault(rest, {})
        g[thread] = g.get(thread, 0) + c
    return {rest: Poly._from(g) for rest, g in groups.items()}


def is_uniform(p: Poly) -> bool:
    """Built from parameters, constants and numbers only (no thread or loop values)."""
    return all(is_uniform_atom(a) for a in p.atoms())
