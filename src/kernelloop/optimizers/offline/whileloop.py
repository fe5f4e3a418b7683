"""A counted `while` loop read as the `for` loop it is.

C-style code (and code written before C99) often writes a grid-stride loop as a declaration and
a `while`: `int i = <global index>; while (i < n) { ...; i += blockDim.x * gridDim.x; }`. The grid
tiers read `for` loops, whose header holds the counter, the bound and the step; this gives them
the same loop in that form, so one reading serves both spellings.

The two forms run alike only where nothing can skip the step or see the counter after the loop:
the step is the body's last statement (`i += s` or `i = i + s`), no `continue` anywhere in the
body (in the `while` form it skips the step; in the `for` form it would not), and the loop is the
function's last statement (bar a `return;`), so the counter's scope ends with it either way.
"""

from __future__ import annotations

from .launcher import Function, function_from_text, statements_under
from .syntax import Assign, Binary, Block, Decl, Empty, ExprStmt, Jump, Name, ParseError, Return, While, to_c


def for_form(fn: Function) -> Function | None:
    """FN with its last statement, a counted `while` after its counter's declaration, written as
    the `for` loop it is; None where FN ends in no such loop or the forms could differ."""
    top = [s for s in fn.body.body if not isinstance(s, Empty)]
    while top and isinstance(top[-1], Return) and top[-1].value is None:
        top.pop()
    if len(top) < 2:
        return None
    declaration, loop = top[-2], top[-1]
    if not isinstance(loop, While) or loop.do or not isinstance(declaration, Decl) \
            or len(declaration.declarators) != 1 or not isinstance(loop.body, Block) or not loop.body.body:
        return None
    counter = declaration.declarators[0]
    if counter.init is None or counter.pointer or counter.array or "const" in declaration.type.split():
        return None
    last = loop.body.body[-1]
    step = last.expr if isinstance(last, ExprStmt) else None
    if not isinstance(step, Assign) or not isinstance(step.target, Name) or step.target.id != counter.name:
        return None
    if step.op == "=":  # i = i + s
        if not (isinstance(step.value, Binary) and step.value.op == "+" and isinstance(step.value.left, Name)
                and step.value.left.id == counter.name):
            return None
    elif step.op != "+=":
        return None
    if any(isinstance(s, Jump) and s.kind == "continue" for s in statements_under(loop.body)):
        return None
    body = fn.item.text[len(fn.head):]
    header = body[declaration.span[0]:declaration.span[1]].rstrip().removesuffix(";")
    increment = body[last.span[0]:last.span[1]].rstrip().removesuffix(";")
    inner = body[loop.body.span[0] + 1:last.span[0]]  # after the body's `{`, up to the step
    rewritten = (body[:declaration.span[0]] + f"for ({header}; {to_c(loop.cond)}; {increment}) {{{inner}}}"
                 + body[loop.span[1]:])
    try:
        read = function_from_text(fn, fn.head + rewritten)
    except ParseError:
        return None
    return read if isinstance(read, Function) else None
