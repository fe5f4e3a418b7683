"""Kernels and launchers as syntax.py trees, read through tree-sitter's CUDA grammar.

The grammar (program/cuda_tree.py) reads real CUDA C++: templates, unknown type names
(`uint`, a project's typedefs), `__restrict__`, C and C++ casts, `#pragma unroll`, lambdas.
This module turns the parts the analysis reasons about into syntax.py nodes: expressions,
declarations, if/for/while/do, return/break/continue. A construct it does not model (a lambda
in a kernel, `switch`, `new`, `#if` inside a body) or a text the grammar cannot read raises
ParseError, and the analysis then says the kernel fits no template; it never guesses.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tree_sitter import Node

from ...program.cuda_tree import UNKNOWN_NAMES, Source, declared_names, first_error, leaves, walk  # noqa: F401
from .syntax import (
    Assign,
    Binary,
    Block,
    Call,
    Cast,
    Decl,
    Declarator,
    Empty,
    Expr,
    ExprStmt,
    For,
    If,
    Index,
    InitList,
    Jump,
    Launch,
    Member,
    Name,
    Num,
    ParseError,
    Postfix,
    Return,
    SizeOf,
    Stmt,
    Str,
    Ternary,
    Using,
    Unary,
    While,
)

_CXX_CASTS = frozenset(["static_cast", "reinterpret_cast", "const_cast", "dynamic_cast"])
_NAME_NODES = frozenset(["identifier", "field_identifier", "type_identifier", "namespace_identifier",
                         "qualified_identifier", "primitive_type", "sized_type_specifier", "true", "false",
                         "null", "nullptr"])
_DECLARATOR_NODES = frozenset(["identifier", "init_declarator", "pointer_declarator", "array_declarator",
                               "reference_declarator", "function_declarator", "parenthesized_declarator",
                               "field_identifier"])
_SKIPPED_IN_BODIES = frozenset(["comment", "preproc_call"])  # `#pragma unroll` and the like
# Statements that declare names and do nothing (syntax.Using).
_NAMING_STATEMENTS = frozenset(["using_declaration", "alias_declaration", "type_definition",
                                "namespace_alias_definition"])
_BODY_PREFIX = "void __kl_body()"


def normalize_type(text: str) -> str:
    text = re.sub(r"\s*::\s*", "::", text)
    text = re.sub(r"\s*\*\s*", "*", text)
    return " ".join(text.split())


def _tokens_text(src: Source, node: Node) -> str:
    """The node's tokens joined by single spaces, comments left out."""
    return " ".join(src.text_of(t) for t in leaves(node) if t.type != "comment")


