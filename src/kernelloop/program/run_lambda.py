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
in a variable or a macro, `(h.run)(...)`, is not read), a called name that the frozen code binds
anywhere is not the part's (`fz::launch`, an outer lambda's parameter or a local lambda named like
the launcher or `cudaMemset`), and the copy's kind read at its own position. Every name the lambda
reads is judged by the binding C++ gives it there (scopes.py; round 278: a range-for, catch,
structured binding, outer lambda's parameter or init-capture, using-declaration or macro binding a
frozen object while an unrelated helper's `int tap` looked like it): it must be a plain value
(numbers, pointers to numbers, CUDA vector and half types, dim3, the program's aliases of those,
structs of such fields with nothing that runs implicitly), and every type the lambda names resolves
to one, so no constructor, destructor, conversion or operator of the program's runs in the timed
call (round 277), nor arithmetic where the frozen code overloads an operator. The lambda takes no
parameters and makes no capture of its own.
"""

from __future__ import annotations

import re

from tree_sitter import Node

from .cuda_tree import Source, first_error, walk
from .macros import expand, macro_body_words, program_macros
from .scopes import VALUE_KINDS, Binding, Scopes, bound_names, declarator_names

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
    """What of the frozen code's types arithmetic in a lambda could reach: every type it defines, and whether it
    overloads an operator outside a class (`Shape operator+(Shape, int)`, which a plain struct's value could call)."""

    def __init__(self, *sources: Source) -> None:
        self.types: set[str] = set()
        self.operators = False
        for src in sources:
            for node in walk(src.root):
                if node.type in ("struct_specifier", "class_specifier", "union_specifier", "enum_specifier"):
                    if (name := node.child_by_field_name("name")) is not None:
                        self.types.add(src.text_of(name).split("::")[-1])
                elif node.type in ("function_definition", "declaration") and \
                        (declarator := node.child_by_field_name("declarator")) is not None and \
                        (node.parent is None or node.parent.type != "field_declaration_list") and \
                        any(n.type in ("operator_name", "operator_cast") for n in walk(declarator)):
                    self.operators = True


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
                found |= {n for n, _ in declarator_names(d, src)}
    return found


# CUDA's own numbers and vectors of them (`__nv_bfloat16* x`, `float2* a`): no code of the program
_CUDA_NUMBERS = re.compile(r"(?:__half2?|half2?|__nv_bfloat162?|nv_bfloat162?|(?:u?char|u?short|u?int|u?long|"
                           r"u?longlong|float|double)[1-4])")
# `auto n = h.size<int>(...)`: the harness's size, an integer
_SIZE_CALL = re.compile(r"[^=]*=\s*\w+\s*(?:\.|->)\s*size\s*(?:<[^<>]*>)?\s*\(")
_DEPTH = 8  # typedefs of typedefs, structs of structs


class _Plainness:
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
        if binding.type.type == "placeholder_type_specifier":
            return binding.node.type == "declaration" and _SIZE_CALL.match(binding.src.text_of(binding.node)) is not None
        declarators = binding.node.children_by_field_name("declarator")
        if any(n.type in ("function_declarator", "abstract_function_declarator") for d in declarators for n in walk(d)):
            return False  # a pointer to a function
        return self.type(binding.type, binding.src)

    def type(self, kind: Node, src: Source, depth: int = 0) -> bool:
        if depth > _DEPTH:
            return False
        if kind.type in ("primitive_type", "sized_type_specifier"):
            return True
        if kind.type in ("struct_specifier", "class_specifier") and kind.child_by_field_name("body") is not None:
            return self._struct(kind, src, depth)
        name = src.text_of(kind)
        if kind.type == "qualified_identifier":
            path = re.findall(r"[A-Za-z_]\w*", name)
            if len(path) == 2 and path[0] == "std" and not self.qualified(path[:1], path[1], kind, src):
                return path[1] in _PLAIN_TYPES
            bindings = self.qualified(path[:-1], path[-1], kind, src) if path and "<" not in name else []
            return bool(bindings) and self._types(bindings, depth)
        if kind.type != "type_identifier":
            return False
        bindings = self.resolve(name, kind, src)
        if not bindings:  # CUDA's own
            return name in _PLAIN_TYPES or _CUDA_NUMBERS.fullmatch(name) is not None
        return self._types(bindings, depth)

    def _types(self, bindings: list[Binding], depth: int) -> bool:
        defined = [b for b in bindings if not (b.node.type in ("struct_specifier", "class_specifier", "union_specifier")
                                               and b.node.child_by_field_name("body") is None)]  # forward declarations
        if not defined or any(b.src is self.editable or b.kind != "type" for b in defined):
            return False
        for b in defined:
            if b.node.type in ("type_definition", "alias_declaration"):
                declarators = b.node.children_by_field_name("declarator")
                if b.type is None or any(n.type == "function_declarator" for d in declarators for n in walk(d)) or \
                        not self.type(b.type, b.src, depth + 1):
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


def _editable_functions(editable: str) -> set[str]:
    """The functions and kernels the editable part defines, by their last name."""
    src = Source(editable)
    return {name for node in walk(src.root) if node.type == "function_definition"
            and (declarator := node.child_by_field_name("declarator")) is not None
            for name, _ in declarator_names(declarator, src)}


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
    HARNESS: the frozen code, comments stripped; MACRO_TEXTS: the program's code (preamble, editable part, harness),
    whose macros a lambda may use."""
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
    preamble = Source(macro_texts[0]) if macro_texts else None
    editable = Source(macro_texts[1]) if len(macro_texts) > 1 else None
    frozen_sources = (src, *([preamble] if preamble is not None else []))
    frozen = _Frozen(*frozen_sources)
    typed_objects = _objects_of(src, frozen.types)
    # names the frozen code binds anywhere (a helper, a local lambda, a parameter, a capture): a call by such a name
    # may reach frozen code whatever scope or overload picks it; prototypes aside (the launcher's own, in the preamble)
    bound = bound_names(*frozen_sources, prototypes=False)
    prototypes = bound_names(*frozen_sources) - bound
    part_functions = _editable_functions(macro_texts[1]) if len(macro_texts) > 1 else set(editable_names)
    scopes = Scopes(tuple(s for s in (preamble, editable) if s is not None), macros,
                    frozenset(macro_body_words(*macro_texts)))
    # the part runs inside the experiment only: a call before or after it (or its address taken, to call it
    # elsewhere) computes on inputs the verifier does not draw, and what it prints is compared by nothing
    inside = [(body.start_byte, body.end_byte) for body in found]
    for node in walk(src.root):
        if node.type != "identifier" or any(a <= node.start_byte < b for a, b in inside):
            continue
        name = src.text_of(node)
        if name in part_functions and name not in bound and not any(
                up.type in ("function_declarator", "parameter_declaration") for up in _ancestors(node)):
            return f"its frozen code names {name} outside its h.run lambda " \
                   f"({' '.join(src.text_of(node.parent).split())[:60]})"
    for lambda_body, (body, body_src) in zip(found, bodies):
        problem = _lambda_problem(lambda_body, body, body_src, src, scopes, editable, frozen, typed_objects,
                                  bound, prototypes, part_functions, editable_names)
        if problem:
            return problem
    return None


def _lambda_problem(lambda_body: Node, body: Node, body_src: Source, src: Source, scopes: Scopes,
                    editable: Source | None, frozen: _Frozen, typed_objects: set[str], bound: set[str],
                    prototypes: set[str], part_functions: set[str], editable_names: set[str]) -> str | None:
    """What one `h.run` lambda (LAMBDA_BODY in the harness SRC; BODY its expansion, in BODY_SRC) runs that is not
    the part's."""
    if first_error(body) is not None:
        return f"its h.run lambda cannot be read ({' '.join(body_src.text_of(body).split())[:80]})"
    lam = lambda_body.parent
    declarator = lam.child_by_field_name("declarator") if lam is not None else None
    parameters = declarator.child_by_field_name("parameters") if declarator is not None else None
    if parameters is not None and parameters.named_children:  # h.run calls it with none: defaults run each call
        return f"its h.run lambda takes parameters ({' '.join(src.text_of(parameters).split())[:60]})"
    captures = lam.child_by_field_name("captures") if lam is not None else None
    ceiling = body.parent  # the wrapper function the expansion was read in

    def resolve(name: str, node: Node, where: Source) -> list[Binding]:
        """NAME's nearest bindings at NODE: inside the lambda's expansion, then around the lambda in the harness."""
        if where is body_src:
            inner = scopes.lookup(name, node, body_src, ceiling=ceiling)
            if inner is not None:
                return inner
            node, where = lambda_body, src
        return scopes.lookup(name, node, where) or []

    def qualified(path: list[str], name: str, node: Node, where: Source) -> list[Binding]:
        return scopes.qualified(path, name, lambda_body if where is body_src else node, src if where is body_src
                                else where)

    plain = _Plainness(resolve, qualified, editable)
    for capture in (captures.named_children if captures is not None else []):
        if capture.type == "lambda_capture_initializer":
            return f"its h.run lambda captures {' '.join(src.text_of(capture).split())[:60]}, a value it makes"
        captured = resolve(src.text_of(capture), capture, src) if capture.type == "identifier" else None
        if captured is not None and not (captured and all(plain.value(b) for b in captured)):
            return f"its h.run lambda captures {src.text_of(capture)}, which is not a plain value the frozen code " \
                   "declares (a number, a pointer to numbers, a dim3)"
    for node in walk(body):
        text = body_src.text_of(node)
        if node.type == "identifier" and not _names_a_call_or_declaration(node):
            up = node.parent
            if up is not None and up.type == "qualified_identifier" and up.child_by_field_name("name") == node:
                path = re.findall(r"[A-Za-z_]\w*", body_src.text_of(up))[:-1]
                bindings = qualified(path, text, up, body_src) if "<" not in body_src.text_of(up) else []
            else:
                bindings = resolve(text, node, body_src)
            if not (bindings and all(plain.value(b) for b in bindings) or
                    not bindings and text == "cudaMemcpyDeviceToDevice"):
                # round 277: operators, conversions and constructors of frozen types reached through a field, an
                # `auto` reference, a container or a base class; round 278: a name judged by its nearest binding
                return f"its h.run lambda reads {text}, which is not a plain value the frozen code " \
                       "declares (a number, a pointer to numbers, a dim3)"
        if node.type == "field_expression" and node.named_children[0].type != "identifier":
            return f"its h.run lambda reads a field, `{' '.join(text.split())[:60]}`, of no plain value"
        if node.type == "type_identifier" and (bindings := resolve(text, node, body_src)) and \
                not plain.type(node, body_src):
            return f"its h.run lambda names {text}, a type of the frozen code's"
        if not node.is_named:  # punctuation and operators (an assignment, a launch are nodes of their own)
            continue
        if node.type not in _ALLOWED:
            return f"its h.run lambda holds {node.type.replace('_', ' ')} `{' '.join(text.split())[:80]}`"
        if frozen.operators and node.type in ("binary_expression", "unary_expression", "update_expression") and \
                any(n.type == "identifier" and body_src.text_of(n) in typed_objects for n in walk(node)):
            return f"its h.run lambda computes `{' '.join(text.split())[:60]}` on an object of a " \
                   "frozen type where the frozen code overloads an operator"
        if node.type == "declaration":
            kind = node.child_by_field_name("type")
            # a declared local runs no code of its own: a number or CUDA's own plain type, never a struct (whose
            # construction could run a default member initializer)
            if kind is None or not (kind.type in ("primitive_type", "sized_type_specifier") or kind.type in (
                    "type_identifier", "qualified_identifier") and body_src.text_of(kind).removeprefix("std::")
                    in _PLAIN_TYPES and plain.type(kind, body_src)):
                return f"its h.run lambda declares {' '.join(text.split())[:80]}"
        if node.type != "call_expression":
            continue
        name = _called_name(node, body_src)
        if name in bound or name in prototypes and name not in part_functions:
            return f"its h.run lambda calls {name}, which the editable part does not define (the frozen code " \
                   "defines one too)" if name in part_functions else \
                f"its h.run lambda calls {name}, which the frozen code declares itself"
        if name in _CONSTRUCTORS:
            continue
        if name in editable_names:  # an editable kernel launched in place too
            continue
        args = node.child_by_field_name("arguments")
        listed = args.named_children if args is not None else []
        if name in _DEVICE_COPIES and len(listed) >= 4 and listed[3].type == "identifier" \
                and body_src.text_of(listed[3]) == "cudaMemcpyDeviceToDevice" or name in _DEVICE_FILLS:
            continue
        return f"its h.run lambda calls {name or text[:40]}, which the editable part does not define"
    return None
