"""What kernelloop reads at run time ships inside the package: every such folder lies under the
package, and every file in it is named by the package data in pyproject.toml (a wheel carries
nothing else; the templates, prompts and exemplars once lived at the repository's root, where an
installed kernelloop could not find them)."""

from __future__ import annotations

import fnmatch
import json
import tomllib
from pathlib import Path

import kernelloop
from kernelloop.corpus import ingest
from kernelloop.optimizers import prompting
from kernelloop.optimizers.offline import templates

from .conftest import ROOT

PACKAGE = Path(kernelloop.__file__).resolve().parent


def _package_data() -> list[str]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["kernelloop"]


def test_every_folder_read_at_run_time_is_inside_the_package_and_shipped():
    folders = [prompting.PROMPTS_DIR, ingest.EXEMPLARS_DIR, ingest.NOTES_DIR, templates.DEFAULT_TEMPLATES_DIR,
               PACKAGE / "harness", PACKAGE / "native"]
    globs = _package_data()
    for folder in folders:
        assert folder.resolve().is_relative_to(PACKAGE), folder
        files = [p for p in folder.iterdir() if p.is_file() and not p.name.startswith(".")]
        assert files, folder
        for f in files:
            relative = f.resolve().relative_to(PACKAGE).as_posix()
            assert any(fnmatch.fnmatchcase(relative, g) for g in globs), f"{relative} is not package data"
    assert prompting.EXEMPLAR_PATH.resolve().is_relative_to(PACKAGE) and prompting.EXEMPLAR_PATH.is_file()


_IMPORT_GUARD = """import sys
import sysconfig
from importlib.machinery import PathFinder

_allowed = set(ALLOWED) | set(sys.stdlib_module_names) | {"kernelloop", "sitecustomize", "__main__"}
_stdlib = tuple({sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib")})


class _Undeclared:
    def find_spec(self, name, path=None, target=None):
        top = name.partition(".")[0]
        if top in _allowed:
            return None
        found = PathFinder.find_spec(name, path)  # the standard library's private modules (_sysconfigdata_...)
        if found is not None and (found.origin or "").startswith(_stdlib) and "-packages" not in (found.origin or ""):
            return None
        raise ModuleNotFoundError(f"{top} is not a dependency the wheel declares", name=name)


sys.meta_path.insert(0, _Undeclared())
"""


def _declared_modules(site: Path) -> set[str]:
    """The top-level modules of every distribution the installed wheel's Requires-Dist reaches (markers as they
    hold here, extras not taken), as this environment installed them."""
    import importlib.metadata as md
    import re

    from packaging.requirements import Requirement

    by_distribution: dict[str, set[str]] = {}
    for module, names in md.packages_distributions().items():
        for name in names:
            by_distribution.setdefault(re.sub(r"[-_.]+", "-", name).lower(), set()).add(module)
    (wheel_dist,) = [d for d in md.distributions(path=[str(site)]) if d.metadata["Name"] == "kernelloop"]
    pending, seen, modules = list(wheel_dist.requires or []), set(), set()
    while pending:
        requirement = Requirement(pending.pop())
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
            continue
        key = re.sub(r"[-_.]+", "-", requirement.name).lower()
        if key in seen:
            continue
        seen.add(key)
        modules |= by_distribution.get(key, set())
        try:
            pending += md.distribution(requirement.name).requires or []
        except md.PackageNotFoundError:
            pass  # not installed here: nothing of it can be imported anyway
    return modules


