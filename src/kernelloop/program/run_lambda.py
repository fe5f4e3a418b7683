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
call (round 277). Round 279: `auto` is plain only from a plain value or one call of the harness's
size/input/output/inout/scratch; the harness is read with the macros in force at each point of its
own unit (preamble and harness: the editable part's are not there); a called name is resolved where
it is called; operators apply to numbers and pointers only (any other operand's operator is a
function of the frozen code); and a called part function is declared nowhere with a default argument
that runs code or a parameter of a frozen type that is not plain. Round 280: every operand expression
is typed (`*p`, `p[0]`, a cast, a conditional), a called part function is declared by the frozen code
only with the editable definition's parameters (no other overload, specialization or asm-labelled
prototype), a parameter type the plain check cannot judge is refused, and a default argument is a
literal or a program's number. Round 281: the frozen code's declarations are read with its macros
expanded (token pasting included), every `run` it names is `h.run(...)` with its lambda in place, and
a use of the part's name outside the lambda is judged by its binding there. The lambda takes no
parameters and makes no capture of its own.
"""

from __future__ import annotations

import functools
import re
from importlib import resources

from tree_sitter import Node

from .cuda_tree import Source, first_error, walk
from .macros import expand, macro_body_words, macros_writing, pasting_macros, program_macros
from .plain_values import PLAIN_TYPES, Plainness, constant, number_field
from .scanner import strip_comments, without_literals
from .scopes import DIRECTIVES, Binding, Scopes, bound_names, declarator_names

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


def _whole_type(name: Node) -> Node:
    """The type a type name is the last part of: `app::Probe` for its `Probe`, `Span<float>` for its `Span`."""
    while name.parent is not None and name.parent.type in ("qualified_identifier", "template_type") and \
            name.parent.child_by_field_name("name") == name:
        name = name.parent
    return name


def _declares(node: Node) -> bool:
    """Whether an identifier is the name a declaration declares (`int x;`, `auto* x = ...`)."""
    up = node.parent
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
    # every name the program #defines anywhere (its preamble, its editable part, its harness)
    macro_names = frozenset(n for m in (frozen_macros, program_macros(*macro_texts[:2]))
                            for n in (*m.defined, *m.uncertain)) if macro_texts else frozenset(frozen_macros.defined)
    if any(re.search(r"\brun\b", m.body) for m in frozen_macros.defined.values()):
        return "its run() is reached through a macro, so its lambda cannot be read"
    src = Source(harness)
    part_macros = program_macros(macro_texts[1]) if len(macro_texts) > 1 else None
    preamble_macros = program_macros(preamble_text)
    if part_macros is not None and (named := sorted(
            # an `#undef` makes the name uncertain, so names_in holds it too
            n for n in part_macros.names_in(harness) if part_macros.defined.get(n) is None
            or part_macros.defined.get(n) != preamble_macros.defined.get(n))):
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
    expansions = _expansions((src, *([preamble] if preamble is not None else [])), macros_at,
                             pasting_macros(preamble_text, harness), macros_writing(_RENAMING, preamble_text, harness))
    if isinstance(expansions, str):
        return expansions
    if problem := _frozen_escape((src, *([preamble] if preamble is not None else []), *expansions),
                                  preamble_text + harness):
        return problem
    part_functions = _editable_functions(macro_texts[1]) if len(macro_texts) > 1 else set(editable_names)
    for where in (src, *([preamble] if preamble is not None else []), *expansions):
        if problem := _other_run(where, where is src or where in expansions, part_functions):
            return problem
    frozen_sources = (src, *([preamble] if preamble is not None else []), *expansions)
    # names the frozen code binds anywhere (a helper, a local lambda, a parameter, a capture), macros expanded: a
    # call by such a name may reach frozen code whatever scope or overload picks it; prototypes aside (the
    # launcher's own, in the preamble)
    bound = bound_names(*frozen_sources, prototypes=False)
    prototypes = bound_names(*frozen_sources) - bound
    scopes = Scopes(tuple(s for s in (preamble, editable) if s is not None), macros_at,
                    frozenset(macro_body_words(preamble_text, harness)))
    harness_expansions = _expansions((src,), macros_at, set())  # the preamble's own functions are the part's to call
    if editable is not None and (problem := _part_reaches_frozen(
            editable, preamble, (src, *(harness_expansions if isinstance(harness_expansions, tuple) else ())))):
        return problem
    # the part runs inside the experiment only: a call before or after it (or its address taken, to call it
    # elsewhere) computes on inputs the verifier does not draw, and what it prints is compared by nothing
    for where in (src, *expansions):
        lambdas = found if where is src else _lambda_bodies(where)
        inside = [(body.start_byte, body.end_byte) for body in lambdas] if isinstance(lambdas, list) else []
        for node in walk(where.root):
            if node.type != "identifier" or any(a <= node.start_byte < b for a, b in inside):
                continue
            name = where.text_of(node)
            if name not in part_functions or any(up.type in ("function_declarator", "parameter_declaration")
                                                 for up in _ancestors(node)) or _declares(node):
                continue  # a frozen declaration named like the part: its uses are what is judged
            # round 281: judged by what the name means where it stands (a frozen helper's parameter named like the
            # launcher is not the part; an unrelated one elsewhere no longer hides a call of the part)
            meant = scopes.lookup(name, node, where) if where is src else []
            if not meant or any(b.src is editable or b.kind in ("function", "unknown", "using") for b in meant):
                return f"its frozen code names {name} outside its h.run lambda " \
                       f"({' '.join(where.text_of(node.parent).split())[:60]})"
    for lambda_body, (body, body_src) in zip(found, bodies):
        problem = _lambda_problem(_Lambda(lambda_body, src, body, body_src), scopes, editable, bound, prototypes,
                                  part_functions, editable_names, expansions, macro_names)
        if problem:
            return problem
    return None




# What gives a symbol another name than its C++ one: an asm label, a file-scope `asm` (`.set`), an alias
# attribute, `#pragma redefine_extname`. Frozen code written so can define the part's symbol (red team round
# 287): the timed call's `launch(...)` is then frozen code, whatever the lambda reads like.
_RENAMING = {"asm", "__asm", "__asm__", "alias", "__alias__", "weakref", "__weakref__", "ifunc", "__ifunc__",
             "symver", "__symver__", "weak", "__weak__", "target_clones", "__target_clones__", "redefine_extname"}
_RENAMING_ATTRIBUTES = _RENAMING - {"asm", "__asm", "__asm__", "redefine_extname"}
# What runs frozen code before main, or puts it where the loader runs it: the header reads its settings in the
# first constructor a program may declare (kernelloop_harness.cuh, take_settings), before any of the program's
# code (red team round 293).
_EARLY_ATTRIBUTES = {"constructor", "__constructor__", "init_priority", "__init_priority__", "section", "__section__"}
# What reaches the process's own settings and memory protections, which the header relies on (red team round 293:
# frozen code edited the environment before the harness read it, and wrote the harness's state, which lies at a
# fixed address, after the run): the environment's editors, memory mapping and protection, another process's or
# the process's own memory by the kernel's interfaces, and the header's private pages by name.
_PROCESS_REACH = re.compile(
    r"\b(?:setenv|unsetenv|putenv|clearenv|\w*environ|\w*mprotect\w*|pkey_\w+|\w*mmap\w*|\w*munmap|\w*mremap|"
    r"\w*madvise|remap_file_pages|process_vm_\w+|ptrace|memfd_create|shmat|shmget|shmctl|shm_open|"
    r"kStateAddress|kStateBytes|kTableAddress|kTableBytes|settings_page|take_settings|kSettingNames)\b")


@functools.lru_cache(maxsize=1)
def _header_type_names() -> frozenset[str]:
    """The classes, structs and enums kernelloop_harness.cuh declares (in namespace kl)."""
    text = strip_comments((resources.files("kernelloop") / "harness" / "kernelloop_harness.cuh").read_text())
    return frozenset(re.findall(r"\b(?:struct|class|union|enum(?:\s+class)?)\s+([A-Za-z_]\w*)", text))


# Assembler directives that place code where the loader runs it or change what a symbol is (files read in, init and
# fini arrays, section switches, the .init/.fini sections, symbol versions, indirect functions): no kernel needs them,
# and PTX has none of them. One list, by kind: the candidate's text rules (verify.policy) and the frozen code's asm
# check below both read it.
LOADER_DIRECTIVE_PATTERNS: dict[str, str] = {
    "include": r"\.(?:incbin|include)\b",
    "sections": r"\.(?:pre)?init_array|\.fini_array|\.ctors|\.dtors|\.section\b",
    # a directive token: a dot not following a name, `)` or `]`, so `cfg.init()` is not one
    "section-switches": r"(?<![\w)\]])\.(?:pushsection|popsection|previous|subsection|init|fini)\b",
    "symver": r"(?<![\w)\]])\.(?:symver|weakref)\b",
    "ifunc": r"gnu_indirect_function|gnu_unique_object|STT_GNU_IFUNC",
}
LOADER_DIRECTIVES = re.compile("|".join(LOADER_DIRECTIVE_PATTERNS.values()))


# Namespaces whose declarations the header's code reads: its own, and the standard library's (its traits, such as
# std::is_integral, and functions it calls). Frozen code declares nothing there (rounds 295, 297, 301).
_HEADER_READ_NAMESPACES = frozenset({"kl", "std", "cuda", "__gnu_cxx", "__cxxabiv1"})


def _declares_into_header(where: Source, node: Node, header_names: frozenset[str]) -> str | None:
    """The qualified name NODE declares, where it is a declarator whose scope is one the header reads (`kl::`, the
    standard library's, or a class of the header's that a using-directive or -declaration brought in: HEADER_NAMES),
    else None."""
    up = node.parent
    if node.type != "qualified_identifier" or up is None:
        return None
    field = "name" if up.type in ("struct_specifier", "class_specifier", "union_specifier", "enum_specifier") else \
        "declarator" if up.type in ("function_declarator", "init_declarator", "declaration", "pointer_declarator",
                                    "reference_declarator", "array_declarator", "field_declaration") else None
    named = up.child_by_field_name(field) if field else None
    if named is None or (named.start_byte, named.end_byte) != (node.start_byte, node.end_byte):
        return None
    text = where.text_of(node)
    first = re.match(r"\s*(?:::)?\s*([A-Za-z_]\w*)", text)
    return text if first and (first.group(1) in _HEADER_READ_NAMESPACES or first.group(1) in header_names) else None


def _frozen_escape(frozen: tuple[Source, ...], raw: str) -> str | None:
    """Why the frozen code (as written and macros expanded) names a symbol otherwise than C++ does, or makes a
    system call of its own, or None. An `asm` statement inside a function body (inline PTX in a device helper) is
    code, not a name. A system call (`syscall(SYS_clone, ...)`, a `syscall` instruction) starts what the harness
    object's imports do not show (round 288: threads, signal handlers and timers beside the timed calls, which
    gate.frozen_link_problem refuses by import)."""
    if re.search(r"^[ \t]*#[ \t]*pragma[ \t]+weak\b|_Pragma\s*\(\s*\"\s*weak\b", raw, re.M):
        return "its frozen code makes a symbol weak (#pragma weak): what its calls link to cannot be read"
    if "redefine_extname" in raw:
        return "its frozen code renames symbols (#pragma redefine_extname): what its calls link to cannot be read"
    code = without_literals(strip_comments(raw))
    if mangled := re.search(r"\b(?:_Z[A-Za-z0-9_]+|__kl_editable_\w*)", code):
        # round 289: an `extern "C"` function named like a template launcher's mangled symbol, a call of the
        # build's private name for the part's copy of an instantiation
        return f"its frozen code names {mangled.group(0)[:60]}, a symbol's linker name: what it defines or calls " \
               "is the part's at the link"
    for text in (code, *(without_literals(strip_comments(where.text)) for where in frozen)):
        if reach := _PROCESS_REACH.search(text):
            return f"its frozen code names {reach.group(0)}, which reaches the process's environment, memory " \
                   "protections or the harness's own pages: the harness's settings and state are the verifier's"
    joined = re.sub(r"\"\s*\"", "", raw)  # adjacent literals are one string ("/proc/self/m" "em")
    if re.search(r"/proc/[^\"\n]*\bmem\b", joined) or re.search(r"\"(?:[^\"\n]*/)?mem\"", joined):
        return "its frozen code names a process's memory file (/proc/.../mem), which writes past every protection"
    if re.search(r"\b(?:__)?syscall\b", code):
        return "its frozen code makes system calls of its own (syscall): what they start beside the timed calls " \
               "cannot be read"
    # a class of the header's named bare is the header's where a using-directive or -declaration brought it in
    brought = set(_header_type_names()) if re.search(r"\busing\s+namespace\s+(?:::\s*)?kl\b", code) else \
        set(re.findall(r"\busing\s+(?:::\s*)?kl\s*::\s*([A-Za-z_]\w*)", code)) & _header_type_names()
    for where in frozen:
        for node in walk(where.root):
            if declared := _declares_into_header(where, node, frozenset(brought)):
                # a definition of the header's own code, a specialization of its templates among them (red team
                # round 297: `template <> int kl::Harness::size<int>(...)` ran every size at the default; explicit
                # specializations skip access checks, so the header's private state was theirs too)
                what = "a part of the harness header" if re.match(r"\s*(?:::)?\s*kl\b", declared) or \
                    declared.split("::")[0].strip() in brought else "in the standard library, which the harness header reads"
                return f"its frozen code declares {' '.join(declared.split())[:60]}, {what}: the header's own code " \
                       "is the verifier's"
            if node.type == "namespace_alias_definition" and re.search(r"(?:^|::|\s)kl\s*;?\s*$",
                                                                      where.text_of(node)):
                return "its frozen code names the harness header's namespace by another name: what it declares " \
                       "there cannot be told"
            if node.type == "namespace_definition" and (name := node.child_by_field_name("name")) is not None \
                    and (opened := re.match(r"(?:::)?\s*(\w+)", where.text_of(name))) \
                    and opened.group(1) in _HEADER_READ_NAMESPACES:
                # the header's namespace: a function of the frozen code there is what the header's own calls (and
                # its templates' dependent ones) can bind to (red team round 295: kl::write, kl::getenv); the
                # standard library's, whose traits and functions the header reads (round 301: a specialization of
                # std::is_integral<int> turned every drawn size off)
                return f"its frozen code declares in namespace {where.text_of(name)}, which the harness header " \
                       "reads: the header's calls and traits could reach it"
            if node.type == "gnu_asm_expression":
                if re.search(r"\b(?:syscall|sysenter|svc)\b|\bint\s*\$?0x80\b", where.text_of(node)):
                    return "its frozen code makes system calls of its own (an asm syscall): what they start " \
                           "beside the timed calls cannot be read"
                # adjacent literals are one string to the compiler (round 303: ".push" "section .ini" "t_array")
                if directive := LOADER_DIRECTIVES.search(re.sub(r"\"\s*\"", "", where.text_of(node))):
                    # round 302: `.pushsection .preinit_array` from inside a function body put a frozen function
                    # where the loader runs it before the preloaded tracer and the header read their settings
                    return f"its frozen code's assembly places code or symbols for the loader ({directive.group(0)}): " \
                           "it would run before the verifier's tracer and the harness read their settings"
                up = node.parent
                statement = up is not None and up.type == "expression_statement" and any(
                    a.type == "compound_statement" and a.parent is not None and a.parent.type in (
                        "function_definition", "lambda_expression") for a in _ancestors(node))
                if not statement:
                    return f"its frozen code gives a symbol its own name or defines one in assembly " \
                           f"(`{' '.join(where.text_of(up or node).split())[:60]}`): the part's functions could " \
                           "be frozen code at the link"
            elif node.type in ("attribute_specifier", "attribute", "attribute_declaration", "ms_declspec_modifier"):
                named = {where.text_of(n) for n in walk(node) if n.type == "identifier"}
                written = " ".join(where.text_of(node).split())[:60]
                if renaming := named & _RENAMING_ATTRIBUTES:
                    return f"its frozen code declares a symbol with the attribute {sorted(renaming)[0]} " \
                           f"(`{written}`): the part's functions could be frozen code at the link"
                if early := named & _EARLY_ATTRIBUTES:
                    return f"its frozen code declares a function with the attribute {sorted(early)[0]} " \
                           f"(`{written}`): it would run before the harness reads its settings"
    return None


def _expansions(sources, macros_at, pasting: set[str], renaming: set[str] = frozenset()) -> tuple[Source, ...] | str:
    """Each top-level item of the frozen SOURCES that names one of the program's macros, as the compiler reads it:
    expanded with the macros in force there. The walks over the frozen code's declarations read these too (round
    281: a name pasted together, `KL_DECL(launch_reduce, _sum)`, declared a frozen function named like the launcher
    that no walk of the written text saw). An item that cannot be expanded for sure is read as written (the scope
    lookup takes it to bind any name its text or a macro body writes), unless one of its macros pastes tokens
    (PASTING): then it could declare any name, and why is returned; so where one writes an asm label or an alias
    (RENAMING), which only the expanded text shows."""
    found = []
    for where in sources:
        items = list(where.root.named_children)
        while items:
            item = items.pop(0)
            if item.type in ("preproc_if", "preproc_ifdef", "preproc_else", "preproc_elif", "preproc_elifdef"):
                items[:0] = [c for c in item.named_children if c.is_named]  # both sides of a #if
                continue
            if item.type in (*DIRECTIVES, "comment") or not item.type.endswith(("definition", "declaration", "specifier",
                                                                   "statement", "expression", "specification")):
                continue
            macros = macros_at(where, item)
            text = where.text_of(item)
            named = macros.names_in(text) if macros is not None else set()
            if not named:
                continue
            expanded = expand(text, macros)
            if expanded is not None:
                found.append(Source(expanded))
            elif named & pasting:
                return f"its frozen code pastes names together in macros that cannot be read for sure " \
                       f"({' '.join(text.split())[:60]}), so what its timed call runs cannot be told"
            elif named & renaming:  # an asm label or an alias in a macro: _frozen_escape reads expansions only
                return f"its frozen code names a symbol through macros that cannot be read for sure " \
                       f"({' '.join(text.split())[:60]}), so what its calls link to cannot be told"
    return tuple(found)


def _other_run(where: Source, harness: bool, part_functions: set[str]) -> str | None:
    """Why a `run` the frozen code names is not `h.run(...)` called with its lambda written in place (round 281:
    `h.kl::Harness::run(...)`, `h.template run<>(...)`, `(&h)->kl::Harness::run(...)` ran a lambda nothing read; a
    member pointer, a derived class's `run(...)` could too), or None. In the preamble (built before the harness
    header) no run at all."""
    for node in walk(where.root):
        if node.type not in ("identifier", "field_identifier") or where.text_of(node) != "run":
            continue
        up = node.parent
        if node.type == "identifier" and up is not None and not (
                up.type == "call_expression" and up.child_by_field_name("function") == node and
                "run" not in part_functions or up.type in ("qualified_identifier", "template_function", "template_method")):
            continue  # a variable named run, read; a launcher of the part's named run (judged as the part's name)
        call = up.parent if up is not None and up.type == "field_expression" and node.type == "field_identifier" \
            else None
        if harness and call is not None and call.type == "call_expression" and \
                call.child_by_field_name("function") == up:
            continue  # `h.run(...)`: _lambda_bodies reads its lambda (or says why not)
        return f"its frozen code names run as `{' '.join(where.text_of(up or node).split())[:60]}`: the timed " \
               "call is written h.run([&] { ... }, ...) in the harness, so that its lambda is read"
    return None


def _part_reaches_frozen(editable: Source, preamble: Source | None, harness: tuple[Source, ...]) -> str | None:
    """Why the editable part reaches frozen code the harness defines, or calls through a frozen function pointer, or
    None. Round 286: a launcher that declared a harness function itself (or found its prototype in the preamble), or
    called a preamble function pointer the harness had set, ran frozen code in every timed call through the part:
    the harness's unit defines it, the part's links to it, and the lambda shows only the launcher."""
    part_words = {editable.text_of(n) for n in walk(editable.root) if n.type == "identifier"}
    own = bound_names(editable, prototypes=False) | (bound_names(preamble, prototypes=False) if preamble else set())
    for src in harness:
        # what the part's unit can link to: the harness's functions at global scope with external linkage
        items = []
        for item in src.root.named_children:
            body = item.child_by_field_name("body") if item.type == "linkage_specification" else None
            # `extern "C" { ... }` holds a list; `extern "C" float f(...) {...}` one definition (round 288)
            items += [item] if body is None else body.named_children if body.type == "declaration_list" else [body]
        for node in items:
            if node.type != "function_definition" or (d := node.child_by_field_name("declarator")) is None or any(
                    c.type == "storage_class_specifier" and src.text_of(c) == "static" for c in node.children):
                continue
            for name, _ in declarator_names(d, src):
                if name in part_words and name not in own:
                    return f"its editable part names {name}, which the harness defines (the part may call only " \
                           "its own code, the preamble's and libraries')"
    for node in walk(preamble.root) if preamble is not None else []:
        if node.type == "declaration" and not any(up.type == "compound_statement" for up in _ancestors(node)):
            for d in node.children_by_field_name("declarator"):
                pointers = [n for n in walk(d) if n.type == "function_declarator"]
                if pointers and d.type != "function_declarator" and any(
                        n.type in ("pointer_declarator", "parenthesized_declarator", "reference_declarator")
                        for n in walk(d)):
                    for name, _ in declarator_names(d, preamble):
                        if name in part_words and name not in bound_names(editable, prototypes=False):
                            return f"its editable part reads {name}, a function pointer the frozen code declares " \
                                   "(the frozen code may point it at its own code)"
    return None


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
                    part_functions: set[str], editable_names: set[str], expansions: tuple[Source, ...],
                    macro_names: frozenset[str] = frozenset()) -> str | None:
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

    plain = Plainness(resolve, qualified, editable)
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
        if node.type == "type_identifier" and not plain.type(whole := _whole_type(node), body_src):
            # round 282: the whole name (`app::Probe`, `Outer::Probe`), judged whether or not the lookup finds it
            # (one it cannot find is plain only as CUDA's own): a cast to a frozen class, in a call's argument, a
            # condition or an initializer, ran its constructor and conversion in every call
            return f"its h.run lambda names {' '.join(body_src.text_of(whole).split())[:60]}, a type of the frozen " \
                   "code's (or one it cannot tell is plain)"
        if not node.is_named:  # punctuation and operators (an assignment, a launch are nodes of their own)
            continue
        if node.type not in _ALLOWED:
            return f"its h.run lambda holds {node.type.replace('_', ' ')} `{' '.join(text.split())[:80]}`"
        if node.type in ("binary_expression", "unary_expression", "update_expression", "pointer_expression") and \
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
                    in PLAIN_TYPES and plain.type(kind, body_src)):
                return f"its h.run lambda declares {' '.join(text.split())[:80]}"
        if node.type != "call_expression":
            continue
        name = _called_name(node, body_src)
        if name in bound or name in prototypes and name not in part_functions:
            return f"its h.run lambda calls {name}, which the editable part does not define (the frozen code " \
                   "defines one too)" if name in part_functions else \
                f"its h.run lambda calls {name}, which the frozen code declares itself"
        function = node.child_by_field_name("function")
        callee = resolve(name, function, body_src) if function is not None and name and \
            function.type in ("identifier", "template_function") else []
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
    return _call_boundary_problem(called, scopes, plain, editable, (src, *expansions), macro_names)


def _overloadable_operand(expression: Node, read, plain: Plainness, src: Source) -> str | None:
    """The first operand of an operator expression that is not provably a number or a pointer, or None."""
    for operand in expression.named_children:
        if not _builtin(operand, read, plain, src):
            return " ".join(src.text_of(operand).split())
    return None


def _builtin(expression: Node, read, plain: Plainness, src: Source) -> bool:
    """Whether an expression is provably of a number or pointer type, so that an operator on it is the language's own
    (round 280: `++*cp` and `cp[0]++` on a plain struct reach a frozen free operator; every operand expression is
    typed, not only names and fields)."""
    kind = expression.type
    if kind == "parenthesized_expression":
        return len(expression.named_children) == 1 and _builtin(expression.named_children[0], read, plain, src)
    if kind in ("number_literal", "char_literal", "true", "false", "nullptr", "sizeof_expression"):
        return True
    if kind in ("identifier", "qualified_identifier"):  # `n`, `cfg::kScale`
        name = expression.child_by_field_name("name") if kind == "qualified_identifier" else expression
        bindings = read(name) if name is not None and name.type == "identifier" else []
        return bool(bindings) and all(plain.arithmetic(b) for b in bindings)
    if kind == "field_expression":
        owner = expression.named_children[0]
        bindings = read(owner) if owner.type == "identifier" else []
        return bool(bindings) and all(number_field(b, src.text_of(expression.child_by_field_name("field")), plain)
                                      for b in bindings)
    if kind == "pointer_expression":
        argument = expression.child_by_field_name("argument")
        if src.text_of(expression.child_by_field_name("operator")) == "&":  # the address of a number or a pointer
            return _builtin(argument, read, plain, src)
        return _points_to_builtin(argument, read, plain, src)
    if kind == "subscript_expression":
        return _points_to_builtin(expression.child_by_field_name("argument"), read, plain, src)
    if kind in ("binary_expression", "unary_expression", "update_expression", "conditional_expression"):
        return all(_builtin(operand, read, plain, src) for operand in expression.named_children)
    if kind == "cast_expression":  # `(int)x`: x's own operators aside, the result is of the type named
        described = expression.child_by_field_name("type")
        declarator = described.child_by_field_name("declarator") if described is not None else None
        base = described.child_by_field_name("type") if described is not None else None
        return declarator is not None and declarator.type == "abstract_pointer_declarator" or \
            declarator is None and base is not None and plain.number(base, src, 0)
    return False


def _points_to_builtin(pointer: Node | None, read, plain: Plainness, src: Source) -> bool:
    """Whether an expression is a pointer (or array) whose items are numbers or pointers: `*p`, `p[i]` are then."""
    if pointer is None:
        return False
    while pointer.type == "parenthesized_expression" and len(pointer.named_children) == 1:
        pointer = pointer.named_children[0]
    if pointer.type == "binary_expression":  # `*(p + i)`: the pointer side
        return all(_builtin(o, read, plain, src) for o in pointer.named_children) and \
            any(_points_to_builtin(o, read, plain, src) for o in pointer.named_children)
    if pointer.type != "identifier":
        return False
    bindings = read(pointer)
    return bool(bindings) and all(plain.arithmetic(b) and b.type is not None and plain.number(b.type, b.src, 0)
                                  and _indirections(b) >= 1 for b in bindings)


def _indirections(binding: Binding) -> int:
    """How many pointer or array levels a value's declarator adds to its declared type."""
    declarators = binding.node.children_by_field_name("declarator") if binding.node.type != "for_range_loop" \
        else [binding.node.child_by_field_name("declarator")]
    names = [d for d in declarators if d is not None and binding.name in {n for n, _ in declarator_names(d, binding.src)}]
    return max((sum(n.type in ("pointer_declarator", "array_declarator") for n in walk(d)) for d in names), default=0)


