"""Whether a value the timed call reads, or a type it names, is plain: nothing of the program's runs
when it is copied, converted or computed with.

Plain: a number, a pointer to numbers, a CUDA vector or half type, a dim3, the program's alias of one,
or a struct of such fields with nothing that runs implicitly (no base class, no constructor,
destructor, conversion or operator member, no default member initializer). Each name is judged by the
binding C++ gives it where it is written (scopes.py), types included: a local `typedef Tap& real;`
shadows a global `typedef float real;` (red team round 278). `auto` is plain from a plain value, a
number or one call of the harness's size/input/output/inout/scratch (round 279); an operator is the
language's own only on numbers and pointers.
"""

from __future__ import annotations

import re

from tree_sitter import Node

from .cuda_tree import Source, walk
from .scopes import VALUE_KINDS, Binding, declarator_names

# local values a launch is written with (`dim3 block(32, 8);`, `int grid = ...;`): types that run no code of
# their own; a class of the frozen code could (a constructor copying scratch)
PLAIN_TYPES = frozenset({"dim3", "size_t", "ptrdiff_t", "int8_t", "int16_t", "int32_t", "int64_t", "uint8_t",
                          "uint16_t", "uint32_t", "uint64_t", "cudaStream_t"})
# CUDA's own numbers and vectors of them (`__nv_bfloat16* x`, `float2* a`): no code of the program
_CUDA_NUMBERS = re.compile(r"(?:__half2?|half2?|__nv_bfloat162?|nv_bfloat162?|(?:u?char|u?short|u?int|u?long|"
                           r"u?longlong|float|double)[1-4])")
# what `auto` may hold: the harness's sizes and buffers (kl::Harness's methods returning a number or a pointer)
_HARNESS_METHODS = frozenset({"size", "input", "output", "inout", "scratch"})
# numbers by name, from CUDA's and the standard headers: the language's own operators
_PLAIN_NUMBERS = PLAIN_TYPES - {"dim3", "cudaStream_t"}
_DEPTH = 8  # typedefs of typedefs, structs of structs
_THREAD_LOCAL = frozenset({"thread_local", "__thread", "_Thread_local"})


