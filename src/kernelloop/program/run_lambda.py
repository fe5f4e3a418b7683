"""What a contract-v2 program's timed call may run: the `h.run` lambda calls the editable part's
functions and nothing else.

Every timed call runs the lambda, so whatever else frozen code does there runs between the part's
work and the harness's checks, where the verifier cannot see it: a copy of a scratch buffer to the
host or a frozen kernel that condenses it into a variable of its own kept a result that nothing
compares (red team round 274, after round 273 closed `h.fetch` of scratch). The other statements
allowed touch device memory only: a device-to-device `cudaMemcpy` between the harness's buffers (an
in-place kernel's input copied into its output before the launcher runs), a `cudaMemset` (an
accumulated output zeroed), and declarations of plain values a launch is written with
(`dim3 block(32, 8);`). Control flow (`if`, `for`) around those statements is allowed, and so is
launching an editable kernel in place; conditions, arguments and launch configurations call nothing
else. Outside the lambda the frozen code calls the part nowhere: a call before the run computes on
inputs the verifier does not draw, and what it prints is compared by nothing.

Read as the compiler reads it (red team round 275 spelled the same frozen work twelve ways): the
program's macros expanded first (a macro renaming the launcher, `cudaMemset` or
`cudaMemcpyDeviceToDevice`), `.run` only ever called with its lambda written in place (a lambda kept
in a variable or a macro, `(h.run)(...)`, is not read), a called name that the frozen code defines
too is not the part's (`fz::launch`, an editable variable named like a frozen helper), the copy's
kind read at its own position, and no object of a frozen type that runs code of its own (a
constructor, destructor, conversion or operator) named in the lambda, nor arithmetic where the frozen
code overloads an operator. What C++ runs implicitly beyond that (a type the reader cannot see)
is a Known limit (docs/verifier.md).
"""

from __future__ import annotations

import re

from tree_sitter import Node

from .cuda_tree import Source, first_error, walk
from .macros import expand, program_macros

# node types a lambda body may hold besides the calls it makes (each checked below)
_ALLOWED = frozenset({
    "compound_statement", "expression_statement", "if_statement", "else_clause", "condition_clause", "for_statement",
    "call_expression", "argument_list", "identifier", "qualified_identifier", "namespace_identifier",
    "template_function", "template_argument_list", "type_descriptor", "primitive_type", "type_identifier",
    "sized_type_specifier", "type_qualifier", "abstract_pointer_declarator", "number_literal", "true", "false",
    "null", "nullptr", "binary_expression", "unary_expression", "parenthesized_expression", "cast_expression",
    "sizeof_expression", "subscript_expression", "subscript_argument_list", "pointer_expression",
    "field_expression", "field_identifier", "conditional_expression", "update_expression", "declaration",
    "init_declarator", "kernel_call_syntax", "pointer_declarator", "initializer_list", "comment"})
_DEVICE_COPIES = frozenset({"cudaMemcpy", "cudaMemcpyAsync"})
_DEVICE_FILLS = frozenset({"cudaMemset", "cudaMemsetAsync"})  # device memory only: zeroing an accumulated output
# local values a launch is written with (`dim3 block(32, 8);`, `int grid = ...;`): types that run no code of
# their own; a class of the frozen code could (a constructor copying scratch)
_PLAIN_TYPES = frozenset({"dim3", "size_t", "ptrdiff_t", "int8_t", "int16_t", "int32_t", "int64_t", "uint8_t",
                          "uint16_t", "uint32_t", "uint64_t", "cudaStream_t"})
_CONSTRUCTORS = frozenset({"dim3", "static_cast", "const_cast", "reinterpret_cast"})  # no code of the program


def _called_name(call: Node, src: Source) -> str:
    fn = call.child_by_field_name("function")
    while fn is not None and fn.type in ("qualified_identifier", "template_function", "parenthesized_expression"):
        fn = fn.named_children[0] if fn.type == "parenthesized_expression" and fn.named_children else \
            fn.child_by_field_name("name")
    return src.text_of(fn) if fn is not None and fn.type == "identifier" else ""


