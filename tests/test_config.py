"""Settings precedence: CLI flag > environment > project file > defaults."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kernelloop.config import default_cache_dir, load_settings
from kernelloop.errors import ConfigError


def test_defaults(tmp_path, monkeypatch):
    for k in ("KERNELLOOP_VERIFY_THRESHOLD", "KERNELLOOP_VERIFY_RUNS"):
        monkeypatch.delenv(k, raising=False)
    s = load_settings(project_dir=tmp_path)
    assert s.verify.threshold == 1.2 and s.verify.timing_pairs == 7 and s.verify.seeds == 2 and s.verify.rtol is None


def test_precedence(tmp_path, monkeypatch):
    (tmp_path / "kernelloop.toml").write_text("[verify]\nthreshold = 1.5\nruns = 7\nseeds = 3\n")
    assert load_settings(project_dir=tmp_path).verify.threshold == 1.5
    monkeypatch.setenv("KERNELLOOP_VERIFY_THRESHOLD", "1.8")
    monkeypatch.setenv("KERNELLOOP_VERIFY_RUNS", "9")
    s = load_settings({"threshold": 2.0, "timing_pairs": None}, project_dir=tmp_path)
    assert s.verify.threshold == 2.0  # CLI
    assert s.verify.timing_pairs == 9  # environment over file (both under the former name)
    assert s.verify.seeds == 3  # file over default


@pytest.mark.parametrize("cli, message", [
    ({"threshold": 1.0}, "greater than 1.0"),
    ({"timing_pairs": 2}, "timing-pairs"),
    ({"runs": 2}, "timing-pairs"),
    ({"memcheck": "maybe"}, "memcheck"),
    ({"arch": None, "rtol": -1}, "rtol"),
])
def test_bad_values_are_one_line_config_errors(tmp_path, cli, message):
    with pytest.raises(ConfigError) as err:
        load_settings(cli, project_dir=tmp_path)
    assert message in str(err.value)


@pytest.mark.parametrize("text, message", [
    ("verify = 3\n", "[verify] must be a table of settings, not 3"),
    ("[verify]\nthreshhold = 5.0\n", "[verify]: unknown setting threshhold (did you mean threshold?)"),
    ("[verfy]\nruns = 9\n", "unknown setting verfy (did you mean [verify]?)"),
    ("[optimize]\nmax_iteration = 3\n", "unknown setting max_iteration (did you mean max_iterations?)"),
    ("[verify]\nseeds = 0\n", "kernelloop.toml [verify] seeds: Input should be greater than or equal to 1"),
    ("[verify]\nrtol = inf\n", "kernelloop.toml [verify] rtol: Input should be a finite number"),
])
def test_project_file_mistakes_name_the_key_and_suggest_the_right_one(tmp_path, text, message):
    (tmp_path / "kernelloop.toml").write_text(text)
    with pytest.raises(ConfigError) as err:
        load_settings(project_dir=tmp_path)
    assert message in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("cli, env, source", [
    ({"threshold": float("nan")}, {}, "--threshold: Input should be a finite number"),
    ({"rtol": ["inf"]}, {}, "--rtol: Input should be a finite number"),
    ({"atol": ["out=inf"]}, {}, "--atol (output out): Input should be a finite number"),
    ({}, {"KERNELLOOP_VERIFY_RTOL": "inf"}, "KERNELLOOP_VERIFY_RTOL=inf: Input should be a finite number"),
    ({}, {"KERNELLOOP_VERIFY_THRESHOLD": "abc"}, "KERNELLOOP_VERIFY_THRESHOLD=abc: Input should be a valid number"),
])
def test_non_finite_and_unreadable_values_are_refused_naming_where_they_came_from(tmp_path, monkeypatch, cli, env,
                                                                                 source):
    # rtol = inf would switch the correctness check off; the error names the flag or variable
    for k in ("KERNELLOOP_VERIFY_RTOL", "KERNELLOOP_VERIFY_ATOL", "KERNELLOOP_VERIFY_THRESHOLD"):
        monkeypatch.delenv(k, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    with pytest.raises(ConfigError) as err:
        load_settings(cli, project_dir=tmp_path)
    assert source in str(err.value)


def test_bad_project_file(tmp_path):
    (tmp_path / "kernelloop.toml").write_text("[verify\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_settings(project_dir=tmp_path)


# -- tolerances: for every output, and per output by name (issue 10) --------------------------


@pytest.fixture
def no_tolerance_env(monkeypatch):
    for k in ("KERNELLOOP_VERIFY_RTOL", "KERNELLOOP_VERIFY_ATOL", "KERNELLOOP_VERIFY_TOLERANCES"):
        monkeypatch.delenv(k, raising=False)


def test_flags_give_every_output_or_one_output(tmp_path, no_tolerance_env):
    s = load_settings({"rtol": ["1e-5", "out=1e-4"], "atol": ["dbias=1e-6", "out=0"]}, project_dir=tmp_path)
    assert s.verify.rtol == 1e-5 and s.verify.atol is None
    assert {k: v.model_dump() for k, v in s.verify.tolerances.items()} == {
        "out": {"rtol": 1e-4, "atol": 0.0}, "dbias": {"rtol": None, "atol": 1e-6}}
    # comma-separated items, a plain number as before, and the last of repeats wins
    s = load_settings({"rtol": ["out=1e-4,dx=2e-4", "out=3e-4"], "atol": 0.5}, project_dir=tmp_path)
    assert s.verify.rtol is None and s.verify.atol == 0.5
    assert s.verify.tolerances["out"].rtol == 3e-4 and s.verify.tolerances["dx"].rtol == 2e-4
    assert load_settings(project_dir=tmp_path).verify.tolerances == {}


def test_per_output_tolerances_layer_by_name_cli_over_env_over_file(tmp_path, monkeypatch, no_tolerance_env):
    (tmp_path / "kernelloop.toml").write_text(
        "[verify]\nrtol = 1e-6\n\n[verify.tolerances.out]\nrtol = 1e-4\natol = 0\n\n"
        "[verify.tolerances.dbias]\natol = 1e-6\n")
    s = load_settings(project_dir=tmp_path)
    assert s.verify.rtol == 1e-6
    assert (s.verify.tolerances["out"].rtol, s.verify.tolerances["out"].atol) == (1e-4, 0.0)
    assert (s.verify.tolerances["dbias"].rtol, s.verify.tolerances["dbias"].atol) == (None, 1e-6)
    monkeypatch.setenv("KERNELLOOP_VERIFY_RTOL", "out=2e-4, dx=1e-3")
    s = load_settings({"rtol": ["out=3e-4"], "atol": ["dbias=5e-6"]}, project_dir=tmp_path)
    t = s.verify.tolerances
    assert t["out"].rtol == 3e-4 and t["out"].atol == 0.0  # the flag's rtol, the file's atol
    assert t["dx"].rtol == 1e-3 and t["dbias"].atol == 5e-6
    # the every-output value from a higher layer leaves the per-output ones in place
    s = load_settings({"rtol": ["1e-3"]}, project_dir=tmp_path)
    assert s.verify.rtol == 1e-3 and s.verify.tolerances["out"].rtol == 2e-4


@pytest.mark.parametrize("cli, message", [
    ({"rtol": ["out=abc"]}, "--rtol 'out=abc': 'abc' is not a number"),
    ({"rtol": ["=1e-4"]}, "--rtol '=1e-4': give a number (every output) or NAME=NUMBER"),
    ({"atol": ["out=1e-4,"]}, "--atol 'out=1e-4,'"),
    ({"atol": ["fast"]}, "--atol 'fast': 'fast' is not a number"),
    ({"rtol": ["out=-1"]}, "--rtol (output out): Input should be greater than or equal to 0"),
    ({"rtol": ["-1"]}, "--rtol: Input should be greater than or equal to 0"),
])
def test_bad_tolerance_flags_are_one_line_config_errors(tmp_path, no_tolerance_env, cli, message):
    with pytest.raises(ConfigError) as err:
        load_settings(cli, project_dir=tmp_path)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_bad_tolerance_tables_and_variables_are_reported(tmp_path, monkeypatch, no_tolerance_env):
    (tmp_path / "kernelloop.toml").write_text("[verify.tolerances.out]\nrtl = 1e-4\n")
    with pytest.raises(ConfigError, match=r"\[verify\.tolerances\.out\] rtl: Extra inputs are not permitted"):
        load_settings(project_dir=tmp_path)
    (tmp_path / "kernelloop.toml").write_text("[verify]\ntolerances = 3\n")
    with pytest.raises(ConfigError, match=r"\[verify\] tolerances: Input should be a valid dictionary"):
        load_settings({"rtol": ["out=1e-4"]}, project_dir=tmp_path)
    (tmp_path / "kernelloop.toml").unlink()
    monkeypatch.setenv("KERNELLOOP_VERIFY_RTOL", "out=x")
    with pytest.raises(ConfigError, match="KERNELLOOP_VERIFY_RTOL 'out=x'"):
        load_settings(project_dir=tmp_path)
    monkeypatch.setenv("KERNELLOOP_VERIFY_RTOL", "1e-4")
    assert load_settings(project_dir=tmp_path).verify.rtol == 1e-4  # the plain number, as before
    monkeypatch.setenv("KERNELLOOP_VERIFY_TOLERANCES", "out=1")
    with pytest.raises(ConfigError, match="KERNELLOOP_VERIFY_TOLERANCES is not read"):
        load_settings(project_dir=tmp_path)


def test_optimize_hands_its_verify_settings_to_the_verifier_server(tmp_path, monkeypatch, no_tolerance_env):
    # `kernelloop optimize --rtol ...`: the verifier runs in the sandbox MCP server; the run's [verify]
    # settings reach it whole when it starts, and it verifies with them, not its folder's.
    from kernelloop.config import RUN_VERIFY_SETTINGS_ENV, run_verify_settings
    from kernelloop.graph.optimize import mcp_toolbox

    s = load_settings({"rtol": ["1e-5", "out=1e-4"], "atol": ["dbias=1e-6"], "seeds": 3}, project_dir=tmp_path)
    toolbox = mcp_toolbox(s)
    assert toolbox.env is not None and toolbox.env["PATH"] == __import__("os").environ["PATH"]
    monkeypatch.setenv(RUN_VERIFY_SETTINGS_ENV, toolbox.env[RUN_VERIFY_SETTINGS_ENV])  # what the server sees
    assert run_verify_settings() == s.verify
    monkeypatch.setenv(RUN_VERIFY_SETTINGS_ENV, '{"rtol": "inf"}')
    with pytest.raises(ConfigError, match=RUN_VERIFY_SETTINGS_ENV):
        run_verify_settings()
    monkeypatch.delenv(RUN_VERIFY_SETTINGS_ENV)
    assert run_verify_settings() is None

@pytest.mark.parametrize("variable, suggestion", [
    ("KERNELLOOP_VERIFY_THRESHHOLD", "KERNELLOOP_VERIFY_THRESHOLD"),
    ("KERNELLOOP_OPTIMIZE_MAX_ITERATION", "KERNELLOOP_OPTIMIZE_MAX_ITERATIONS"),
    ("KERNELLOOP_BENCH_PAIR", "KERNELLOOP_BENCH_PAIRS"),
])
def test_a_misspelt_section_variable_is_named_with_the_right_one(monkeypatch, tmp_path, variable, suggestion):
    monkeypatch.setenv(variable, "3")
    with pytest.raises(ConfigError, match=f"unknown setting {variable} \\(did you mean {suggestion}\\?\\)"):
        load_settings(project_dir=tmp_path)


def test_an_error_names_the_flag_as_the_user_types_it(tmp_path):
    # the setting is run_timeout_s; the flag is --run-timeout
    with pytest.raises(ConfigError, match=r"^--run-timeout: "):
        load_settings({"run_timeout_s": 0}, project_dir=tmp_path)


def test_a_bad_variable_outside_the_settings_file_is_one_line_not_an_import_crash(tmp_path, monkeypatch):
    import subprocess
    import sys

    from kernelloop.tools.sandbox import sandbox_uid_base

    env = {**os.environ, "KERNELLOOP_SANDBOX_UID_BASE": "abc", "KERNELLOOP_EMBEDDINGS": "bogus",
           "KERNELLOOP_DATA_DIR": str(tmp_path / "d"), "KERNELLOOP_CACHE_DIR": str(tmp_path / "c")}
    # importing the sandbox module read the uid base and crashed every command with a traceback
    done = subprocess.run([sys.executable, "-c", "import kernelloop.tools.sandbox, kernelloop.corpus.dense"],
                          capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    monkeypatch.setenv("KERNELLOOP_SANDBOX_UID_BASE", "abc")
    with pytest.raises(ConfigError, match="KERNELLOOP_SANDBOX_UID_BASE=abc: not a whole number"):
        sandbox_uid_base()
    # an unknown embeddings backend was read as "auto" without a word
    done = subprocess.run([sys.executable, "-m", "kernelloop", "corpus", "search", "tiling"], capture_output=True,
                          text=True, env=env, cwd=tmp_path)
    assert done.returncode == 2 and "KERNELLOOP_EMBEDDINGS=bogus: use one of auto, nvidia, local, off" in done.stderr
    assert "Traceback" not in done.stderr, done.stderr


def test_internal_variables_are_read_through_config_and_only_declared_ones(monkeypatch):
    from kernelloop.config import internal_value
    monkeypatch.setenv("KERNELLOOP_NCU_INPROCESS", "1")
    assert internal_value("KERNELLOOP_NCU_INPROCESS") == "1"
    monkeypatch.delenv("KERNELLOOP_NCU_INPROCESS")
    assert internal_value("KERNELLOOP_NCU_INPROCESS") is None
    with pytest.raises(KeyError):
        internal_value("KERNELLOOP_NOT_A_VARIABLE")


def test_timing_pairs_are_read_under_their_former_name_runs_everywhere(tmp_path, monkeypatch):
    # issue 12: "runs" named four things; the setting is timing_pairs now, and what users typed still works
    for k in ("KERNELLOOP_VERIFY_RUNS", "KERNELLOOP_VERIFY_TIMING_PAIRS", "KERNELLOOP_VERIFY_MAX_RUNS"):
        monkeypatch.delenv(k, raising=False)
    (tmp_path / "kernelloop.toml").write_text("[verify]\nruns = 11\nmax_runs = 21\n")
    s = load_settings(project_dir=tmp_path)
    assert (s.verify.timing_pairs, s.verify.max_timing_pairs) == (11, 21)
    monkeypatch.setenv("KERNELLOOP_VERIFY_RUNS", "13")
    assert load_settings(project_dir=tmp_path).verify.timing_pairs == 13
    assert load_settings({"runs": 17}, project_dir=tmp_path).verify.timing_pairs == 17
    assert load_settings({"timing_pairs": 19}, project_dir=tmp_path).verify.timing_pairs == 19


@pytest.mark.parametrize("where", ["file", "environment", "flags"])
def test_a_setting_under_both_names_is_one_clear_error(tmp_path, monkeypatch, where):
    for k in ("KERNELLOOP_VERIFY_RUNS", "KERNELLOOP_VERIFY_TIMING_PAIRS"):
        monkeypatch.delenv(k, raising=False)
    cli = None
    if where == "file":
        (tmp_path / "kernelloop.toml").write_text("[verify]\nruns = 11\ntiming_pairs = 9\n")
    elif where == "environment":
        monkeypatch.setenv("KERNELLOOP_VERIFY_RUNS", "11")
        monkeypatch.setenv("KERNELLOOP_VERIFY_TIMING_PAIRS", "9")
    else:
        cli = {"runs": 11, "timing_pairs": 9}
    with pytest.raises(ConfigError) as err:
        load_settings(cli, project_dir=tmp_path)
    assert "runs is the former name of timing_pairs; give timing_pairs alone" in str(err.value)


def test_a_bad_value_under_the_former_name_is_named_as_given(tmp_path, monkeypatch):
    monkeypatch.delenv("KERNELLOOP_VERIFY_TIMING_PAIRS", raising=False)
    monkeypatch.setenv("KERNELLOOP_VERIFY_RUNS", "abc")
    with pytest.raises(ConfigError, match=r"^KERNELLOOP_VERIFY_RUNS=abc: "):
        load_settings(project_dir=tmp_path)
    monkeypatch.delenv("KERNELLOOP_VERIFY_RUNS")
    (tmp_path / "kernelloop.toml").write_text("[verify]\nruns = 2\n")
    with pytest.raises(ConfigError, match=r"kernelloop.toml \[verify\] runs: "):
        load_settings(project_dir=tmp_path)


def test_the_test_suite_never_writes_into_the_users_own_folders(tmp_path):
    # conftest points the cache and data folders at a temporary folder: a test that builds, caches
    # or records a run never touches ~/.cache/kernelloop or ~/.local/share/kernelloop
    from platformdirs import user_cache_dir, user_data_dir

    settings = load_settings(project_dir=tmp_path)
    for folder, users in ((settings.cache_dir, user_cache_dir("kernelloop")),
                          (settings.data_dir, user_data_dir("kernelloop")),
                          (default_cache_dir(), user_cache_dir("kernelloop"))):
        assert not Path(folder).resolve().is_relative_to(Path(users).resolve()), folder