class Plainness:
    """Whether a name read in the timed call, or a type, is plain: a number, a pointer to numbers, a CUDA vector or
    half type, a dim3, the program's alias of one, or a struct of such fields with nothing that runs implicitly (no
    base class, no constructor, destructor, conversion or operator member, no default member initializer). Each name
    is judged by the binding C++ gives it where it is written (scopes.Scopes), types included."""

    def __init__(self, resolve, qualified, editable: Source | None) -> None:
        self.resolve = resolve  # (name, node, src) -> the nearest bindings
        self.qualified = qualified  # (path, name, node, src) -> the bindings in a namespace
        self.editable = editable
        self._structs: dict[tuple[int, int], bool] = {}

    def value(self, binding: Binding) -> bool:
        if binding.src is self.editable or binding.kind not in VALUE_KINDS or binding.type is None:
            return False
        if any(c.type == "storage_class_specifier" and binding.src.text_of(c) in _THREAD_LOCAL
               for c in binding.node.children):
            return False  # round 284: a read of a thread_local runs its initializer (frozen code) the first time
        if binding.type.type == "placeholder_type_specifier":
            return self._deduced(binding)
        declarators = binding.node.children_by_field_name("declarator")
        if any(n.type in ("function_declarator", "abstract_function_declarator") for d in declarators for n in walk(d)):
            return False  # a pointer to a function
        return self.type(binding.type, binding.src)

    def _deduced(self, binding: Binding) -> bool:
        """Whether an `auto` binding's type is plain, read from its initializer alone: a plain value or a number
        (`const auto count = n;`), or one call of the harness's `size`, `input`, `output`, `inout` or `scratch` on a
        `kl::Harness` with a plain type argument (`auto* in = h.input<float>(...)`: a pointer to it)."""
        if binding.node.type != "declaration":
            return False  # a structured binding's or a range-for's element: not read
        value = next((d.child_by_field_name("value") for d in binding.node.children_by_field_name("declarator")
                      if d.type == "init_declarator" and d.child_by_field_name("declarator").type
                      != "structured_binding_declarator" and binding.name in
                      {n for n, _ in declarator_names(d, binding.src)}), None)
        while value is not None and value.type in ("initializer_list", "argument_list", "parenthesized_expression") \
                and len(value.named_children) == 1:
            value = value.named_children[0]
        if value is None:
            return False
        if value.type == "number_literal":
            return True
        if value.type == "identifier":
            found = self.resolve(binding.src.text_of(value), value, binding.src)
            return bool(found) and all(self.value(b) for b in found)
        function = value.child_by_field_name("function") if value.type == "call_expression" else None
        if function is None or function.type != "field_expression" or \
                (owner := function.child_by_field_name("argument")).type != "identifier":
            return False
        field = function.child_by_field_name("field")
        method = field.child_by_field_name("name") if field.type == "template_method" else field
        arguments = field.child_by_field_name("arguments") if field.type == "template_method" else None
        member = binding.src.text_of(method)
        if member not in _HARNESS_METHODS or arguments is None and member != "size":
            return False
        described = [a.child_by_field_name("type") for a in (arguments.named_children if arguments else [])]
        if len(described) > 1 or any(k is None or not self.type(k, binding.src) for k in described):
            return False
        owners = self.resolve(binding.src.text_of(owner), owner, binding.src)
        return bool(owners) and all(b.kind in VALUE_KINDS and b.type is not None and b.src is not self.editable and
                                    self.is_harness(b.type, b.src) for b in owners)

    def is_harness(self, kind: Node, src: Source) -> bool:
        """Whether a type is the harness header's `kl::Harness` (no class of the program's named so)."""
        return re.sub(r"\s+", "", src.text_of(kind)).removeprefix("::") == "kl::Harness" and \
            not self.qualified(["kl"], "Harness", kind, src)

    def arithmetic(self, binding: Binding) -> bool:
        """Whether a value's operators are the language's own: a number or a pointer (any other operand's operator
        is a function, and in the harness's unit only the frozen code can define one: round 279)."""
        if not self.value(binding) or binding.type is None:
            return False
        declarators = binding.node.children_by_field_name("declarator") if binding.node.type != "for_range_loop" \
            else [binding.node.child_by_field_name("declarator")]
        pointer = any(n.type in ("pointer_declarator", "array_declarator") for d in declarators if d is not None
                      for n in walk(d))
        return pointer or self.number(binding.type, binding.src, 0)

    def number(self, kind: Node, src: Source, depth: int) -> bool:
        if kind.type in ("primitive_type", "sized_type_specifier"):
            return True
        if kind.type == "placeholder_type_specifier" or depth > _DEPTH:
            return kind.type == "placeholder_type_specifier"  # judged by _deduced: a number or a harness pointer
        name = src.text_of(kind).removeprefix("std::")
        bindings = self.resolve(name, kind, src) if kind.type == "type_identifier" else []
        if not bindings:
            return name in _PLAIN_NUMBERS
        return all(b.kind == "type" and b.node.type in ("type_definition", "alias_declaration") and b.type is not None
                   and not _names_a_function(b)
                   and (any(n.type == "pointer_declarator" for d in b.node.children_by_field_name("declarator")
                            for n in walk(d)) or self.number(b.type, b.src, depth + 1)) for b in bindings)

    def type(self, kind: Node, src: Source, depth: int = 0) -> bool:
        if depth > _DEPTH:
            return False
        if kind.type in ("primitive_type", "sized_type_specifier"):
            return True
        if kind.type in ("struct_specifier", "class_specifier") and kind.child_by_field_name("body") is not None:
            return self._struct(kind, src, depth)
        if kind.type in ("struct_specifier", "class_specifier", "union_specifier") and \
                (tag := kind.child_by_field_name("name")) is not None and tag.type == "type_identifier":
            # an elaborated name (`struct Tapper t`): the class it names (round 280), never CUDA's own
            return bool(self.resolve(src.text_of(tag), tag, src)) and self.type(tag, src, depth + 1)
        name = src.text_of(kind)
        if kind.type == "qualified_identifier":
            path = re.findall(r"[A-Za-z_]\w*", name)
            if len(path) == 2 and path[0] == "std" and not self.qualified(path[:1], path[1], kind, src):
                return path[1] in PLAIN_TYPES
            bindings = self.qualified(path[:-1], path[-1], kind, src) if path and "<" not in name else []
            return bool(bindings) and self._types(bindings, depth)
        if kind.type != "type_identifier":
            return False
        bindings = self.resolve(name, kind, src)
        if not bindings:  # CUDA's own
            return name in PLAIN_TYPES or _CUDA_NUMBERS.fullmatch(name) is not None
        return self._types(bindings, depth)

    def _types(self, bindings: list[Binding], depth: int) -> bool:
        defined = [b for b in bindings if not (b.node.type in ("struct_specifier", "class_specifier", "union_specifier")
                                               and b.node.child_by_field_name("body") is None)]  # forward declarations
        if not defined or any(b.src is self.editable or b.kind != "type" for b in defined):
            return False
        for b in defined:
            if b.node.type in ("type_definition", "alias_declaration"):
                if b.type is None or _names_a_function(b) or not self.type(b.type, b.src, depth + 1):
                    return False
            elif b.node.type not in ("struct_specifier", "class_specifier") or not self._struct(b.node, b.src, depth):
                return False
        return True

    def _struct(self, spec: Node, src: Source, depth: int) -> bool:
        key = (id(src), spec.start_byte)
        if key not in self._structs:
            self._structs[key] = False  # a struct holding itself is not plain
            self._structs[key] = self._struct_fields(spec, src, depth)
        return self._structs[key]

    def _struct_fields(self, spec: Node, src: Source, depth: int) -> bool:
        name, body = spec.child_by_field_name("name"), spec.child_by_field_name("body")
        if body is None or any(c.type == "base_class_clause" for c in spec.children):
            return False
        own = src.text_of(name).split("::")[-1] if name is not None else ""
        for member in body.named_children:
            declarator = member.child_by_field_name("declarator")
            kind = member.child_by_field_name("type")
            if member.type in ("comment", "access_specifier"):
                continue
            if declarator is not None and any(n.type in ("function_declarator", "operator_cast")
                                              for n in walk(declarator)):
                if any(n.type in ("operator_name", "operator_cast", "destructor_name") for n in walk(declarator)) \
                        or own in {n for n, _ in declarator_names(declarator, src)}:
                    return False  # runs implicitly: an operator, a conversion, a constructor or destructor
                continue
            if member.type != "field_declaration" or kind is None or member.child_by_field_name("default_value") \
                    is not None or any(c.type in ("initializer_list", "=") for c in member.children) or \
                    not self.type(kind, src, depth + 1):
                return False
        return True