def _lambda_bodies(src: Source) -> list[Node] | str:
    """The body of every lambda handed to a `.run(` call, or why some use of `run` is not one."""
    bodies = []
    for node in walk(src.root):
        if node.type != "field_expression":
            continue
        field = node.child_by_field_name("field")
        if field is None or src.text_of(field) != "run":
            continue
        call = node.parent
        args = call.child_by_field_name("arguments") if call is not None and call.type == "call_expression" \
            and call.child_by_field_name("function") == node else None
        first = args.named_children[0] if args is not None and args.named_children else None
        if first is None or first.type != "lambda_expression" or first.child_by_field_name("body") is None:
            return f"its run() is not called with its lambda written in place ({' '.join(src.text_of(call or node).split())[:80]})"
        bodies.append(first.child_by_field_name("body"))
    return bodies


class _Frozen:
    """What frozen code defines that a lambda could run without calling it by a name of the part's: its functions and
    variables (a local lambda or function pointer named like the launcher: round 276), its types with code that runs
    implicitly (a constructor, destructor, conversion or operator member) and every type of its own, whether it
    overloads an operator, and the CUDA names it declares again (`cudaMemset(..., size_t count = tapped())`)."""

    def __init__(self, *sources: Source) -> None:
        self.functions: set[str] = set()
        self.variables: set[str] = set()
        self.active_types: set[str] = set()
        self.types: set[str] = set()
        self.operators = False
        self.redeclared: set[str] = set()
        for src in sources:
            self._read(src)

    @staticmethod
    def _function_name(declarator: Node, src: Source) -> tuple[str, bool]:
        """(the last name, whether it is an operator or a conversion) of a function's declarator."""
        for node in walk(declarator):
            if node.type in ("operator_name", "operator_cast"):
                return "", True
            if node.type == "destructor_name":
                return "~" + src.text_of(node).lstrip("~").strip(), False
            if node.type in ("identifier", "field_identifier"):
                return src.text_of(node), False
        return "", False

    def _read(self, src: Source) -> None:
        for node in walk(src.root):
            if node.type in ("struct_specifier", "class_specifier", "union_specifier", "enum_specifier"):
                name = node.child_by_field_name("name")
                if name is None:
                    continue
                type_name = src.text_of(name).split("::")[-1]
                self.types.add(type_name)
                body = node.child_by_field_name("body")
                for member in (body.named_children if body is not None else []):
                    declarator = member.child_by_field_name("declarator")
                    if declarator is None or member.type not in ("function_definition", "declaration",
                                                                 "field_declaration"):
                        continue
                    named, operator = self._function_name(declarator, src)
                    if declarator.type == "operator_cast" or operator or named in (type_name, "~" + type_name):
                        self.active_types.add(type_name)
            elif node.type in ("function_definition", "declaration", "field_declaration") and \
                    (declarator := node.child_by_field_name("declarator")) is not None:
                is_function = declarator.type in ("function_declarator", "operator_cast") or any(
                    n.type == "function_declarator" for n in walk(declarator) if n.parent is declarator)
                named, operator = self._function_name(declarator, src)
                in_class = node.parent is not None and node.parent.type == "field_declaration_list"
                if operator or declarator.type == "operator_cast":
                    self.operators = self.operators or not in_class
                elif is_function and named:
                    (self.functions if node.type == "function_definition" else self.redeclared).add(named)
                elif node.type == "declaration" and not in_class:
                    for d in node.children_by_field_name("declarator"):
                        if d.type != "function_declarator" and (names := re.findall(
                                r"[A-Za-z_]\w*", src.text_of(d).split("=")[0].split("{")[0].split("(")[0])):
                            self.variables.add(names[-1])


def _objects_of(src: Source, types: set[str]) -> set[str]:
    """Variables the frozen code declares of TYPES (or with `auto` from an expression naming one)."""
    found: set[str] = set()
    for node in walk(src.root):
        if node.type != "declaration" or (kind := node.child_by_field_name("type")) is None:
            continue
        text = src.text_of(node)
        if src.text_of(kind).split("::")[-1] in types or kind.type == "placeholder_type_specifier" and \
                any(re.search(rf"\b{re.escape(t)}\b", text) for t in types):
            for d in node.children_by_field_name("declarator"):
                if names := re.findall(r"[A-Za-z_]\w*", src.text_of(d).split("=")[0].split("{")[0].split("(")[0]):
                    found.add(names[-1])
    return found


