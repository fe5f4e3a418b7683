"""The device names an object's host code registers with the CUDA runtime.

nvcc's host stub for a translation unit (`__nv_cudaEntityRegisterCallback`) registers each kernel
(`__cudaRegisterFunction`) and each device variable (`__cudaRegisterVar`, `__cudaRegisterManagedVar`)
by its device name, a string literal the stub loads from the object's read-only data (at -O3 the callback
is inlined into the unit's static initialiser, `__sti____cudaRegisterAll`). What is
registered is what the harness's state check reads; a device object no registration names (a string
literal's storage, an `asm` statement's `.global`, a library's table) is module memory it never sees.
Read from the same object the verifier ships, so internal-linkage names (`_INTERNAL_<hash>_...`,
which follow the compile) are the cubin's own.
"""

from __future__ import annotations

from pathlib import Path

from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile
from elftools.elf.enums import ENUM_RELOC_TYPE_x64

# nvcc's registration functions (static, one per translation unit: a definition of the same name in the unit
# does not compile); at -O3 the host compiler inlines the callback into the static initialiser
# (their exact symbols: a name of the part's own that merely contains one is no registrar, round 268)
_REGISTRARS = frozenset({"_ZL31__nv_cudaEntityRegisterCallbackPPv", "_ZL24__sti____cudaRegisterAllv"})
_PC_RELATIVE = frozenset(ENUM_RELOC_TYPE_x64[name] for name in (
    "R_X86_64_PC32", "R_X86_64_PLT32", "R_X86_64_GOTPCREL", "R_X86_64_GOTPCRELX", "R_X86_64_REX_GOTPCRELX")
    if name in ENUM_RELOC_TYPE_x64)


def registered_device_names(obj: Path) -> set[str]:
    """Every string the object's registration callback loads from read-only data: the registered device names
    (kernels and variables). Empty where the object has no callback (no device code) or cannot be read."""
    names: set[str] = set()
    try:
        with obj.open("rb") as handle:
            elf = ELFFile(handle)
            symtab = elf.get_section_by_name(".symtab")
            if symtab is None:
                return names
            callbacks = [s for s in symtab.iter_symbols() if s.name in _REGISTRARS and s["st_info"]["type"] == "STT_FUNC"
                         and s["st_info"]["bind"] == "STB_LOCAL" and isinstance(s["st_shndx"], int)]
            for callback in callbacks:
                section = elf.get_section(callback["st_shndx"])
                relocations = elf.get_section_by_name(f".rela{section.name}")
                if relocations is None:
                    continue
                start, end = callback["st_value"], callback["st_value"] + callback["st_size"]
                for relocation in relocations.iter_relocations():
                    if not start <= relocation["r_offset"] < end:
                        continue
                    target = symtab.get_symbol(relocation["r_info_sym"])
                    if not isinstance(target["st_shndx"], int):
                        continue
                    data_section = elf.get_section(target["st_shndx"])
                    if not data_section.name.startswith(".rodata"):
                        continue
                    data = data_section.data()
                    # a PC-relative field is 4 bytes before the end of its instruction: the string is 4 past the addend
                    pc_relative = relocation.entry["r_info_type"] in _PC_RELATIVE
                    address = target["st_value"] + relocation["r_addend"] + (4 if pc_relative else 0)
                    if 0 <= address < len(data) and (address == 0 or data[address - 1] == 0):
                        stop = data.find(b"\0", address)
                        names.add(data[address:stop if stop >= 0 else len(data)].decode("utf-8", "replace"))
    except (OSError, ELFError):
        return set()
    return names