class _Reader:
    def __init__(self, src: Source, base: int = 0, type_names: frozenset[str] = frozenset()) -> None:
        self.src = src
        self.base = base  # character offset of the caller's text inside src.text
        # names that are types here (a function template's type parameters): `T(0)` is a conversion
        self.type_names = type_names

    def text(self, node: Node) -> str:
        return self.src.text_of(node)

    def span(self, node: Node) -> tuple[int, int]:
        start, end = self.src.span(node)
        return start - self.base, end - self.base

    def check(self, node: Node) -> None:
        bad = first_error(node)
        if bad is not None:
            near = self.text(bad).strip().splitlines()
            found = near[0][:30] if near else "end of text"
            raise ParseError(f"does not parse near {found!r}" if not bad.is_missing else f"expected {bad.type!r}")

    # -- expressions --
    def expr(self, n: Node) -> Expr:
        t = n.type
        if t in _NAME_NODES:
            return Name(re.sub(r"\s+", " ", normalize_type(self.text(n))))
        if t == "number_literal":
            # the grammar folds a sign into the literal (`-010`); C reads an operator applied to the
            # literal, whose base and type come from its own digits (red team round 121: `-010`
            # read as -10, C's -(010) is -8)
            text = self.text(n)
            sign = re.match(r"[-+]\s*", text)
            return Unary(text[0], Num(text[sign.end():])) if sign else Num(text)
        if t in ("string_literal", "char_literal", "concatenated_string", "raw_string_literal"):
            return Str(self.text(n))
        if t == "parenthesized_expression":
            inner = [c for c in n.named_children if c.type != "comment"]
            if len(inner) != 1:
                raise ParseError("unreadable parenthesized expression")
            return self.expr(inner[0])
        if t in ("binary_expression", "comma_expression"):
            op = "," if t == "comma_expression" else self.text(n.child_by_field_name("operator"))
            return Binary(op, self.expr(n.child_by_field_name("left")), self.expr(n.child_by_field_name("right")))
        if t in ("unary_expression", "pointer_expression"):
            return Unary(self.text(n.child_by_field_name("operator")), self.expr(n.child_by_field_name("argument")))
        if t == "update_expression":
            op_node = n.child_by_field_name("operator")
            arg = self.expr(n.child_by_field_name("argument"))
            op = self.text(op_node)
            return Unary(op, arg) if op_node.start_byte < n.child_by_field_name("argument").start_byte \
                else Postfix(op, arg)
        if t == "assignment_expression":
            right = n.child_by_field_name("right")
            return Assign(self.text(n.child_by_field_name("operator")), self.expr(n.child_by_field_name("left")),
                          self.expr(right))
        if t == "conditional_expression":
            return Ternary(self.expr(n.child_by_field_name("condition")),
                           self.expr(n.child_by_field_name("consequence")),
                           self.expr(n.child_by_field_name("alternative")))
        if t == "cast_expression":
            return Cast(normalize_type(_tokens_text(self.src, n.child_by_field_name("type"))),
                        self.expr(n.child_by_field_name("value")))
        if t == "subscript_expression":
            indices = n.child_by_field_name("indices")
            items = [c for c in indices.named_children if c.type != "comment"] if indices is not None else []
            if len(items) != 1:
                raise ParseError("subscript with other than one index")
            return Index(self.expr(n.child_by_field_name("argument")), self.expr(items[0]))
        if t == "field_expression":
            op = self.text(n.child_by_field_name("operator"))
            return Member(self.expr(n.child_by_field_name("argument")), self.text(n.child_by_field_name("field")),
                          op == "->")
        if t == "sizeof_expression":
            type_node = n.child_by_field_name("type")
            if type_node is not None:
                return SizeOf(normalize_type(_tokens_text(self.src, type_node)))
            # kept as an expression, so its names are seen, inlined and printed like any other's
            return SizeOf("", self.expr(n.child_by_field_name("value")))
        if t == "initializer_list":
            return InitList(tuple(self.expr(c) for c in n.named_children if c.type != "comment"))
        if t == "call_expression":
            return self.call(n)
        if t == "template_function":
            return Name(self.text(n.child_by_field_name("name")))
        if t == "lambda_expression":
            raise ParseError("lambdas are not supported")
        raise ParseError(f"unsupported construct {t.replace('_', ' ')}")

    def arguments(self, n: Node | None) -> tuple[Expr, ...]:
        if n is None:
            return ()
        return tuple(self.expr(c) for c in n.named_children if c.type != "comment")

    def call(self, n: Node) -> Expr:
        func = n.child_by_field_name("function")
        args_node = n.child_by_field_name("arguments")
        launch = next((c for c in n.children if c.type == "kernel_call_syntax"), None)
        targs = ""
        if func.type == "template_function":
            name = self.text(func.child_by_field_name("name"))
            targ_node = func.child_by_field_name("arguments")
            targs = _template_args_text(self.src, targ_node)
            if name in _CXX_CASTS:
                args = self.arguments(args_node)
                if len(args) != 1:
                    raise ParseError(f"{name} with {len(args)} operands")
                return Cast(normalize_type(targs), args[0])
            func_expr: Expr = Name(normalize_type(name))
        else:
            func_expr = self.expr(func)
        if launch is None and not targs and func.type == "identifier" and self.text(func) in self.type_names:
            args = self.arguments(args_node)
            if len(args) == 1:  # `T(x)`, T a type parameter: a functional cast, which returns
                return Cast(self.text(func), args[0])
        if launch is not None:
            config = tuple(self.expr(c) for c in launch.named_children if c.type != "comment")
            return Launch(func_expr, config, self.arguments(args_node), targs)
        return Call(func_expr, self.arguments(args_node), targs)

    # -- statements --
    def statements(self, n: Node) -> list[Stmt]:
        out = []
        for c in n.named_children:
            if c.type in _SKIPPED_IN_BODIES:
                if c.type == "preproc_call" and self.text(c.child_by_field_name("directive")) != "#pragma":
                    raise ParseError(f"preprocessor directive {self.text(c.child_by_field_name('directive'))} "
                                     "inside a function")
                continue
            out.append(self.stmt(c))
        return out

    def stmt(self, n: Node) -> Stmt:
        t = n.type
        span = self.span(n)
        if t == "compound_statement":
            return Block(tuple(self.statements(n)), span)
        if t == "expression_statement":
            inner = [c for c in n.named_children if c.type != "comment"]
            if not inner:
                return Empty(span)
            return ExprStmt(self.expr(inner[0]), span)
        if t == "declaration":
            return self.declaration(n)
        if t == "if_statement":
            if any(c.type == "constexpr" or self.text(c) == "constexpr" for c in n.children):
                raise ParseError("if constexpr is not supported")
            cond = self._condition(n.child_by_field_name("condition"))
            alt = n.child_by_field_name("alternative")
            other = None
            if alt is not None:
                body = [c for c in alt.named_children if c.type != "comment"]
                other = self.stmt(body[0])
            return If(cond, self.stmt(n.child_by_field_name("consequence")), other, span)
        if t == "for_statement":
            init_node = n.child_by_field_name("initializer")
            init: Stmt | None = None
            if init_node is not None:
                init = self.declaration(init_node) if init_node.type == "declaration" else \
                    ExprStmt(self.expr(init_node), self.span(init_node))
            cond_node, step_node = n.child_by_field_name("condition"), n.child_by_field_name("update")
            return For(init, self.expr(cond_node) if cond_node is not None else None,
                       self.expr(step_node) if step_node is not None else None,
                       self.stmt(n.child_by_field_name("body")), span)
        if t == "while_statement":
            return While(self._condition(n.child_by_field_name("condition")), self.stmt(n.child_by_field_name("body")),
                         False, span)
        if t == "do_statement":
            return While(self.expr(n.child_by_field_name("condition")), self.stmt(n.child_by_field_name("body")),
                         True, span)
        if t == "return_statement":
            inner = [c for c in n.named_children if c.type != "comment"]
            return Return(self.expr(inner[0]) if inner else None, span)
        if t in ("break_statement", "continue_statement"):
            return Jump(t.split("_")[0], span)
        if t in _NAMING_STATEMENTS:
            return Using(" ".join(self.text(n).split()), span, *self._plain_alias(n))
        raise ParseError(f"unsupported statement {t.replace('_', ' ')}")

    def _plain_alias(self, n: Node) -> tuple[str, str]:
        """(name, type) of an alias of a plain type; ("", "") for any other naming statement."""
        if n.type == "alias_declaration":
            name, kind = n.child_by_field_name("name"), n.child_by_field_name("type")
            if name is None or kind is None or any(c.type.startswith("abstract_") for c in kind.children):
                return "", ""
            return self.text(name), " ".join(self.text(kind).split())
        if n.type == "type_definition":
            declarators = [c for i, c in enumerate(n.children) if n.field_name_for_child(i) == "declarator"]
            if len(declarators) != 1 or declarators[0].type != "type_identifier":
                return "", ""
            spelled = [self.text(c) for c in n.children if c.type not in ("typedef", ";") and c != declarators[0]]
            return self.text(declarators[0]), " ".join(" ".join(spelled).split())
        return "", ""

    def _condition(self, n: Node) -> Expr:
        if n.type == "condition_clause":
            if n.child_by_field_name("initializer") is not None:
                raise ParseError("a condition with an initializer is not supported")
            value = n.child_by_field_name("value")
            if value is None or value.type == "declaration":
                raise ParseError("a declaration as a condition is not supported")
            return self.expr(value)
        return self.expr(n)

    def declaration(self, n: Node) -> Decl:
        declarators = [c for i, c in enumerate(n.children) if n.field_name_for_child(i) == "declarator"]
        if not declarators:
            raise ParseError("a declaration without a name")
        type_parts = [c for i, c in enumerate(n.children)
                      if n.field_name_for_child(i) != "declarator" and c.type not in (";", ",", "comment")]
        type_text = " ".join(_tokens_text(self.src, c) for c in type_parts)
        if not type_text or any(c.type in ("struct_specifier", "class_specifier", "union_specifier",
                                           "enum_specifier") and c.child_by_field_name("body") is not None
                                for c in type_parts):
            raise ParseError("a declaration defining a type is not supported")
        out = [self.declarator(d, type_text) for d in declarators]
        return Decl(normalize_type(type_text), tuple(out), self.span(n))

    def declarator(self, d: Node, type_text: str) -> Declarator:
        init: Expr | None = None
        if d.type == "init_declarator":
            value = d.child_by_field_name("value")
            if value.type == "argument_list":
                init = Call(Name(type_text), self.arguments(value))
            else:
                init = self.expr(value)
            d = d.child_by_field_name("declarator")
        elif d.type == "function_declarator" and d.child_by_field_name("declarator").type == "identifier":
            # `dim3 grid(W / TILE, H / TILE), threads(TILE, ROWS);` in a body builds objects from
            # arguments; tree-sitter, which knows neither macros nor which names are types, may read a
            # function declaration. Arguments that are not expressions (`int x`) stay refused.
            params = d.child_by_field_name("parameters")
            init = Call(Name(type_text), tuple(parse_expression(self.text(x)) for x in params.named_children
                                               if x.type != "comment"))
            d = d.child_by_field_name("declarator")
        pointer, dims = 0, []
        while d.type != "identifier":
            if d.type == "pointer_declarator":
                pointer += 1
            elif d.type == "array_declarator":
                size = d.child_by_field_name("size")
                dims.insert(0, self.expr(size) if size is not None else None)
            elif d.type == "reference_declarator":
                # `float& acc = out[i];` names memory, it is not a copy: read as a scalar it would let a
                # rewrite split "acc" across threads that all write one element (red team round 40)
                raise ParseError("a reference variable is not supported")
            elif d.type != "parenthesized_declarator":
                raise ParseError(f"unsupported declarator {d.type.replace('_', ' ')}")
            inner = d.child_by_field_name("declarator")
            if inner is None:
                inner = next((c for c in d.named_children if c.type in _DECLARATOR_NODES), None)
            if inner is None:
                raise ParseError("a declarator without a name")
            d = inner
        return Declarator(self.text(d), pointer, tuple(dims), init)


