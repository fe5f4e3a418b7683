"""`kernelloop init --spec FILE`: init's options in a small TOML file kept beside the user's code.

A kernel file from a codebase has no `main` to say its sizes, and a dozen `--set`/`--count`/`--role`
flags do not belong in shell history. The file holds the same options by the same names:

    kernel = "layernorm_forward_kernel"     # or launcher = "layernorm_forward"
    template_args = "float"
    block = "256"
    include_dirs = ["../include"]           # relative to this file
    [set]
    B = [8, 5]                              # DEFAULT, ALTERNATIVE
    C = 768
    eps = 1e-5
    [count]
    inp = "B * T * C"
    [role]
    out = "output"
    [range]
    inp = [-2, 2]

Flags given on the command line win over the file, key by key. Unknown keys are reported with the
closest known one, like kernelloop.toml's.
"""

from __future__ import annotations

import difflib
import math
import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from ..errors import InputError
from .init import ROLES

Scalar = int | float | str


class InitSpecFile(BaseModel):
    """The options of one `init --spec` file, as read."""

    model_config = ConfigDict(extra="forbid")

    kernel: str | None = None
    launcher: str | None = None
    template_args: str | None = None
    grid: str | None = None
    block: str | None = None
    shared_memory: str | None = None
    capture_command: str | None = None
    include_dirs: list[Path] = []  # resolved against the spec file's folder
    keep_state: list[str] = []
    trust_call: list[str] = []
    set: dict[str, Scalar | list[Scalar]] = {}
    count: dict[str, str | int] = {}
    role: dict[str, str] = {}
    range: dict[str, list[int | float]] = {}

    def as_flags(self) -> dict[str, list[str]]:
        """The repeatable options as the command line spells them (NAME=VALUE)."""
        def values(v: Scalar | list[Scalar]) -> str:
            return ",".join(_spelled(x) for x in (v if isinstance(v, list) else [v]))
        return {
            "set": [f"{k}={values(v)}" for k, v in self.set.items()],
            "count": [f"{k}={v}" for k, v in self.count.items()],
            "role": [f"{k}={v}" for k, v in self.role.items()],
            "range": [f"{k}={','.join(_spelled(x) for x in v)}" for k, v in self.range.items()],
        }


def _spelled(x: Scalar) -> str:
    return repr(x) if isinstance(x, float) else str(x)


def read_init_spec(path: Path) -> InitSpecFile:
    """The spec file at `path`, checked; one InputError line for anything wrong in it."""
    try:
        data: dict[str, Any] = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise InputError(f"{path}: no such spec file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read it ({exc})") from None
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"{path}: not valid TOML ({exc})") from None
    known = list(InitSpecFile.model_fields)
    for key in data:
        if key not in known:
            close = difflib.get_close_matches(key, known, n=1)
            raise InputError(f"{path}: unknown key {key} ({f'did you mean {close[0]}?' if close else 'known: ' + ', '.join(known)})")
    try:
        spec = InitSpecFile.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise InputError(f"{path}: {where}: {first['msg']}") from None
    for name, role in spec.role.items():
        if role not in ROLES:
            raise InputError(f"{path}: role.{name} = {role!r}: the role is one of {', '.join(ROLES)}")
    for name, bounds in spec.range.items():
        if len(bounds) != 2 or not all(math.isfinite(b) for b in bounds) or bounds[0] >= bounds[1]:
            raise InputError(f"{path}: range.{name}: give two finite numbers [LO, HI] with LO < HI")
    for name, value in spec.set.items():
        if isinstance(value, list) and not 1 <= len(value) <= 2:
            raise InputError(f"{path}: set.{name}: give one value or [DEFAULT, ALTERNATIVE]")
    folder = path.parent
    return spec.model_copy(update={"include_dirs": [d if d.is_absolute() else folder / d for d in spec.include_dirs]})
