"""`kernelloop init`: a contract-v2 program around a user's own kernel, copied verbatim.

From a kernel file (with or without its own `main`) and the sizes the user gives, this writes
a program `optimize` can work on: the file's includes, macros and host helpers as the frozen
preamble; its `__global__`/`__device__` code, verbatim, plus a generated launcher as the
editable part; and a v2 harness that declares every pointer argument as a buffer with a role
(input, output, inout, scratch), the scalar arguments from the given sizes, and one alternative
size. Every guess (roles, element counts, launch configuration, input ranges) is written into
the file as a comment, and each can be overridden, so the user can check the result.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, Field

from ..errors import InputError
from .scanner import Item, function_name, scan_items, strip_comments

Role = Literal["input", "output", "inout", "scratch"]
ROLES: tuple[Role, ...] = ("input", "output", "inout", "scratch")

# Element types a buffer may have (the harness's DType list), by the spellings kernels use.
_ELEMENT_TYPES = {
    "float": "float", "double": "double", "__half": "__half", "half": "__half", "__nv_bfloat16": "__nv_bfloat16",
    "nv_bfloat16": "__nv_bfloat16", "int": "int32_t", "int32_t": "int32_t", "unsigned": "uint32_t",
    "unsigned int": "uint32_t", "uint32_t": "uint32_t", "long long": "int64_t", "int64_t": "int64_t",
    "unsigned long long": "uint64_t", "uint64_t": "uint64_t", "size_t": "uint64_t", "short": "int16_t",
    "int16_t": "int16_t", "unsigned short": "uint16_t", "uint16_t": "uint16_t", "char": "int8_t",
    "signed char": "int8_t", "int8_t": "int8_t", "unsigned char": "uint8_t", "uint8_t": "uint8_t",
}
_FLOATING = {"float", "double", "__half", "__nv_bfloat16"}
_QUALIFIERS = re.compile(r"\b(?:const|volatile|__restrict__|__restrict|restrict|struct)\b")


class Param(BaseModel):
    name: str
    type: str  # as written, qualifiers included
    element: str  # the harness's element type (pointers) or the scalar's type
    pointer: bool
    const: bool


class InitSpec(BaseModel):
    """What the user tells `init` (the CLI's options)."""

    kernel: str | None = None
    values: dict[str, list[str]] = Field(default_factory=dict)  # scalar -> [default, alternative]
    counts: dict[str, str] = Field(default_factory=dict)  # pointer -> element count (C expression)
    roles: dict[str, Role] = Field(default_factory=dict)
    ranges: dict[str, tuple[str, str]] = Field(default_factory=dict)  # integer input -> [lo, hi)
    grid: str | None = None
    block: str | None = None
    calls: int = Field(20, ge=1, le=4000)
    warmup: int = Field(2, ge=1)


class InitResult(BaseModel):
    program: str
    kernel: str
    params: list[Param]
    roles: dict[str, Role]
    notes: list[str]  # what was guessed, for the user to check


def parse_params(head: str) -> list[Param]:
    """The parameters of a function head, from its last top-level parenthesis group."""
    clean = strip_comments(head)
    close = clean.rfind(")")
    depth, open_at = 0, -1
    for i in range(close, -1, -1):
        if clean[i] == ")":
            depth += 1
        elif clean[i] == "(":
            depth -= 1
            if depth == 0:
                open_at = i
                break
    if open_at < 0:
        raise InputError("cannot read the kernel's parameter list")
    inner = clean[open_at + 1:close]
    parts, depth, cur = [], 0, ""
    for ch in inner:
        depth += ch in "(<[" and 1 or 0
        depth -= ch in ")>]" and 1 or 0
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    if cur.strip() and cur.strip() != "void":
        parts.append(cur)
    params: list[Param] = []
    for part in parts:
        text = " ".join(part.split("=")[0].split())
        m = re.match(r"^(?P<type>.*?)(?P<name>[A-Za-z_]\w*)\s*(?:\[\s*\])?$", text)
        if m is None or not m.group("type").strip():
            raise InputError(f"cannot read the kernel parameter {text!r}: give it a name")
        ctype = m.group("type").strip()
        pointer = "*" in ctype or text.rstrip().endswith("]")
        base = " ".join(_QUALIFIERS.sub(" ", ctype.replace("*", " ")).split())
        element = _ELEMENT_TYPES.get(base)
        if element is None:
            raise InputError(f"parameter {m.group('name')} has type {ctype!r}, which init cannot generate "
                             "(numbers and pointers to numbers only); write the harness by hand (docs/contract.md)")
        const = pointer and bool(re.search(r"\bconst\b", ctype.split("*")[0]))
        params.append(Param(name=m.group("name"), type=ctype, element=element, pointer=pointer, const=const))
    return params


def _pick_kernel(items: list[Item], wanted: str | None) -> Item:
    kernels = [i for i in items if i.is_function_definition and "__global__" in strip_comments(i.head)]
    names = [function_name(i) or "" for i in kernels]
    if not kernels:
        raise InputError("no __global__ kernel defined in the file")
    if wanted is not None:
        for item, name in zip(kernels, names):
            if name == wanted:
                return item
        raise InputError(f"no kernel named {wanted!r}; the file defines: {', '.join(names)}")
    if len(kernels) > 1:
        raise InputError(f"the file defines {len(kernels)} kernels ({', '.join(names)}); choose one with --kernel")
    return kernels[0]


def _generator(element: str, value_range: tuple[str, str] | None) -> tuple[str, str]:
    """The generator expression for an input, and the comment saying what it draws."""
    if element in _FLOATING:
        return f"kl::Uniform<{element}>{{-1.0f, 1.0f}}", "uniform in [-1, 1) (stressed with large values too)"
    lo, hi = value_range or ("0", "16")
    return f"kl::UniformInt<{element}>{{{lo}, {hi}}}", f"integers in [{lo}, {hi}): GUESS unless --range gave it"


def generate(source: str, spec: InitSpec, source_name: str = "kernel.cu") -> InitResult:
    """A contract-v2 program around `source`'s kernel (see the module's docstring)."""
    items = scan_items(source)
    kernel_item = _pick_kernel(items, spec.kernel)
    kernel = function_name(kernel_item) or "kernel"
    if re.search(r"\btemplate\s*<", strip_comments(kernel_item.head)):
        raise InputError(f"{kernel} is a template kernel: init cannot choose its template arguments; "
                         "write its harness by hand (docs/contract.md)")
    params = parse_params(kernel_item.head)
    notes: list[str] = []
    names = {p.name for p in params}
    for given in [*spec.values, *spec.counts, *spec.roles, *spec.ranges]:
        if given not in names:
            raise InputError(f"{kernel} has no parameter {given!r}; its parameters: {', '.join(sorted(names))}")
    scalars = [p for p in params if not p.pointer]
    pointers = [p for p in params if p.pointer]
    if not pointers:
        raise InputError(f"{kernel} takes no pointer: nothing to compare")
    for p in scalars:
        if p.name not in spec.values:
            raise InputError(f"give the value of {kernel}'s argument {p.name} ({p.type}): --set {p.name}=DEFAULT,ALTERNATIVE")
    alternatives = [len(spec.values[p.name]) for p in scalars]
    options = max(alternatives, default=1)
    if any(n not in (1, options) for n in alternatives):
        raise InputError("every --set gives the same number of sizes (a default, then the same alternatives)")
    integer_scalars = [p for p in scalars if p.element not in _FLOATING]
    counts: dict[str, str] = {}
    for p in pointers:
        if p.name in spec.counts:
            counts[p.name] = spec.counts[p.name]
        elif len(integer_scalars) == 1:
            counts[p.name] = integer_scalars[0].name
            notes.append(f"{p.name} holds {integer_scalars[0].name} elements (guessed: the only integer argument; "
                         f"--count {p.name}=EXPR to change)")
        else:
            raise InputError(f"how many elements does {p.name} hold? give --count {p.name}=EXPR "
                             f"(a C expression of {', '.join(s.name for s in integer_scalars) or 'the sizes'})")
    # A pointer without const may be read, written or both: inout is the safe guess (fresh inputs
    # before every call, compared after), where "output" would feed a read-only buffer the same
    # poison every call and make the experiment blind (a red team exploited exactly that).
    roles: dict[str, Role] = {}
    for p in pointers:
        roles[p.name] = spec.roles.get(p.name) or ("input" if p.const else "inout")
        if p.name not in spec.roles:
            notes.append(f"{p.name} is an {roles[p.name]} (guessed from {'const' if p.const else 'no const'}; "
                         f"--role {p.name}=output if the kernel only writes it, or input|scratch)")
    if not any(roles[p.name] in ("output", "inout") for p in pointers):
        raise InputError(f"{kernel} has no output: mark the pointer it writes with --role NAME=output (or inout)")
    if not any(roles[p.name] in ("input", "inout") for p in pointers):
        raise InputError(f"{kernel} reads nothing the harness generates (every pointer is an output or scratch): "
                         "its results could not depend on the inputs; mark what it reads --role NAME=input")
    for p in pointers:
        if roles[p.name] in ("input", "inout") and p.element not in _FLOATING:
            lo, hi = spec.ranges.get(p.name, ("0", "16"))
            notes.append(f"{p.name} holds integers in [{lo}, {hi}) (--range {p.name}=LO,HI for the range your kernel "
                         "must handle: indices must stay in bounds; larger values test more)")
    if spec.grid is None or spec.block is None:
        if len(integer_scalars) != 1 or spec.grid is not None or spec.block is not None:
            raise InputError("give the launch configuration: --grid EXPR --block EXPR (C expressions of the "
                             "arguments, e.g. --grid 'dim3((n + 15) / 16, (m + 15) / 16)' --block 'dim3(16, 16)')")
        n = integer_scalars[0].name
        grid, block = f"({n} + 255) / 256", "256"
        notes.append(f"launched as <<<({n} + 255) / 256, 256>>> (guessed: one thread per element; "
                     "--grid/--block to change)")
    else:
        grid, block = spec.grid, spec.block
    if options == 1:
        notes.append("one size only: give an alternative size (--set NAME=DEFAULT,ALTERNATIVE, an odd one) so "
                     "a kernel specialised to one size is caught")
    program = _render(source, items, kernel, params, spec, roles, counts, grid, block, options, notes, source_name)
    return InitResult(program=program, kernel=kernel, params=params, roles=roles, notes=notes)


def _render(source: str, items: list[Item], kernel: str, params: list[Param], spec: InitSpec,
            roles: dict[str, Role], counts: dict[str, str], grid: str, block: str, options: int,
            notes: list[str], source_name: str) -> str:
    device = [i for i in items if i.is_device_item]
    frozen = [i for i in items if not i.is_device_item and function_name(i) != "main"]
    dropped_main = any(function_name(i) == "main" for i in items)
    signature = ", ".join(f"{p.type} {p.name}" for p in params)
    arguments = ", ".join(p.name for p in params)
    lines = [f"// Generated by `kernelloop init` from {source_name}: the kernel code between the markers is",
             "// copied verbatim; check every line marked GUESS before you optimize.",
             *(f"// GUESS: {n}" for n in notes)]
    if dropped_main:
        lines.append(f"// {source_name}'s own main() was left out: the harness below replaces it.")
    lines.append("")
    lines += [i.text for i in frozen if i.start < device[0].start]
    lines += ["", "// kernelloop: editable begin"]
    lines += [i.text for i in device]
    lines += ["", f"void launch_{kernel}({signature}) {{",
              f"  {kernel}<<<{grid}, {block}>>>({arguments});", "}", "// kernelloop: editable end", ""]
    lines += [i.text for i in frozen if i.start > device[0].start]
    lines += ["#include <cstdio>", "#include <vector>", "#include <kernelloop_harness.cuh>", "", "int main() {",
              "  kl::Harness h;"]
    for p in params:
        if p.pointer:
            continue
        values = spec.values[p.name]
        if len(values) > 1:
            lines.append(f"  const {p.element} {p.name} = h.size<{p.element}>({{{', '.join(values)}}});")
        else:
            lines.append(f"  const {p.element} {p.name} = ({p.element})({values[0]});")
    for p in params:
        if not p.pointer:
            continue
        role, count = roles[p.name], f"(size_t)({counts[p.name]})"
        if role in ("input", "inout"):
            gen, what = _generator(p.element, spec.ranges.get(p.name))
            lines.append(f"  {p.element}* {p.name} = h.{role}<{p.element}>(\"{p.name}\", {count}, {gen});  // {what}")
        else:
            lines.append(f"  {p.element}* {p.name} = h.{role}<{p.element}>(\"{p.name}\", {count});")
    lines.append(f"  h.run([&] {{ launch_{kernel}({arguments}); }}, "
                 f"{{.warmup = {spec.warmup}, .calls = {spec.calls}, .flops = 0.0}});")
    for p in params:
        if p.pointer and roles[p.name] in ("output", "inout"):
            lines += [f"  {{  // a checksum of {p.name}: the verifier compares every element too",
                      f"    std::vector<{p.element}> v = h.fetch({p.name});",
                      "    double sum = 0.0;",
                      f"    for (const auto& x : v) sum += {'(double)(float)x' if p.element in _FLOATING else '(double)x'};",
                      f"    printf(\"{p.name} sum %.9g\\n\", sum);", "  }"]
    lines += ["  return 0;", "}", ""]
    return "\n".join(lines)
