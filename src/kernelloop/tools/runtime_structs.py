"""The layout of the CUDA runtime's structures that calls write through a pointer, in this toolkit.

The host-code scan judges what a launcher reads from its own stack frame by what was written there
first (verify/frame_writes.py). A runtime call that fills a structure writes its named fields; its
`reserved` arrays and the padding between fields keep what the stack held, which in a caller's
process is what the launcher's previous call left there (red team round 217: a call count kept in
`cudaFuncAttributes.reserved`). So the layout is read from the toolkit's own headers, as the
compiler lays it out: a probe defining one of each is compiled with debug information (never run)
and its DWARF members give each field's offset and size.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile

from ..errors import ConfigError, EnvironmentProblem
from .sandbox import Limits, private_workdir, run_sandboxed
from .nvcc import find_toolchain

# The runtime's structures that calls write through a pointer, by the probe's name for each.
RUNTIME_STRUCTS = {"func_attributes": "cudaFuncAttributes", "device_prop": "cudaDeviceProp",
                   "pointer_attributes": "cudaPointerAttributes", "pitched_ptr": "cudaPitchedPtr",
                   "channel_format_desc": "cudaChannelFormatDesc"}

# Fields the runtime keeps for later use and does not fill (`int reserved[56]`); a field that only
# begins with the word (`reservedSharedMemPerBlock`) is a named one.
_RESERVED_FIELD = re.compile(r"^_*(reserved|pad|padding)\d*$", re.I)


@dataclass(frozen=True)
class StructLayout:
    size: int
    written: tuple[tuple[int, int], ...]  # (offset, bytes) of the named fields, adjacent ones merged


_LAYOUTS: list[dict[str, StructLayout]] = []


def runtime_struct_layouts() -> dict[str, StructLayout]:
    """Each of RUNTIME_STRUCTS as this toolkit lays it out. Empty when nvcc cannot compile the probe
    or its debug information cannot be read (the scan then takes such a call to write nothing)."""
    if not _LAYOUTS:
        source = "#include <cuda_runtime.h>\n" + "".join(
            f"{struct} kl_struct_{name};\n" for name, struct in RUNTIME_STRUCTS.items())
        try:
            tc = find_toolchain()
            with private_workdir() as work:
                (work / "probe.cu").write_text(source)
                shutil.chown(work / "probe.cu", user=work.stat().st_uid, group=work.stat().st_gid)
                run = run_sandboxed([str(tc.nvcc), "-g", "-c", "probe.cu", "-o", "probe.o"], workdir=work,
                                    limits=Limits(wall_timeout_s=120))
                if not run.ok:
                    return {}
                layouts = layouts_in_object(work / "probe.o")
        except (EnvironmentProblem, ConfigError, OSError, ELFError):
            return {}
        if set(layouts) != set(RUNTIME_STRUCTS):
            return {}
        _LAYOUTS.append(layouts)
    return _LAYOUTS[0]


def runtime_struct_sizes() -> dict[str, int]:
    """sizeof each of RUNTIME_STRUCTS in this toolkit (the C runtime's structs change between releases:
    cudaFuncAttributes is 144 bytes in CUDA 13). Empty when the toolkit cannot be asked."""
    return {name: layout.size for name, layout in runtime_struct_layouts().items()}


def layouts_in_object(obj: Path) -> dict[str, StructLayout]:
    """The layout of the structure type of each `kl_struct_NAME` variable an object's DWARF describes."""
    layouts: dict[str, StructLayout] = {}
    with obj.open("rb") as f:
        elf = ELFFile(f)
        if not elf.has_dwarf_info():
            return {}
        for cu in elf.get_dwarf_info().iter_CUs():
            for die in cu.iter_DIEs():
                name = die.attributes.get("DW_AT_name")
                if die.tag != "DW_TAG_variable" or name is None or not name.value.startswith(b"kl_struct_"):
                    continue
                struct = _through_aliases(die.get_DIE_from_attribute("DW_AT_type"))
                if struct.tag != "DW_TAG_structure_type" or "DW_AT_byte_size" not in struct.attributes:
                    continue
                layouts[name.value.decode()[len("kl_struct_"):]] = StructLayout(
                    size=struct.attributes["DW_AT_byte_size"].value, written=_named_fields(struct))
    return layouts


def _through_aliases(die):
    while die.tag in ("DW_TAG_typedef", "DW_TAG_const_type", "DW_TAG_volatile_type") and "DW_AT_type" in die.attributes:
        die = die.get_DIE_from_attribute("DW_AT_type")
    return die


def _type_size(die) -> int:
    die = _through_aliases(die)
    if die.tag == "DW_TAG_array_type":
        count = 1
        for sub in die.iter_children():
            if sub.tag == "DW_TAG_subrange_type":
                if "DW_AT_count" in sub.attributes:
                    count *= sub.attributes["DW_AT_count"].value
                elif "DW_AT_upper_bound" in sub.attributes:
                    count *= sub.attributes["DW_AT_upper_bound"].value + 1
                else:
                    raise ELFError("an array member without a bound")
        return count * _type_size(die.get_DIE_from_attribute("DW_AT_type"))
    if "DW_AT_byte_size" not in die.attributes:
        raise ELFError(f"a member type without a size ({die.tag})")
    return die.attributes["DW_AT_byte_size"].value


def _named_fields(struct) -> tuple[tuple[int, int], ...]:
    spans: list[tuple[int, int]] = []
    for member in struct.iter_children():
        if member.tag != "DW_TAG_member" or "DW_AT_data_member_location" not in member.attributes:
            continue
        field = member.attributes.get("DW_AT_name")
        if field is None or _RESERVED_FIELD.match(field.value.decode()):
            continue
        offset, size = member.attributes["DW_AT_data_member_location"].value, _type_size(
            member.get_DIE_from_attribute("DW_AT_type"))
        if not isinstance(offset, int):
            raise ELFError("a member location that is not a constant offset")
        if spans and spans[-1][0] + spans[-1][1] == offset:
            spans[-1] = (spans[-1][0], spans[-1][1] + size)
        else:
            spans.append((offset, size))
    return tuple(spans)
