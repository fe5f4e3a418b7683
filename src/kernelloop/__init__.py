"""kernelloop: make CUDA kernels faster and prove it.

    from kernelloop import verify_files, profile_file, optimize, search, Settings

Importing the package loads none of them: each is imported on first use (module __getattr__),
so `kernelloop --help` and `import kernelloop` stay fast. What each one does: kernelloop/api.py.
"""

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (type checkers read it so)

__version__ = "0.1.0"

# public name -> the module that defines it
_PUBLIC = {
    "verify_files": "kernelloop.api",
    "profile_file": "kernelloop.api",
    "optimize": "kernelloop.api",
    "search": "kernelloop.corpus.engine",
    "Settings": "kernelloop.config",
}
__all__ = ["Settings", "__version__", "optimize", "profile_file", "search", "verify_files"]

if TYPE_CHECKING:
    from typing import Any

    from .api import optimize, profile_file, verify_files
    from .config import Settings
    from .corpus.engine import search


def __getattr__(name: str) -> "Any":
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'kernelloop' has no attribute {name!r}")
    from importlib import import_module  # here, not at the top: `import kernelloop` stays as cheap as can be

    value = getattr(import_module(module), name)
    globals()[name] = value  # the next access is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_PUBLIC})
