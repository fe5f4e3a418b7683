"""Every KERNELLOOP_* variable a user may set is declared in one place (config.ENVIRONMENT) and
read through config.environment_value; one kernelloop does not read is reported by doctor with the
name it probably meant (issue 12: environment reads scattered over five modules; a misspelt
variable leaves the default in force unseen)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import kernelloop
from kernelloop.config import ENVIRONMENT, INTERNAL_ENVIRONMENT, environment_value, unknown_environment

from .conftest import ROOT

PACKAGE = Path(kernelloop.__file__).parent
_READ = re.compile(r"os\.environ(?:\.get\(|\[)\s*([A-Za-z_]\w*|\"[^\"]*\"|f\"[^\"]*\")")
_CONSTANT = re.compile(r"^([A-Z_][A-Z0-9_]*)\s*=\s*\"(KERNELLOOP_[A-Z0-9_]*)\"", re.M)


def test_a_misspelt_variable_is_reported_with_the_one_meant():
    env = {"KERNELLOOP_EMBEDING": "local", "KERNELLOOP_ENGINE": "ray", "KERNELLOOP_VERIFY_RUNS": "9",
           "KERNELLOOP_SEED": "1", "KERNELLOOP_MCP_TIMEOUT_VERIFY": "900", "KERNELLOOP_FROBNICATE": "1",
           "PATH": "/bin"}
    assert unknown_environment(env) == [("KERNELLOOP_EMBEDING", "KERNELLOOP_EMBEDDINGS"),
                                        ("KERNELLOOP_FROBNICATE", None)]


def test_doctor_warns_about_an_unread_variable(monkeypatch, tmp_path):
    from kernelloop.doctor import check_settings

    monkeypatch.setenv("KERNELLOOP_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("KERNELLOOP_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("KERNELLOOP_NIM_RERANK_MODLE", "off")
    check = check_settings(tmp_path)
    assert check.status == "warn" and "KERNELLOOP_NIM_RERANK_MODLE" in check.detail
    assert check.fix == "did you mean KERNELLOOP_NIM_RERANK_MODEL?"


def test_an_undeclared_variable_cannot_be_read(monkeypatch):
    monkeypatch.setenv("KERNELLOOP_ENGINE", "  ray ")
    assert environment_value("KERNELLOOP_ENGINE") == "ray"
    with pytest.raises(KeyError):
        environment_value("KERNELLOOP_SOMETHING_NEW")


def test_no_module_reads_a_user_variable_of_its_own():
    own = {"config.py", "llm_config.py"}  # the settings themselves, and the LLM endpoint's (with .env)
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name in own:
            continue
        text = path.read_text()
        constants = dict(_CONSTANT.findall(text))
        for m in _READ.finditer(text):
            arg = m.group(1).strip('"').removeprefix('f"')
            name = constants.get(arg, arg)
            if name.startswith("KERNELLOOP_") and name not in INTERNAL_ENVIRONMENT:
                found.append(f"{path.relative_to(PACKAGE)}: {name}")
    assert not found, found


def test_every_declared_variable_is_in_the_readme():
    readme = (ROOT / "README.md").read_text()
    assert [name for name in ENVIRONMENT if name not in readme] == []
