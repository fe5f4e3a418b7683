"""Settings precedence: CLI flag > environment > project file > defaults."""

from __future__ import annotations

import pytest

from kernelloop.config import load_settings
from kernelloop.errors import ConfigError


def test_defaults(tmp_path, monkeypatch):
    for k in ("KERNELLOOP_VERIFY_THRESHOLD", "KERNELLOOP_VERIFY_RUNS"):
        monkeypatch.delenv(k, raising=False)
    s = load_settings(project_dir=tmp_path)
    assert s.verify.threshold == 1.2 and s.verify.runs == 7 and s.verify.seeds == 2 and s.verify.rtol is None


def test_precedence(tmp_path, monkeypatch):
    (tmp_path / "kernelloop.toml").write_text("[verify]\nthreshold = 1.5\nruns = 7\nseeds = 3\n")
    assert load_settings(project_dir=tmp_path).verify.threshold == 1.5
    monkeypatch.setenv("KERNELLOOP_VERIFY_THRESHOLD", "1.8")
    monkeypatch.setenv("KERNELLOOP_VERIFY_RUNS", "9")
    s = load_settings({"threshold": 2.0, "runs": None}, project_dir=tmp_path)
    assert s.verify.threshold == 2.0  # CLI
    assert s.verify.runs == 9  # environment over file
    assert s.verify.seeds == 3  # file over default


@pytest.mark.parametrize("cli, message", [
    ({"threshold": 1.0}, "greater than 1.0"),
    ({"runs": 2}, "runs"),
    ({"memcheck": "maybe"}, "memcheck"),
    ({"arch": None, "rtol": -1}, "rtol"),
])
def test_bad_values_are_one_line_config_errors(tmp_path, cli, message):
    with pytest.raises(ConfigError) as err:
        load_settings(cli, project_dir=tmp_path)
    assert message in str(err.value)


def test_bad_project_file(tmp_path):
    (tmp_path / "kernelloop.toml").write_text("[verify\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_settings(project_dir=tmp_path)
