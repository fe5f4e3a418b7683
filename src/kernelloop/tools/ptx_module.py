"""Reading a PTX module as text: its functions (kernels and device functions) and variables, by
name. The one reader behind init's state check (what a kernel's body names) and its copy check
(a kernel's text with everything it reaches)."""

from __future__ import annotations

import heapq
import re
from dataclasses import dataclass, field

_FUNCTION = re.compile(r"^(?P<attributes>(?:\.visible\s+|\.weak\s+|\.extern\s+)*)\.(?:entry|func)\s+"
                       r"(?:\([^)]*\)\s*)?(?P<name>[\w$.]+)")
_VARIABLE = re.compile(r"^(?:\.visible\s+|\.weak\s+|\.extern\s+)*\.(?:global|const|shared)\s[^;]*?(?P<name>[\w$]+)"
                       r"(?:\[\d*\])*\s*(?:=|;)")
NAME = re.compile(r"[A-Za-z_$][\w$]*")
# A module-scope statement as nvcc writes it, whitespace made single spaces: a function's
# declaration (`.extern .func (.param .b32 func_retval0) vprintf ( ... ) ;`) or one variable with at
# most one value (`.global .attribute(.managed) .align 4 .u32 mv;`, `.const .align 4 .b8 cf[16] =
# {0, 0, 128, 63};`, `.global .align 8 .u64 msg = generic($str);`). ptxas reads more (`.alias`,
# `.common`, several declarators, `.global.f32` without a space: red team round 184); a module
# holding anything else is unreadable.
_ATTRIBUTES = r"(?:(?:\.visible|\.weak|\.extern) )*"
_NVCC_DECLARATION = re.compile(_ATTRIBUTES + r"\.(?:entry|func) (?:\([^()]*\) )?[\w$.]+ ?(?:\([^()]*\) ?)?"
                               r"(?:\.noreturn ?)?;")
# A function's header up to its body's `{`, with the performance directives nvcc writes there.
_NVCC_HEADER = re.compile(_ATTRIBUTES + r"\.(?:entry|func) (?:\([^()]*\) )?[\w$.]+ ?(?:\([^()]*\) ?)?"
                          r"(?:\.(?:maxntid|reqntid|minnctapersm|maxnreg|maxclusterrank|reqnctapercluster|explicitcluster"
                          r"|noreturn)(?: \d+(?:, ?\d+)*)? ?)*")
_NVCC_VARIABLE = re.compile(_ATTRIBUTES + r"\.(?:global|const|shared) (?:\.attribute\(\.managed\) )?(?:\.align \d+ )?"
                            r"(?:\.v[248] )?\.[a-z]\w* [\w$]+(?:\[\d*\])*(?: = (?:\{[^;{}]*(?:\{[^;{}]*\}[^;{}]*)*\}"
                            r"|[^;,{}]+))? ?;")


@dataclass
class PtxFunction:
    name: str
    extern: bool = False  # declared `.extern`: defined in another module
    lines: list[str] = field(default_factory=list)  # every line from its header to its closing brace (or `;`)
    body: list[str] = field(default_factory=list)  # the lines between its braces

    def names_used(self) -> set[str]:
        """Every name its body uses (the functions it calls or takes the address of among them)."""
        return {n for line in self.body for n in NAME.findall(line.split("//", 1)[0])}


@dataclass
class PtxModule:
    functions: dict[str, PtxFunction] = field(default_factory=dict)
    variables: dict[str, str] = field(default_factory=dict)  # name -> its statements, one per line
    # Module-scope text no nvcc writes (two statements in one, a directive with more on its line, a
    # body without a function's header, a statement never ended): what it holds cannot be told, so
    # a digest of the module reads it whole (red team round 183).
    unreadable: bool = False
    # nvcc writes every module-scope variable before the first function's body; one after it can
    # only come from inline assembly that closed its function (red team rounds 182-185), and marks
    # the module unreadable
    functions_defined: bool = False


# A string ends at the next `"`: ptxas reads no escapes in one (red team round 184: `\"` ended it).
_LEXEME = re.compile(r'"[^"]*"?|//|/\*')


def line_code(line: str, in_comment: bool) -> tuple[str, bool]:
    """LINE without its comments (`//` to the end, `/* */` across lines) and with each string literal
    made `""` (a `.pragma "}"` holds no brace: red team round 181), and whether a block comment is
    still open after it."""
    code, rest = "", line
    while rest:
        if in_comment:
            end = rest.find("*/")
            if end < 0:
                return code, True
            rest, in_comment = rest[end + 2:], False
            continue
        m = _LEXEME.search(rest)
        if m is None:
            return code + rest, False
        code += rest[:m.start()]
        if m.group(0) == "//":
            return code, False
        if m.group(0) == "/*":
            code, rest, in_comment = code + " ", rest[m.end():], True
            continue
        code, rest = code + '""', rest[m.end():]
    return code, in_comment