# CUDA's own numbers and vectors of them (`__nv_bfloat16* x`, `float2* a`): no code of the program
_CUDA_NUMBERS = re.compile(r"(?:__half2?|half2?|__nv_bfloat162?|nv_bfloat162?|(?:u?char|u?short|u?int|u?long|"
                           r"u?longlong|float|double)[1-4])")


def _plain_type(kind: Node, src: Source, aliases: set[str]) -> bool:
    name = src.text_of(kind).removeprefix("std::")
    return kind.type in ("primitive_type", "sized_type_specifier") or kind.type in (
        "type_identifier", "qualified_identifier") and (name in _PLAIN_TYPES or name in aliases
                                                       or _CUDA_NUMBERS.fullmatch(name) is not None)


def _plain_structs(sources: tuple[Source, ...], aliases: set[str]) -> set[str]:
    """Structs of the frozen code with nothing that runs implicitly: no base class, no constructor, destructor,
    conversion or operator member, every field a plain type (a shape or a parameter block passed by value)."""
    found: set[str] = set()
    for _ in range(3):  # a struct of plain structs
        for src in sources:
            for node in walk(src.root):
                name, body = node.child_by_field_name("name"), node.child_by_field_name("body")
                if node.type not in ("struct_specifier", "class_specifier") or name is None or body is None or any(
                        c.type == "base_class_clause" for c in node.children):
                    continue
                type_name = src.text_of(name)
                plain = True
                for member in body.named_children:
                    declarator = member.child_by_field_name("declarator")
                    kind = member.child_by_field_name("type")
                    if member.type == "comment" or member.type == "access_specifier":
                        continue
                    if declarator is not None and (declarator.type == "function_declarator" or any(
                            n.type == "function_declarator" for n in walk(declarator))):
                        named, operator = _Frozen._function_name(declarator, src)
                        plain = plain and not operator and named not in (type_name, "~" + type_name)
                    elif member.type == "field_declaration" and kind is not None:
                        plain = plain and (_plain_type(kind, src, aliases) or src.text_of(kind) in found)
                    else:
                        plain = False
                if plain:
                    found.add(type_name)
    return found


def _plain_declared(*sources: Source) -> tuple[set[str], set[str]]:
    """(names declared with a plain type: a number, a pointer to numbers, a dim3, the program's alias of one; names
    declared with any other type, `auto` included) across the frozen code's declarations and parameters."""
    plain: set[str] = set()
    other: set[str] = set()
    aliases: set[str] = set()
    for src in sources:  # `typedef float real;`, `using idx_t = int;`
        for node in walk(src.root):
            kind = node.child_by_field_name("type") if node.type in ("type_definition", "alias_declaration") else None
            if kind is not None and kind.type == "type_descriptor":
                kind = kind.child_by_field_name("type")
            if kind is not None and _plain_type(kind, src, aliases):
                for d in (node.children_by_field_name("declarator") or [node.child_by_field_name("name")]):
                    if d is not None and (names := re.findall(r"[A-Za-z_]\w*", src.text_of(d))):
                        aliases.add(names[-1])
    aliases |= _plain_structs(sources, aliases)
    for src in sources:
        for node in walk(src.root):
            if node.type not in ("declaration", "parameter_declaration") or \
                    (kind := node.child_by_field_name("type")) is None:
                continue
            # `auto n = h.size<int>(...)`: the harness's size, an integer
            is_plain = _plain_type(kind, src, aliases) or kind.type == "placeholder_type_specifier" and re.match(
                r"[^=]*=\s*\w+\s*(?:\.|->)\s*size\s*(?:<[^<>]*>)?\s*\(", src.text_of(node)) is not None
            for d in node.children_by_field_name("declarator"):
                if d.type == "function_declarator":
                    continue
                if names := re.findall(r"[A-Za-z_]\w*", src.text_of(d).split("=")[0].split("{")[0].split("(")[0]):
                    if is_plain:
                        plain.add(names[-1])
                    elif node.type == "declaration":  # another function's parameter is not in the lambda's scope
                        other.add(names[-1])
    return plain, other


