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


# CUDA's own numbers and vectors of them (`__nv_bfloat16* x`, `float2* a`): no code of the program
_CUDA_NUMBERS = re.compile(r"(?:__half2?|half2?|__nv_bfloat162?|nv_bfloat162?|(?:u?char|u?short|u?int|u?long|"
                           r"u?longlong|float|double)[1-4])")
# what `auto` may hold: the harness's sizes and buffers (kl::Harness's methods returning a number or a pointer)
_HARNESS_METHODS = frozenset({"size", "input", "output", "inout", "scratch"})
# numbers by name, from CUDA's and the standard headers: the language's own operators
_PLAIN_NUMBERS = frozenset({"size_t", "ptrdiff_t", "int8_t", "int16_t", "int32_t", "int64_t", "uint8_t", "uint16_t",
                            "uint32_t", "uint64_t"})
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
        return pointer or self._number(binding.type, binding.src, 0)

    def _number(self, kind: Node, src: Source, depth: int) -> bool:
        if kind.type in ("primitive_type", "sized_type_specifier"):
            return True
        if kind.type == "placeholder_type_specifier" or depth > _DEPTH:
            return kind.type == "placeholder_type_specifier"  # judged by _deduced: a number or a harness pointer
        name = src.text_of(kind).removeprefix("std::")
        bindings = self.resolve(name, kind, src) if kind.type == "type_identifier" else []
        if not bindings:
            return name in _PLAIN_NUMBERS
        return all(b.kind == "type" and b.node.type in ("type_definition", "alias_declaration") and b.type is not None
                   and (any(n.type == "pointer_declarator" for d in b.node.children_by_field_name("declarator")
                            for n in walk(d)) or self._number(b.type, b.src, depth + 1)) for b in bindings)

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
    HARNESS: the frozen code, comments stripped; MACRO_TEXTS: the program's code (preamble, editable part, harness).
    The harness is read as the unit that builds it does: the preamble, then the harness, with the macros in force at
    each point (a `#define` after the lambda is not in force in it; the editable part's are not in that unit)."""
    preamble_text = macro_texts[0] if macro_texts else ""
    frozen_macros = program_macros(preamble_text, harness)
    if any(re.search(r"(?:\.|->)\s*run\b", m.body) for m in frozen_macros.defined.values()):
        return "its run() is reached through a macro, so its lambda cannot be read"
    src = Source(harness)
    part_macros = program_macros(macro_texts[1]) if len(macro_texts) > 1 else None
    preamble_macros = program_macros(preamble_text)
    if part_macros is not None and (named := sorted(
            {n for n in part_macros.names_in(harness) if part_macros.defined.get(n) is None
             or part_macros.defined.get(n) != preamble_macros.defined.get(n)} |
            (_undefined(macro_texts[1]) & _words(harness)))):
        # the harness's unit is built without the part, so such a name means one thing there and another in one file
        return f"its frozen code names {named[0]}, a macro the editable part defines (the harness is built without it)"
    found = _lambda_bodies(src)
    if isinstance(found, str):
        return found
    macros_cache: dict[tuple[int, int], object] = {}

    def macros_at(where: Source, node: Node):
        """The macros in force at NODE of the harness or the preamble (the later ones uncertain there)."""
        if where is not src and where is not preamble:
            return None
        key = (id(where), node.start_byte)
        if key not in macros_cache:
            at = where.offset(node.start_byte)
            macros_cache[key] = program_macros(preamble_text, harness[:at], later=harness[at:]) if where is src \
                else program_macros(preamble_text[:at], later=preamble_text[at:] + harness)
        return macros_cache[key]

    preamble = Source(preamble_text) if macro_texts else None
    editable = Source(macro_texts[1]) if len(macro_texts) > 1 else None
    bodies = []
    for node in found:
        read = _body_as_compiled(src.text_of(node), macros_at(src, node))
        if isinstance(read, str):
            return read
        bodies.append(read)
    frozen_sources = (src, *([preamble] if preamble is not None else []))
    # names the frozen code binds anywhere (a helper, a local lambda, a parameter, a capture): a call by such a name
    # may reach frozen code whatever scope or overload picks it; prototypes aside (the launcher's own, in the preamble)
    bound = bound_names(*frozen_sources, prototypes=False)
    prototypes = bound_names(*frozen_sources) - bound
    part_functions = _editable_functions(macro_texts[1]) if len(macro_texts) > 1 else set(editable_names)
    scopes = Scopes(tuple(s for s in (preamble, editable) if s is not None), macros_at,
                    frozenset(macro_body_words(preamble_text, harness)))
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
        problem = _lambda_problem(_Lambda(lambda_body, src, body, body_src), scopes, editable, bound, prototypes,
                                  part_functions, editable_names)
        if problem:
            return problem
    return None


def _words(text: str) -> set[str]:
    return set(re.findall(r"[A-Za-z_]\w*", text))


def _undefined(text: str) -> set[str]:
    return set(re.findall(r"^[ \t]*#[ \t]*undef[ \t]+([A-Za-z_]\w*)", text, re.M))


class _Lambda:
    """One `h.run` lambda: its body in the harness SRC (LAMBDA_BODY) and as compiled (BODY, in BODY_SRC: macros
    expanded); names resolve inside the expansion first, then around the lambda in the harness."""

    def __init__(self, lambda_body: Node, src: Source, body: Node, body_src: Source) -> None:
        self.lambda_body, self.src, self.body, self.body_src = lambda_body, src, body, body_src
        self.node = lambda_body.parent  # the lambda_expression

    def resolve(self, scopes: Scopes, name: str, node: Node, where: Source) -> list[Binding]:
        if where is self.body_src:
            inner, settled = scopes.lookup_below(name, node, self.body_src, ceiling=self.body.parent)
            if settled:
                return inner
            return inner + scopes.lookup(name, self.lambda_body, self.src)
        return scopes.lookup(name, node, where)

    def qualified(self, scopes: Scopes, path: list[str], name: str, node: Node, where: Source) -> list[Binding]:
        if where is self.body_src:
            node, where = self.lambda_body, self.src
        return scopes.qualified(path, name, node, where)


def _lambda_problem(lam: _Lambda, scopes: Scopes, editable: Source | None, bound: set[str], prototypes: set[str],
                    part_functions: set[str], editable_names: set[str]) -> str | None:
    """What one `h.run` lambda runs that is not the part's."""
    body, body_src, src = lam.body, lam.body_src, lam.src
    if first_error(body) is not None:
        return f"its h.run lambda cannot be read ({' '.join(body_src.text_of(body).split())[:80]})"
    declarator = lam.node.child_by_field_name("declarator") if lam.node is not None else None
    parameters = declarator.child_by_field_name("parameters") if declarator is not None else None
    if parameters is not None and parameters.named_children or \
            lam.node is not None and lam.node.child_by_field_name("template_parameters") is not None:
        return "its h.run lambda takes parameters (h.run calls it with none: a default would run in every call)"
    captures = lam.node.child_by_field_name("captures") if lam.node is not None else None

    def resolve(name: str, node: Node, where: Source) -> list[Binding]:
        return lam.resolve(scopes, name, node, where)

    def qualified(path: list[str], name: str, node: Node, where: Source) -> list[Binding]:
        return lam.qualified(scopes, path, name, node, where)

    plain = _Plainness(resolve, qualified, editable)
    for capture in (captures.named_children if captures is not None else []):
        if capture.type == "lambda_capture_initializer":
            return f"its h.run lambda captures {' '.join(src.text_of(capture).split())[:60]}, a value it makes"
        captured = resolve(src.text_of(capture), capture, src) if capture.type == "identifier" else None
        if captured is not None and not (captured and all(plain.value(b) for b in captured)):
            return f"its h.run lambda captures {src.text_of(capture)}, which is not a plain value the frozen code " \
                   "declares (a number, a pointer to numbers, a dim3)"

    def read(node: Node) -> list[Binding]:
        """The bindings of an identifier the lambda reads (a qualified one's in its namespace)."""
        text, up = body_src.text_of(node), node.parent
        if up is not None and up.type == "qualified_identifier" and up.child_by_field_name("name") == node:
            path = re.findall(r"[A-Za-z_]\w*", body_src.text_of(up))[:-1]
            return qualified(path, text, up, body_src) if "<" not in body_src.text_of(up) else []
        return resolve(text, node, body_src)

    called: set[str] = set()
    for node in walk(body):
        text = body_src.text_of(node)
        if node.type == "identifier" and not _names_a_call_or_declaration(node):
            bindings = read(node)
            if not (bindings and all(plain.value(b) for b in bindings) or
                    not bindings and text == "cudaMemcpyDeviceToDevice"):
                # round 277: operators, conversions and constructors of frozen types reached through a field, an
                # `auto` reference, a container or a base class; round 278: a name judged by its nearest binding
                return f"its h.run lambda reads {text}, which is not a plain value the frozen code " \
                       "declares (a number, a pointer to numbers, a dim3)"
        if node.type == "field_expression" and node.named_children[0].type != "identifier":
            return f"its h.run lambda reads a field, `{' '.join(text.split())[:60]}`, of no plain value"
        if node.type == "type_identifier" and resolve(text, node, body_src) and not plain.type(node, body_src):
            return f"its h.run lambda names {text}, a type of the frozen code's"
        if not node.is_named:  # punctuation and operators (an assignment, a launch are nodes of their own)
            continue
        if node.type not in _ALLOWED:
            return f"its h.run lambda holds {node.type.replace('_', ' ')} `{' '.join(text.split())[:80]}`"
        if node.type in ("binary_expression", "unary_expression", "update_expression") and \
                (operand := _overloadable_operand(node, read, plain, body_src)):
            # round 279: an operator on anything but numbers and pointers is a function; in the harness's unit only
            # the frozen code can define it (a free `operator++` of a plain struct, reached through an alias)
            return f"its h.run lambda computes `{' '.join(text.split())[:60]}` on {operand}, whose operators are " \
                   "functions of the program"
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
        function = node.child_by_field_name("function")
        callee = [b for b in (resolve(name, function, body_src) if function is not None and name and
                              function.type in ("identifier", "template_function") else [])]
        if any(b.src is not editable and not (b.kind == "function" and b.node.type == "declaration") for b in callee):
            # round 279: resolved where it is called (a local a macro declares, named like the launcher)
            return f"its h.run lambda calls {name}, which the frozen code binds where the lambda stands"
        if name in _CONSTRUCTORS and not callee:
            continue
        if name in editable_names and (name in part_functions or not callee):  # an editable kernel launched in place
            called.add(name)
            continue
        args = node.child_by_field_name("arguments")
        listed = args.named_children if args is not None else []
        if not callee and (name in _DEVICE_COPIES and len(listed) >= 4 and listed[3].type == "identifier"
                           and body_src.text_of(listed[3]) == "cudaMemcpyDeviceToDevice" or name in _DEVICE_FILLS):
            continue
        return f"its h.run lambda calls {name or text[:40]}, which the editable part does not define"
    return _call_boundary_problem(called, scopes, plain, editable, src)


def _overloadable_operand(expression: Node, read, plain: _Plainness, src: Source) -> str | None:
    """The first operand of an operator expression that is not a number or a pointer (a name or a field read
    directly), or None."""
    for operand in expression.named_children:
        while operand.type == "parenthesized_expression" and operand.named_children:
            operand = operand.named_children[0]
        if operand.type == "identifier":
            bindings = read(operand)
            if not bindings or not all(plain.arithmetic(b) for b in bindings):
                return src.text_of(operand)
        elif operand.type == "field_expression":
            owner = operand.named_children[0]
            bindings = read(owner) if owner.type == "identifier" else []
            if not bindings or not all(_number_field(b, src.text_of(operand.child_by_field_name("field")), plain)
                                       for b in bindings):
                return " ".join(src.text_of(operand).split())
    return None


def _number_field(binding: Binding, field: str, plain: _Plainness) -> bool:
    """Whether FIELD of a plain value is a number or a pointer: dim3's and CUDA vectors' x, y, z, w; a plain
    struct's field declared so."""
    kind = binding.type
    if kind is None or not plain.value(binding):
        return False
    if kind.type == "type_identifier" and not plain.resolve(binding.src.text_of(kind), kind, binding.src):
        return field in ("x", "y", "z", "w")  # dim3, float4 and the like: numbers
    spec = _struct_of(kind, binding.src, plain)
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
                return pointer or kind is not None and plain._number(kind, struct_src, 0)
    return False


def _constant(value: Node, src: Source, plain: _Plainness) -> bool:
    """Whether a default argument evaluates to a value without running code: literals, a sign, and names that are
    plain values or none of the program's (a header's constant: `cudaStreamDefault`)."""
    for node in walk(value):
        if node.type == "identifier":
            bindings = plain.resolve(src.text_of(node), node, src)
            if bindings and not all(plain.value(b) for b in bindings):
                return False
        elif node.is_named and node.type not in ("number_literal", "true", "false", "null", "nullptr",
                                                 "unary_expression", "parenthesized_expression", "qualified_identifier",
                                                 "namespace_identifier", "char_literal", "character"):
            return False
    return True


def _struct_of(kind: Node, src: Source, plain: _Plainness, depth: int = 0) -> tuple[Node, Source] | None:
    """The struct definition a type names (through aliases), or None."""
    if depth > _DEPTH or kind.type != "type_identifier":
        return None
    bindings = [b for b in plain.resolve(src.text_of(kind), kind, src) if b.kind == "type"]
    for b in bindings:
        if b.node.type in ("struct_specifier", "class_specifier") and b.node.child_by_field_name("body") is not None:
            return b.node, b.src
        if b.node.type in ("type_definition", "alias_declaration") and b.type is not None:
            return _struct_of(b.type, b.src, plain, depth + 1)
    return None


def _call_boundary_problem(called: set[str], scopes: Scopes, plain: _Plainness, editable: Source | None,
                           src: Source) -> str | None:
    """What runs at the boundary of a call of the part's function: a default argument of any declaration of it
    (evaluated by the caller at each call; the editable definition's is copied into the harness's unit), or a
    parameter of a frozen type that is not plain (its converting constructor runs there). Round 279."""
    for source in [s for s in (*scopes.prior, src) if s is not None]:
        for node in walk(source.root):
            if node.type != "function_declarator":
                continue
            names = {n for n, _ in declarator_names(node, source)}
            if not names & called:
                continue
            parameters = node.child_by_field_name("parameters")
            for parameter in (parameters.named_children if parameters is not None else []):
                name = " ".join(source.text_of(parameter).split())[:60]
                default = parameter.child_by_field_name("default_value")
                if default is not None and not _constant(default, source, plain):
                    return f"its h.run lambda calls {sorted(names & called)[0]}, declared with a default argument " \
                           f"({name}) that runs code in every call"
                kind = parameter.child_by_field_name("type")
                if source is editable or kind is None or kind.type not in ("type_identifier", "qualified_identifier"):
                    continue
                bindings = plain.resolve(source.text_of(kind), kind, source) if kind.type == "type_identifier" else []
                if any(b.kind == "type" and b.node.type in ("type_parameter_declaration",
                                                             "optional_type_parameter_declaration") for b in bindings):
                    continue  # a template's type: deduced from the plain value passed
                if bindings and not plain.type(kind, source):
                    return f"its h.run lambda calls {sorted(names & called)[0]}, whose parameter ({name}) is of a " \
                           "frozen type that is not plain (a conversion would run in every call)"
    return None
