"""ruff on the library, with the rules in pyproject.toml ([tool.ruff]); CI runs it with the tests."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

from .conftest import ROOT

pytestmark = pytest.mark.skipif(importlib.util.find_spec("ruff") is None,
                                reason="ruff is not installed (pip install -e '.[dev]')")


def ruff(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", *args], cwd=ROOT, input=stdin,
                          capture_output=True, text=True, timeout=60)


def test_ruff_finds_nothing_in_src():
    r = ruff("src")
    assert r.returncode == 0, r.stdout + r.stderr


def test_the_project_rules_are_in_force():
    """What the check above would report: an unused import and a name never defined, in a file
    under src/ (so pyproject's [tool.ruff] applies), while a long line is allowed."""
    r = ruff("--stdin-filename", "src/kernelloop/lint_probe.py", "-",
             stdin="import os\n\n\ndef f():\n    return undefined_name  # " + "x" * 130 + "\n")
    assert r.returncode == 1 and "F401" in r.stdout and "F821" in r.stdout and "E501" not in r.stdout
