"""Shared test set-up: markers that skip cleanly where a tool or a GPU is missing."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from kernelloop.tools.gpu import detect_gpus


def pytest_configure(config):
    # Never the user's real cache and data folders (~/.cache/kernelloop, ~/.local/share/kernelloop):
    # a folder per test process, unless the caller chose folders explicitly.
    # xdist's workers inherit the controller's environment, so one pytest run shares one build
    # cache: every cache in it is content-addressed and written atomically, and tests that build
    # the same baseline (its harness object above all) build it once instead of once per test.
    base = Path(tempfile.mkdtemp(prefix="kernelloop-tests-"))
    os.environ.setdefault("KERNELLOOP_CACHE_DIR", str(base / "cache"))
    os.environ.setdefault("KERNELLOOP_DATA_DIR", str(base / "data"))
    _SHARED_CACHE.append(Path(os.environ["KERNELLOOP_CACHE_DIR"]))


_SHARED_CACHE: list[Path] = []


def shared_cache_dir() -> Path:
    """The run's build cache (content-addressed: safe to share between tests and workers). Tests
    about the cache itself, or that must start cold, use a folder of their own."""
    return _SHARED_CACHE[0]


ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"


def assert_passes_the_static_gates(split, editable: str) -> None:
    """Every static gate for the lent GPU's target (sm_90), and for the target users rent most (an A10:
    sm_86) the verifier's build of the candidate: the gates' other checks read the same code whatever
    the target, and what a target changes is whether the code builds (tests/test_templates_arch.py
    builds every template for sm_80-sm_90)."""
    from kernelloop.config import Settings
    from kernelloop.tools.nvcc import build_program, find_toolchain
    from kernelloop.verify.gate import static_gates

    result = static_gates(split, editable, arch="sm_90", settings=Settings(cache_dir=shared_cache_dir()),
                          toolchain=find_toolchain())
    assert not result.violations, [v.describe() for v in result.violations]
    assert result.candidate is not None and result.candidate.ok, result.candidate.log[-2000:]
    rented = build_program(split.editable_unit(editable, "candidate.cu"), split.harness_unit(), arch="sm_86",
                           cache_dir=shared_cache_dir(), toolchain=find_toolchain())
    assert rented.ok, rented.log[-2000:]


def deep_tier_ids() -> set[str]:
    """tests/deep_tier.txt: the tests the default command leaves out for their cost (tests/deep_tier.py)."""
    lines = (Path(__file__).with_name("deep_tier.txt")).read_text().splitlines()
    return {line.strip() for line in lines if line.strip() and not line.startswith("#")}


def _whole_suite_collected(config) -> bool:
    # Only a run over the whole tests folder can tell a stale entry from one not asked for.
    args = [Path(a.split("::")[0]).resolve() for a in config.args]
    return not config.getoption("keyword") and all(a in (ROOT, ROOT / "tests") for a in args)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    deep = deep_tier_ids()
    for item in items:
        if item.nodeid in deep:
            item.add_marker(pytest.mark.deep)
    if _whole_suite_collected(config):
        stale = deep - {item.nodeid for item in items}
        if stale:
            raise pytest.UsageError(f"tests/deep_tier.txt names {len(stale)} test(s) that no longer exist, e.g. "
                                    f"{sorted(stale)[0]!r}: rerun tests/deep_tier.py or edit the list")
    has_gpu = bool(detect_gpus())
    has_nvcc = shutil.which("nvcc") is not None
    for item in items:
        if "gpu" in item.keywords and not has_gpu:
            item.add_marker(pytest.mark.skip(reason="no NVIDIA GPU visible (gpu tests run on the lent H100/H200)"))
        if "nvcc" in item.keywords and not has_nvcc:
            item.add_marker(pytest.mark.skip(reason="nvcc not on PATH"))


@pytest.fixture
def shared_cache() -> Path:
    return shared_cache_dir()


@pytest.fixture
def isolated_cache(tmp_path, monkeypatch):
    """Point kernelloop's cache and data dirs at a temporary folder."""
    monkeypatch.setenv("KERNELLOOP_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("KERNELLOOP_DATA_DIR", str(tmp_path / "data"))
    return tmp_path / "cache"


def run_cli_in_process(monkeypatch, capsys, cwd, *args) -> tuple[int, str, str]:
    """`kernelloop ARGS` in this process (so monkeypatched modules apply): exit code, stdout, stderr."""
    import sys

    from kernelloop.cli import app as cli

    monkeypatch.chdir(cwd)
    monkeypatch.setattr(sys, "argv", ["kernelloop", *args])
    with pytest.raises(SystemExit) as exited:
        cli.main()
    captured = capsys.readouterr()
    return exited.value.code, captured.out, captured.err
