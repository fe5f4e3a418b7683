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