def _template_args_text(src: Source, n: Node | None) -> str:
    if n is None:
        return ""
    return ", ".join(normalize_type(_tokens_text(src, c)) for c in n.named_children if c.type != "comment")


def parse_expression(text: str) -> Expr:
    prefix = "void __kl_expr() { "
    src = Source(f"{prefix}{text}\n; }}")
    body = src.root.children[0].child_by_field_name("body") if src.root.child_count == 1 else None
    reader = _Reader(src, len(prefix))
    if body is None:
        raise ParseError("not an expression")
    reader.check(body)
    stmts = [c for c in body.named_children if c.type != "comment"]
    if len(stmts) != 1 or stmts[0].type != "expression_statement" or not stmts[0].named_children:
        raise ParseError("not one expression")
    return reader.expr(stmts[0].named_children[0])


def parse_body(text: str, type_names: frozenset[str] = frozenset()) -> Block:
    """The statements of a function body (`text` with or without its outer braces); statement
    spans are offsets into `text`. TYPE_NAMES: the names that are types in it (its function
    template's type parameters), whose `T(x)` is a conversion."""
    braced = text.lstrip().startswith("{")
    code = f"{_BODY_PREFIX}{text}" if braced else f"{_BODY_PREFIX}{{{text}\n}}"
    base = len(_BODY_PREFIX) + (0 if braced else 1)
    src = Source(code)
    functions = [c for c in src.root.named_children if c.type != "comment"]
    if len(functions) != 1 or functions[0].type != "function_definition":
        raise ParseError("text after the function body" if braced else "not a function body")
    body = functions[0].child_by_field_name("body")
    reader = _Reader(src, base, type_names)
    reader.check(functions[0])
    if braced:
        return reader.stmt(body)  # type: ignore[return-value]
    return Block(tuple(reader.statements(body)), (0, len(text)))


