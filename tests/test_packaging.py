"""What kernelloop reads at run time ships inside the package: every such folder lies under the
package, and every file in it is named by the package data in pyproject.toml (a wheel carries
nothing else; the templates, prompts and exemplars once lived at the repository's root, where an
installed kernelloop could not find them)."""

from __future__ import annotations

import fnmatch
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
