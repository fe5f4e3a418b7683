"""Which functions the compiler inlined into a host function, read from the object's debug
information (an object built with `-g`, which GCC guarantees changes no code).

A function inlined into another leaves no symbol and no relocation, so a reading of the object's
symbols and relocations (state_refs, code_identity) cannot see it: `init`'s comparison of the
user's file with the generated program found every function each defines, but not a template the
generated program's start-up code inlined (`always_inline`) where the user's file called another
overload (red team round 308). The debug information names every inlined instance.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from elftools.elf.elffile import ELFFile

# The scopes a qualified name is made of, as DWARF nests them
_SCOPES = {"DW_TAG_namespace", "DW_TAG_class_type", "DW_TAG_structure_type", "DW_TAG_union_type"}


def inlined_into(obj: Path, chosen: Callable[[str], bool]) -> dict[str, set[str]]:
    """For each function of `obj` whose symbol `chosen` accepts, the qualified names (template
    arguments included, `setup<int>`) of the functions inlined into it, at any depth. Where a
    function was declared says nothing (a `#line` directive names any file)."""
    found: dict[str, set[str]] = {}
    with obj.open("rb") as handle:
        elf = ELFFile(handle)
        if not elf.has_dwarf_info():
            raise ValueError(f"{obj} has no debug information: build it with -g")
        dwarf = elf.get_dwarf_info()
        for unit in dwarf.iter_CUs():
            for die in unit.iter_DIEs():
                if die.tag != "DW_TAG_subprogram" or "DW_AT_low_pc" not in die.attributes:
                    continue
                symbol = _symbol_name(die)
                if symbol and chosen(symbol):
                    names = found.setdefault(symbol, set())
                    names.update(_qualified_name(_origin(inlined)) for inlined in _inlined_instances(die))
    return found


def _inlined_instances(die):
    for child in die.iter_children():
        if child.tag == "DW_TAG_inlined_subroutine":
            yield child
        yield from _inlined_instances(child)


def _origin(die):
    """The declaration an inlined instance (or an out-of-line definition) stands for."""
    seen = 0
    while seen < 16:  # a chain of abstract origins and specifications is short; never a cycle
        seen += 1
        for link in ("DW_AT_abstract_origin", "DW_AT_specification"):
            if link in die.attributes:
                die = die.get_DIE_from_attribute(link)
                break
        else:
            return die
    return die


def _attribute(die, name: str):
    """An attribute's value, looked up through the abstract origins and specifications too."""
    seen = 0
    while die is not None and seen < 16:
        seen += 1
        if name in die.attributes:
            return die.attributes[name].value
        link = next((a for a in ("DW_AT_abstract_origin", "DW_AT_specification") if a in die.attributes), None)
        die = die.get_DIE_from_attribute(link) if link else None
    return None


def _symbol_name(die) -> str:
    value = _attribute(die, "DW_AT_linkage_name") or _attribute(die, "DW_AT_MIPS_linkage_name") \
        or _attribute(die, "DW_AT_name")
    return value.decode(errors="replace") if isinstance(value, bytes) else ""


def _qualified_name(die) -> str:
    name = _attribute(die, "DW_AT_name")
    parts = [name.decode(errors="replace") if isinstance(name, bytes) else "<anonymous>"]
    parent = die.get_parent()
    while parent is not None and parent.tag in _SCOPES:
        scope = parent.attributes.get("DW_AT_name")
        parts.append(scope.value.decode(errors="replace") if scope else "(anonymous namespace)")
        parent = parent.get_parent()
    return "::".join(reversed(parts))
