"""C++ symbol names as people read them: binutils' c++filt over a batch of mangled names."""

from __future__ import annotations

import subprocess


def demangle(names: list[str]) -> list[str]:
    """Each name demangled (`_Z6launchPfi` -> `launch(float*, int)`); the names unchanged when
    c++filt is missing or fails, and a name that is not mangled stays as it is."""
    if not names:
        return []
    try:
        out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return names
    lines = out.splitlines()
    return lines if len(lines) == len(names) else names


def bare_name(signature: str) -> str:
    """A function's own name from its demangled signature: `void ns::launch_x<float>(float*, int)` -> `launch_x`."""
    head = signature.split("(", 1)[0]
    depth, out = 0, ""
    for ch in head:  # drop template argument lists
        depth += ch == "<"
        if depth == 0:
            out += ch
        depth -= ch == ">"
    return out.split()[-1].split("::")[-1] if out.split() else signature
