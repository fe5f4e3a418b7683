"""A small parser for the C++ that naive CUDA kernels and launchers are written in.

Enough of the language to read kernel bodies and launchers structurally: expressions with
C++ precedence (casts, C++ casts, calls, indexing, members, ternaries, assignments, kernel
launches), declarations, if/for/while/do, return/break/continue. What it cannot read
(lambdas, classes, `new`, exotic templates) raises ParseError, and the analysis then says
the kernel fits no template; it never guesses.

The tree it builds is defined in syntax.py.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

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
    Unary,
    While,
)


# -- tokens ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Tok:
    kind: str  # "id" | "num" | "str" | "op"
    text: str
    pos: int


_OPERATORS = sorted(
    ["<<<", ">>>", "<<=", ">>=", "...", "->", "++", "--", "<<", ">>", "<=", ">=", "==", "!=", "&&", "||",
     "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "::",
     "+", "-", "*", "/", "%", "<", ">", "=", "!", "~", "&", "|", "^", "?", ":", ";", ",", ".",
     "(", ")", "[", "]", "{", "}"],
    key=len, reverse=True,
)
_NUMBER = re.compile(r"(?:0[xX][0-9a-fA-F']+|(?:\d[\d']*\.?[\d']*|\.\d[\d']*)(?:[eE][+-]?\d+)?)[uUlLfF]*")
_IDENT = re.compile(r"[A-Za-z_]\w*")


def tokenize(text: str) -> list[Tok]:
    """Tokens of `text`; comments and preprocessor lines (#pragma unroll, ...) are dropped."""
    toks: list[Tok] = []
    i, n = 0, len(text)
    line_start = True
    while i < n:
        c = text[i]
        if c == "\n":
            line_start = True
            i += 1
            continue
        if c in " \t\r\f\v":
            i += 1
            continue
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
            continue
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            if j < 0:
                raise ParseError("unterminated comment")
            i = j + 2
            continue
        if c == "#" and line_start:
            j = i
            while True:  # a preprocessor line with its continuations
                k = text.find("\n", j)
                if k < 0:
                    k = n
                    break
                if text[k - 1] == "\\":
                    j = k + 1
                    continue
                break
            i = k
            continue
        line_start = False
        if c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            toks.append(Tok("str", text[i:j + 1], i))
            i = j + 1
            continue
        m = _NUMBER.match(text, i) if (c.isdigit() or (c == "." and i + 1 < n and text[i + 1].isdigit())) else None
        if m:
            toks.append(Tok("num", m.group(0), i))
            i = m.end()
            continue
        m = _IDENT.match(text, i)
        if m:
            toks.append(Tok("id", m.group(0), i))
            i = m.end()
            continue
        for op in _OPERATORS:
            if text.startswith(op, i):
                toks.append(Tok("op", op, i))
                i += len(op)
                break
        else:
            raise ParseError(f"unexpected character {c!r}")
    return toks


# Words that start or continue a type. Identifiers ending in _t (size_t, uint8_t) are types too.
TYPE_WORDS = frozenset("""
    void bool char short int long float double signed unsigned auto const volatile static extern register
    constexpr inline __restrict__ __restrict restrict __shared__ __device__ __constant__ __managed__
    __forceinline__ __noinline__ __host__ __global__ dim3 half float2 float3 float4 int2 int3 int4 uint2 uint3
    uint4 uchar4 char4 double2 double4 longlong2 ulonglong2 short2 ushort2 std
""".split())
_ASSIGN_OPS = frozenset(["=", "+=", "-=", "*=", "/=", "%=", "<<=", ">>=", "&=", "|=", "^="])
_BINARY_PRECEDENCE = {
    "||": 3, "&&": 4, "|": 5, "^": 6, "&": 7, "==": 8, "!=": 8, "<": 9, ">": 9, "<=": 9, ">=": 9,
    "<<": 10, ">>": 10, "+": 11, "-": 11, "*": 12, "/": 12, "%": 12,
}
_CXX_CASTS = frozenset(["static_cast", "reinterpret_cast", "const_cast", "dynamic_cast"])
_STATEMENT_WORDS = frozenset(["if", "else", "for", "while", "do", "return", "break", "continue", "switch",
                              "case", "default", "goto", "sizeof"])


def is_type_word(tok: Tok) -> bool:
    return tok.kind == "id" and (tok.text in TYPE_WORDS or tok.text.endswith("_t"))


class Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.toks = tokenize(text)
        self.i = 0

    # -- cursor --
    def peek(self, k: int = 0) -> Tok | None:
        j = self.i + k
        return self.toks[j] if j < len(self.toks) else None

    def at(self, text: str, k: int = 0) -> bool:
        t = self.peek(k)
        return t is not None and t.text == text and t.kind in ("op", "id")

    def take(self, text: str | None = None) -> Tok:
        t = self.peek()
        if t is None:
            raise ParseError(f"unexpected end of text, expected {text or 'a token'}")
        if text is not None and t.text != text:
            raise ParseError(f"expected {text!r}, found {t.text!r}")
        self.i += 1
        return t

    def done(self) -> bool:
        return self.i >= len(self.toks)

    def pos(self) -> int:
        t = self.peek()
        return t.pos if t is not None else len(self.text)

    def end_pos(self) -> int:
        prev = self.toks[self.i - 1] if self.i > 0 else None
        return prev.pos + len(prev.text) if prev else 0

    # -- expressions --
    def expression(self) -> Expr:
        e = self.assignment()
        while self.at(","):
            self.take(",")
            e = Binary(",", e, self.assignment())
        return e

    def assignment(self) -> Expr:
        left = self.ternary()
        t = self.peek()
        if t is not None and t.kind == "op" and t.text in _ASSIGN_OPS:
            self.take()
            value = self.initializer() if self.at("{") else self.assignment()
            return Assign(t.text, left, value)
        return left

    def ternary(self) -> Expr:
        cond = self.binary(3)
        if self.at("?"):
            self.take("?")
            then = self.assignment()
            self.take(":")
            return Ternary(cond, then, self.assignment())
        return cond

    def binary(self, min_prec: int) -> Expr:
        left = self.unary()
        while True:
            t = self.peek()
            if t is None or t.kind != "op":
                return left
            prec = _BINARY_PRECEDENCE.get(t.text)
            if prec is None or prec < min_prec:
                return left
            self.take()
            right = self.binary(prec + 1)
            left = Binary(t.text, left, right)

    def unary(self) -> Expr:
        t = self.peek()
        if t is None:
            raise ParseError("unexpected end of expression")
        if t.kind == "op" and t.text in ("-", "+", "!", "~", "*", "&", "++", "--"):
            self.take()
            return Unary(t.text, self.unary())
        if t.kind == "id" and t.text == "sizeof":
            self.take()
            if self.at("("):
                start = self.i
                self.skip_balanced("(", ")")
                inner = self.toks[start + 1:self.i - 1]
                return SizeOf(" ".join(x.text for x in inner))
            operand = self.unary()
            return SizeOf(type(operand).__name__)
        if t.kind == "op" and t.text == "(" and self.cast_ahead():
            self.take("(")
            type_text = self.type_tokens_until(")")
            self.take(")")
            return Cast(type_text, self.unary())
        return self.postfix(self.primary())

    def cast_ahead(self) -> bool:
        """`(` type `)` followed by an operand: a C-style cast."""
        j = self.i + 1
        saw_type = False
        while j < len(self.toks):
            t = self.toks[j]
            if t.kind == "id" and (is_type_word(t) or t.text in ("struct", "class")):
                saw_type = True
            elif t.kind == "op" and t.text in ("*", "&", "::"):
                pass
            elif t.kind == "op" and t.text == ")":
                nxt = self.toks[j + 1] if j + 1 < len(self.toks) else None
                return saw_type and nxt is not None and not (nxt.kind == "op" and nxt.text in (
                    ")", ";", ",", "]", "+=", "-=", "=", "?", ":", "<", ">", "==", "!=", "<=", ">=", "|", "^", "||",
                    "&&", "/", "%", "<<", ">>"))
            else:
                return False
            j += 1
        return False

    def type_tokens_until(self, stop: str) -> str:
        parts: list[str] = []
        depth = 0
        while not self.done():
            t = self.peek()
            assert t is not None
            if depth == 0 and t.text == stop:
                break
            if t.text == "<":
                depth += 1
            elif t.text == ">":
                depth -= 1
            elif t.text == ">>":
                depth -= 2
            parts.append(t.text)
            self.take()
        return normalize_type(" ".join(parts))

    def template_args_ahead(self) -> bool:
        """After an identifier: is `<` the start of template arguments (then `(`, `<<<` or `::`)?"""
        if not self.at("<"):
            return False
        depth = 0
        j = self.i
        while j < len(self.toks):
            t = self.toks[j]
            if t.kind == "op" and t.text in (";", "{", "}", "&&", "||", ")", "?"):
                return False
            if t.text == "<":
                depth += 1
            elif t.text == ">":
                depth -= 1
            elif t.text in (">>", ">>>"):
                if t.text == ">>>" and depth == 1:
                    return False  # `a < b >>> ...` is not a template
                depth -= 2
            if depth <= 0:
                nxt = self.toks[j + 1] if j + 1 < len(self.toks) else None
                return depth == 0 and nxt is not None and nxt.text in ("(", "<<<", "::")
            j += 1
        return False

    def take_template_args(self) -> str:
        parts: list[str] = []
        depth = 0
        while True:
            t = self.take()
            if t.text == "<":
                depth += 1
                if depth == 1:
                    continue
            elif t.text == ">":
                depth -= 1
                if depth == 0:
                    break
            elif t.text == ">>":
                depth -= 2
                if depth <= 0:
                    break
            parts.append(t.text)
        return " ".join(parts)

    def primary(self) -> Expr:
        t = self.take()
        if t.kind == "num":
            return Num(t.text)
        if t.kind == "str":
            return Str(t.text)
        if t.kind == "id":
            if t.text in _CXX_CASTS:
                self.take("<")
                depth, parts = 1, []
                while True:
                    u = self.take()
                    if u.text == "<":
                        depth += 1
                    elif u.text == ">":
                        depth -= 1
                        if depth == 0:
                            break
                    parts.append(u.text)
                self.take("(")
                operand = self.expression()
                self.take(")")
                return Cast(normalize_type(" ".join(parts)), operand)
            if t.text in ("new", "delete", "throw", "operator", "this", "template", "typename") or \
                    t.text in _STATEMENT_WORDS:
                raise ParseError(f"unsupported construct {t.text!r}")
            name = t.text
            while self.at("::"):
                self.take("::")
                name += "::" + self.take().text
            return Name(name)
        if t.text == "(":
            e = self.expression()
            self.take(")")
            return e
        if t.text == "[":
            raise ParseError("lambdas are not supported")
        raise ParseError(f"unexpected {t.text!r}")

    def postfix(self, e: Expr) -> Expr:
        while True:
            if isinstance(e, Name) and self.template_args_ahead():
                targs = self.take_template_args()
                if self.at("<<<"):
                    e = self.launch(e, targs)
                    continue
                self.take("(")
                e = Call(e, self.arguments(")"), targs)
                continue
            if self.at("<<<"):
                e = self.launch(e, "")
            elif self.at("("):
                self.take("(")
                e = Call(e, self.arguments(")"))
            elif self.at("["):
                self.take("[")
                idx = self.expression()
                self.take("]")
                e = Index(e, idx)
            elif self.at(".") or self.at("->"):
                arrow = self.take().text == "->"
                e = Member(e, self.take().text, arrow)
            elif self.at("++") or self.at("--"):
                e = Postfix(self.take().text, e)
            else:
                return e

    def launch(self, kernel: Expr, targs: str) -> Launch:
        self.take("<<<")
        config: list[Expr] = []
        while True:
            config.append(self.binary(3) if not self.at("(") else self.assignment())
            if self.at(","):
                self.take(",")
                continue
            self.take(">>>")
            break
        self.take("(")
        return Launch(kernel, tuple(config), self.arguments(")"), targs)

    def arguments(self, close: str) -> tuple[Expr, ...]:
        args: list[Expr] = []
        if self.at(close):
            self.take(close)
            return ()
        while True:
            args.append(self.initializer() if self.at("{") else self.assignment())
            if self.at(","):
                self.take(",")
                continue
            self.take(close)
            return tuple(args)

    def initializer(self) -> Expr:
        self.take("{")
        return InitList(self.arguments("}"))

    def skip_balanced(self, open_: str, close: str) -> None:
        self.take(open_)
        depth = 1
        while depth:
            t = self.take()
            if t.text == open_:
                depth += 1
            elif t.text == close:
                depth -= 1

    # -- statements --
    def statement(self) -> Stmt:
        start = self.pos()
        t = self.peek()
        if t is None:
            raise ParseError("unexpected end of statements")
        if t.text == "{" and t.kind == "op":
            self.take("{")
            body: list[Stmt] = []
            while not self.at("}"):
                if self.done():
                    raise ParseError("unbalanced braces")
                body.append(self.statement())
            self.take("}")
            return Block(tuple(body), (start, self.end_pos()))
        if t.text == ";":
            self.take()
            return Empty((start, self.end_pos()))
        if t.kind == "id":
            if t.text == "if":
                self.take()
                self.take("(")
                cond = self.expression()
                self.take(")")
                then = self.statement()
                other = None
                if self.at("else"):
                    self.take("else")
                    other = self.statement()
                return If(cond, then, other, (start, self.end_pos()))
            if t.text == "for":
                self.take()
                self.take("(")
                init: Stmt | None = None
                if not self.at(";"):
                    init = self.declaration() if self.declaration_ahead() else ExprStmt(self.expression())
                if not self.at(";"):
                    raise ParseError("range-based for loops are not supported")
                self.take(";")
                cond = None if self.at(";") else self.expression()
                self.take(";")
                step = None if self.at(")") else self.expression()
                self.take(")")
                return For(init, cond, step, self.statement(), (start, self.end_pos()))
            if t.text == "while":
                self.take()
                self.take("(")
                cond = self.expression()
                self.take(")")
                return While(cond, self.statement(), False, (start, self.end_pos()))
            if t.text == "do":
                self.take()
                body_stmt = self.statement()
                self.take("while")
                self.take("(")
                cond = self.expression()
                self.take(")")
                self.take(";")
                return While(cond, body_stmt, True, (start, self.end_pos()))
            if t.text == "return":
                self.take()
                value = None if self.at(";") else self.expression()
                self.take(";")
                return Return(value, (start, self.end_pos()))
            if t.text in ("break", "continue"):
                self.take()
                self.take(";")
                return Jump(t.text, (start, self.end_pos()))
            if t.text in ("switch", "goto", "case", "default", "asm", "__asm__", "try", "using", "typedef",
                          "struct", "class", "union", "enum", "namespace", "template"):
                raise ParseError(f"unsupported statement {t.text!r}")
        if self.declaration_ahead():
            d = self.declaration()
            self.take(";")
            return Decl(d.type, d.declarators, (start, self.end_pos()))
        e = self.expression()
        self.take(";")
        return ExprStmt(e, (start, self.end_pos()))

    def declaration_ahead(self) -> bool:
        t, u = self.peek(), self.peek(1)
        if t is None or t.kind != "id":
            return False
        if is_type_word(t):
            return not (u is not None and u.text in ("(", "::") and t.text not in TYPE_WORDS)
        if u is None:
            return False
        if u.kind == "id":
            return True  # `MyType name`
        if u.text in ("*", "&"):  # `MyType* name =` rather than `a * b`
            j = self.i + 1
            while j < len(self.toks) and self.toks[j].text in ("*", "&", "const", "__restrict__"):
                j += 1
            if j + 1 < len(self.toks) and self.toks[j].kind == "id":
                return self.toks[j + 1].text in ("=", ";", ",", "[")
        return False

    def declaration(self) -> Decl:
        start = self.pos()
        type_parts: list[str] = []
        while True:
            t = self.peek()
            if t is None:
                raise ParseError("unexpected end of declaration")
            if t.kind != "id":
                break
            nxt = self.peek(1)
            if is_type_word(t):
                # `int count_t = 0`: a name ending in _t after a type is the declarator.
                if t.text not in TYPE_WORDS and type_parts and nxt is not None and \
                        nxt.text in ("=", ";", ",", "[", "(", "{"):
                    break
            elif type_parts:
                break  # the declarator name
            self.take()
            type_parts.append(t.text)
            if self.at("::"):
                self.take("::")
                type_parts.append("::")
            elif self.at("<") and t.text not in TYPE_WORDS:
                type_parts.append("<" + self.take_template_args() + ">")
        if not type_parts:
            raise ParseError("expected a type")
        declarators: list[Declarator] = []
        while True:
            pointer = 0
            while self.at("*") or self.at("&") or self.at("const") or self.at("__restrict__") or self.at("__restrict"):
                if self.take().text == "*":
                    pointer += 1
            name_tok = self.take()
            if name_tok.kind != "id":
                raise ParseError(f"expected a declarator name, found {name_tok.text!r}")
            dims: list[Expr | None] = []
            while self.at("["):
                self.take("[")
                dims.append(None if self.at("]") else self.expression())
                self.take("]")
            init: Expr | None = None
            if self.at("="):
                self.take("=")
                init = self.initializer() if self.at("{") else self.assignment()
            elif self.at("("):
                self.take("(")
                init = Call(Name(" ".join(type_parts)), self.arguments(")"))
            elif self.at("{"):
                init = self.initializer()
            declarators.append(Declarator(name_tok.text, pointer, tuple(dims), init))
            if self.at(","):
                self.take(",")
                continue
            break
        return Decl(normalize_type(" ".join(type_parts)), tuple(declarators), (start, self.end_pos()))


def normalize_type(text: str) -> str:
    text = re.sub(r"\s*::\s*", "::", text)
    text = re.sub(r"\s*\*\s*", "*", text)
    return " ".join(text.split())


def parse_expression(text: str) -> Expr:
    p = Parser(text)
    e = p.expression()
    if not p.done():
        raise ParseError(f"trailing text after expression: {p.peek().text!r}")  # type: ignore[union-attr]
    return e


def parse_body(text: str) -> Block:
    """The statements of a function body (`text` with or without its outer braces)."""
    p = Parser(text)
    if p.at("{"):
        stmt = p.statement()
        if not p.done():
            raise ParseError("text after the function body")
        assert isinstance(stmt, Block)
        return stmt
    body: list[Stmt] = []
    while not p.done():
        body.append(p.statement())
    return Block(tuple(body), (0, len(text)))


# -- signatures ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Param:
    name: str
    type: str  # as written, normalized: "const float*"
    base: str  # element/base type without qualifiers: "float", "unsigned char"
    pointer: int
    const: bool  # the pointee (or the value) is const


@dataclass(frozen=True)
class Signature:
    name: str
    return_type: str  # without attributes: "void", "cudaError_t"
    qualifiers: tuple[str, ...]  # __global__, static, inline, ...
    params: tuple[Param, ...]


_QUALIFIER_WORDS = frozenset(["__global__", "__device__", "__host__", "static", "inline", "__forceinline__",
                              "__noinline__", "extern", "constexpr"])


def parse_signature(head: str) -> Signature:
    """`head` is a function's text before its body: `void f(const float* a, int n)`."""
    text = re.sub(r"__launch_bounds__\s*\([^()]*\)", " ", head)
    text = re.sub(r"__attribute__\s*\(\((?:[^()]|\([^()]*\))*\)\)", " ", text)
    text = re.sub(r"\[\[[^\]]*\]\]", " ", text)
    toks = tokenize(text)
    if not toks or toks[-1].text != ")":
        raise ParseError("not a function head")
    depth, open_idx = 0, -1
    for j in range(len(toks) - 1, -1, -1):
        if toks[j].text == ")":
            depth += 1
        elif toks[j].text == "(":
            depth -= 1
            if depth == 0:
                open_idx = j
                break
    if open_idx < 1 or toks[open_idx - 1].kind != "id":
        raise ParseError("no function name before the parameter list")
    if any(t.text == "template" for t in toks[:open_idx]):
        raise ParseError("function templates are not supported")
    name = toks[open_idx - 1].text
    before = [t.text for t in toks[:open_idx - 1]]
    qualifiers = tuple(w for w in before if w in _QUALIFIER_WORDS)
    return_type = normalize_type(" ".join(w for w in before if w not in _QUALIFIER_WORDS))
    params: list[Param] = []
    inner = toks[open_idx + 1:-1]
    groups: list[list[Tok]] = [[]]
    depth = 0
    for t in inner:
        if t.text in ("(", "[", "<", "{"):
            depth += 1
        elif t.text in (")", "]", ">", "}"):
            depth -= 1
        if t.text == "," and depth == 0:
            groups.append([])
        else:
            groups[-1].append(t)
    for g in groups:
        if not g or (len(g) == 1 and g[0].text == "void"):
            continue
        if any(t.text == "=" for t in g):  # default argument
            g = g[:[t.text for t in g].index("=")]
        if not g:
            raise ParseError("unreadable parameter")
        array = False
        if g[-1].text == "]":
            while g and g[-1].text != "[":
                g = g[:-1]
            g = g[:-1]
            array = True
        if len(g) < 2 or g[-1].kind != "id" or is_type_word(g[-1]) and g[-1].text in TYPE_WORDS:
            raise ParseError("unnamed or unreadable parameter")
        pname = g[-1].text
        type_toks = [t.text for t in g[:-1]]
        pointer = type_toks.count("*") + (1 if array else 0)
        words = [w for w in type_toks if w not in ("*", "&", "__restrict__", "__restrict", "restrict")]
        star = type_toks.index("*") if "*" in type_toks else len(type_toks)
        const = "const" in type_toks[:star] if pointer else "const" in type_toks
        base = normalize_type(" ".join(w for w in words if w not in ("const", "volatile")))
        params.append(Param(pname, normalize_type(" ".join(type_toks) + ("*" if array else "")), base, pointer, const))
    return Signature(name, return_type, qualifiers, tuple(params))


