"""Reading a PTX module as text: its functions (kernels and device functions) and variables, by
name. The one reader behind init's state check (what a kernel's body names) and its copy check
(a kernel's text with everything it reaches)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_FUNCTION = re.compile(r"^(?P<attributes>(?:\.visible\s+|\.weak\s+|\.extern\s+)*)\.(?:entry|func)\s+"
                       r"(?:\([^)]*\)\s*)?(?P<name>[\w$.]+)")
_VARIABLE = re.compile(r"^(?:\.visible\s+|\.weak\s+|\.extern\s+)*\.(?:global|const|shared)\s[^;]*?(?P<name>[\w$]+)"
                       r"(?:\[\d*\])*\s*(?:=|;)")
NAME = re.compile(r"[A-Za-z_$][\w$]*")


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
    variables: dict[str, str] = field(default_factory=dict)  # name -> its declaration line


def read_ptx(text: str) -> PtxModule:
    """Functions (a name declared, then defined, keeps both in `lines`) and module-scope variables."""
    module = PtxModule()
    current: PtxFunction | None = None
    in_body = False
    for line in text.splitlines():
        if not in_body and (m := _FUNCTION.match(line)):
            current = module.functions.setdefault(m.group("name"), PtxFunction(m.group("name")))
            current.extern |= ".extern" in m.group("attributes")
            current.lines.append(line)
        elif current is None:
            if m := _VARIABLE.match(line):
                module.variables[m.group("name")] = line.strip()
        else:
            current.lines.append(line)
            if not in_body and line.startswith("{"):
                in_body = True
            elif in_body and line.startswith("}"):
                in_body, current = False, None
            elif in_body:
                current.body.append(line)
            elif line.strip().endswith(";"):  # a declaration ends without a body
                current = None
    return module
