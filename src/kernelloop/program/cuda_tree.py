"""CUDA C++ syntax trees from tree-sitter's maintained CUDA grammar (tree-sitter-cuda).

One parser for the whole package: the offline optimizer's reader (optimizers/offline/cparse.py)
and anything else that needs structure rather than text builds on `parse`. Trees are
error-tolerant; `first_error` says where a text does not parse, so callers can refuse rather
than guess.
"""

from __future__ import annotations

from functools import lru_cache

import tree_sitter_cuda
from tree_sitter import Language, Node, Parser, Tree


@lru_cache(maxsize=1)
def _parser() -> Parser:
    return Parser(Language(tree_sitter_cuda.language()))


class Source:
    """A text and its tree; offsets of nodes as character offsets into the text."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.data = text.encode("utf-8")
        self.tree: Tree = _parser().parse(self.data)
        self._ascii = len(self.data) == len(text)

    @property
    def root(self) -> Node:
        return self.tree.root_node

    def text_of(self, node: Node) -> str:
        return self.data[node.start_byte:node.end_byte].decode("utf-8", "replace")

    def offset(self, byte: int) -> int:
        """Character offset of a byte offset."""
        return byte if self._ascii else len(self.data[:byte].decode("utf-8", "replace"))

    def span(self, node: Node) -> tuple[int, int]:
        return self.offset(node.start_byte), self.offset(node.end_byte)


def first_error(node: Node) -> Node | None:
    """The first ERROR or MISSING node under `node` (itself included), in source order."""
    if not node.has_error:
        return None
    if node.type == "ERROR" or node.is_missing:
        return node
    for child in node.children:
        found = first_error(child)
        if found is not None:
            return found
    return node  # has_error with no erroneous child: the node itself is the error


def leaves(node: Node):
    """Every leaf (token) under `node`, in source order; comments included."""
    if node.child_count == 0:
        yield node
        return
    for child in node.children:
        yield from leaves(child)


def walk(node: Node):
    """Every node under `node`, `node` first."""
    yield node
    for child in node.children:
        yield from walk(child)


# Nodes that declare a name, and the field that holds it.
_DECLARING = {"function_declarator": "declarator", "init_declarator": "declarator", "pointer_declarator": "declarator",
              "reference_declarator": "declarator", "array_declarator": "declarator", "declaration": "declarator",
              "field_declaration": "declarator", "parameter_declaration": "declarator",
              "type_definition": "declarator", "alias_declaration": "name", "struct_specifier": "name",
              "class_specifier": "name", "union_specifier": "name", "enum_specifier": "name", "enumerator": "name",
              "preproc_def": "name", "preproc_function_def": "name", "namespace_alias_definition": "name"}


UNKNOWN_NAMES = "<names made by ## pasting>"


def declared_names(text: str, depth: int = 0) -> set[str]:
    """Every name the code declares, at any scope: functions, variables, types, macros, enumerators
    and the names a using-declaration brings in (`using ::ns::max;`: "max"), each by its last part.
    Macros too (red team round 87): what a macro's body declares, and every name passed to a
    function-like macro of the code (`ACT_UNARY(exp, exp2f(x))` may define `exp`)."""
    src = Source(text)
    found: set[str] = set()
    macros = {src.text_of(n.child_by_field_name("name")) for n in walk(src.root) if n.type == "preproc_function_def"}
    for node in walk(src.root):
        if node.type in ("preproc_def", "preproc_function_def") and depth < 4:
            body = node.child_by_field_name("value")
            if body is not None and "##" in src.text_of(body):
                # a name pasted together (`fmax##sfx`) could be any name: the caller reads
                # UNKNOWN_NAMES as "every name may be declared" (red team round 88)
                found.add(UNKNOWN_NAMES)
            if body is not None:
                found |= declared_names(src.text_of(body).replace("\\\n", "\n"), depth + 1)
        if node.type in ("call_expression", "macro_type_specifier") and macros:
            callee = node.child_by_field_name("function") or node.child_by_field_name("name")
            if callee is not None and src.text_of(callee) in macros:
                found |= {src.text_of(n) for n in walk(node) if n.type in ("identifier", "field_identifier",
                                                                           "type_identifier")}
        if node.type == "function_declarator" and node.child_by_field_name("declarator") is not None:
            # every name inside a function's declarator: the parser reads `float (max)(float, float)`
            # with `max` among parameters of a nested declarator (red team round 88)
            found |= {src.text_of(n) for n in walk(node.child_by_field_name("declarator"))
                      if n.type in ("identifier", "field_identifier", "type_identifier")}
        if node.type == "using_declaration":
            names = [c for c in node.named_children if c.type in ("identifier", "qualified_identifier")]
            targets = names[-1:]
        else:
            field = _DECLARING.get(node.type)
            # every declarator of a list: `float g, K;` declares K too (red team round 92)
            targets = list(node.children_by_field_name(field)) if field else []
        for target in targets:
            while target is not None and target.type not in ("identifier", "field_identifier", "type_identifier"):
                if target.type == "parenthesized_declarator":  # `float (max)(float, float)`: round 88
                    target = next((c for c in target.named_children if c.type != "comment"), None)
                elif target.type == "qualified_identifier":
                    target = target.child_by_field_name("name")
                elif target.type == "reference_declarator" and target.child_by_field_name("declarator") is None:
                    target = next((c for c in target.named_children if c.type != "comment"), None)  # `float& v`
                else:
                    target = target.child_by_field_name("declarator")
            if target is not None:
                found.add(src.text_of(target))
    return found


# What a declaration whose signature is read may hold: type words, qualifiers, pointer, reference
# and array marks, names. Anything else (an attribute such as `vector_size` or `ms_abi`, a default
# value, `...`, a function pointer) may change how an argument is passed (red team round 122).
_PLAIN_DECLARATION = frozenset([
    "translation_unit", "linkage_specification", "string_literal", "string_content", "declaration",
    "storage_class_specifier", "primitive_type", "sized_type_specifier", "type_identifier", "type_qualifier",
    "function_declarator", "parameter_list", "parameter_declaration", "identifier", "pointer_declarator",
    "reference_declarator", "array_declarator", "abstract_pointer_declarator", "abstract_reference_declarator",
    "abstract_array_declarator", "number_literal", "comment"])


def declared_signature(declaration: str) -> str | None:
    """`name(type, type, ...)` of the first function a declaration declares, its parameters' types
    as a demangler writes them (`f(double const*, int)`: names dropped, a pointer or array as `*`,
    a reference as `&`); None where a parameter's type is not that simple (a function pointer, a
    parenthesized declarator, `...`) or no function is declared."""
    src = Source(declaration)
    function = next((n for n in walk(src.root) if n.type == "function_declarator"
                     and (name := n.child_by_field_name("declarator")) is not None and name.type == "identifier"), None)
    params = function.child_by_field_name("parameters") if function is not None else None
    if function is None or params is None or first_error(src.root) is not None or \
            any(n.type not in _PLAIN_DECLARATION if n.is_named else n.type == "..." for n in walk(src.root)):
        return None
    types: list[str] = []
    for param in params.named_children:
        if param.type == "comment":
            continue
        kind = param.child_by_field_name("type")
        if param.type not in ("parameter_declaration", "optional_parameter_declaration") or kind is None:
            return None
        qualifiers = [src.text_of(c) for c in param.named_children if c.type == "type_qualifier"]
        suffix, node = "", param.child_by_field_name("declarator")
        while node is not None and node.type != "identifier":
            if node.type in ("pointer_declarator", "abstract_pointer_declarator", "array_declarator",
                             "abstract_array_declarator"):
                suffix += "*"
            elif node.type in ("reference_declarator", "abstract_reference_declarator"):
                suffix += "&"
            else:
                return None
            node = node.child_by_field_name("declarator") or next(
                (c for c in node.named_children if c.type.endswith("declarator") or c.type == "identifier"), None)
        words = " ".join(src.text_of(kind).split())
        types.append(" ".join([words, *qualifiers]) + suffix)
    if types == ["void"]:
        types = []
    return f"{src.text_of(function.child_by_field_name('declarator'))}({', '.join(types)})"
