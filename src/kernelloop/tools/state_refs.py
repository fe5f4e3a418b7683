"""Which writable data each function of a compiled object can reach, read from its relocations.

`init` keeps a file's launcher and kernels and drops the rest of its host code (`main`, helpers).
Anything the dropped code sets that the kept code reads would differ between the user's program
and the generated one. Names in the source cannot answer that: C++ reaches a variable through
namespaces, class members, aggregates, several declarators, pointers and references kept in other
globals and token pasting (red team round 19 hid one from a text match nine ways). The object
can: every access to file-scope data is a relocation against its symbol (or its section plus an
offset), and data that holds an address has a relocation of its own, so following relocations
from a function through data finds every variable it can touch, however it was spelled.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from .nvcc import PTXAS_REPORT, ptxas_saves_registers
from .ptx_module import PtxModule, read_ptx
from .ptx_writes import body_memory, device_statics, written_variables
from .registered import registered_device_names
from .symbols import demangle

# Code and data the compiler writes (registration, static initialisation, launch stubs and their
# handles): it runs the same way in the user's program and in the generated one. Matched on the
# demangled identifier's start, never inside a user's name (round 21: `blend__nv_alpha`).
_GENERATED = re.compile(r"^(?:__cuda|__nv_|____nv_|__sti__|__device_stub__|__wrapper__device_stub|_GLOBAL__sub_I"
                        r"|__static_initialization_and_destruction|__cxx_global_var_init|__fatDeviceText$|__dso_handle$"
                        r"|guard variable for |DW\.ref\.)")
_PC_RELATIVE = {"R_X86_64_PC32", "R_X86_64_PLT32", "R_X86_64_GOTPCREL", "R_X86_64_GOTPCRELX",
                "R_X86_64_REX_GOTPCRELX", "R_X86_64_PC64"}
_SECTION_HEADER = re.compile(r"^\s*\[\s*(\d+)\]\s+(\S+)\s+\S+\s+[0-9a-f]+\s+[0-9a-f]+\s+[0-9a-f]+\s+[0-9a-f]+\s+"
                             r"(?P<flags>[A-Za-z]*)\s", re.M)
_SYMBOL = re.compile(r"^\s*\d+:\s+(?P<value>[0-9a-f]+)\s+(?P<size>\d+)\s+(?P<type>\w+)\s+(?P<bind>\w+)\s+\w+\s+"
                     r"(?P<index>\d+)\s+(?P<name>\S+)\s*$")
_RELOCATION_SECTION = re.compile(r"^Relocation section '\.rela?(?P<section>\S+)'")
_RELOCATION = re.compile(r"^(?P<offset>[0-9a-f]+)\s+[0-9a-f]+\s+(?P<type>R_X86_64_\w+)\s+[0-9a-f]+\s+"
                         r"(?P<target>\S+)\s*(?P<sign>[+-])\s*(?P<addend>[0-9a-f]+)")


@dataclass
class _Symbol:
    name: str
    section: str
    start: int
    size: int
    kind: str  # FUNC or OBJECT


@dataclass
class StateReferences:
    """What each symbol of an object refers to, and which symbols are mutable state."""

    edges: dict[str, set[str]] = field(default_factory=dict)  # symbol -> symbols its code or bytes refer to
    functions: set[str] = field(default_factory=set)
    writable: set[str] = field(default_factory=set)  # file-scope and static variables the program can change
    external: set[str] = field(default_factory=set)  # data another file defines (referenced, not called)
    device_shadows: set[str] = field(default_factory=set)  # host shadows of __device__/__constant__ variables
    imports: set[str] = field(default_factory=set)  # every symbol another file or library defines, called or referred to
    replaceable: set[str] = field(default_factory=set)  # weak definitions another file's strong one replaces
    control_instructions: dict[str, set[str]] = field(default_factory=dict)  # function -> process-control mnemonics
    # functions that address memory through a segment register (%fs/%gs: the C library's thread-local
    # data, errno and the character-class tables among it; the stack protector's canary too)
    thread_memory: set[str] = field(default_factory=set)
    # functions the loader runs before main (`.init_array`, `.preinit_array`, `.ctors`): a file-scope
    # initialiser, or a function marked `__attribute__((constructor))` whatever its name
    runs_at_start: set[str] = field(default_factory=set)
    device_edges: dict[str, set[str]] = field(default_factory=dict)  # device function (PTX) -> names its body uses
    # `static` variables of device code that device code writes (or whose address escapes): global
    # memory kept between launches with no host copy, so no host shadow names it (red team round 310)
    device_statics: set[str] = field(default_factory=set)
    readable_names: dict[str, str] = field(default_factory=dict)  # mangled -> demangled

    def reach(self, roots: set[str], *, stop: set[str] = frozenset()) -> set[str]:
        """Every symbol reachable from `roots` through calls, data accesses and addresses kept in
        data (a function pointer in a table is reached, and so called), not entering `stop`."""
        seen, todo = set(), [r for r in roots if r not in stop]
        while todo:
            name = todo.pop()
            if name in seen:
                continue
            seen.add(name)
            todo += [t for t in self.edges.get(name, ()) if t not in seen and t not in stop]
        return seen

    def state(self, symbols: set[str]) -> set[str]:
        """The mutable state among `symbols` (the compiler's own excluded)."""
        return {s for s in symbols if (s in self.writable or s in self.external)
                and not generated(s, self.readable_names.get(s))}


def generated(name: str, readable: str | None = None) -> bool:
    """Whether a symbol is the compiler's own: its identifier, or the function a static local of it
    belongs to, is one nvcc or gcc makes."""
    text = readable if readable is not None else name
    head = text.split("(", 1)[0].split("<", 1)[0]
    owner = re.sub(r"^(?:static |void |int |char |auto )+", "", head).split("::")[-1].strip()
    return bool(_GENERATED.match(owner) or _GENERATED.match(text) or _GENERATED.match(name)
                or re.match(r"^_ZZL?\d+(?:__device_stub__|__nv_)", name))


# Data a library defines that an honest launcher's error path touches.
_LIBRARY_DATA = {"stdin", "stdout", "stderr", "_ZSt4cout", "_ZSt4cerr", "_ZSt4clog", "__dso_handle",
                 "_ZTVN10__cxxabiv117__class_type_infoE", "_ZTVN10__cxxabiv120__si_class_type_infoE"}
_CALL_RELOCATIONS = {"R_X86_64_PLT32"}


_TRAILING_QUALIFIERS = re.compile(r"(?:\s*(?:const|volatile|&&|&|noexcept))+$")


def no_variable(mangled: str, readable: str) -> bool:
    """Whether another file's symbol is certainly no variable: type information or its name, a
    vtable (read-only once relocated), or a C++ function, whose mangled name carries its parameter
    list (`ns::f(int)`; a variable's reads `ns::v`). A local entity (`_ZZ`: `f()::counter`, a static
    local) and an unmangled C name may be variables."""
    if mangled.startswith(("_ZTI", "_ZTS", "_ZTV")):
        return True
    if not re.match(r"_Z(?:N|\d)", mangled) or readable == mangled:
        return False
    return _TRAILING_QUALIFIERS.sub("", readable).endswith(")")


def state_references(obj: Path) -> StateReferences:
    """Read `obj` (an ELF relocatable object from nvcc -c) with readelf."""
    if shutil.which("readelf") is None:
        raise FileNotFoundError("readelf (binutils) is needed to read the program's object")
    out = subprocess.run(["readelf", "-SsrW", str(obj)], capture_output=True, text=True, timeout=120).stdout
    sections: dict[str, str] = {}  # index -> name
    writable_sections: set[str] = set()
    grouped: set[str] = set()  # indices of sections in a COMDAT group
    relro: set[str] = set()
    replaceable: set[str] = set()
    for m in _SECTION_HEADER.finditer(out):
        sections[m.group(1)] = m.group(2)
        name = m.group(2)
        if "G" in m.group("flags"):
            grouped.add(m.group(1))
        if "W" in m.group("flags") and name.startswith(".data.rel.ro"):
            relro.add(name)
        # RELRO data (.data.rel.ro) is read-only once the program runs: it is followed, not counted
        if "W" in m.group("flags") and "X" not in m.group("flags") and not name.startswith(".data.rel.ro") \
                and name not in (".init_array", ".fini_array", ".got", ".got.plt") and not name.startswith(".nv"):
            writable_sections.add(name)
    symbols: list[_Symbol] = []
    undefined: set[str] = set()
    for line in out.splitlines():
        m = _SYMBOL.match(line)
        if m and m.group("type") in ("FUNC", "OBJECT", "TLS") and m.group("index") in sections:
            # A weak definition outside a COMDAT group (`__attribute__((weak))`, `#pragma weak`)
            # is one another file of the program can replace at link time (round 27); the
            # compiler's own weak copies of inline and template code sit in groups.
            if m.group("bind") == "WEAK" and m.group("index") not in grouped:
                replaceable.add(m.group("name"))
            symbols.append(_Symbol(m.group("name"), sections[m.group("index")], int(m.group("value"), 16),
                                   int(m.group("size")), "FUNC" if m.group("type") == "FUNC" else "OBJECT"))
        elif line.strip() and re.match(r"^\s*\d+:\s+0+\s+0\s+NOTYPE\s+GLOBAL\s+\w+\s+UND\s+(\S+)", line):
            undefined.add(line.split()[-1])
    by_section: dict[str, list[_Symbol]] = {}
    for s in symbols:
        by_section.setdefault(s.section, []).append(s)
    # Only the compiler's own RELRO sections are read-only when the program runs: a section name the
    # source chose (`section(".data.rel.ro.w")` on a global main sets; round 29) is writable data.
    for name in relro:
        own = {".data.rel.ro", ".data.rel.ro.local"} | {f"{prefix}.{s.name}" for s in by_section.get(name, ())
                                                         for prefix in (".data.rel.ro", ".data.rel.ro.local")}
        if name not in own:
            writable_sections.add(name)

    def containing(section: str, offset: int) -> _Symbol | None:
        for s in by_section.get(section, ()):
            if s.start <= offset < s.start + max(s.size, 1):
                return s
        return None

    names = {s.name for s in symbols}
    refs = StateReferences()
    refs.replaceable = replaceable
    section = ""
    for line in out.splitlines():
        if m := _RELOCATION_SECTION.match(line):
            section = m.group("section")
            continue
        m = _RELOCATION.match(line.strip())
        if not m or not section:
            continue
        source = containing(section, int(m.group("offset"), 16))
        target, addend = m.group("target"), int(m.group("addend"), 16) * (-1 if m.group("sign") == "-" else 1)
        if section in (".init_array", ".preinit_array", ".ctors") or section.startswith((".init_array.", ".ctors.")):
            started = target if target in names else containing(target, addend)
            if started is not None:
                refs.runs_at_start.add(started if isinstance(started, str) else started.name)
        if source is None:
            continue
        if target in undefined:
            # a function can be called through its address as well as directly (round 23: a pointer
            # to cudaDeviceSetLimit), so every reference to another library's symbol is an import
            refs.imports.add(target)
            if m.group("type") not in _CALL_RELOCATIONS and target not in _LIBRARY_DATA:
                refs.external.add(target)  # a variable of another file (a called function has a PLT relocation)
        elif target not in names:  # a section symbol plus an offset: the symbol there, else the section's bytes
            # A PC-relative field is followed by the rest of its instruction: 4 bytes to its end,
            # more when an immediate follows (a store of a constant: `sym-8`), so the variable is
            # at the first of those offsets that lands in one.
            tails = (4, 5, 6, 8) if m.group("type") in _PC_RELATIVE else (0,)
            inner = next((found for tail in tails if (found := containing(target, addend + tail)) is not None), None)
            offset = addend + tails[0]
            if inner is None and target in writable_sections:
                inner = _Symbol(f"{target}+{offset:#x}", target, offset, 1, "OBJECT")
                symbols.append(inner)
                by_section.setdefault(target, []).append(inner)
            target = inner.name if inner is not None else target
        refs.edges.setdefault(source.name, set()).add(target)
    refs.functions = {s.name for s in symbols if s.kind == "FUNC"}
    refs.writable = {s.name for s in symbols if s.kind == "OBJECT" and s.section in writable_sections}
    refs.device_shadows = {t for fn in refs.functions if "__nv_cudaEntityRegisterCallback" in fn
                           for t in refs.edges.get(fn, ()) if t in refs.writable}
    every = sorted(refs.functions | refs.writable | refs.external | refs.imports)
    refs.readable_names = dict(zip(every, demangle(every)))
    # an address that is no variable's: a C++ function's (`throw` hands the exception's destructor
    # to the runtime), type information, a vtable
    refs.external = {t for t in refs.external if not no_variable(t, refs.readable_names.get(t, t))}
    refs.device_shadows = {t for t in refs.device_shadows if not generated(t, refs.readable_names.get(t))}
    refs.control_instructions, refs.thread_memory = _instruction_classes(obj)
    ptx = obj.with_name("program.ptx")
    if ptx.exists():
        module = read_ptx(ptx.read_text())
        refs.device_edges = device_references(module)
        report = obj.with_name(PTXAS_REPORT)
        saves = ptxas_saves_registers(report.read_text()) if report.exists() else True
        refs.device_statics = (written_variables(module, device_statics(module, registered_device_names(obj)),
                                                 register_saves=saves) | body_memory(module))
        statics = sorted(refs.device_statics)
        refs.readable_names.update(zip(statics, demangle(statics)))
    return refs


def device_references(ptx: str | PtxModule) -> dict[str, set[str]]:
    """For each kernel and device function of a PTX module, the names its body uses (the
    functions it calls or takes the address of among them)."""
    module = read_ptx(ptx) if isinstance(ptx, str) else ptx
    return {name: f.names_used() for name, f in module.functions.items()}


# Instructions that change the process with no symbol to see, or dump processor state no digest of
# memory covers: the floating-point environment (rounding, flush-to-zero, exception masks and flags:
# round 22 named an MXCSR load in main; round 196 kept a launcher's call count in the MXCSR), the x87
# and vector registers' saved images (round 197 read a count back from a popped x87 register with
# fxsave), system calls made directly, segment bases and protection keys. Read by init for the code
# it leaves out and by the host-code scan for the editable part's.
PROCESSOR_STATE_INSTRUCTION = re.compile(r"^(?:v?ldmxcsr|fldcw|fldenv|fn?stenv|fn?save|fn?init|fn?clex|frstor"
                                         r"|fxrstor\w*|xrstor\w*|fxsave\w*|xsave\w*|syscall|sysenter|int"
                                         r"|wr[fg]sbase|wrpkru)$")
_SEGMENT_OPERAND = re.compile(r"%[fg]s:|\b[fg]s\s+")
_FUNCTION_HEADER = re.compile(r"^[0-9a-f]+ <(?P<name>[^>]+)>:$")
_INSTRUCTION = re.compile(r"^\s*[0-9a-f]+:\s+(?:(?:rep|repz|repnz|lock|notrack|bnd|data16|addr32|cs|ds)\s+)*"
                          r"(?P<mnemonic>[a-z][a-z0-9]*)")


def _instruction_classes(obj: Path) -> tuple[dict[str, set[str]], set[str]]:
    """For each function of `obj`, the process-control instructions its code contains; and the
    functions that address memory through %fs or %gs."""
    if shutil.which("objdump") is None:
        raise FileNotFoundError("objdump (binutils) is needed to read the program's object")
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(obj)], capture_output=True, text=True,
                         timeout=120).stdout
    found: dict[str, set[str]] = {}
    segment: set[str] = set()
    function = ""
    for line in out.splitlines():
        if m := _FUNCTION_HEADER.match(line):
            function = m.group("name")
        elif function and (m := _INSTRUCTION.match(line)):
            if PROCESSOR_STATE_INSTRUCTION.match(m.group("mnemonic")):
                found.setdefault(function, set()).add(m.group("mnemonic"))
            if _SEGMENT_OPERAND.search(line):
                segment.add(function)
    return found, segment