def _names_a_function(alias: Binding) -> bool:
    """Whether a typedef or alias names a function or a pointer to one (`typedef int (*Fn)(int);`,
    `using Fn = int (*)(int);`): calling it runs code, and it is no number."""
    parts = alias.node.children_by_field_name("declarator") if alias.node.type == "type_definition" else \
        [alias.node.child_by_field_name("type")]
    return any(n.type in ("function_declarator", "abstract_function_declarator")
               for d in parts if d is not None for n in walk(d))


def number_field(binding: Binding, field: str, plain: Plainness) -> bool:
    """Whether FIELD of a plain value is a number or a pointer: dim3's and CUDA vectors' x, y, z, w; a plain
    struct's field declared so."""
    kind = binding.type
    if kind is None or not plain.value(binding):
        return False
    if kind.type == "type_identifier" and not plain.resolve(binding.src.text_of(kind), kind, binding.src):
        return field in ("x", "y", "z", "w")  # dim3, float4 and the like: numbers
    spec = struct_of(kind, binding.src, plain)
    if spec is None:
        return False
    struct, struct_src = spec
    body = struct.child_by_field_name("body")
    for member in (body.named_children if body is not None else []):
        declarators = member.children_by_field_name("declarator") if member.type == "field_declaration" else []
        for d in declarators:
            if field in {n for n, _ in declarator_names(d, struct_src)}:
                pointer = any(n.type in ("pointer_declarator", "array_declarator") for n in walk(d))
                kind = member.child_by_field_name("type")
                return pointer or kind is not None and plain.number(kind, struct_src, 0)
    return False


def constant(value: Node, src: Source, plain: Plainness) -> bool:
    """Whether a default argument evaluates to a value without running code: a literal, a signed number, or a name
    of the program's that is a number or a pointer (copied, nothing runs). Round 280: a sign on anything else may
    reach an operator by argument-dependent lookup (`= +tap`), a qualified name is not looked up here, and a name
    that is none of the program's may be a macro: all refused."""
    while value.type == "parenthesized_expression" and len(value.named_children) == 1:
        value = value.named_children[0]
    if value.type in ("number_literal", "true", "false", "null", "nullptr", "char_literal"):
        return True
    if value.type == "unary_expression" and src.text_of(value.child_by_field_name("operator")) in ("-", "+"):
        return value.child_by_field_name("argument").type == "number_literal"
    if value.type == "identifier":
        bindings = plain.resolve(src.text_of(value), value, src)
        return bool(bindings) and all(plain.arithmetic(b) for b in bindings)
    return False


def struct_of(kind: Node, src: Source, plain: Plainness, depth: int = 0) -> tuple[Node, Source] | None:
    """The struct definition a type names (through aliases), or None."""
    if depth > _DEPTH or kind.type != "type_identifier":
        return None
    bindings = [b for b in plain.resolve(src.text_of(kind), kind, src) if b.kind == "type"]
    for b in bindings:
        if b.node.type in ("struct_specifier", "class_specifier") and b.node.child_by_field_name("body") is not None:
            return b.node, b.src
        if b.node.type in ("type_definition", "alias_declaration") and b.type is not None:
            return struct_of(b.type, b.src, plain, depth + 1)
    return None