def _fields_of_plain_structs(*sources: Source) -> set[str]:
    """The fields a lambda may read: dim3's x, y, z and the fields of the frozen code's plain structs."""
    fields = {"x", "y", "z"}
    structs = _plain_structs(sources, set())
    for src in sources:
        for node in walk(src.root):
            name = node.child_by_field_name("name") if node.type in ("struct_specifier", "class_specifier") else None
            body = node.child_by_field_name("body") if name is not None else None
            if body is not None and src.text_of(name) in structs:
                fields |= {src.text_of(f) for m in body.named_children for f in walk(m) if f.type == "field_identifier"}
    return fields


def _editable_functions(editable: str) -> set[str]:
    """The functions and kernels the editable part defines, by their last name."""
    src = Source(editable)
    names = set()
    for node in walk(src.root):
        if node.type == "function_definition" and (declarator := node.child_by_field_name("declarator")) is not None:
            named, _ = _Frozen._function_name(declarator, src)
            if named:
                names.add(named)
    return names


def _names_a_call_or_declaration(node: Node) -> bool:
    """Whether an identifier is the called function's name (`f(...)`, `ns::f<T>(...)`, `k<<<...>>>(...)`) or the name
    a declaration declares, rather than a value read."""
    up = node.parent
    while up is not None and up.type in ("qualified_identifier", "template_function", "parenthesized_expression"):
        node, up = up, up.parent
    if up is not None and up.type == "call_expression" and up.child_by_field_name("function") == node:
        return True
    while up is not None and up.type in ("pointer_declarator", "array_declarator", "reference_declarator"):
        node, up = up, up.parent
    return up is not None and (up.type == "declaration" or up.type == "init_declarator"
                               and up.child_by_field_name("declarator") == node)


def _ancestors(node: Node):
    while node.parent is not None:
        node = node.parent
        yield node


def _body_as_compiled(text: str, macros) -> Node | str:
    """A lambda body as the compiler reads it: its macros expanded where it names one; or why it cannot be read."""
    named = set(macros.defined) | set(macros.uncertain)
    if named and set(re.findall(r"[A-Za-z_]\w*", text)) & named:
        expanded = expand(text, macros)
        if expanded is None:
            return f"its h.run lambda uses macros that cannot be read for sure ({' '.join(text.split())[:80]})"
        text = expanded
    body = Source(f"void kl_lambda_body() {text}")
    node = body.root.named_children[0].child_by_field_name("body") if body.root.named_children else None
    return (node, body) if node is not None else "its h.run lambda cannot be read"  # type: ignore[return-value]


