"""The package's one dependency direction (models/config -> tools -> agents -> graph -> CLI): every
import, at module level or inside a function, goes to a layer below its own or within its own
package. A new import that runs upward fails here, naming the file and the import."""

from __future__ import annotations

import ast
from pathlib import Path

from .conftest import ROOT

PACKAGE = ROOT / "src" / "kernelloop"

# Lowest first. A top-level module or package imports from layers below its own; only the shells
# (the last layer) import one another.
LAYERS: list[set[str]] = [
    {"errors", "__version__"},          # the root's version string (`from .. import __version__`)
    {"package_files"},                 # where the files shipped in the package are
    {"llm_config", "config", "toolkit_roots"},  # settings; where CUDA toolkits are
    {"program"},                       # the contract: reading and splitting a program
    {"tools"},                         # nvcc, ncu, CUPTI, the sandbox, GPUs, symbols
    {"verify", "engine", "capture_init", "init_state"},
    {"profiler"},                      # reads verify's program runs
    {"corpus", "optimizers", "reports"},
    {"runs", "doctor", "mcp", "bench"},
    {"agents"},                        # the graph's nodes
    {"graph"},                         # the LangGraph loop, optimize(), fan-out
    {"api", "cli", "__init__", "__main__"},  # the facade and the shells
]
RANK = {name: i for i, layer in enumerate(LAYERS) for name in layer}


def _imported_tops(path: Path, text: str | None = None) -> list[tuple[int, str]]:
    """(line, top-level module of kernelloop) for every import in the file (or TEXT, as that file)."""
    rel = path.relative_to(PACKAGE)
    package = list(rel.parts[:-1])
    found = []
    for node in ast.walk(ast.parse(path.read_text() if text is None else text)):
        if isinstance(node, ast.ImportFrom) and node.level > 0:
            base = package[:len(package) - (node.level - 1)]
            target = base + [m for m in (node.module or "").split(".") if m]
            names = target[:1] or [alias.name for alias in node.names]
            found += [(node.lineno, n) for n in names]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("kernelloop."):
            found.append((node.lineno, node.module.split(".")[1]))
        elif isinstance(node, ast.ImportFrom) and node.module == "kernelloop":
            # `from kernelloop import X`: X is a module of the package, else a name of the facade
            found += [(node.lineno, a.name if a.name in RANK else "__init__") for a in node.names]
        elif isinstance(node, ast.Import):
            found += [(node.lineno, a.name.split(".")[1]) for a in node.names if a.name.startswith("kernelloop.")]
            # a bare `import kernelloop` loads the facade, the top layer
            found += [(node.lineno, "__init__") for a in node.names if a.name == "kernelloop"]
    return found


def test_every_top_level_module_has_a_layer():
    tops = {p.name.removesuffix(".py") for p in PACKAGE.iterdir()
            if (p.suffix == ".py" or (p.is_dir() and (p / "__init__.py").exists()))}
    assert tops - RANK.keys() == set(), "give each new module or package a layer in LAYERS"


def test_no_import_runs_upward():
    # a module the table does not know counts as the highest layer: importing it is upward
    upward = []
    for path in sorted(PACKAGE.rglob("*.py")):
        own = path.relative_to(PACKAGE).parts[0].removesuffix(".py")
        for line, top in _imported_tops(path):
            if top == own:
                continue
            shells = RANK[own] == len(LAYERS) - 1
            if RANK.get(top, len(LAYERS)) > RANK[own] or (RANK.get(top) == RANK[own] and not shells):
                upward.append(f"{path.relative_to(ROOT)}:{line} imports {top} (layer {RANK.get(top)}) from "
                              f"{own} (layer {RANK[own]})")
    assert not upward, "\n".join(upward)


def test_the_check_itself_sees_an_upward_import():
    # a tools module importing the graph, at module level or inside a function, is what the rule is for
    probe = PACKAGE / "tools" / "probe.py"
    text = "from ..graph.optimize import optimize\n\ndef f():\n    from kernelloop.cli import app\n"
    tops = [top for _, top in _imported_tops(probe, text)]
    assert tops == ["graph", "cli"] and RANK["graph"] > RANK["tools"]


def test_the_check_sees_the_facade_imported_by_name():
    # `import kernelloop` or `from kernelloop import verify_files` in a lower layer reaches the facade
    probe = PACKAGE / "tools" / "probe.py"
    text = "import kernelloop\nfrom kernelloop import verify_files\nfrom kernelloop import config\n"
    assert [top for _, top in _imported_tops(probe, text)] == ["__init__", "__init__", "config"]
