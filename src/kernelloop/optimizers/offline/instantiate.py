"""A function template read as one instantiation: `template <typename T>` with T = float.

The families read a kernel's facts, and a template kernel's are in terms of its parameters (`const
T* A`, `T acc = T(0)`), which says nothing about the element type. Where the program launches the
kernel with one set of type arguments only (analysis.verified_type_arguments), the families read
the kernel as that instantiation: every type parameter's name in a type replaced by its argument,
and a functional cast `T(x)` read as the cast it is. A kernel with a non-type parameter is not
instantiated (its value would be an unknown name to the families, which then do not fit).
"""

from __future__ import annotations

import dataclasses
import re

from .cparse import Param, Signature
from .syntax import Call, Cast, Name, SizeOf


def instantiate(sig: Signature, body, types: dict[str, str]):
    """(signature, body) with the template's type parameters replaced by `types`, or None where
    some template parameter is not a type parameter with an argument in `types`."""
    if not sig.template or any(t.kind != "type" or not types.get(t.name) for t in sig.template):
        return None
    words = {t.name: " ".join(types[t.name].split()) for t in sig.template}
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, words)) + r")\b")

    def in_type(text: str) -> str:
        return pattern.sub(lambda m: words[m.group(1)], text)

    def rebuilt(node):
        if isinstance(node, tuple):
            return tuple(rebuilt(x) for x in node)
        if not dataclasses.is_dataclass(node) or isinstance(node, type):
            return node
        if isinstance(node, Call) and isinstance(node.func, Name) and node.func.id in words and len(node.args) == 1:
            return Cast(words[node.func.id], rebuilt(node.args[0]))  # T(x): a functional cast
        changes = {}
        for fld in dataclasses.fields(node):
            value = getattr(node, fld.name)
            if isinstance(value, str) and (fld.name in ("type", "targs", "base")
                                           or (isinstance(node, SizeOf) and fld.name == "text")):
                changes[fld.name] = in_type(value)
            elif isinstance(value, tuple) or dataclasses.is_dataclass(value):
                changes[fld.name] = rebuilt(value)
        return dataclasses.replace(node, **changes) if changes else node

    params = tuple(Param(p.name, in_type(p.type), in_type(p.base), p.pointer, p.const) for p in sig.params)
    return dataclasses.replace(sig, params=params, template=()), rebuilt(body)
