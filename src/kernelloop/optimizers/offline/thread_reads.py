"""Which of a program's device code reads where its thread runs, and whether a kernel can run such
code without a call the tiers read.

The tiers and families read a kernel's own text: the axis tier renames the built-ins written
there, the row tier takes the thread index as the row only where nothing else reads it. A kernel
also runs code its text does not call by name: a parameter's or a local's constructor, a
conversion (`i >= rows` with `rows` of a class type), an operator, a helper's default argument,
a macro's body (red team round 126; rounds 123-125 were names that meant other code). Listing
those ways one by one is what failed before, so the rule is by place instead: device code that
runs only by its name (a kernel, a plain function's body, a macro) may read the thread's place,
and then every kernel naming it is not read; anywhere else (a class's members, a function's head,
an out-of-class member or operator, a variable's initializer) it may not, or no kernel of the
program is read.
"""

from __future__ import annotations

import re

from tree_sitter import Node

from ...program.cuda_tree import Source, first_error, walk
from ...program.scanner import strip_comments, without_literals

# Where a thread runs: the built-ins, the special registers behind them, and the library calls
# that read them for a group.
# A built-in's name anywhere inside an identifier counts: the toolkit spells them through its own
# macros (`__cudaGet_blockIdx()`, red team round 127) and the rule does not expand the toolkit's
# headers. Inline assembly counts whole: a special register's name can be split over string
# literals (`"%%cta" "id.x"`, round 127).
THREAD_PLACE = re.compile(
    r"\w*(?:threadIdx|blockIdx|blockDim|gridDim|warpSize|clusterIdx|clusterDim|clusterBlockIdx|lanemask|"
    r"activemask|nvvm_read_ptx_sreg)\w*|\b(?:cooperative_groups|this_thread_block|this_grid|this_cluster|"
    r"this_thread|coalesced_threads|tiled_partition|asm|__asm__|__asm)\b"
    r"|%(?:tid|ntid|ctaid|nctaid|laneid|warpid|nwarpid|smid|nsmid|gridid|clusterid|cluster_ctaid)\b")

_PLAIN_NAME = ("identifier", "template_function")
# A macro named like a keyword or CUDA's own specifier (`#define signed Sat8`, red team round 129):
# every reading of the program's words by their spelling would be wrong.
_RESPELLED = re.compile(
    r"^[ \t]*#[ \t]*define[ \t]+(alignas|alignof|asm|auto|bool|char|char8_t|char16_t|char32_t|class|const|"
    r"constexpr|const_cast|decltype|delete|do|double|dynamic_cast|else|enum|explicit|extern|false|float|for|"
    r"friend|goto|if|inline|int|long|mutable|namespace|new|noexcept|nullptr|operator|private|protected|public|"
    r"register|reinterpret_cast|return|short|signed|sizeof|static|static_assert|static_cast|struct|switch|"
    r"template|this|thread_local|throw|true|typedef|typeid|typename|union|unsigned|using|virtual|void|"
    r"volatile|wchar_t|while|__global__|__device__|__host__|__shared__|__constant__|__managed__|"
    r"__forceinline__|__noinline__|__launch_bounds__|__restrict__)\b", re.M)
_CONDITIONAL_LINE = re.compile(r"^[ \t]*#[ \t]*(?:if|ifdef|ifndef|elif|elifdef|elifndef|else|endif)\b[^\n]*", re.M)
# What a free function may stand in: namespaces, templates, `extern "C"` blocks, `#if` regions.
_SCOPES = ("template_declaration", "linkage_specification", "declaration_list", "namespace_definition",
           "preproc_if", "preproc_ifdef", "preproc_else", "preproc_elif", "preproc_elifdef")
# What runs nothing: an include, a namespace alias, a using-declaration (`namespace cg =
# cooperative_groups;` names the library, calls none of it).
_INERT = ("preproc_include", "namespace_alias_definition", "using_declaration")


class ThreadReads:
    """`readers`: the names (functions and macros, by their last part) whose code reads the thread's
    place, or names one that does; `implicit`: where a kernel may run code it does not name that
    does, or None."""

    def __init__(self, readers: set[str], implicit: str | None) -> None:
        self.readers = readers
        self.implicit = implicit

    def named_by(self, kernel_text: str) -> str | None:
        """The first reader a kernel's text names, or None."""
        code = without_literals(strip_comments(kernel_text))
        return next((n for n in sorted(self.readers) if re.search(rf"(?<![\w$]){re.escape(n)}(?![\w$])", code)), None)


