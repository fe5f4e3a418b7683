"""The command line's habits: examples in the help of the main commands, one option name for one
idea, fixed choices shown as choices, exit codes stated, the visible GPU's architecture by
default, and commands that answer without loading the agent loop (LangGraph, MCP)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from kernelloop.cli.app import app
from kernelloop.tools.gpu import GpuInfo

from .conftest import ROOT

runner = CliRunner()
WIDE = {"COLUMNS": "200"}


def help_text(*command: str) -> str:
    r = runner.invoke(app, [*command, "--help"], env=WIDE)
    assert r.exit_code == 0, r.output
    return r.output


@pytest.mark.parametrize("command", [["verify"], ["optimize"], ["profile"], ["init"], ["doctor"], ["resources"],
                                     ["verify-cert"], ["bench", "check"], ["runs", "list"], ["corpus", "search"]],
                         ids=" ".join)
def test_the_main_commands_show_examples(command):
    text = help_text(*command)
    examples = text[text.index("Examples:"):]
    assert f"kernelloop {' '.join(command)} " in examples


def _every_command(group, path=()):
    for name, sub in group.commands.items():
        if hasattr(sub, "commands"):
            yield from _every_command(sub, (*path, name))
        else:
            yield (*path, name)


def test_every_command_shows_an_example():
    from typer.main import get_command

    for command in _every_command(get_command(app)):
        text = help_text(*command)
        assert "Example" in text and f"kernelloop {' '.join(command)}" in text.split("Example", 1)[1], command


@pytest.mark.parametrize("command, shown", [
    (["optimize"], "--optimizer auto|offline|nim|openai"),
    (["verify"], "--memcheck auto|on|off"),
    (["verify"], "--independent-timing on|auto|off"),
    (["profile"], "--set full|fast"),
    (["profile"], "--clock-control none|base"),
    (["corpus", "search"], "--mode auto|bm25|dense|hybrid"),
    (["mcp", "serve"], "profiler|verifier|researcher"),
])
def test_a_fixed_set_of_values_is_shown_as_the_choices(command, shown):
    text = help_text(*command)
    assert shown in text
    # a choice is never shown as its type (`profiler|verifier|researcher <str>`: issue 12)
    assert not any(line.strip().startswith(shown.split()[-1]) and "<str>" in line for line in text.splitlines())
    assert f"{shown} <str>" not in text
    assert not any(shown.split()[-1] in line and "<str>" in line for line in text.splitlines())  # `SERVER <str>  ...`


def test_verify_help_states_its_exit_codes():
    text = " ".join(help_text("verify").split())
    assert "Exit code 0: accepted" in text and "1: rejected" in text and "2: a usage or environment problem" in text


def test_the_number_of_results_is_limit_everywhere_and_k_stays_as_a_hidden_alias(tmp_path):
    assert "--limit" in help_text("runs", "list")
    search_help = help_text("corpus", "search")
    assert "--limit" in search_help and "--k " not in search_help
    env = {**WIDE, "KERNELLOOP_DATA_DIR": str(tmp_path / "data"), "KERNELLOOP_EMBEDDINGS": "off"}
    for flag in ("--limit", "--k"):
        r = runner.invoke(app, ["corpus", "search", "shared memory bank conflicts", flag, "2", "--json"], env=env)
        assert r.exit_code == 0, r.output
        assert len(json.loads(r.stdout)) == 2


@pytest.mark.nvcc
def test_resources_compiles_for_the_visible_gpu_else_sm_86_like_verify(monkeypatch):
    kernel = str(ROOT / "kernels" / "naive_matmul.cu")
    monkeypatch.setattr("kernelloop.verify.static_check.detect_gpus", lambda: [])
    r = runner.invoke(app, ["resources", kernel, "--json"], env=WIDE)
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)[0]["kernel"]["arch"] == "sm_86"
    a100 = GpuInfo(index=0, name="NVIDIA A100-SXM4-80GB", compute_capability="8.0", driver_version="580")
    monkeypatch.setattr("kernelloop.verify.static_check.detect_gpus", lambda: [a100])
    r = runner.invoke(app, ["resources", kernel, "--json"], env=WIDE)
    assert json.loads(r.stdout)[0]["kernel"]["arch"] == "sm_80"
    r = runner.invoke(app, ["resources", kernel, "--arch", "sm_90", "--json"], env=WIDE)
    assert json.loads(r.stdout)[0]["kernel"]["arch"] == "sm_90"


# -- answering without the agent loop --------------------------------------------------------------

_HEAVY = ("langgraph", "mcp", "langchain_core")
_RUN_MAIN = """
import json, sys
args, heavy_roots = json.loads(sys.argv[1]), set(json.loads(sys.argv[2]))
import kernelloop.graph.inputs as inputs
inputs.detect_gpus = lambda: []  # this machine has no GPU, whatever it really has
from kernelloop.cli.app import main
sys.argv = ["kernelloop", *args]
try:
    main()
except SystemExit as exc:
    code = exc.code
heavy = sorted({m.split(".")[0] for m in sys.modules} & heavy_roots)
print(json.dumps({"code": code, "heavy": heavy}))
"""


def run_main(args, tmp_path):
    env = {**os.environ, "KERNELLOOP_DATA_DIR": str(tmp_path / "data"), **WIDE}
    r = subprocess.run([sys.executable, "-c", _RUN_MAIN, json.dumps(args), json.dumps(_HEAVY)], capture_output=True,
                       text=True, env=env, cwd=tmp_path, timeout=120)
    result = json.loads(r.stdout.strip().splitlines()[-1])
    return result["code"], result["heavy"], r.stderr


@pytest.mark.parametrize("args", [[str(ROOT / "kernels" / "naive_matmul.cu")], ["--resume", "20261121-1015"]],
                         ids=["new run", "resume"])
def test_optimize_without_a_gpu_says_so_before_loading_the_agent_loop(args, tmp_path):
    _a_failed_run(tmp_path)  # what --resume names
    code, heavy, err = run_main(["optimize", *args], tmp_path)
    assert code == 2 and heavy == []
    assert err.strip().splitlines() == [err.strip()] and "optimize needs a CUDA GPU" in err


def _a_failed_run(tmp_path):
    from kernelloop.runs.store import RunRecord, RunStore

    RunStore(tmp_path / "data" / "runs.sqlite").start_run(RunRecord(
        run_id="20261121-101502-3fa2", kernel="k", kernel_path="/k.cu", kernel_sha256="0", started_at="2026-11-21",
        status="error", optimizer="offline", run_dir=str(tmp_path), reason="the GPU fell off the bus"))


def test_the_run_log_is_read_without_loading_the_agent_loop(tmp_path):
    _a_failed_run(tmp_path)
    for args in (["runs", "list"], ["runs", "show", "20261121-1015"], ["runs", "list", "--json"]):
        code, heavy, err = run_main(args, tmp_path)
        assert code == 0 and heavy == [], (args, err)
