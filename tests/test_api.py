"""The public facade: `from kernelloop import verify_files, profile_file, optimize, search, Settings`.
Importing the package loads none of them; each reads the settings as the CLI does unless given a
Settings; the calls reach the real library (optimize: the whole loop with scripted tools)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

import kernelloop
from kernelloop.errors import ConfigError, EnvironmentProblem, InputError
from kernelloop.tools.gpu import GpuInfo

from .conftest import ROOT
from .graph_fakes import FakeToolbox, Scripted, make_verdict, static_ok

NAIVE = ROOT / "kernels" / "naive_matmul.cu"
TILED = (ROOT / "src" / "kernelloop" / "exemplars" / "matmul_smem_tiling.cu").read_text()
H200 = GpuInfo(index=0, name="NVIDIA H200", compute_capability="9.0", driver_version="580")

_LOADED = """
import json, sys
before = sorted(m for m in sys.modules if m.startswith("kernelloop"))
import kernelloop
bare = sorted(m for m in sys.modules if m.startswith("kernelloop"))
from kernelloop import Settings, optimize, profile_file, verify_files
heavy = sorted({m.split(".")[0] for m in sys.modules} & {"langgraph", "mcp", "langchain_core", "bm25s"})
print(json.dumps({"before": before, "bare": bare, "heavy": heavy}))
"""


def test_import_kernelloop_loads_nothing_else_until_a_name_is_used():
    r = subprocess.run([sys.executable, "-c", _LOADED], capture_output=True, text=True, timeout=60,
                       env={**os.environ, "PYTHONWARNINGS": "ignore"})
    loaded = json.loads(r.stdout.strip().splitlines()[-1])
    assert loaded["before"] == [] and loaded["bare"] == ["kernelloop"]
    assert loaded["heavy"] == []  # the facade's functions import the loop, the gate, the corpus when called


def test_the_public_names_are_the_library_s():
    from kernelloop import api, config
    from kernelloop.corpus import engine

    assert set(kernelloop.__all__) == {"verify_files", "profile_file", "optimize", "search", "Settings", "__version__"}
    assert kernelloop.Settings is config.Settings and kernelloop.search is engine.search
    assert (kernelloop.verify_files, kernelloop.profile_file, kernelloop.optimize) == (
        api.verify_files, api.profile_file, api.optimize)
    assert {"optimize", "search", "Settings"} <= set(dir(kernelloop))
    with pytest.raises(AttributeError, match="no attribute 'verify_file'"):
        kernelloop.verify_file  # noqa: B018 - the attribute access is the test


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("KERNELLOOP_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("KERNELLOOP_OPTIMIZE_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.delenv("NVIDIA_API_KEY", raising=False)
    return tmp_path


def test_verify_and_profile_read_the_project_file_unless_given_settings(project):
    (project / "kernelloop.toml").write_text("[verify]\nthreshhold = 5.0\n")
    with pytest.raises(ConfigError, match="threshhold"):
        kernelloop.verify_files(NAIVE, "candidate.cu")
    with pytest.raises(ConfigError, match="threshhold"):
        kernelloop.profile_file(str(NAIVE))
    given = kernelloop.Settings(data_dir=project / "data")  # used as given: the file is not read
    with pytest.raises(InputError, match="candidate.cu: no such file"):
        kernelloop.verify_files(str(NAIVE), "candidate.cu", given)
    with pytest.raises(InputError, match="missing.cu: no such file"):
        kernelloop.profile_file("missing.cu", given)


def test_search_answers_from_the_bundled_notes(project, monkeypatch):
    monkeypatch.setenv("KERNELLOOP_EMBEDDINGS", "off")
    hits = kernelloop.search("shared memory bank conflicts", k=2)
    assert len(hits) == 2 and all(h.title for h in hits)
    with pytest.raises(InputError, match="empty query"):
        kernelloop.search("  ")


def collect(stream) -> list:
    async def drive():
        return [event async for event in stream]
    return asyncio.run(drive())


def test_optimize_runs_the_loop_and_ends_with_done(project, monkeypatch):
    toolbox = FakeToolbox([make_verdict(accepted=True, speedup=1.74)], static=static_ok)

    @asynccontextmanager
    async def factory(settings):
        yield toolbox

    monkeypatch.setattr("kernelloop.graph.optimize.mcp_toolbox", factory)
    monkeypatch.setattr("kernelloop.graph.optimize.make_optimizer", lambda *a, **k: Scripted([TILED]))
    monkeypatch.setattr("kernelloop.graph.inputs.detect_gpus", lambda: [H200])
    given = kernelloop.Settings(optimize={"max_iterations": 1, "runs_dir": "given-runs"}, data_dir=project / "data")
    events = collect(kernelloop.optimize(str(NAIVE), given))
    assert events[-1].kind == "done" and events[-1].data["status"] == "accepted"
    run_dir = Path(events[0].data["run_dir"])
    assert run_dir.parent.parent == project / "given-runs"  # the Settings given, not $KERNELLOOP_OPTIMIZE_RUNS_DIR
    assert json.loads((run_dir / "summary.json").read_text())["status"] == "accepted"
    assert toolbox.calls["verify"] == [TILED]


def test_optimize_says_what_is_wrong_before_anything_starts(project, monkeypatch):
    monkeypatch.setattr("kernelloop.graph.inputs.detect_gpus", lambda: [])
    with pytest.raises(EnvironmentProblem, match="optimize needs a CUDA GPU"):
        collect(kernelloop.optimize(NAIVE))
    with pytest.raises(InputError, match="not both"):
        collect(kernelloop.optimize())
    with pytest.raises(InputError, match="not both"):
        collect(kernelloop.optimize(NAIVE, resume="20261121-1015"))


def test_an_input_checked_without_a_gpu_gets_the_arch_every_command_builds_for(monkeypatch):
    from kernelloop.graph.inputs import check_inputs
    from kernelloop.verify.static_check import DEFAULT_ARCH

    monkeypatch.setattr("kernelloop.graph.inputs.detect_gpus", lambda: [])
    monkeypatch.setattr("kernelloop.verify.static_check.detect_gpus", lambda: [])
    assert check_inputs(NAIVE, kernelloop.Settings(), require_gpu=False).arch == DEFAULT_ARCH
    given = kernelloop.Settings(verify={"arch": "sm_89"})
    assert check_inputs(NAIVE, given, require_gpu=False).arch == "sm_89"