def call_arguments(code: str, function: str) -> list[tuple[Expr, ...]]:
    """The arguments of every readable call of `function` in `code` (a whole file or a body),
    in source order; launches with `<<<...>>>` are not calls."""
    src = Source(code)
    reader = _Reader(src)
    out: list[tuple[Expr, ...]] = []
    for n in walk(src.root):
        if n.type != "call_expression" or any(c.type == "kernel_call_syntax" for c in n.children):
            continue
        func = n.child_by_field_name("function")
        if func is None or func.type != "identifier" or reader.text(func) != function:
            continue
        args = n.child_by_field_name("arguments")
        if args is None or first_error(args) is not None:
            continue
        try:
            out.append(reader.arguments(args))
        except ParseError:
            continue
    return out


def identifiers(code: str) -> set[str]:
    """Every identifier-like token of `code` (names, type names, keywords), comments left out;
    preprocessor lines count too."""
    src = Source(code)
    words: set[str] = set()
    for leaf in leaves(src.root):
        if leaf.type == "comment":
            continue
        words.update(re.findall(r"[A-Za-z_]\w*", src.text_of(leaf)) if leaf.type in (
            "preproc_arg", "string_content") else
            [src.text_of(leaf)] if re.fullmatch(r"[A-Za-z_]\w*", src.text_of(leaf)) else [])
    return words