def run_lambda_problem(harness: str, editable_names: set[str], macro_texts: tuple[str, ...] = ()) -> str | None:
    """What the frozen code's `h.run` lambda does besides calling functions the editable part declares
    (EDITABLE_NAMES: a macro's included) and device-memory copies and fills, in words; None when nothing.
    HARNESS: the frozen code, comments stripped; MACRO_TEXTS: the program's code, whose macros a lambda may use."""
    macros = program_macros(*macro_texts)
    if any(re.search(r"(?:\.|->)\s*run\b", m.body) for m in macros.defined.values()):
        return "its run() is reached through a macro, so its lambda cannot be read"
    src = Source(harness)
    found = _lambda_bodies(src)
    if isinstance(found, str):
        return found
    bodies = []
    for node in found:
        read = _body_as_compiled(src.text_of(node), macros)
        if isinstance(read, str):
            return read
        bodies.append(read)
    # the frozen code: the harness, and the preamble before the editable part (MACRO_TEXTS[0])
    frozen = _Frozen(src, *([Source(macro_texts[0])] if macro_texts else []))
    frozen_functions = frozen.functions | frozen.variables
    frozen_objects = _objects_of(src, frozen.active_types)
    typed_objects = _objects_of(src, frozen.types)
    part_functions = _editable_functions(macro_texts[1]) if len(macro_texts) > 1 else set(editable_names)
    plain, other = _plain_declared(src, *([Source(macro_texts[0])] if macro_texts else []))
    # the part runs inside the experiment only: a call before or after it (or its address taken, to call it
    # elsewhere) computes on inputs the verifier does not draw, and what it prints is compared by nothing
    inside = [(body.start_byte, body.end_byte) for body in found]
    for node in walk(src.root):
        if node.type != "identifier" or any(a <= node.start_byte < b for a, b in inside):
            continue
        name = src.text_of(node)
        if name in part_functions and name not in frozen_functions and not any(
                up.type in ("function_declarator", "parameter_declaration") for up in _ancestors(node)):
            return f"its frozen code names {name} outside its h.run lambda " \
                   f"({' '.join(src.text_of(node.parent).split())[:60]})"
    for body, src in bodies:
        if first_error(body) is not None:
            return f"its h.run lambda cannot be read ({' '.join(src.text_of(body).split())[:80]})"
        local_plain, local_other = _plain_declared(Source(src.text))
        values = (plain | local_plain) - other - local_other - frozen.functions
        plain_fields = _fields_of_plain_structs(src, *([Source(macro_texts[0]), Source(harness)] if macro_texts
                                                       else [Source(harness)]))
        for node in walk(body):
            if node.type == "identifier" and not _names_a_call_or_declaration(node) \
                    and src.text_of(node) not in values | {"cudaMemcpyDeviceToDevice"}:
                # round 277: operators, conversions and constructors of frozen types reached through a field, an
                # `auto` reference, a container or a base class: only plain values (numbers, pointers to numbers)
                # are read in the timed call
                return f"its h.run lambda reads {src.text_of(node)}, which is not a plain value the frozen code " \
                       "declares (a number, a pointer to numbers, a dim3)"
            if node.type == "field_expression" and (node.named_children[0].type != "identifier" or src.text_of(
                    node.named_children[0]) not in values or src.text_of(node.child_by_field_name("field")) not in
                    plain_fields):
                return f"its h.run lambda reads a field, `{' '.join(src.text_of(node).split())[:60]}`, of no plain value"
            if node.type == "type_identifier" and src.text_of(node) in frozen.types:
                return f"its h.run lambda names {src.text_of(node)}, a type of the frozen code's"
            if not node.is_named:  # punctuation and operators (an assignment, a launch are nodes of their own)
                continue
            if node.type not in _ALLOWED:
                return f"its h.run lambda holds {node.type.replace('_', ' ')} " \
                       f"`{' '.join(src.text_of(node).split())[:80]}`"
            if node.type == "identifier" and src.text_of(node) in frozen_objects:
                return f"its h.run lambda names {src.text_of(node)}, an object of a frozen type that runs code of its own"
            if node.type == "type_identifier" and src.text_of(node) in frozen.active_types:
                return f"its h.run lambda makes a {src.text_of(node)}, a frozen type that runs code of its own"
            if frozen.operators and node.type in ("binary_expression", "unary_expression", "update_expression") and \
                    any(n.type == "identifier" and src.text_of(n) in typed_objects for n in walk(node)):
                return f"its h.run lambda computes `{' '.join(src.text_of(node).split())[:60]}` on an object of a " \
                       "frozen type where the frozen code overloads an operator"
            if node.type == "declaration":
                kind = node.child_by_field_name("type")
                plain = kind is not None and (
                    kind.type in ("primitive_type", "sized_type_specifier")
                    or kind.type in ("type_identifier", "qualified_identifier")
                    and src.text_of(kind).removeprefix("std::") in _PLAIN_TYPES)
                if not plain:
                    return f"its h.run lambda declares {' '.join(src.text_of(node).split())[:80]}"
            if node.type != "call_expression":
                continue
            name = _called_name(node, src)
            if name in frozen.redeclared | frozen.functions and name not in part_functions:
                return f"its h.run lambda calls {name}, which the frozen code declares itself"
            if name in _CONSTRUCTORS:
                continue
            if name in editable_names and name not in frozen_functions:  # an editable kernel launched in place too
                continue
            args = node.child_by_field_name("arguments")
            listed = args.named_children if args is not None else []
            if name in _DEVICE_COPIES and len(listed) >= 4 and listed[3].type == "identifier" \
                    and src.text_of(listed[3]) == "cudaMemcpyDeviceToDevice" or name in _DEVICE_FILLS:
                continue
            defined = " (the frozen code defines one too)" if name in frozen_functions else ""
            return f"its h.run lambda calls {name or src.text_of(node)[:40]}, which the editable part does not " \
                   f"define{defined}"
    return None