_RESTRICT = frozenset({"__restrict__", "__restrict", "restrict"})
_CUDA_STATUS = frozenset({"cudaError_t", "cudaError"})  # what a launcher may return besides void and plain values


def _result_problem(function: Node, src: Source, plain: Plainness, macro_names: frozenset[str]) -> str | None:
    """Why what a called part function returns (as one of its declarations writes it) may run code in the timed
    call, or None. Round 283: `#define cudaError_t Status` in the preamble, undone in the harness, made the launcher
    return a frozen class whose destructor ran at the end of the lambda's statement, while the return type read as
    CUDA's status. Plain: void, a number, a pointer, a plain type, CUDA's own cudaError_t; and no word of it one the
    program #defines."""
    owner, pointer = function.parent, False
    while owner is not None and owner.type in ("pointer_declarator", "reference_declarator",
                                               "parenthesized_declarator"):
        pointer = pointer or owner.type == "pointer_declarator"
        owner = owner.parent
    kind = owner.child_by_field_name("type") if owner is not None and owner.type in (
        "declaration", "function_definition", "field_declaration") else None
    if kind is None:
        return None
    text = " ".join(src.text_of(kind).split())
    if named := sorted(set(re.findall(r"[A-Za-z_]\w*", text)) & macro_names):
        return f"declared to return {text}, which names {named[0]}, a macro of the program's (read as written here, " \
               "another type to the compiler)"
    if pointer or kind.type in ("primitive_type", "sized_type_specifier") or plain.type(kind, src):
        return None
    words = re.findall(r"[A-Za-z_]\w*", text)
    if words and words[-1] in _CUDA_STATUS and not any(plain.resolve(w, kind, src) for w in words[-1:]):
        return None
    return f"declared to return {text}, a type that is not plain (its destructor would run in every call)"