# -- signatures ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Param:
    name: str
    type: str  # as written, normalized: "const float*"
    base: str  # element/base type without qualifiers: "float", "unsigned char"
    pointer: int
    const: bool  # the pointee (or the value) is const


@dataclass(frozen=True)
class TemplateParam:
    name: str
    kind: str  # "type" | "value"
    type: str  # the value's type ("int"); "" for a type parameter


def type_parameters(sig: "Signature") -> frozenset[str]:
    """The names of a function template's type parameters."""
    return frozenset(p.name for p in sig.template if p.kind == "type")


@dataclass(frozen=True)
class Signature:
    name: str
    return_type: str  # without attributes: "void", "cudaError_t"
    qualifiers: tuple[str, ...]  # __global__, static, inline, ...
    params: tuple[Param, ...]
    template: tuple[TemplateParam, ...] = ()  # a function template's parameters


_QUALIFIER_WORDS = frozenset(["__global__", "__device__", "__host__", "static", "inline", "__forceinline__",
                              "__noinline__", "extern", "constexpr"])
_POINTER_WORDS = frozenset(["*", "&", "__restrict__", "__restrict", "restrict"])


def parse_signature(head: str) -> Signature:
    """`head` is a function's text before its body: `void f(const float* a, int n)`, maybe with
    `template <...>` before it."""
    src = Source(f"{head}\n{{}}")
    tops = [c for c in src.root.named_children if c.type != "comment"]
    if len(tops) != 1:
        raise ParseError("not a function head")
    node = tops[0]
    if node.type == "linkage_specification":  # `extern "C" cudaError_t f(...)`: the function it declares
        inner = [c for c in node.named_children if c.type == "function_definition"]
        if len(inner) != 1:
            raise ParseError("not a function head")
        node = inner[0]
    template: list[TemplateParam] = []
    if node.type == "template_declaration":
        template = _template_params(src, node.child_by_field_name("parameters"))
        inner = [c for c in node.named_children if c.type == "function_definition"]
        if not inner:
            raise ParseError("not a function head")
        node = inner[0]
    if node.type != "function_definition":
        raise ParseError("not a function head")
    bad = first_error(node)
    if bad is not None:
        raise ParseError(f"does not parse near {src.text_of(bad).strip()[:30]!r}")
    declarator = node.child_by_field_name("declarator")
    ret_pointer = ""
    while declarator is not None and declarator.type in ("pointer_declarator", "reference_declarator"):
        ret_pointer += "*" if declarator.type == "pointer_declarator" else "&"
        declarator = declarator.child_by_field_name("declarator") or next(
            (c for c in declarator.named_children if c.type in _DECLARATOR_NODES), None)
    if declarator is None or declarator.type != "function_declarator":
        raise ParseError("not a function head")
    name_node = declarator.child_by_field_name("declarator")
    if name_node is None or name_node.type not in ("identifier", "qualified_identifier", "field_identifier"):
        raise ParseError("no function name before the parameter list")
    before: list[str] = []
    for c in node.children:
        if c.start_byte >= declarator.start_byte or c.type in ("launch_bounds", "attribute_specifier",
                                                                "attribute_declaration", "ms_declspec_modifier"):
            if c.start_byte >= declarator.start_byte:
                break
            continue
        before += [src.text_of(t) for t in leaves(c) if t.type != "comment"]
    qualifiers = tuple(w for w in before if w in _QUALIFIER_WORDS)
    return_type = normalize_type(" ".join(w for w in before if w not in _QUALIFIER_WORDS) + ret_pointer)
    params = tuple(_param(src, p) for p in declarator.child_by_field_name("parameters").named_children
                   if p.type != "comment")
    params = tuple(p for p in params if p is not None)
    name = src.text_of(name_node).split("::")[-1].strip()
    return Signature(name, return_type, qualifiers, params, tuple(template))