# Module-scope directives that end at the end of their line, without a `;`.
_LINE_DIRECTIVE = re.compile(r"^\s*\.(?:version|target|address_size|file)\b")


def read_ptx(text: str) -> PtxModule:
    """Functions (a name declared, then defined, keeps both in `lines`) and module-scope variables.
    Read as ptxas reads it, not line by line: a module-scope statement runs to its `;` or to the `{`
    of a function's body, across lines (a variable's value or a function's name on the next line:
    red team round 182 hid both from a line-by-line reading), and a body ends where its braces close,
    counted outside comments and strings (inline assembly is copied as written: a `}` at the start
    of one of its lines is no end, round 178)."""
    module = PtxModule()
    current: PtxFunction | None = None
    depth = 0  # braces open in the current function's body
    in_comment = False
    pending: list[str] = []  # the lines of the module-scope statement being read
    pending_code: list[str] = []
    for line in text.splitlines():
        code, in_comment = line_code(line, in_comment)
        if depth > 0:
            assert current is not None
            current.lines.append(line)
            depth += code.count("{") - code.count("}")
            if depth <= 0:
                depth, current = 0, None
            else:
                current.body.append(line)
            continue
        if not pending and _LINE_DIRECTIVE.match(code):
            module.unreadable |= bool(re.search(r"[;{}]|\s\.(?:global|const|shared|local|func|entry|extern|visible|weak)\b",
                                                 code))
            continue
        pending.append(line)
        pending_code.append(code)
        statement = " ".join(" ".join(pending_code).split())
        header = statement[:statement.index("{")].strip() if "{" in code else ""
        module.unreadable |= ";" in header or (";" in statement.rstrip(";") and "{" not in statement)
        if "{" in code and (m := _FUNCTION.match(header)) is None and not _VARIABLE.match(statement):
            module.unreadable = True  # a body without a function's header
        if "{" in code and (m := _FUNCTION.match(header)) is not None:  # a function's body opens
            module.unreadable |= _NVCC_HEADER.fullmatch(header) is None
            current = module.functions.setdefault(m.group("name"), PtxFunction(m.group("name")))
            module.functions_defined = True
            current.extern |= ".extern" in m.group("attributes")
            current.lines += pending
            opened = code[code.index("{"):]
            depth = opened.count("{") - opened.count("}")
            if depth <= 0:  # a body on one line
                depth, current = 0, None
            pending, pending_code = [], []
        elif statement.endswith(";"):
            if (m := _FUNCTION.match(statement)) is not None:  # a declaration without a body
                declared = module.functions.setdefault(m.group("name"), PtxFunction(m.group("name")))
                declared.extern |= ".extern" in m.group("attributes")
                declared.lines += pending
                module.unreadable |= _NVCC_DECLARATION.fullmatch(statement) is None
            elif (m := _VARIABLE.match(statement)) is not None and _NVCC_VARIABLE.fullmatch(statement) \
                    and not module.functions_defined:
                # every statement of the name, in order: ptxas keeps a definition's value under a later
                # `.extern` declaration (red team round 185: the value was left out of the digest)
                known = module.variables.get(m.group("name"))
                module.variables[m.group("name")] = statement if known is None else f"{known}\n{statement}"
            else:
                module.unreadable = True  # a statement nvcc never writes (red team round 184)
            pending, pending_code = [], []
        elif not statement:
            pending, pending_code = [], []  # blank lines and comments between statements
    module.unreadable |= bool(" ".join(" ".join(pending_code).split())) or depth > 0
    return module


# Instructions that only compute registers from registers, immediates and addresses of names: no
# memory, no other lane, no clock, no trap. Any other instruction is *ordered*: it keeps its place
# relative to every other ordered one.
_PURE_OPCODES = frozenset("""
    add sub mul mad mul24 mad24 sad div rem abs neg min max popc clz bfind fns brev bfe bfi dp4a dp2a and
    or xor not cnot lop3 shf shl shr mov cvt cvta set setp selp slct testp copysign rcp sqrt rsqrt sin cos
    lg2 ex2 tanh fma prmt
""".split())
# Modifiers that make an instruction read or write state no operand names: `.cc` writes the carry
# flag that `addc`/`subc`/`madc` read (red team round 176 reordered two `add.cc` around an `addc`).
_IMPLICIT_STATE = frozenset({"cc"})
# The virtual registers nvcc's PTX declares (`.reg .b32 %r<9>;`); any other %name (%tid.x, %clock,
# %envreg3, %pm0) is a special register, read as an ordered instruction.
_VIRTUAL_REGISTER = re.compile(r"%(?:r|rd|rs|f|fd|p|h|hh)\d+")
_REGISTER = re.compile(r"%[\w.]+")
_GUARD = re.compile(r"^@!?%\w+\s+")
# a name among an instruction's operands: a register (`%r1`, `%tid.x`, or one declared without `%`)
# or a symbol; numbers (`0f3F800000`, `-1`) start with a digit or a sign
_OPERAND_NAME = re.compile(r"[%A-Za-z_$][\w$.]*")


