"""Whether a function may write through one of its pointer parameters, read from the syntax tree.

`kernelloop init` guesses a pointer's role from this: a pointer without const that no code
writes through is an input (the harness then checks that every call leaves it as filled),
anything else in-out. The reading is conservative: a pointer stored to, incremented, taken the
address of an element of, copied into another variable, returned, or passed to a function not
defined in the same text counts as written. Both wrong guesses fail safe: an input that is
written stops the program (exit 87, named), an in-out buffer the baseline never changes is
refused by the verifier with the flag that fixes it."""

from __future__ import annotations

from tree_sitter import Node

from .cuda_tree import Source, walk

_READ_ONLY_CALLS = {"__ldg", "__ldcg", "__ldca", "__ldcs", "__ldlu", "__ldcv"}
_POINTER_ARITHMETIC = {"binary_expression", "parenthesized_expression", "cast_expression"}
_MAX_DEPTH = 8


def _functions(source: Source) -> dict[str, list[Node]]:
    found: dict[str, list[Node]] = {}
    for node in walk(source.root):
        if node.type != "function_definition":
            continue
        declarator = node.child_by_field_name("declarator")
        while declarator is not None and declarator.type != "function_declarator":
            declarator = declarator.child_by_field_name("declarator")
        name = declarator.child_by_field_name("declarator") if declarator is not None else None
        if name is not None:
            found.setdefault(source.text_of(name), []).append(node)
    return found


def _parameter_names(source: Source, function: Node) -> list[str]:
    declarator = function.child_by_field_name("declarator")
    while declarator is not None and declarator.type != "function_declarator":
        declarator = declarator.child_by_field_name("declarator")
    params = declarator.child_by_field_name("parameters") if declarator is not None else None
    names = []
    for param in params.named_children if params is not None else []:
        identifiers = [n for n in walk(param) if n.type == "identifier"]
        names.append(source.text_of(identifiers[-1]) if identifiers else "")
    return names


def _called_name(source: Source, call: Node) -> str:
    callee = call.child_by_field_name("function") or call.children[0]
    if callee.type == "template_function":
        callee = callee.child_by_field_name("name") or callee.children[0]
    return source.text_of(callee)


def _use_may_write(source: Source, functions: dict[str, list[Node]], use: Node, depth: int) -> bool:
    node = use
    while node.parent is not None and node.parent.type in _POINTER_ARITHMETIC:
        node = node.parent
    parent = node.parent
    if parent is None:
        return True
    if parent.type == "subscript_expression" and parent.child_by_field_name("argument") == node \
            or parent.type == "pointer_expression" and source.text_of(parent.children[0]) == "*":
        access = parent  # an element: written if it is a target, or its address escapes
        outer = access.parent
        while outer is not None and outer.type == "parenthesized_expression":
            access, outer = outer, outer.parent
        if outer is None:
            return True
        if outer.type == "assignment_expression" and outer.child_by_field_name("left") == access:
            return True
        if outer.type == "update_expression":
            return True
        if outer.type == "pointer_expression" and source.text_of(outer.children[0]) == "&":
            return True
        return False
    if parent.type == "binary_expression" or parent.type == "condition_clause":
        return False  # a comparison (p != nullptr) or arithmetic already climbed
    if parent.type == "argument_list" and parent.parent is not None and parent.parent.type == "call_expression":
        called = _called_name(source, parent.parent)
        if called in _READ_ONLY_CALLS:
            return False
        if called not in functions or depth >= _MAX_DEPTH:
            return True
        index = [c for c in parent.named_children].index(node)
        for definition in functions[called]:
            names = _parameter_names(source, definition)
            if index >= len(names) or _may_write(source, functions, definition, names[index], depth + 1):
                return True
        return False
    return True  # copied, returned, assigned, captured: followed no further


def _may_write(source: Source, functions: dict[str, list[Node]], function: Node, param: str, depth: int) -> bool:
    body = function.child_by_field_name("body")
    if body is None or not param:
        return True
    return any(_use_may_write(source, functions, node, depth)
               for node in walk(body) if node.type == "identifier" and source.text_of(node) == param)


def pointer_may_be_written(text: str, function: str, param: str) -> bool:
    """Whether FUNCTION (defined in TEXT, every definition of that name) may write through its
    parameter PARAM, following it into the functions and kernels of TEXT it is passed to."""
    source = Source(text)
    functions = _functions(source)
    if function not in functions:
        return True
    return any(_may_write(source, functions, definition, param, 0) for definition in functions[function])