def _signature(function: Node, src: Source) -> tuple[str, ...]:
    """A function declarator's parameter types as written, one string each: the names, default arguments and
    restrict qualifiers left out."""
    parameters = function.child_by_field_name("parameters")
    kinds = []
    for parameter in (parameters.named_children if parameters is not None else []):
        if parameter.type == "comment":
            continue
        declarator = parameter.child_by_field_name("declarator")
        skipped = [n for _, n in declarator_names(declarator, src)] if declarator is not None else []
        default = parameter.child_by_field_name("default_value")
        words = [src.text_of(leaf) for leaf in walk(parameter) if leaf.child_count == 0 and
                 not any(_within(leaf, s) for s in skipped + ([default] if default is not None else []))
                 and src.text_of(leaf) not in _RESTRICT]
        if default is not None and words and words[-1] == "=":
            words.pop()
        kinds.append(" ".join(words))
    return () if kinds == ["void"] else tuple(kinds)


def _home(node: Node, src: Source) -> tuple[str, ...]:
    """Where a declaration stands: the namespaces around it by name (an anonymous one as `-`), with `{}` for a class
    or a block, so that two declarations of a name in the same place compare equal."""
    where: list[str] = []
    for up in _ancestors(node):
        if up.type == "namespace_definition":
            named = up.child_by_field_name("name")
            where.insert(0, " ".join(src.text_of(named).split()) if named is not None else "-")
        elif up.type in ("field_declaration_list", "compound_statement", "template_declaration"):
            where.insert(0, "{}")
    return tuple(where)