# One plain instruction as ptxas reads a line: an optional guard, an opcode, operands, one `;` and at
# most a `//` comment after it. A line with anything else (a label before the instruction, a block
# comment's `/*` or `*/`, a second `;`) is no instruction that may move: ptxas reads what the line
# holds otherwise than one instruction (red team round 177 commented out a neighbour's line with
# `/* ;`, and moved an instruction past `LOOP: add ...;` into a loop).
_PLAIN_INSTRUCTION = re.compile(r"^(?:@!?%\w+\s+)?[a-z][\w.]*(?:\s+[^;:/*]*)?;$")


def _instruction(line: str) -> str | None:
    """The instruction a body line holds, whitespace-normalised; None for anything else (a label, a
    directive, a brace, a comment, a branch, a return, a line ptxas reads otherwise than one plain
    instruction): the places no instruction moves across."""
    code, _, comment = line.partition("//")
    text = " ".join(code.split())
    if "/*" in comment or "*/" in comment or not _PLAIN_INSTRUCTION.match(text):
        return None
    opcode = _GUARD.sub("", text).split(" ", 1)[0].rstrip(";")
    if opcode.split(".", 1)[0] in ("bra", "brx", "ret", "exit", "call", "trap", "brkpt"):
        return None
    return text


def _pure(text: str) -> bool:
    """Whether an instruction computes registers only: a listed opcode whose every operand is one of
    nvcc's virtual registers or a number. A bare name (a register inline assembly declared without
    `%`, a variable's address) makes it ordered, since the dependences are read from `%` names."""
    opcode, _, operands = _GUARD.sub("", text).rstrip(";").partition(" ")
    base, *modifiers = opcode.split(".")
    return base in _PURE_OPCODES and not set(modifiers) & _IMPLICIT_STATE and all(
        _VIRTUAL_REGISTER.fullmatch(t) for t in _OPERAND_NAME.findall(operands))


def _canonical_run(run: list[str]) -> list[str]:
    """A straight-line run of instructions in a canonical order that keeps every dependence: two
    instructions that name a register in common (read or written: taken as both), or are both
    ordered, keep their order; among the instructions whose predecessors have all been placed, the
    least text goes first. Any order that keeps those dependences computes the same (registers are
    the thread's own; a pure instruction touches nothing else), so two runs that are such
    reorderings of each other get the same order, and a run that differs otherwise does not."""
    preds: list[set[int]] = [set() for _ in run]
    last_touch: dict[str, int] = {}
    last_ordered: int | None = None
    for i, text in enumerate(run):
        for reg in set(_REGISTER.findall(text)):
            if reg in last_touch:
                preds[i].add(last_touch[reg])
            last_touch[reg] = i
        if not _pure(text):
            if last_ordered is not None:
                preds[i].add(last_ordered)
            last_ordered = i
    succs: list[list[int]] = [[] for _ in run]
    waiting = [len(p) for p in preds]
    for i, p in enumerate(preds):
        for j in p:
            succs[j].append(i)
    ready = [(run[i], i) for i in range(len(run)) if waiting[i] == 0]
    heapq.heapify(ready)
    out: list[str] = []
    while ready:
        text, i = heapq.heappop(ready)
        out.append(text)
        for k in succs[i]:
            waiting[k] -= 1
            if waiting[k] == 0:
                heapq.heappush(ready, (run[k], k))
    return out


def schedule_neutral(lines: list[str]) -> list[str]:
    """A function's PTX lines with each straight-line run of instructions (between labels, branches,
    calls, directives, braces and comments) in its canonical order (_canonical_run), unless it holds
    inline assembly (then as written): two builds whose compiler
    scheduled the same instructions differently read alike (a debug build's dropped assertion moved
    an `and` past a load: a rewrite refused for its schedule)."""
    # A function that holds the program's own assembly (nvcc marks every asm statement `// begin inline
    # asm`) is read as written: the assembly's text could print a marker of its own, so where it ends
    # cannot be told, and nvcc copies it as written in every build anyway.
    if any("inline asm" in line for line in lines):
        return list(lines)
    out: list[str] = []
    run: list[str] = []
    for line in lines:
        text = _instruction(line)
        if text is not None:
            run.append(text)
            continue
        out += _canonical_run(run)
        run = []
        out.append(line)
    return out + _canonical_run(run)
