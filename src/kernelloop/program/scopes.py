"""Which declaration a name means where the code reads it: C++'s nearest enclosing binding.

A check that asks "what is X here?" by looking for any declaration of X anywhere answers for the
wrong X as soon as two scopes use the name (red team round 278: an unrelated helper's `int tap`
made a range-for's `Tap& tap` read as a number). This follows C++'s unqualified lookup as far as
the program's text shows it: the blocks around the use (what they declare before it), the binders
of the statements and functions around it (a for or range-for declaration, an if/while/switch
condition, a catch parameter, a lambda's parameters and init-captures, a function's and a
template's parameters), a class's members, the enclosing namespace (every body of it before the
use), then the global scope of every source that comes before (the preamble, the editable part).
Anonymous namespaces, `extern "C"` blocks, both sides of `#if`, using-declarations and
using-directives count where they stand. A statement that names one of the program's macros is
read expanded. Where the text cannot tell (a member function defined outside its class, a class
with a base, a macro that cannot be expanded for sure), the name is bound to something unknown:
callers treat that as not plain and fail closed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Callable

from tree_sitter import Node

from .cuda_tree import Source, first_error, walk
from .macros import Macros, expand

# what a binding is: a variable (or data member), a parameter, a function, a type, an enumerator; a capture
# (`[t = hold.tap]`), a using-declaration, or unknown: no declared type to judge
VALUE_KINDS = ("variable", "parameter")
_NAMED = ("identifier", "field_identifier", "type_identifier", "namespace_identifier")
_PARAMETERS = ("parameter_declaration", "optional_parameter_declaration", "variadic_parameter_declaration")
_TYPE_PARAMETERS = ("type_parameter_declaration", "optional_type_parameter_declaration",
                    "variadic_type_parameter_declaration", "template_template_parameter_declaration")
_CLASSES = ("struct_specifier", "class_specifier", "union_specifier")
DIRECTIVES = ("preproc_def", "preproc_function_def", "preproc_include", "preproc_call")  # bind no C++ name
# containers whose items stand in the scope around them
_TRANSPARENT = ("case_statement", "labeled_statement", "preproc_if", "preproc_ifdef", "preproc_else",
                "preproc_elif", "preproc_elifdef")


@dataclass(frozen=True)
class Binding:
    name: str
    kind: str  # see VALUE_KINDS and above
    src: Source
    node: Node  # the declaration, parameter, class or statement that binds the name
    type: Node | None = None  # the type it is declared with, where one is written
    # found where the compiler may not see it (a `#if` branch) or not at this scope (a using-directive's names sit
    # at the enclosing namespace): the search goes on outward, and every binding found on the way counts
    tentative: bool = False


def declarator_names(declarator: Node, src: Source) -> list[tuple[str, Node]]:
    """The names a declarator declares: its innermost name; every name of a structured binding."""
    node = declarator
    while True:
        if node.type in _NAMED:
            return [(src.text_of(node), node)]
        if node.type == "structured_binding_declarator":
            return [(src.text_of(n), n) for n in node.named_children if n.type == "identifier"]
        if node.type == "qualified_identifier":
            node = node.child_by_field_name("name") or node
            if node.type == "qualified_identifier":
                return []
            continue
        if node.type == "template_function":  # an explicit specialization `f<const float>(...)` declares f
            node = node.child_by_field_name("name")
            if node is None:
                return []
            continue
        inner = node.child_by_field_name("declarator")
        if inner is None and node.type in ("reference_declarator", "parenthesized_declarator") and node.named_children:
            inner = node.named_children[-1]  # `Tap& tap`, `(x)`: no field names the declarator
        if inner is None:
            return []
        node = inner


def _is_function(declarator: Node) -> bool:
    node = declarator
    while node is not None:
        if node.type == "function_declarator":
            return True
        if node.type in ("parenthesized_declarator", "pointer_declarator", "reference_declarator"):
            return False  # a pointer or reference to a function is a variable
        node = node.child_by_field_name("declarator")
    return False


class Scopes:
    """Name lookup over a program given as sources in order: PRIOR (whole texts before, e.g. the preamble and the
    editable part) and the texts whose uses are looked up; MACROS_AT: the program's macros in force at a node of a
    source (None: none to expand), expanded in statements naming one; MACRO_WORDS: every name any of its macro bodies
    writes (what a macro that cannot be expanded may bind)."""

    def __init__(self, prior: tuple[Source, ...] = (),
                 macros_at: Callable[[Source, Node], Macros | None] = lambda src, node: None,
                 macro_words: frozenset[str] = frozenset()) -> None:
        self.prior = prior
        self.macros_at = macros_at
        self.macro_words = macro_words
        self._expanded: dict[tuple[int, int], tuple[str, Source | None]] = {}

    # -- the public question ---------------------------------------------------------------------------------------
    def lookup(self, name: str, at: Node, src: Source, *, start: Node | None = None) -> list[Binding]:
        """The bindings of NAME nearest to AT (a node of SRC's tree): all those of the innermost scope that binds it
        for sure (an overload set, a declaration and its definition), with any tentative ones found on the way; []
        when nothing of the program binds it. START: the node to climb from (AT itself by default)."""
        return self.lookup_below(name, at, src, start=start)[0]

    def lookup_below(self, name: str, at: Node, src: Source, *, start: Node | None = None,
                     ceiling: Node | None = None) -> tuple[list[Binding], bool]:
        """lookup, climbing no higher than CEILING: (the bindings found, whether they settle the name before it)."""
        child = start if start is not None else at
        up = child.parent
        pending: list[Binding] = []
        while up is not None:
            if ceiling is not None and up == ceiling:
                return pending, False
            found = self._in_scope(name, up, child, at, src)
            if found and not all(b.tentative for b in found):
                return pending + found, True
            pending += found
            child, up = up, up.parent
        return pending, True

    def qualified(self, path: list[str], name: str, before: Node, src: Source) -> list[Binding]:
        """The bindings of NAME in namespace PATH (`a::b::name`) as seen before BEFORE."""
        return [b for body, body_src in self._namespace_bodies(path, before, src)
                for b in self._items(name, body.named_children, before, src, body_src)]

    # -- scopes ------------------------------------------------------------------------------------------------------
    def _in_scope(self, name: str, up: Node, child: Node, at: Node, src: Source) -> list[Binding]:
        kind = up.type
        if kind == "compound_statement":
            return self._items(name, up.named_children, at, src, src)
        if kind == "translation_unit":
            prior = [b for p in self.prior for b in self._items(name, p.root.named_children, None, src, p)]
            return prior + self._items(name, up.named_children, at, src, src)
        if kind == "declaration_list" and up.parent is not None and up.parent.type == "namespace_definition":
            if _transparent_namespace(up.parent, src):
                # an anonymous or inline namespace: its items belong to the scope around it too (read there)
                return self._items(name, up.named_children, at, src, src)
            return self.qualified([w for w, _ in self._namespace_path(up.parent, src)], name, at, src)
        if kind == "declaration_list":  # extern "C" { ... }: its items belong to the scope around it
            return []
        if kind == "field_declaration_list":
            return self._class_members(name, up, src)
        if kind == "for_statement":
            init = up.child_by_field_name("initializer")
            return self._declared(name, init, at, src) if init is not None and init.type == "declaration" else []
        if kind == "for_range_loop" and child == up.child_by_field_name("body"):
            return self._declared(name, up, at, src)
        if kind in ("if_statement", "while_statement", "switch_statement"):
            clause = up.child_by_field_name("condition")
            found = []
            for part in (clause.named_children if clause is not None else []):
                declaration = part.named_children[0] if part.type == "init_statement" and part.named_children \
                    else part
                if declaration.type == "declaration":
                    found += self._declared(name, declaration, at, src)
            return found
        if kind == "catch_clause":
            return self._parameters(name, up.child_by_field_name("parameters"), src)
        if kind == "lambda_expression":
            # a generic lambda's template parameters are in scope in its declarator and body alike
            found = self._parameters(name, up.child_by_field_name("template_parameters"), src)
            if child != up.child_by_field_name("body"):
                return found
            declarator = up.child_by_field_name("declarator")
            found += self._parameters(name, declarator.child_by_field_name("parameters")
                                      if declarator is not None else None, src)
            captures = up.child_by_field_name("captures")
            for capture in (captures.named_children if captures is not None else []):
                left = capture.child_by_field_name("left") if capture.type == "lambda_capture_initializer" else None
                if left is not None and src.text_of(left) == name:
                    found.append(Binding(name, "capture", src, capture))
            return found
        if kind == "function_definition" and child == up.child_by_field_name("body"):
            declarator = up.child_by_field_name("declarator")
            function = next((n for n in walk(declarator) if n.type == "function_declarator"), None) \
                if declarator is not None else None
            found = self._parameters(name, function.child_by_field_name("parameters")
                                     if function is not None else None, src)
            own = function.child_by_field_name("declarator") if function is not None else None
            if not found and own is not None and own.type == "qualified_identifier" and \
                    up.parent is not None and up.parent.type != "field_declaration_list":
                # a member defined outside its class (`void S::go() {...}`): S's members (and its bases') are in
                # scope before the namespace's, and this does not follow them
                return [Binding(name, "unknown", src, up)]
            return found
        if kind == "template_declaration":
            return self._parameters(name, up.child_by_field_name("parameters"), src)
        if kind == "requires_expression":
            return self._parameters(name, up.child_by_field_name("parameters"), src)
        return []

    def _namespace_path(self, namespace: Node, src: Source) -> list[tuple[str, bool]]:
        """A named namespace's path from the global scope: each name, and whether it is an inline namespace's (C++
        finds its names in the enclosing namespace too, so a qualified name may leave it out)."""
        path: list[tuple[str, bool]] = []
        node: Node | None = namespace
        while node is not None:
            if node.type == "namespace_definition" and (named := node.child_by_field_name("name")) is not None:
                inline = any(c.type == "inline" for c in node.children)
                words = re.findall(r"[A-Za-z_]\w*", src.text_of(named))  # `a::inline b` (C++20) too
                path[:0] = [(w, inline or i > 0 and words[i - 1] == "inline") for i, w in enumerate(words)
                            if w != "inline"]
            node = node.parent
        return path

    def _namespace_bodies(self, path: list[str], before: Node, src: Source):
        """Every body of namespace PATH (a path that may leave inline namespaces out): in the prior sources, and in
        SRC before BEFORE."""
        for body_src, limit in [(p, None) for p in self.prior] + [(src, before)]:
            for node in walk(body_src.root):
                if node.type == "namespace_definition" and node.child_by_field_name("name") is not None and \
                        (limit is None or node.start_byte < limit.start_byte) and \
                        _path_names(self._namespace_path(node, body_src), path):
                    body = node.child_by_field_name("body")
                    if body is not None:
                        yield body, body_src

    def _class_members(self, name: str, members: Node, src: Source) -> list[Binding]:
        found = self._items(name, members.named_children, None, src, src)
        owner = members.parent
        if not found and owner is not None and any(c.type == "base_class_clause" for c in owner.children):
            return [Binding(name, "unknown", src, owner)]  # a base class's member, not followed
        return found

    # -- what a list of items binds ----------------------------------------------------------------------------------
    def _items(self, name: str, items, before: Node | None, use_src: Source, src: Source) -> list[Binding]:
        """The bindings of NAME among a scope's ITEMS of SRC (those starting before BEFORE when SRC is USE_SRC)."""
        found: list[Binding] = []
        for item in items:
            if before is not None and src is use_src and item.start_byte >= before.start_byte:
                break
            found += self._item(name, item, before if src is use_src else None, use_src, src)
        return found

    def _item(self, name: str, item: Node, before: Node | None, use_src: Source, src: Source) -> list[Binding]:
        kind = item.type
        if kind in _TRANSPARENT:
            found = self._items(name, item.named_children, before, use_src, src)
            # a `#if` branch the compiler may skip
            return [replace(b, tentative=True) for b in found] if kind.startswith("preproc") else found
        if kind == "linkage_specification" or kind == "namespace_definition" and _transparent_namespace(item, src):
            body = item.child_by_field_name("body")
            if body is None:
                return []
            return self._items(name, body.named_children if body.type == "declaration_list" else [body],
                               before, use_src, src)
        if kind == "template_declaration":
            return [b for c in item.named_children if c.type != "template_parameter_list"
                    for b in self._item(name, c, before, use_src, src)]
        if kind == "using_declaration":
            words = [c for c in item.children if c.type == "namespace"]
            target = item.named_children[-1] if item.named_children else None
            if target is None:
                return []
            if words:  # `using namespace fz;`: fz's names, seen from the enclosing namespace (tentative here)
                path = re.findall(r"[A-Za-z_]\w*", src.text_of(target))
                return [replace(b, tentative=True) for body, body_src in self._namespace_bodies(path, before or item, src)
                        for b in self._items(name, body.named_children, before, use_src, body_src)]
            last = re.findall(r"[A-Za-z_]\w*", src.text_of(target))
            return [Binding(name, "using", src, item)] if last and last[-1] == name else []
        if kind in DIRECTIVES:
            return []  # `#define X ...` binds no name of C++'s (a statement that uses X is read expanded)
        found: list[Binding] = []
        macros = self.macros_at(src, item)
        if macros is not None and macros.names_in(src.text_of(item)):
            found += self._macro_item(name, item, src, macros)
        if kind == "expression_statement" and self._may_declare(name, item, src):
            found.append(Binding(name, "unknown", src, item))
        if kind in ("declaration", "field_declaration"):
            found += self._declared(name, item, before, src)
        elif kind == "function_definition":
            declarator = item.child_by_field_name("declarator")
            if declarator is not None and any(n == name for n, _ in declarator_names(declarator, src)):
                found.append(Binding(name, "function", src, item))
        elif kind == "type_definition":
            found += [Binding(name, "type", src, item, item.child_by_field_name("type"))
                      for d in item.children_by_field_name("declarator")
                      for n, _ in declarator_names(d, src) if n == name]
        elif kind == "alias_declaration":
            alias = item.child_by_field_name("name")
            described = item.child_by_field_name("type")
            if alias is not None and src.text_of(alias) == name:
                found.append(Binding(name, "type", src, item, described.child_by_field_name("type")
                                     if described is not None else None))
        # classes and enums, alone or as a declaration's type: their names and an unscoped enum's enumerators
        for spec in [item] + [c for c in item.children if c.type in _CLASSES + ("enum_specifier",)]:
            if spec.type not in _CLASSES + ("enum_specifier",):
                continue
            tag = spec.child_by_field_name("name")
            if tag is not None and src.text_of(tag) == name:
                found.append(Binding(name, "type", src, spec))
            body = spec.child_by_field_name("body")
            if spec.type == "enum_specifier" and body is not None and not any(
                    c.type in ("class", "struct") for c in spec.children):
                found += [Binding(name, "enumerator", src, e) for e in body.named_children
                          if e.type == "enumerator" and (n := e.child_by_field_name("name")) is not None
                          and src.text_of(n) == name]
        return found

    def _declared(self, name: str, declaration: Node, before: Node | None, src: Source) -> list[Binding]:
        """NAME's bindings in a declaration (or a range-for's declaration), declared before BEFORE."""
        kind = declaration.child_by_field_name("type")
        found = []
        for declarator in declaration.children_by_field_name("declarator"):
            for named, node in declarator_names(declarator, src):
                if named == name and (before is None or node.start_byte < before.start_byte):
                    function = _is_function(declarator)
                    found.append(Binding(name, "function" if function else "variable", src, declaration, kind))
        return found

    def _parameters(self, name: str, parameters: Node | None, src: Source) -> list[Binding]:
        found = []
        for parameter in (parameters.named_children if parameters is not None else []):
            if parameter.type in _TYPE_PARAMETERS:
                if any(src.text_of(n) == name for n in parameter.named_children if n.type == "type_identifier"):
                    found.append(Binding(name, "type", src, parameter))
                continue
            declarator = parameter.child_by_field_name("declarator")
            if parameter.type in _PARAMETERS and declarator is not None and \
                    any(n == name for n, _ in declarator_names(declarator, src)):
                found.append(Binding(name, "parameter", src, parameter, parameter.child_by_field_name("type")))
        return found

    def _may_declare(self, name: str, statement: Node, src: Source) -> bool:
        """Whether C++ may read an expression statement as a declaration of NAME ([stmt.ambig]): `X(name) = v;`,
        `X(name);`, `X(*name)(...)` declare `name` where X names a type, which tree-sitter reads as a call. Settled
        only where X is a function of the program."""
        match = _DECLARATION_LIKE.match(src.text_of(statement))
        if match is None or match.group(2) != name:
            return False
        callee = re.findall(r"[A-Za-z_]\w*", match.group(1))[-1]
        bindings = self.lookup(callee, statement, src) if match.group(1).strip() == callee else []
        return not bindings or any(b.kind != "function" for b in bindings)

    def _macro_item(self, name: str, item: Node, src: Source, macros: Macros) -> list[Binding]:
        """NAME's bindings in a statement that names a macro, read expanded with MACROS (those in force there);
        unknown where the expansion cannot be read and could bind NAME (it writes NAME, or a macro body does)."""
        key = (id(src), item.start_byte)
        in_block = item.parent is not None and item.parent.type == "compound_statement"
        if key not in self._expanded:
            text = expand(src.text_of(item), macros)
            wrapped = None if text is None else Source(f"void kl_scope() {{\n{text}\n}}" if in_block else text)
            self._expanded[key] = (text if text is not None else src.text_of(item),
                                   wrapped if wrapped is not None and first_error(wrapped.root) is None else None)
        text, wrapped = self._expanded[key]
        if wrapped is None:
            could = set(re.findall(r"[A-Za-z_]\w*", text)) | self.macro_words
            return [Binding(name, "unknown", src, item)] if name in could else []
        items = wrapped.root.named_children
        if in_block:
            body = items[0].child_by_field_name("body") if items else None
            items = body.named_children if body is not None else []
        return Scopes(self.prior)._items(name, items, None, wrapped, wrapped)  # already expanded


def _transparent_namespace(namespace: Node, src: Source) -> bool:
    """Whether a namespace's names are found in the scope around it: an anonymous one, an inline one (round 280:
    `inline namespace v1 { Tap& tap; }` binds app::tap to C++, where a global `float* tap` was found instead)."""
    named = namespace.child_by_field_name("name")
    return named is None or any(c.type == "inline" for c in namespace.children) or \
        re.search(r"\binline\s+\w+\s*$", src.text_of(named)) is not None


def _path_names(path: list[tuple[str, bool]], names: list[str]) -> bool:
    """Whether NAMES (`a::b`) name the namespace at PATH: its names in order, inline ones perhaps left out."""
    if not path:
        return not names
    (first, inline), rest = path[0], path[1:]
    return bool(names) and names[0] == first and _path_names(rest, names[1:]) or inline and _path_names(rest, names)


# a statement C++ may read as a declaration: a name (a type's, perhaps qualified or a template's) then `(`, any
# declarator punctuation, the declared name alone (array bounds aside) and `)`
_DECLARATION_LIKE = re.compile(r"\s*((?:::\s*)?[A-Za-z_]\w*(?:\s*::\s*[A-Za-z_]\w*)*(?:\s*<[^;{}()]*>)?)"
                               r"\s*\(\s*(?:[*&(]\s*|const\b\s*|volatile\b\s*)*([A-Za-z_]\w*)\s*(?:\[[^\]]*\]\s*)*\)")


def bound_names(*sources: Source, prototypes: bool = True) -> set[str]:
    """Every name any binder of the sources binds, in any scope: declarations, parameters, captures, range-for and
    condition declarations, functions, types, enumerators, using-declarations; PROTOTYPES: with the names of
    functions declared without a body."""
    names: set[str] = set()
    for src in sources:
        for node in walk(src.root):
            if node.type in ("declaration", "field_declaration", "type_definition", "for_range_loop") + _PARAMETERS:
                for declarator in node.children_by_field_name("declarator"):
                    if prototypes or node.type != "declaration" or not _is_function(declarator):
                        names |= {n for n, _ in declarator_names(declarator, src)}
            elif node.type == "function_definition" and (d := node.child_by_field_name("declarator")) is not None:
                names |= {n for n, _ in declarator_names(d, src)}
            elif node.type in ("alias_declaration", "enumerator") + _CLASSES + ("enum_specifier",) and \
                    (n := node.child_by_field_name("name")) is not None:
                names.add(src.text_of(n).split("::")[-1])
            elif node.type == "lambda_capture_initializer" and (left := node.child_by_field_name("left")) is not None:
                names.add(src.text_of(left))
            elif node.type == "using_declaration" and node.named_children:
                names |= set(re.findall(r"[A-Za-z_]\w*", src.text_of(node.named_children[-1]))[-1:])
            elif node.type in _TYPE_PARAMETERS:
                names |= {src.text_of(n) for n in node.named_children if n.type == "type_identifier"}
    return names
