"""What each x86-64 instruction of an object's code does to memory, the stack pointer and
control flow, from a real decoder (iced-x86) rather than from its mnemonic.

The host-code scan (hostcode.py) judges every instruction by these facts. Mnemonic rules fail
open on what they do not list: red teams found stores hidden in `cmpxchg`, `vcvtps2ph`,
`maskmovdqu` (an implicit [%rdi]), and stack moves in `leave`/`enter`. The decoder lists every
memory write and read, explicit or implicit, with its address's parts, and every write to
%rsp, so an instruction nobody thought of is judged like any other.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import iced_x86 as ix
from elftools.elf.elffile import ELFFile

_WRITES = {ix.OpAccess.WRITE, ix.OpAccess.COND_WRITE, ix.OpAccess.READ_WRITE, ix.OpAccess.READ_COND_WRITE}
# a conditional write (a masked store, cmov) may leave what was there: it defines nothing (round 213)
_CERTAIN_WRITES = {ix.OpAccess.WRITE, ix.OpAccess.READ_WRITE}
# stores under a vector mask that the decoder lists as plain writes (AVX's masked moves)
_MASKED_STORES = frozenset({"vmaskmovps", "vmaskmovpd", "vpmaskmovd", "vpmaskmovq", "maskmovq", "maskmovdqu"})
_READS = {ix.OpAccess.READ, ix.OpAccess.COND_READ, ix.OpAccess.READ_WRITE, ix.OpAccess.READ_COND_WRITE}
_STACK_POINTER = {ix.Register.RSP, ix.Register.ESP, ix.Register.SP, ix.Register.SPL}
_FORMATTER = ix.Formatter(ix.FormatterSyntax.GAS)
_REGISTER_NAMES = {getattr(ix.Register, n): n.lower() for n in dir(ix.Register) if n.isupper()}
_MNEMONIC_NAMES = {getattr(ix.Mnemonic, n): n.lower() for n in dir(ix.Mnemonic) if n.isupper()}


@dataclass(frozen=True)
class MemoryAccess:
    base: str  # "rsp", "rip", "rdi", ... ("" when none)
    index: str
    displacement: int  # signed; for %rip-relative operands, relative to the next instruction
    size: int  # bytes; 0 when the decoder cannot tell (string instructions)
    segment: str  # "fs"/"gs" for thread-local storage, else the default ("ss", "ds", "es")


@dataclass(frozen=True)
class Instruction:
    address: int
    length: int
    mnemonic: str  # iced's name, lower case ("push", "cmpxchg", "maskmovdqu")
    text: str  # AT&T, for messages
    writes: tuple[MemoryAccess, ...]
    reads: tuple[MemoryAccess, ...]
    writes_stack_pointer: bool
    stack_pointer_increment: int
    flow: str  # next, branch, conditional, indirect-branch, return, call, indirect-call, interrupt, xbegin, exception
    branch_target: int | None
    privileged_or_system: bool  # syscall, sysenter, int n, wrpkru, xrstor...
    written_registers: frozenset[str] = frozenset()  # full 64-bit names ("rdx" for a `cqto`), implicit ones too
    read_registers: frozenset[str] = frozenset()  # full names of every register it reads, address registers too
    replaced_registers: frozenset[str] = frozenset()  # registers it sets whole (a 32- or 64-bit write, a VEX one)
    # vector registers read as ymm/zmm (their upper part: bits 128 and up), and those a legacy-SSE write
    # sets only bits 0-127 of (on AVX hardware the rest keeps what it held; VEX and EVEX writes clear it)
    wide_reads: frozenset[str] = frozenset()
    low_writes: frozenset[str] = frozenset()
    # general registers read, each with the part read from its bottom (bytes: 1 for %al, 2 for %ax and
    # %ah, 4, 8), and those written only in part (8 or 16 bits: the rest keeps what it held; a write of
    # %ah sets no bottom part, 0)
    general_reads: tuple[tuple[str, int], ...] = ()
    partial_writes: tuple[tuple[str, int], ...] = ()
    # the memory writes that happen whenever the instruction runs (not a masked store's), and the
    # registers it writes only on a condition or under a mask (cmov, a merge-masked move): what a
    # conditional write leaves may be what was there before (red team round 213)
    certain_writes: tuple[MemoryAccess, ...] = ()
    conditional_registers: frozenset[str] = frozenset()
    # whether it reads any of the status flags (a jcc, setcc, cmov, adc), and whether it sets or clears every one a
    # branch can read, whatever its operands (what an earlier instruction left in them is gone)
    reads_flags: bool = False
    writes_all_flags: bool = False


_FLOW = {ix.FlowControl.NEXT: "next", ix.FlowControl.UNCONDITIONAL_BRANCH: "branch",
         ix.FlowControl.CONDITIONAL_BRANCH: "conditional", ix.FlowControl.INDIRECT_BRANCH: "indirect-branch",
         ix.FlowControl.RETURN: "return", ix.FlowControl.CALL: "call", ix.FlowControl.INDIRECT_CALL: "indirect-call",
         ix.FlowControl.INTERRUPT: "interrupt", ix.FlowControl.XBEGIN_XABORT_XEND: "xbegin",
         ix.FlowControl.EXCEPTION: "exception"}
# Instructions that enter the kernel or change what memory may be written, whatever their flow class.
_SYSTEM = {"syscall", "sysenter", "sysexit", "sysret", "int", "int1", "into", "wrpkru", "xrstor", "xrstor64",
           "xrstors", "xrstors64", "fxrstor", "fxrstor64", "wrfsbase", "wrgsbase", "wrssd", "wrssq", "wrussd",
           "wrussq", "rstorssp", "saveprevssp", "setssbsy", "clrssbsy", "incsspd", "incsspq", "ltr", "lldt",
           "lgdt", "lidt", "wrmsr", "invlpg", "hlt", "iret", "iretd", "iretq", "uiret", "senduipi", "tpause",
           "umwait", "serialize", "xsetbv", "vmcall", "vmmcall", "vmfunc", "encls", "enclu", "swapgs"}


def _register(reg: int) -> str:
    return "" if reg == ix.Register.NONE else _REGISTER_NAMES.get(reg, f"r{reg}")


def _access(insn: ix.Instruction, m) -> MemoryAccess:
    # iced resolves a %rip-relative operand to its absolute address (no base register): give it
    # back its base, relative to the next instruction, as the relocation that follows reads it.
    rip = insn.is_ip_rel_memory_operand and m.base == ix.Register.NONE and m.index == ix.Register.NONE \
        and m.displacement == insn.ip_rel_memory_address
    displacement = m.displacement - (1 << 64) if m.displacement >= 1 << 63 else m.displacement
    return MemoryAccess(base="rip" if rip else _register(m.base), index=_register(m.index),
                       displacement=insn.ip_rel_memory_address - insn.next_ip if rip else displacement,
                       size=ix.MemorySizeExt.size(m.memory_size), segment=_register(m.segment))


def decode(code: bytes, address: int) -> Instruction | None:
    """The instruction whose first byte is `code[0]`, placed at `address`; None if invalid."""
    decoder = ix.Decoder(64, code, ip=address)
    insn = decoder.decode()
    if insn.is_invalid:
        return None
    info = ix.InstructionInfoFactory().info(insn)
    writes = tuple(_access(insn, m) for m in info.used_memory() if m.access in _WRITES)
    mnemonic = _MNEMONIC_NAMES.get(insn.mnemonic, "?")
    certain_writes = () if mnemonic in _MASKED_STORES else \
        tuple(_access(insn, m) for m in info.used_memory() if m.access in _CERTAIN_WRITES)
    reads = tuple(_access(insn, m) for m in info.used_memory() if m.access in _READS)
    stack = any(r.register in _STACK_POINTER and r.access in _WRITES for r in info.used_registers())
    flow = _FLOW.get(insn.flow_control, "exception")
    target = insn.near_branch_target if flow in ("branch", "conditional", "call") and insn.op0_kind in (
        ix.OpKind.NEAR_BRANCH64, ix.OpKind.NEAR_BRANCH32, ix.OpKind.NEAR_BRANCH16) else None
    written = frozenset(_register(ix.RegisterExt.full_register(r.register)) for r in info.used_registers()
                        if r.access in _WRITES)
    read = frozenset(_register(ix.RegisterExt.full_register(r.register)) for r in info.used_registers()
                     if r.access in _READS)
    legacy = insn.encoding == ix.EncodingKind.LEGACY
    vector_writes = {r.register for r in info.used_registers() if r.access in _WRITES and ix.RegisterExt.is_vector_register(
        r.register)}
    replaced = frozenset(_register(ix.RegisterExt.full_register(r.register)) for r in info.used_registers()
                         if r.access == ix.OpAccess.WRITE and ix.RegisterExt.size(r.register) >= 4
                         and not (legacy and r.register in vector_writes))
    low = frozenset(_register(ix.RegisterExt.full_register(r)) for r in vector_writes if legacy)
    general_reads = tuple((_register(ix.RegisterExt.full_register(r.register)), _part(r.register))
                          for r in info.used_registers() if r.access in _READS and ix.RegisterExt.is_gpr(r.register))
    partial = tuple((_register(ix.RegisterExt.full_register(r.register)),
                     0 if r.register in _HIGH_BYTES else ix.RegisterExt.size(r.register))
                    for r in info.used_registers() if r.access in _CERTAIN_WRITES and ix.RegisterExt.is_gpr(r.register)
                    and ix.RegisterExt.size(r.register) < 4)
    certainly = {_register(ix.RegisterExt.full_register(r.register)) for r in info.used_registers()
                 if r.access in _CERTAIN_WRITES}
    conditional = written - certainly
    wide = frozenset(_register(ix.RegisterExt.full_register(r.register)) for r in info.used_registers()
                     if r.access in _READS and ix.RegisterExt.is_vector_register(r.register)
                     and ix.RegisterExt.size(r.register) > 16)
    return Instruction(address=address, length=insn.len, mnemonic=mnemonic, text=_FORMATTER.format(insn),
                       writes=writes, reads=reads, writes_stack_pointer=stack, stack_pointer_increment=insn.stack_pointer_increment,
                       flow=flow, branch_target=target,
                       privileged_or_system=mnemonic in _SYSTEM or insn.is_privileged, written_registers=written,
                       read_registers=read, replaced_registers=replaced, wide_reads=wide, low_writes=low,
                       general_reads=general_reads, partial_writes=partial, certain_writes=certain_writes,
                       conditional_registers=conditional, reads_flags=insn.rflags_read != 0,
                       writes_all_flags=((insn.rflags_written | insn.rflags_cleared | insn.rflags_set) & _STATUS_FLAGS)
                       == _STATUS_FLAGS and mnemonic not in _SHIFTS)


# The status flags a program can branch on (AF only `lahf` and `pushf` read, which the scan refuses). An
# instruction sets them all only if it writes each for sure: not left undefined, and not a shift or rotate, whose
# count may be 0 and change no flag (red team round 290).
_STATUS_FLAGS = ix.RflagsBits.OF | ix.RflagsBits.SF | ix.RflagsBits.ZF | ix.RflagsBits.CF | ix.RflagsBits.PF
_SHIFTS = frozenset({"shl", "sal", "shr", "sar", "rol", "ror", "rcl", "rcr", "shld", "shrd", "shlx", "shrx", "sarx",
                     "rorx"})
_HIGH_BYTES = {ix.Register.AH, ix.Register.BH, ix.Register.CH, ix.Register.DH}


def _part(register: int) -> int:
    """Bytes of a general register an operand covers from its bottom (%ah: bits 8-15, so 2)."""
    return 2 if register in _HIGH_BYTES else ix.RegisterExt.size(register)


class SectionBytes:
    """The bytes of an object's executable sections, by objdump's section name (a name that
    occurs more than once is ambiguous: its instructions are not decoded, and the scan refuses)."""

    def __init__(self, obj: Path):
        self._data: dict[str, bytes] = {}
        self._ambiguous: set[str] = set()
        with obj.open("rb") as f:
            elf = ELFFile(f)
            for section in elf.iter_sections():
                if not section["sh_flags"] & 0x4:  # SHF_EXECINSTR
                    continue
                if section.name in self._data:
                    self._ambiguous.add(section.name)
                self._data[section.name] = section.data()

    def instruction(self, section: str, address: int) -> Instruction | None:
        """The instruction at `address` of `section`; None when it cannot be decoded there."""
        data = self._data.get(section)
        if data is None or section in self._ambiguous or not 0 <= address < len(data):
            return None
        return decode(data[address:address + 15], address)