def _template_params(src: Source, n: Node | None) -> list[TemplateParam]:
    out: list[TemplateParam] = []
    for p in (n.named_children if n is not None else []):
        if p.type in ("type_parameter_declaration", "optional_type_parameter_declaration"):
            name = p.child_by_field_name("name") or next((c for c in p.named_children
                                                          if c.type == "type_identifier"), None)
            if name is None:
                raise ParseError("an unnamed template parameter")
            out.append(TemplateParam(src.text_of(name), "type", ""))
        elif p.type in ("parameter_declaration", "optional_parameter_declaration"):
            d = p.child_by_field_name("declarator")
            if d is None or d.type != "identifier":
                raise ParseError("an unreadable template parameter")
            out.append(TemplateParam(src.text_of(d), "value",
                                     normalize_type(_tokens_text(src, p.child_by_field_name("type")))))
        elif p.type != "comment":
            raise ParseError(f"unsupported template parameter {p.type.replace('_', ' ')}")
    return out


def _param(src: Source, p: Node) -> Param | None:
    if p.type == "variadic_parameter_declaration" or src.text_of(p).strip() == "...":
        raise ParseError("variadic parameters are not supported")
    if p.type not in ("parameter_declaration", "optional_parameter_declaration"):
        raise ParseError(f"unreadable parameter {src.text_of(p).strip()!r}")
    d = p.child_by_field_name("declarator")
    if d is None:
        if src.text_of(p).strip() == "void":
            return None
        raise ParseError("unnamed or unreadable parameter")
    array = False
    words: list[str] = []
    for i, c in enumerate(p.children):
        field = p.field_name_for_child(i)
        if field in ("declarator", "default_value") or c.type in ("=", "comment"):
            continue
        words += [src.text_of(t) for t in leaves(c) if t.type != "comment"]
    after: list[str] = []  # the declarator's tokens besides the name: *, const, __restrict__
    node = d
    while node.type != "identifier":
        if node.type == "array_declarator":
            array = True
        elif node.type not in ("pointer_declarator", "reference_declarator", "parenthesized_declarator"):
            raise ParseError(f"unreadable parameter {src.text_of(p).strip()!r}")
        inner = node.child_by_field_name("declarator") or next(
            (c for c in node.named_children if c.type in _DECLARATOR_NODES), None)
        if inner is None:
            raise ParseError("unnamed or unreadable parameter")
        after += [src.text_of(t) for c in node.children if c.start_byte < inner.start_byte
                  for t in leaves(c) if t.type != "comment"]
        node = inner
    type_toks = words + after
    pointer = type_toks.count("*") + (1 if array else 0)
    plain = [w for w in type_toks if w not in _POINTER_WORDS]
    star = type_toks.index("*") if "*" in type_toks else len(type_toks)
    const = "const" in type_toks[:star] if pointer else "const" in type_toks
    base = normalize_type(" ".join(w for w in plain if w not in ("const", "volatile")))
    if not base:
        raise ParseError("unnamed or unreadable parameter")
    return Param(src.text_of(node), normalize_type(" ".join(type_toks) + ("*" if array else "")), base, pointer,
                 const)


def called_names(text: str) -> set[str]:
    """The names the code calls unqualified (`f(...)`, `f<T>(...)`, a launch `k<<<...>>>(...)`):
    the calls whose meaning depends on the scope they are written in (`ns::f(...)` and `::f(...)`
    do not; analysis.names_the_rewrite_adds counts `::f` calls apart)."""
    src = Source(text)
    found: set[str] = set()
    for node in walk(src.root):
        if node.type != "call_expression":
            continue
        callee = node.child_by_field_name("function")
        if callee is not None and callee.type == "template_function":
            callee = callee.child_by_field_name("name")
        if callee is not None and callee.type in ("identifier", "field_identifier"):
            found.add(src.text_of(callee))
    return found