def thread_reads(program: str, kernels: set[str] | None = None) -> ThreadReads:
    """Read `program` (the preamble and the editable part) for device code that reads where its
    thread runs (THREAD_PLACE). `kernels`: the kernels the optimizer's own reader found; a function
    counts as a kernel only where both readings agree (red team round 128: a `__global__` the
    compiler never sees, in a comment continued by a backslash or in an attribute)."""
    # lines joined where a backslash continues them, as the compiler joins them before anything else;
    # `#if` lines blanked, every branch kept: all the code is read, whichever branch builds (an
    # `#ifdef __cplusplus` around `extern "C" {` would not parse otherwise)
    joined = re.sub(r"\\[ \t]*\r?\n", "", program)
    # no line ends in blanks (where a comment was): the grammar reads an empty `#define NAME ` as
    # taking the next line for its value (red team round 129)
    text = re.sub(r"[ \t]+$", "", _CONDITIONAL_LINE.sub(lambda m: " " * len(m.group(0)), strip_comments(joined)),
                  flags=re.M)
    src = Source(text)
    if (error := first_error(src.root)) is not None:
        line = text.count("\n", 0, src.offset(error.start_byte)) + 1
        return ThreadReads(set(), f"the program's code does not parse at line {line}, so which code a kernel "
                                  "runs without calling it is not known")
    if (spread := next((n for n in walk(src.root) if n.type.startswith("preproc_") and n.type not in _SCOPES
                        and "\n" in src.text_of(n).rstrip("\n")), None)) is not None:
        line = text.count("\n", 0, src.offset(spread.start_byte)) + 1
        return ThreadReads(set(), f"a directive at line {line} reads as spanning lines, which the compiler never "
                                  "does, so which code a kernel runs without calling it is not known")
    if (respelled := _RESPELLED.search(text)) is not None:
        return ThreadReads(set(), f"the program defines a macro named {respelled.group(1)}, a keyword, so the "
                                  "code's words are not what the compiler reads")
    named: dict[str, list[str]] = {}  # a name -> the texts that run under it
    macros = {src.text_of(n.child_by_field_name("name")) for n in walk(src.root)
              if n.type in ("preproc_def", "preproc_function_def")}
    explicit: list[tuple[int, int]] = []  # spans that run only under a name (or are a kernel)
    for node in walk(src.root):
        if node.type in ("preproc_def", "preproc_function_def"):
            name, value = node.child_by_field_name("name"), node.child_by_field_name("value")
            body = src.text_of(value) if value is not None else ""
            # a pasted name could be any name, a built-in's too
            named.setdefault(src.text_of(name), []).append("threadIdx" if "##" in body else body)
            explicit.append(src.span(node))
        elif node.type in _INERT:
            explicit.append(src.span(node))
        elif node.type == "function_definition":
            head_end = node.child_by_field_name("body")
            if head_end is None:
                continue
            head = text[src.offset(node.start_byte):src.offset(head_end.start_byte)]
            plain = _plain_function_name(node)
            # a kernel runs only by its launch, and its text is what the tiers read; a kernel is a free
            # function whose specifiers, not a string in its head, say __global__ (red team round 127)
            if plain is not None and _is_kernel_head(text, node, plain[1], src) and \
                    (kernels is None or plain[0] in kernels):
                explicit.append(src.span(node))
                continue
            if plain is not None:
                name, where = plain
                explicit.append(src.span(head_end))  # the head stays implicit: its default arguments
                explicit.append(src.span(where))  # but for its own name
                # host code reads no built-in (a host `dim3 blockDim(...)` is a name of its own)
                if re.search(r"\b__device__\b", head) or _names_any(head, set(macros)):
                    named.setdefault(name, []).append(src.text_of(head_end))
    readers = {n for n, bodies in named.items() if any(THREAD_PLACE.search(b) for b in bodies)}
    changed = True
    while changed:
        changed = False
        for n, bodies in named.items():
            if n not in readers and any(_names_any(without_literals(b), readers) for b in bodies):
                readers.add(n)
                changed = True
    implicit = _outside(text, explicit)
    found = THREAD_PLACE.search(implicit)
    which = found.group(0) if found else _names_any(without_literals(implicit), readers)
    problem = None
    if which:
        problem = (f"device code a kernel may run without calling it by name (a constructor, a conversion, an "
                   f"operator, a member, a default argument, an initializer) reads {which}: the tiers read only "
                   "what a kernel's own text and the helpers it calls say")
    return ThreadReads(readers, problem)


def _plain_function_name(node) -> tuple[str, Node] | None:
    """The name (and its node) of a function definition that runs only where its name is called: a
    free function (not a class's member, an out-of-class member, an operator or a conversion), or None."""
    parent = node.parent
    while parent is not None and parent.type in _SCOPES:
        parent = parent.parent
    if parent is not None and parent.type != "translation_unit":
        return None  # in a class body (field_declaration_list) or a function: a member or local
    declarator = node.child_by_field_name("declarator")
    while declarator is not None and declarator.type in ("pointer_declarator", "reference_declarator"):
        declarator = declarator.child_by_field_name("declarator")
    if declarator is None or declarator.type != "function_declarator":
        return None
    inner = declarator.child_by_field_name("declarator")
    if inner is None or inner.type not in _PLAIN_NAME:
        return None
    if inner.type == "template_function":
        inner = inner.child_by_field_name("name")
    return (inner.text.decode("utf-8", "replace"), inner) if inner is not None else None


def _is_kernel_head(text: str, node: Node, name: Node, src: Source) -> bool:
    """Whether `__global__` is among the specifiers before a function definition's name (its
    template header aside), outside any literal or parentheses."""
    before = without_literals(text[src.offset(node.start_byte):src.offset(name.start_byte)])
    while (shorter := re.sub(r"\([^()]*\)|\[\[[^\[\]]*\]\]", " ", before)) != before:  # arguments, attributes
        before = shorter
    return re.search(r"\b__global__\b", before) is not None


def _names_any(code: str, names: set[str]) -> str | None:
    return next((n for n in sorted(names) if re.search(rf"(?<![\w$]){re.escape(n)}(?![\w$])", code)), None)


def _outside(text: str, spans: list[tuple[int, int]]) -> str:
    """`text` with the spans blanked (nested spans too)."""
    chars = list(text)
    for start, end in spans:
        for k in range(start, end):
            if chars[k] != "\n":
                chars[k] = " "
    return "".join(chars)
