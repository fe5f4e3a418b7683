"""Whether a function compiles to the same code in two builds: a fingerprint of its machine code
(host) or PTX (device) that two translation units can be compared on.

`init` copies the user's launcher and kernels into a program of its own. What it copies must
compile to what the user's file compiles to: a `#if 0` block whose contents moved out of it, a
macro the harness defines, an overload that appears beside the kept code would all change what
the baseline computes without any state being involved (red team round 24: a dead overload
became the one called). Comparing the compiled code checks the result of the copy, however the
copy went wrong.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from pathlib import Path

from elftools.elf.elffile import ELFFile
from elftools.elf.relocation import RelocationSection
from elftools.elf.sections import SymbolTableSection

from .ptx_module import NAME, read_ptx, schedule_neutral

# x86-64 relocation types and the bytes each patches (the rest are 4 bytes)
_EIGHT_BYTE_RELOCATIONS = {1, 24}  # R_X86_64_64, R_X86_64_PC64
_PC_RELATIVE = {2, 4, 9, 24, 41, 42}  # PC32, PLT32, GOTPCREL, PC64, GOTPCRELX, REX_GOTPCRELX


class HostCode:
    """A host function's code as host_fingerprints reads it, compared with another's (`==`) as the
    machine runs it: every byte and every relocation's target the same, except that a constant in a
    merged pool is compared on the bytes both entries hold. The compiler puts one constant in a pool
    of the width it likes (a float's -inf in 4-byte `.rodata.cst4` alone, in an 8-byte entry beside
    the harness's constants: kept-aside set 11's row max), and an instruction reads no further than
    its entry; the instructions themselves are compared byte for byte, so both read the same width,
    which neither entry is shorter than. (Host code holds no inline assembly: the policy refuses it.)"""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, HostCode):
            return NotImplemented
        mine, theirs = _POOL_ENTRY.split(self.text), _POOL_ENTRY.split(other.text)
        if len(mine) != len(theirs):
            return False
        # split keeps the captured entries at odd positions, the text between them at even ones
        for k, (a, b) in enumerate(zip(mine, theirs, strict=True)):
            if k % 2 == 0 and a != b:
                return False
            if k % 2 == 1 and (a[:len(b)] != b[:len(a)] or not (a and b) and a != b):
                return False
        return True

    __hash__ = None  # type: ignore[assignment]  # equal values need not share a digest

    def __repr__(self) -> str:
        return f"HostCode({hashlib.sha256(self.text.encode()).hexdigest()[:12]})"


_POOL_ENTRY = re.compile(r"cst\[([0-9a-f]*)\]")


def host_fingerprints(obj: Path, names: set[str], opaque: Callable[[str], bool] | None = None) -> dict[str, HostCode]:
    """For each function of `obj` whose symbol is in `names`: its bytes and those of every function
    and variable of the object it reaches, with every relocation replaced by what it refers to (a
    symbol's name, the bytes of a variable, constant or string), so the same code in two objects
    compares equal (HostCode). A symbol `opaque` names counts by its name alone, its code not
    followed (the compiler's registration of a unit's kernels, which differs by unit)."""
    with open(obj, "rb") as handle:
        elf = ELFFile(handle)
        symtab = elf.get_section_by_name(".symtab")
        if not isinstance(symtab, SymbolTableSection):
            return {}
        symbols = list(symtab.iter_symbols())
        defined = {s.name: s for s in symbols if s.name and isinstance(s["st_shndx"], int)
                   and s["st_info"]["type"] in ("STT_FUNC", "STT_OBJECT")}
        texts: dict[str, str] = {}
        edges: dict[str, set[str]] = {}
        for name, symbol in defined.items():
            texts[name], edges[name] = _describe(elf, symbols, symbol)
        prints: dict[str, HostCode] = {}
        for root in sorted(names & {n for n, s in defined.items() if s["st_info"]["type"] == "STT_FUNC"}):
            seen, todo = set(), [root]
            while todo:
                name = todo.pop()
                if name not in seen:
                    seen.add(name)
                    if opaque is None or name == root or not opaque(name):
                        todo += [t for t in edges.get(name, ()) if t in defined and t not in seen]
            prints[root] = HostCode("\n".join(sorted(
                f"{_stable_name(defined[n])}=" + ("(opaque)" if opaque is not None and n != root and opaque(n)
                                                  else texts[n]) for n in seen)))
        return prints


def _describe(elf: ELFFile, symbols: list, symbol) -> tuple[str, set[str]]:
    """A symbol's bytes with its relocations resolved to names and contents, and the names it uses."""
    section = elf.get_section(symbol["st_shndx"])
    start, size = symbol["st_value"], symbol["st_size"]
    if section["sh_type"] == "SHT_NOBITS":
        return f"zeros:{size}", set()
    code = bytearray(section.data()[start:start + size])
    described: list[str] = []
    uses: set[str] = set()
    relocations = elf.get_section_by_name(f".rela{section.name}")
    if isinstance(relocations, RelocationSection):
        for rel in relocations.iter_relocations():
            offset = rel["r_offset"] - start
            if not 0 <= offset < size:
                continue
            kind = rel["r_info_type"]
            width = 8 if kind in _EIGHT_BYTE_RELOCATIONS else 4
            code[offset:offset + width] = bytes(width)
            target = symbols[rel["r_info_sym"]]
            # A static function is called through its section's symbol (-ffunction-sections): name the
            # function that lies there and follow it, as a call by name is (red team round 52 hid a
            # build switch two calls down a static function's chain).
            function = _function_at(elf, symbols, target, rel, kind)
            if function is not None:
                uses.add(function.name)
                described.append(f"{offset}:{kind}:{_stable_name(function)}")
                continue
            uses.add(target.name)
            described.append(f"{offset}:{kind}:{_target(elf, target, rel, kind)}")
    return bytes(code).hex() + "|" + ";".join(described), uses


def _function_at(elf: ELFFile, symbols: list, target, rel, kind: int):
    """The function a relocation against an executable section's symbol points at, or None."""
    if target["st_info"]["type"] != "STT_SECTION" or not isinstance(target["st_shndx"], int):
        return None
    section = elf.get_section(target["st_shndx"])
    if not section["sh_flags"] & 0x4:  # SHF_EXECINSTR
        return None
    where = rel["r_addend"] + (4 if kind in _PC_RELATIVE else 0) + target["st_value"]
    return next((s for s in symbols if s["st_info"]["type"] == "STT_FUNC" and s["st_shndx"] == target["st_shndx"]
                 and s["st_value"] == where and s.name), None)


def _target(elf: ELFFile, symbol, rel, kind: int) -> str:
    """What a relocation refers to, independent of where the compiler laid things out."""
    addend = rel["r_addend"] + (4 if kind in _PC_RELATIVE else 0)
    # a section, or a local label the compiler numbers in order (.LC0): named by what lies there
    if symbol["st_info"]["type"] != "STT_SECTION" and not symbol.name.startswith(".L"):
        return f"{_stable_name(symbol)}{addend:+d}"
    if not isinstance(symbol["st_shndx"], int):
        return f"{symbol.name}{addend:+d}"
    addend += symbol["st_value"]
    section = elf.get_section(symbol["st_shndx"])
    # `.rodata.CSWTCH.17`: numbered in order, like local names; `.text._ZN..._GLOBAL__N__<digest>...`:
    # a function of an anonymous namespace's section, named by the file (a kernel in `namespace {}`)
    label = unit_neutral(re.sub(r"\.\d+$", ".N", section.name))
    if section["sh_type"] == "SHT_NOBITS":
        return f"{label}:zeros"
    data = section.data()
    if section["sh_flags"] & 0x20:  # SHF_STRINGS: a string, read to its end, by its text alone (merged
        end = data.find(b"\0", addend)  # strings sit in the pool of whichever function used them first)
        return f"string:{data[addend:end if end >= 0 else len(data)].hex()}"
    # A merged constant section holds entries of sh_entsize bytes: the one referred to, marked so that
    # HostCode compares it on the bytes both builds' entries hold (dim3's 1, 1 as 8 bytes here, as 16
    # there; a float alone in 4 bytes here, padded to 8 there). Any other data section is hashed whole:
    # an index computed at run time reaches all of it (round 26: a table compared 32 bytes from its
    # start, its second half differing).
    if section["sh_entsize"]:
        entry = data[addend:addend + section["sh_entsize"]]
        return f"{_CONSTANT_POOL.sub('', label)}:cst[{entry.hex()}]"
    return f"{label}{addend:+d}:{hashlib.sha256(data).hexdigest()}"


_CONSTANT_POOL = re.compile(r"cst\d+$")  # .rodata.cst8, .rodata.cst16: merged pools of one width each


_UNIT_NAMESPACE = re.compile(r"(\d+)_GLOBAL__N__")


def unit_neutral(name: str) -> str:
    """A mangled name with nvcc's name for an anonymous namespace (`35_GLOBAL__N__<digest>_<n>_<file>_cu_
    <first symbol>`, from the file name and contents) made `_GLOBAL__N_`: the same code compiled in
    another file has another such name, and nothing else differs."""
    changed = False
    while m := _UNIT_NAMESPACE.search(name):
        end = m.start(1) + len(m.group(1)) + int(m.group(1))
        name = f"{name[:m.start()]}11_GLOBAL__N_{name[end:]}"
        changed = True
    # nvcc's launch stub of such a kernel spells the kernel's mangled name inside its own, whose
    # length counts the file's name too: `_ZL111__device_stub__ZN43_GLOBAL__N__...` (internal), or
    # `_Z104__device_stub__ZN5myext43_GLOBAL__N__...` (an anonymous namespace inside a named one)
    return re.sub(r"(?<=Z)(L?)\d+(?=__device_stub__)", r"\1", name) if changed else name


def _stable_name(symbol) -> str:
    """A symbol's name without the number the compiler gives local ones in order of appearance
    (`CSWTCH.17`, `value.0`): it differs between two files that hold the same code in another order;
    and without the file's name in an anonymous namespace's."""
    if symbol["st_info"]["bind"] == "STB_LOCAL":
        return unit_neutral(re.sub(r"\.\d+$", ".N", symbol.name))
    return unit_neutral(symbol.name)


# Names the PTX writer numbers by position in the module: a label (its function's index and its own
# number), a string, a frame's depot; and the file-named part of a name in an anonymous namespace
# (`36_GLOBAL__N__<digest>_6_abc_cu_...`). Each distinct spelling is renamed in order of first
# appearance in the text digested, to a name with `#`, which no PTX name can hold: a bijection onto
# names nothing else spells, so the position and the file say nothing, two names never become one,
# and inline assembly cannot spell a renamed form (red team round 179: `__local_depot7` and a literal
# `__local_depot_kl0`, and two registers spelled `_Z13_GLOBAL__N__a` / `..._b`, read alike).
_POSITIONAL = re.compile(r"\$L__BB\d+_\d+|\$str(?:\$\d+)?(?![\w$])|__local_depot\d+")


_MANGLED = re.compile(r"\b_Z\w+")


def _anonymous_namespace_spans(text: str) -> list[tuple[int, int]]:
    """Where TEXT spells nvcc's length-prefixed name of an anonymous namespace (unit_neutral's), inside
    a mangled name and wholly within it: a length that reaches past the name's end is no such name
    (red team round 180: `1300_GLOBAL__N__` in a comment and in a function's own name would have
    swallowed the code after it)."""
    spans = []
    for token in _MANGLED.finditer(text):
        for m in _UNIT_NAMESPACE.finditer(token.group(0)):
            end = m.start(1) + len(m.group(1)) + int(m.group(1))
            if end <= len(token.group(0)):
                spans.append((token.start() + m.start(1), token.start() + end))
    return spans


def _renumbered(text: str) -> str:
    names: dict[str, str] = {}

    def placeholder(kind: str, name: str) -> str:  # closed by `#`: `#N1#` then `0` is not `#N10#`
        return names.setdefault(name, f"#{kind}{len(names)}#")
    out, at = [], 0
    for start, end in _anonymous_namespace_spans(text):
        if start >= at:
            out += [text[at:start], placeholder("N", text[start:end])]
            at = end
    text = "".join(out) + text[at:]
    return _POSITIONAL.sub(lambda m: placeholder(
        "L" if m.group(0).startswith("$L") else "S" if m.group(0).startswith("$s") else "D", m.group(0)), text)


def device_fingerprints(ptx: str, kernels: set[str]) -> dict[str, str]:
    """For each kernel of a PTX module whose name is in `kernels`: a digest of its text and of
    every device function and variable it reaches, with position-dependent names made neutral and
    each straight-line run of instructions in a canonical order that keeps its dependences
    (ptx_module.schedule_neutral: the same code scheduled otherwise digests alike).
    Names in an anonymous namespace count unit_neutral (pass `kernels` so too)."""
    module = read_ptx(ptx)  # as written: a name's file-named part is renamed one to one (_renumbered)
    by_neutral: dict[str, list[str]] = {}
    for name in module.functions:
        by_neutral.setdefault(unit_neutral(name), []).append(name)
    bodies = {name: schedule_neutral(f.lines) for name, f in module.functions.items()}
    variables = module.variables
    def reached_text(start: str) -> str:
        """START's text and that of every device function and variable it reaches, by name."""
        seen, todo, text = set(), [start], []
        while todo:
            name = todo.pop()
            if name in seen:
                continue
            seen.add(name)
            if name in variables:  # with what its initializer names (a pointer to a table)
                text.append(variables[name])
                todo += [t for statement in variables[name].split("\n")
                         for t in NAME.findall(statement.split("=", 1)[-1])
                         if (t in bodies or t in variables) and t not in seen]
                continue
            body = "\n".join(bodies.get(name, ()))
            text.append(body)
            todo += [t for t in NAME.findall(body) if (t in bodies or t in variables) and t not in seen]
        return "\n".join(text)

    prints: dict[str, str] = {}
    if module.unreadable:  # every kernel asked for, digested with the whole text as written
        whole = hashlib.sha256(ptx.encode()).hexdigest()
        return {unit_neutral(k): whole for k in kernels}
    for kernel in sorted({unit_neutral(k) for k in kernels} & set(by_neutral)):
        names = sorted(by_neutral[kernel])
        if len(names) == 1:
            joined = _renumbered(reached_text(names[0]))
        else:
            # names that read alike once neutral (a namespace spelled like nvcc's anonymous one: red team
            # round 181) are told apart as written: each one's name and what it reaches, digested together
            joined = "\n".join(f"{name}\n{_renumbered(reached_text(name))}" for name in names)
        prints[kernel] = hashlib.sha256(joined.encode()).hexdigest()
    return prints