def _within(node: Node, outer: Node) -> bool:
    return outer.start_byte <= node.start_byte and node.end_byte <= outer.end_byte


def _call_boundary_problem(called: set[str], scopes: Scopes, plain: Plainness, editable: Source | None,
                           frozen: tuple[Source, ...], macro_names: frozenset[str] = frozenset()) -> str | None:
    """What runs at the boundary of a call of the part's function: a default argument of any declaration of it
    (evaluated by the caller at each call; the editable definition's is copied into the harness's unit), or a
    parameter of a frozen type that is not plain (its converting constructor runs there). Round 279."""
    defined: dict[str, set[tuple[str, ...]]] = {}  # the editable part's signatures of each name it defines
    homes: dict[str, set[tuple[str, ...]]] = {}  # ... and the namespaces it defines them in
    for node in walk(editable.root) if editable is not None else []:
        if node.type == "function_definition" and (declarator := node.child_by_field_name("declarator")) is not None \
                and (function := next((n for n in walk(declarator) if n.type == "function_declarator"), None)):
            for name, _ in declarator_names(function, editable):
                defined.setdefault(name, set()).add(_signature(function, editable))
                homes.setdefault(name, set()).add(_home(node, editable))
    for source in [s for s in (*scopes.prior, *frozen) if s is not None]:
        for node in walk(source.root):
            if node.type != "function_declarator":
                continue
            names = {n for n, _ in declarator_names(node, source)}
            if not names & called:
                continue
            declaration = next((up for up in _ancestors(node) if up.type in (
                "declaration", "field_declaration", "function_definition", "friend_declaration")), None)
            if source is not editable and editable is not None and declaration is not None and (
                    re.search(r"\b(?:__asm__|__asm|asm)\b", source.text_of(declaration)) or
                    any(_home(declaration, source) not in homes.get(n, set()) for n in names & called)):
                # round 285: a prototype in another namespace (reached by argument-dependent lookup), a class or a
                # block, whose parameter types read like the part's but name other types there, and an asm label
                # giving it a frozen body: only a plain prototype beside the part's own definition is the part
                return f"its h.run lambda calls {sorted(names & called)[0]}, which the frozen code declares " \
                       f"elsewhere than the editable part defines it, or under another symbol " \
                       f"({' '.join(source.text_of(node).split())[:60]})"
            if source is not editable and editable is not None and (
                    any(up.type == "template_declaration" for up in _ancestors(node)) or
                    any(_signature(node, source) not in defined.get(n, set()) for n in names & called)):
                # round 280: another overload, a template's specialization or a prototype whose body is frozen code
                # under another name (an asm label): overload resolution may pick it instead of the part's
                return f"its h.run lambda calls {sorted(names & called)[0]}, which the frozen code declares with " \
                       f"other parameters than the editable part defines ({' '.join(source.text_of(node).split())[:60]})"
            if problem := _result_problem(node, source, plain, macro_names):
                return f"its h.run lambda calls {sorted(names & called)[0]}, {problem}"
            parameters = node.child_by_field_name("parameters")
            for parameter in (parameters.named_children if parameters is not None else []):
                name = " ".join(source.text_of(parameter).split())[:60]
                default = parameter.child_by_field_name("default_value")
                if default is not None and not constant(default, source, plain):
                    return f"its h.run lambda calls {sorted(names & called)[0]}, declared with a default argument " \
                           f"({name}) that runs code in every call"
                kind = parameter.child_by_field_name("type")
                if kind is None or kind.type in ("primitive_type", "sized_type_specifier", "placeholder_type_specifier"):
                    continue  # a number; `auto`: a template's type, deduced from the plain value passed
                if kind.type not in ("type_identifier", "qualified_identifier"):
                    if plain.type(kind, source):
                        continue
                    # round 280: a template's type (`Span<float>`) or an elaborated one (`struct Tapper`) is a class
                    # whose constructor and destructor run in every call like any other frozen type's
                    return f"its h.run lambda calls {sorted(names & called)[0]}, whose parameter ({name}) is of a " \
                           "type that is not plain (a conversion would run in every call)"
                words = re.findall(r"[A-Za-z_]\w*", source.text_of(kind))
                bindings = plain.resolve(source.text_of(kind), kind, source) if kind.type == "type_identifier" else \
                    plain.qualified(words[:-1], words[-1], kind, source)
                if any(b.kind == "type" and b.node.type in ("type_parameter_declaration",
                                                             "optional_type_parameter_declaration") for b in bindings):
                    continue  # a template's type: deduced from the plain value passed
                if named := sorted(set(words) & macro_names):
                    # round 283: a type name the preprocessor reads otherwise (`#define Count Probe`)
                    return f"its h.run lambda calls {sorted(names & called)[0]}, whose parameter ({name}) names " \
                           f"{named[0]}, a macro of the program's (read as written here, another type to the compiler)"
                # the editable definition's types too: its declaration in the harness's unit names the preamble's; a
                # type nothing of the program binds is plain only as CUDA's own
                if all(b.src is not editable for b in bindings) and not plain.type(kind, source):
                    return f"its h.run lambda calls {sorted(names & called)[0]}, whose parameter ({name}) is of a " \
                           "frozen type that is not plain (a conversion would run in every call)"
    return None
