"""The compiler's own record of the stack depth at every host instruction: the object's
`.eh_frame` call-frame information (CFI).

GCC on x86-64 emits asynchronous unwind tables by default: for every instruction of every
function, how far the canonical frame address (the caller's %rsp before the call) lies above
the current %rsp. The host-code scan keeps its own model of the depth (pushes, pops, `sub/add
$imm,%rsp`, branches, cold parts, landing pads); red team rounds 11-15 each found a place where
that model and the machine disagreed (a cold part, a landing pad after a call that never
returns) and wrote a return address from there. This table is a second, independent account:
where the two disagree, the scan refuses to judge (hostcode.py). The editable part cannot write
its own CFI: host `asm` is refused by the source policy, and so are `optimize` attributes and
pragmas that change how the host compiler builds it.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from pathlib import Path

from elftools.common.exceptions import ELFError
from elftools.dwarf.callframe import DW_CFA, FDE
from elftools.elf.elffile import ELFFile

_RSP = 7  # DWARF register number of %rsp on x86-64


@dataclass(frozen=True)
class Depth:
    """The stack depth an unwind record gives for one instruction: `covered` is False where no
    record covers it; `bytes` is None where the frame address is kept in another register (a
    frame pointer), else the bytes on the stack below the return address (the scan's `frame`).
    `saved`: the bytes below the return address that hold the caller's registers anywhere in the
    function (its deepest save slot): the function's own locals lie below them."""

    covered: bool
    bytes: int | None = None
    saved: int = 0


@dataclass
class _Range:
    start: int
    end: int
    rows: list[tuple[int, int | None]] = field(default_factory=list)  # (address, depth) from there on
    saved: int = 0


class UnwindTable:
    """Every function's unwind rows in a relocatable object, by section name."""

    def __init__(self, obj: Path):
        self._ranges: dict[str, list[_Range]] = {}
        self._ambiguous: set[str] = set()
        try:
            self._read(obj)
        except (ELFError, KeyError, ValueError, AttributeError, IndexError):
            self._ranges = {}  # unreadable: nothing is covered, so the scan refuses to judge

    def _read(self, obj: Path) -> None:
        with obj.open("rb") as f:
            elf = ELFFile(f)
            names = [s.name for s in elf.iter_sections()]
            self._ambiguous = {n for n in names if names.count(n) > 1}
            frames = elf.get_section_by_name(".eh_frame")
            relocations = elf.get_section_by_name(".rela.eh_frame")
            if frames is None or relocations is None or not elf.has_dwarf_info():
                return
            symbols = elf.get_section(relocations["sh_link"])
            # Each FDE's start address is a PC-relative relocation at its `pc_begin` field: the
            # section it names and the offset there.
            starts: dict[int, tuple[str, int]] = {}
            for r in relocations.iter_relocations():
                symbol = symbols.get_symbol(r["r_info_sym"])
                if not isinstance(symbol["st_shndx"], int):
                    continue
                starts[r["r_offset"]] = (elf.get_section(symbol["st_shndx"]).name,
                                         symbol["st_value"] + r["r_addend"])
            dwarf = elf.get_dwarf_info(relocate_dwarf_sections=False)
            for entry in dwarf.EH_CFI_entries():
                if not isinstance(entry, FDE):
                    continue
                # pc_begin follows the 4-byte length and the 4-byte CIE pointer.
                where = starts.get(entry.offset + 8)
                if where is None:
                    continue
                section, start = where
                rows, saved = _depth_rows(entry, start)
                span = _Range(start=start, end=start + entry.header["address_range"], rows=rows, saved=saved)
                self._ranges.setdefault(section, []).append(span)
        for spans in self._ranges.values():
            spans.sort(key=lambda s: s.start)

    def depth_at(self, section: str, address: int) -> Depth:
        """What the unwind table says of the instruction at `address` in `section`."""
        if section in self._ambiguous:
            return Depth(covered=False)
        spans = self._ranges.get(section, [])
        i = bisect.bisect_right([s.start for s in spans], address) - 1
        if i < 0 or not spans[i].start <= address < spans[i].end or not spans[i].rows:
            return Depth(covered=False)
        rows = spans[i].rows
        k = bisect.bisect_right([a for a, _ in rows], address) - 1
        return Depth(covered=k >= 0, bytes=rows[k][1] if k >= 0 else None, saved=spans[i].saved)


def _depth_rows(entry: FDE, start: int) -> tuple[list[tuple[int, int | None]], int]:
    """The frame-address rule of one FDE (its CIE's initial instructions, then its own), as
    (address, depth) rows: depth is the bytes below the return address while the frame address
    is %rsp plus a constant, else None; and the bytes below the return address down to its
    deepest register save slot. Only these rules matter here, so this follows them itself
    (pyelftools' decoder stops at GCC's `DW_CFA_GNU_args_size`)."""
    cie = entry.cie
    code_factor, data_factor = cie["code_alignment_factor"], cie["data_alignment_factor"]
    return_address = cie["return_address_register"]
    deepest = 8  # the return address's own slot
    pc, reg, offset, expression = start, None, 0, False
    saved: list[tuple[int | None, int, bool]] = []
    rows: dict[int, int | None] = {}
    for ins in [*cie.instructions, *entry.instructions]:
        op, args = ins.opcode, ins.args
        if op in (DW_CFA.advance_loc, DW_CFA.advance_loc1, DW_CFA.advance_loc2, DW_CFA.advance_loc4):
            pc += args[0] * code_factor
        elif op == DW_CFA.set_loc:
            pc = start + args[0] - entry.header["initial_location"]
        elif op == DW_CFA.def_cfa:
            reg, offset, expression = args[0], args[1], False
        elif op == DW_CFA.def_cfa_sf:
            reg, offset, expression = args[0], args[1] * data_factor, False
        elif op == DW_CFA.def_cfa_register:
            reg, expression = args[0], False
        elif op == DW_CFA.def_cfa_offset:
            offset = args[0]
        elif op == DW_CFA.def_cfa_offset_sf:
            offset = args[0] * data_factor
        elif op == DW_CFA.def_cfa_expression:
            expression = True
        elif op in (DW_CFA.offset, DW_CFA.offset_extended, DW_CFA.offset_extended_sf) and args[0] != return_address:
            deepest = max(deepest, -args[1] * data_factor)  # the register is saved at CFA - this
        elif op == DW_CFA.remember_state:
            saved.append((reg, offset, expression))
        elif op == DW_CFA.restore_state:
            if not saved:
                raise ValueError("DW_CFA_restore_state with nothing remembered")
            reg, offset, expression = saved.pop()
        rows[pc] = offset - 8 if reg == _RSP and not expression else None
    return sorted(rows.items()), deepest - 8
