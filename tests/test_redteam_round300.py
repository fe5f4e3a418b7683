"""Red team round 300 (tests/fixtures/redteam/round300/REPORT.md), on c7d255e: a baseline's frozen input generator
with a converting constructor template (`template <class U> CountGen(U&)`, never a copy constructor, so the type
stayed trivially copyable) ran frozen host code in every call: the header launched the fill kernel with the
generator by value from a non-const copy, and a copy from a non-const lvalue prefers that template to the trivial
copy. The frozen code queued work on a stream of its own that waited for the poison and then wrote the exact sum
into the output (and a tag the candidate recognised into the scratch buffer). Closed by class in the header: the
generator reaches the fill kernel as bytes (`GeneratorBytes`), the header takes it by reference and stores it as
bytes, so no host code of a program's type runs in the header's per-call path; every call the header's templates
make to a free function is qualified (no argument-dependent lookup can bind a frozen function to it); and outputs
and scratch are checked, once the GPU is idle, to be exactly the poison (or the kept copy) as they enter the call."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
import tree_sitter_cuda
from tree_sitter import Language, Parser

from .conftest import FIXTURES, ROOT

ROUND = FIXTURES / "redteam" / "round300"
HEADER = ROOT / "src" / "kernelloop" / "harness" / "kernelloop_harness.cuh"
CASTS = {"static_cast", "reinterpret_cast", "const_cast", "dynamic_cast"}


def _walk(node):
    yield node
    for child in node.children:
        yield from _walk(child)


def _inside(node, kind: str) -> bool:
    up = node.parent
    while up is not None:
        if up.type == kind:
            return True
        up = up.parent
    return False


def _name(node) -> str | None:
    if node is None:
        return None
    if node.type in ("identifier", "field_identifier", "type_identifier"):
        return node.text.decode()
    if node.type == "template_function":
        return node.child_by_field_name("name").text.decode()
    return None


def _unqualified_free_calls(source: bytes) -> list[tuple[int, str]]:
    """Calls in the header's templates that name a function bare and could reach argument-dependent lookup: not a
    member called from its class, a cast, a macro, a type's construction, a variable (a lambda), or a call with no
    arguments."""
    tree = Parser(Language(tree_sitter_cuda.language())).parse(source)
    members, types, variables = set(), set(), set()
    for node in _walk(tree.root_node):
        if node.type == "function_declarator" and (name := _name(node.child_by_field_name("declarator"))):
            if _inside(node, "field_declaration_list"):
                members.add(name)
        elif node.type in ("struct_specifier", "class_specifier", "type_parameter_declaration",
                           "alias_declaration", "type_definition"):
            types.update(n.text.decode() for n in _walk(node) if n.type == "type_identifier")
        elif node.type in ("parameter_declaration", "optional_parameter_declaration"):
            declarator = node.child_by_field_name("declarator")
            if (name := _name(declarator)) is not None:
                variables.add(name)
    macros = set(re.findall(rb"^\s*#\s*define\s+(\w+)", source, re.M))
    found = []
    for template in (n for n in _walk(tree.root_node) if n.type == "template_declaration"):
        for call in (n for n in _walk(template) if n.type == "call_expression"):
            function = call.child_by_field_name("function")
            name = _name(function) if function is not None and function.type in ("identifier", "template_function") \
                else None
            arguments = call.child_by_field_name("arguments")
            if name is None or name in CASTS or name.encode() in macros or name in types or name in variables:
                continue
            if arguments is not None and arguments.named_child_count == 0:
                continue
            if name in members and _inside(call, "field_declaration_list"):
                continue
            found.append((call.start_point[0] + 1, name))
    return found


def test_every_free_call_in_the_headers_templates_is_qualified():
    """A call the header's templates make bare, with an argument of a program's type (a generator, `__half`), is
    resolved where the template is instantiated, among functions argument-dependent lookup finds: a frozen function
    of that name taking the program's type would be the better match and run instead (in a fill, a stress, a
    check). Qualified (`kl::`, `::`), the call binds to what the header saw when it was read, first."""
    bare = _unqualified_free_calls(HEADER.read_bytes())
    assert not bare, f"bare calls in the header's templates (qualify them): {bare[:10]}"


def test_the_scan_sees_a_bare_call():  # the control for the test above
    source = b"namespace kl { void f(int); template <class T> void g(T t) { f(t); kl::f(t); } }"
    assert _unqualified_free_calls(source) == [(1, "f")]


@pytest.mark.nvcc
def test_round300_no_constructor_of_the_generator_is_instantiated_by_the_header(tmp_path):
    """Built with the header, the baseline's converting constructor is never instantiated: the header copies no
    generator as an object (before: `CountGen::CountGen<CountGen>(CountGen&)`, called from fill_with)."""
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("no nvcc")
    obj = tmp_path / "v.o"
    subprocess.run([nvcc, "-std=c++17", "-arch=sm_90", "-I", str(HEADER.parent), "-c",
                    str(ROUND / "v_converting_constructor.cu"), "-o", str(obj)], check=True, capture_output=True,
                   timeout=600)
    symbols = subprocess.run(["nm", "-C", str(obj)], check=True, capture_output=True, text=True).stdout
    assert "CountGen::CountGen(unsigned long*)" in symbols  # the program's own construction, in its main
    assert "CountGen::CountGen<" not in symbols
