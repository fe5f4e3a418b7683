"""What a contract-v2 program's timed call may run: the `h.run` lambda calls the editable part's
functions and nothing else.

Every timed call runs the lambda, so whatever else frozen code does there runs between the part's
work and the harness's checks, where the verifier cannot see it: a copy of a scratch buffer to the
host or a frozen kernel that condenses it into a variable of its own kept a result that nothing
compares (red team round 274, after round 273 closed `h.fetch` of scratch). The other statements
allowed touch device memory only: a device-to-device `cudaMemcpy` between the harness's buffers (an
in-place kernel's input copied into its output before the launcher runs), a `cudaMemset` (an
accumulated output zeroed), and declarations of plain values a launch is written with
(`dim3 block(32, 8);`). Control flow
(`if`, `for`) around those statements is allowed, and so is launching an editable kernel in place;
conditions, arguments and launch configurations call nothing else.
"""

from __future__ import annotations

from tree_sitter import Node

from .cuda_tree import Source, first_error, walk

# node types a lambda body may hold besides the calls it makes (each checked below)
_ALLOWED = frozenset({
    "compound_statement", "expression_statement", "if_statement", "else_clause", "condition_clause", "for_statement",
    "call_expression", "argument_list", "identifier", "qualified_identifier", "namespace_identifier",
    "template_function", "template_argument_list", "type_descriptor", "primitive_type", "type_identifier",
    "sized_type_specifier", "type_qualifier", "abstract_pointer_declarator", "number_literal", "true", "false",
    "null", "nullptr", "binary_expression", "unary_expression", "parenthesized_expression", "cast_expression",
    "sizeof_expression", "subscript_expression", "subscript_argument_list", "field_expression",
    "field_identifier", "pointer_expression", "conditional_expression", "update_expression", "declaration",
    "init_declarator", "kernel_call_syntax", "pointer_declarator", "initializer_list", "placeholder_type_specifier",
    "auto", "comment"})
_DEVICE_COPIES = frozenset({"cudaMemcpy", "cudaMemcpyAsync"})
_DEVICE_FILLS = frozenset({"cudaMemset", "cudaMemsetAsync"})  # device memory only: zeroing an accumulated output
# local values a launch is written with (`dim3 block(32, 8);`, `int grid = ...;`): types that run no code of
# their own; a class of the frozen code could (a constructor copying scratch)
_PLAIN_TYPES = frozenset({"dim3", "size_t", "ptrdiff_t", "int8_t", "int16_t", "int32_t", "int64_t", "uint8_t",
                          "uint16_t", "uint32_t", "uint64_t", "cudaStream_t"})
_CONSTRUCTORS = frozenset({"dim3"})  # a launch's configuration, built in place


def _called_name(call: Node, src: Source) -> str:
    fn = call.child_by_field_name("function")
    while fn is not None and fn.type in ("qualified_identifier", "template_function", "parenthesized_expression"):
        fn = fn.named_children[0] if fn.type == "parenthesized_expression" and fn.named_children else \
            fn.child_by_field_name("name")
    return src.text_of(fn) if fn is not None and fn.type == "identifier" else ""


def _lambda_bodies(src: Source) -> list[Node]:
    """The body of every lambda handed to a `.run(` call."""
    bodies = []
    for node in walk(src.root):
        if node.type != "call_expression":
            continue
        fn = node.child_by_field_name("function")
        field = fn.child_by_field_name("field") if fn is not None and fn.type == "field_expression" else None
        args = node.child_by_field_name("arguments")
        if field is None or src.text_of(field) != "run" or args is None:
            continue
        for arg in args.named_children:
            if arg.type == "lambda_expression" and (body := arg.child_by_field_name("body")) is not None:
                bodies.append(body)
    return bodies


def run_lambda_problem(harness: str, editable_names: set[str]) -> str | None:
    """What the frozen code's `h.run` lambda does besides calling functions the editable part declares
    (EDITABLE_NAMES: a macro's included) and device-to-device copies, in words; None when nothing.
    HARNESS: the frozen code, comments stripped."""
    src = Source(harness)
    for body in _lambda_bodies(src):
        if first_error(body) is not None:
            return f"its h.run lambda cannot be read ({' '.join(src.text_of(body).split())[:80]})"
        for node in walk(body):
            if not node.is_named:  # punctuation and operators (an assignment, a launch are nodes of their own)
                continue
            if node.type not in _ALLOWED:
                return f"its h.run lambda holds {node.type.replace('_', ' ')} " \
                       f"`{' '.join(src.text_of(node).split())[:80]}`"
            if node.type == "declaration":
                kind = node.child_by_field_name("type")
                if kind is None or not (kind.type in ("primitive_type", "sized_type_specifier",
                                                      "placeholder_type_specifier")
                                        or kind.type == "type_identifier" and src.text_of(kind) in _PLAIN_TYPES):
                    return f"its h.run lambda declares {' '.join(src.text_of(node).split())[:80]}"
            if node.type != "call_expression":
                continue
            name = _called_name(node, src)
            if name in editable_names or name in _CONSTRUCTORS:  # an editable kernel launched in place too
                continue
            args = node.child_by_field_name("arguments")
            kinds = {src.text_of(a) for a in args.named_children} if args is not None else set()
            if name in _DEVICE_COPIES and "cudaMemcpyDeviceToDevice" in kinds or name in _DEVICE_FILLS:
                continue
            return f"its h.run lambda calls {name or src.text_of(node)[:40]}, which the editable part does not define"
    return None
