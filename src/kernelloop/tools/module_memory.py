"""The editable part's module memory, as its cubin lists it, for the harness to digest at run time.

A kernel can keep a value from one launch to the next in its module's own memory: its `__device__` and
`__constant__` variables, a C++ `static` in device code, a string literal's storage, an `asm` statement's
`.global`, a library's table. The host stub registers only the first two, so the harness's state check
read only those, and the static reading of the rest (`tools/ptx_writes.py`: may any code write them?) is
a proof about code a candidate shapes at will: red team rounds 316-336 each found a new way to hide a write
from it. Reading the memory itself ends that class: whatever wrote it, however the address was formed,
the bytes after a call are what they are.

The cubin lists every object of that memory: the symbols in its module memory sections (`.nv.global`,
`.nv.global.init`, the module's constant banks `.nv.constantN`). The harness asks the driver where each
lies and how large it is (`cuModuleGetGlobal`, which finds every object of the module, registered or not)
and digests it after every call with the rest of the part's state. The driver places each object on its
own (measured on an H100, driver 580: 256-byte aligned, each its own address range, not as the cubin's
sections lay them out), so the object, not its section, is what is read.
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile

# Module memory a kernel can keep values in from launch to launch: global memory and the module's constant banks
# (`.nv.constant3`: device memory like any other, writable through a generic pointer; red team round 271: an
# unregistered `.const` counter reached from a registered table's address). A kernel's own bank-0 section
# (`.nv.constant0.<kernel>`, its parameters) is the launch's, not the module's.
STATE_SECTION = re.compile(r"\.nv\.global|\.nv\.constant\d+$")


class ModuleMemoryUnread(Exception):
    """The object's module memory could not be listed (no cuobjdump, no cubin for the target, an unreadable ELF)."""


@dataclass(frozen=True)
class ModuleObject:
    name: str
    offset: int  # from the start of its section
    size: int


@dataclass(frozen=True)
class ModuleSection:
    name: str
    size: int
    objects: tuple[ModuleObject, ...]  # every object symbol in it


def _cubin_for(folder: Path, arch: str) -> Path:
    """The extracted cubin the target loads: the one built for ARCH (`x.1.sm_90.cubin`)."""
    cubins = sorted(folder.glob("*.cubin"))
    exact = [c for c in cubins if c.name.endswith(f".{arch}.cubin")]
    if len(exact) == 1:
        return exact[0]
    raise ModuleMemoryUnread(f"no single cubin for {arch} among {[c.name for c in cubins] or 'none'}")


def read_module_memory(cubin: Path) -> list[ModuleSection]:
    """The module memory sections of one cubin that hold named objects, with those objects."""
    try:
        with cubin.open("rb") as handle:
            elf = ELFFile(handle)
            symtab = elf.get_section_by_name(".symtab")
            objects: dict[int, list[ModuleObject]] = {}
            for symbol in symtab.iter_symbols() if symtab is not None else ():
                index = symbol["st_shndx"]
                if symbol["st_info"]["type"] != "STT_OBJECT" or not isinstance(index, int) or not symbol.name:
                    continue
                if STATE_SECTION.match(elf.get_section(index).name):
                    objects.setdefault(index, []).append(ModuleObject(symbol.name, symbol["st_value"],
                                                                      symbol["st_size"]))
            return [ModuleSection(elf.get_section(index).name, elf.get_section(index)["sh_size"],
                                  tuple(sorted(found, key=lambda o: (o.offset, o.name))))
                    for index, found in sorted(objects.items())]
    except (OSError, ELFError) as exc:
        raise ModuleMemoryUnread(f"cannot read {cubin.name} ({exc})") from exc


def object_module_memory(obj: Path, *, arch: str, cuobjdump: Path | None) -> list[ModuleSection]:
    """The module memory of OBJ's cubin for ARCH (none where OBJ holds no device code)."""
    if cuobjdump is None:
        raise ModuleMemoryUnread("cuobjdump not found (the CUDA toolkit's, or the nvidia-cuda-cuobjdump wheel)")
    with tempfile.TemporaryDirectory(prefix="kl-module-") as folder:
        try:
            run = subprocess.run([str(cuobjdump), "-xelf", "all", str(obj.resolve())], cwd=folder,
                                 capture_output=True, text=True, timeout=120)
        except (OSError, subprocess.SubprocessError) as exc:
            raise ModuleMemoryUnread(f"cuobjdump -xelf failed ({exc})") from exc
        if run.returncode != 0:
            if "does not contain device code" in run.stderr:
                return []
            raise ModuleMemoryUnread(f"cuobjdump -xelf exit {run.returncode}: {run.stderr.strip()[:200]}")
        if not any(Path(folder).glob("*.cubin")):
            return []
        return read_module_memory(_cubin_for(Path(folder), arch))


def _c_string(text: str) -> str:
    """TEXT as a C++ string literal, every byte outside [A-Za-z0-9_$.] as an octal escape."""
    return '"' + "".join(chr(b) if re.match(rb"[A-Za-z0-9_$.]", bytes([b])) else f"\\{b:03o}"
                         for b in text.encode()) + '"'


def module_memory_unit(sections: list[ModuleSection]) -> str:
    """A C++ unit that gives the harness the table it reads (`__kl_module_objects`, kernelloop_harness.cuh,
    "The part's module memory"): one row per object, name and size, a null name last."""
    rows = [f"  {{{_c_string(o.name)}, {o.size}ull}}," for section in sections for o in section.objects]
    return ("/* Generated by kernelloop (tools/module_memory.py): the objects of the editable part's module memory,\n"
            "   from the cubin the program loads. */\n"
            "struct kl_module_object { const char *name; unsigned long long size; };\n"
            "extern \"C\" const kl_module_object __kl_module_objects[] = {\n"
            + "".join(f"{row}\n" for row in rows) + "  {0, 0ull}\n};\n")