def test_the_built_wheel_works_outside_the_source_tree(tmp_path):
    """Build the wheel, install it alone into a folder and run it from there (the dependencies are
    this environment's): the CLI starts, and the harness header, templates, prompts and notes it
    reads are the wheel's own files, not the checkout's."""
    import os
    import subprocess
    import sys

    import shutil

    # From a copy of what the wheel is built from: a checkout's stale build/ must not leak into it.
    source, dist, site = tmp_path / "source", tmp_path / "dist", tmp_path / "site"
    shutil.copytree(ROOT / "src", source / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                            "-w", str(dist), str(source)], capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stderr[-2000:]
    (wheel,) = dist.glob("kernelloop-*.whl")
    install = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-compile",
                              "--target", str(site), str(wheel)], capture_output=True, text=True, timeout=300)
    assert install.returncode == 0, install.stderr[-2000:]
    # Only what the wheel declares may be imported (issue 12: a dependency used but not declared works here, where
    # the development environment has it, and fails on a user's fresh install): every run below starts with an
    # import guard that lets through the standard library, kernelloop and the modules of the distributions the
    # wheel's Requires-Dist reaches.
    guard = tmp_path / "guard"
    guard.mkdir()
    (guard / "sitecustomize.py").write_text(_IMPORT_GUARD.replace("ALLOWED", repr(sorted(_declared_modules(site)))))
    env = {**os.environ, "PYTHONPATH": f"{guard}{os.pathsep}{site}"}
    probe = ("import kernelloop, pathlib\n"
             "from kernelloop.optimizers.offline.templates import load_templates\n"
             "from kernelloop.optimizers import prompting\n"
             "from kernelloop.corpus import ingest\n"
             "print(pathlib.Path(kernelloop.__file__).resolve())\n"
             "print(len(load_templates()), prompting.EXEMPLAR_PATH.is_file(), len(list(ingest.NOTES_DIR.iterdir())))\n")
    run = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    location, counts = run.stdout.strip().splitlines()
    assert Path(location).is_relative_to(site.resolve()), location  # the wheel's copy, not the checkout
    templates_count, exemplar, notes = counts.split()
    assert int(templates_count) > 0 and exemplar == "True" and int(notes) > 0, counts
    include = subprocess.run([sys.executable, "-m", "kernelloop", "include-dir"], cwd=tmp_path, env=env,
                             capture_output=True, text=True, timeout=120)
    assert include.returncode == 0, include.stderr[-2000:]
    folder = Path(include.stdout.strip())
    assert folder.is_relative_to(site.resolve()) and (folder / "kernelloop_harness.cuh").is_file(), include.stdout
    version = subprocess.run([sys.executable, "-m", "kernelloop", "--version"], cwd=tmp_path, env=env,
                             capture_output=True, text=True, timeout=120)
    assert version.returncode == 0 and version.stdout.strip(), version.stderr[-2000:]
    # Every command that reads the shipped files, run from the wheel (issue 12): retrieval over the
    # bundled notes, an offline proposal from the bundled templates, and the static gates with the
    # bundled harness header (where nvcc is on PATH).
    home = {**env, "KERNELLOOP_DATA_DIR": str(tmp_path / "data"), "KERNELLOOP_CACHE_DIR": str(tmp_path / "cache"),
            "KERNELLOOP_EMBEDDINGS": "off"}
    search = subprocess.run([sys.executable, "-m", "kernelloop", "corpus", "search", "shared memory tiling",
                             "--json"], cwd=tmp_path, env=home, capture_output=True, text=True, timeout=300)
    assert search.returncode == 0, search.stderr[-2000:]
    hits = json.loads(search.stdout)
    assert hits and all(Path(h["source"]).is_relative_to(site.resolve()) for h in hits), hits[:1]  # the wheel's notes
    program = tmp_path / "naive_matmul.cu"
    shutil.copy(ROOT / "kernels" / "naive_matmul.cu", program)
    propose = ("import pathlib\n"
               "from kernelloop.optimizers.base import OptimizeRequest\n"
               "from kernelloop.optimizers.offline import OfflineOptimizer\n"
               "from kernelloop.program.split import split_program\n"
               "text = pathlib.Path('naive_matmul.cu').read_text()\n"
               "s = split_program(text, 'naive_matmul')\n"
               "r = OptimizeRequest(kernel_name='naive_matmul', program=text, baseline_editable=s.editable,\n"
               "    current_editable=s.editable, preamble=s.preamble, harness=s.harness, exported=s.exported,\n"
               "    arch='sm_86', gpu_name='NVIDIA A10')\n"
               "print(OfflineOptimizer().propose(r).approach)\n"
               # the LLM optimizer's prompts and exemplar, as it builds its first messages
               "from kernelloop.optimizers.prompting import build_messages\n"
               "assert len(build_messages(r)) >= 2 and 'naive_matmul' in str(build_messages(r)[-1])\n")
    proposal = subprocess.run([sys.executable, "-c", propose], cwd=tmp_path, env=home, capture_output=True, text=True,
                              timeout=300)
    assert proposal.returncode == 0 and proposal.stdout.strip(), proposal.stderr[-2000:]
    if shutil.which("nvcc"):
        static = subprocess.run([sys.executable, "-m", "kernelloop", "verify", "--static", "--arch", "sm_86",
                                 str(program), str(program)], cwd=tmp_path, env=home, capture_output=True, text=True,
                                timeout=600)
        assert static.returncode == 0, (static.stdout[-1000:], static.stderr[-2000:])
