"""Red team round 85 (tests/fixtures/redteam/round85/): rewrites wrong by construction where the
offline optimizer read a name outside the scope that gave it its meaning, and a run folder
outside runs_dir. CPU only."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from kernelloop.config import Settings
from kernelloop.errors import InputError
from kernelloop.graph.fanout import RunBundle, import_run
from kernelloop.optimizers.base import NoMoreCandidates
from kernelloop.optimizers.offline import OfflineOptimizer
from kernelloop.optimizers.offline.launcher import read_editable
from kernelloop.program.split import split_program
from kernelloop.runs.artifacts import kernel_name
from kernelloop.runs.store import RunRecord

from .conftest import FIXTURES
from .test_offline_optimizer import request_for

ROUND = FIXTURES / "redteam" / "round85"


def _proposals(path: Path) -> list[str]:
    """Every rewrite the offline optimizer proposes for the program (its sources)."""
    from kernelloop.optimizers.base import FailedAttempt

    text = path.read_text()
    opt = OfflineOptimizer(cache_dir=Path(tempfile.mkdtemp(prefix="kl-r85-")))
    failed: list[FailedAttempt] = []
    sources = []
    for iteration in range(1, 8):
        try:
            p = opt.propose(request_for(text, "baseline", iteration=iteration, failed_attempts=list(failed)))
        except NoMoreCandidates:
            break
        sources.append(p.source)
        failed.append(FailedAttempt(iteration=iteration, approach=p.approach, kind="not_faster", reason="x",
                                    source=p.source))
    return sources


@pytest.mark.parametrize("name", ["baseline_typedef.cu", "baseline_using_decl.cu", "baseline_namespace_alias.cu"])
def test_a_template_never_takes_a_launchs_words_out_of_the_launcher_that_names_them(name):
    # the launcher's own `typedef int idx_t;` (or using-declaration, or namespace alias) gave
    # `(idx_t)n` its meaning; the template wrote a new body without it, and the file's 16-bit idx_t
    # summed 0 of 2^26 elements
    # summed 0 of 2^26 elements. Since round 102 the template's call takes the launch's place, so
    # the words stay inside the body that names them, and the naming statement stays too.
    from .test_launch_in_place import _assert_in_place
    path = ROUND / "launcher_alias_dropped" / name
    for source in _proposals(path):
        _assert_in_place(path.read_text(), source, "launch_reduce_sum")
        assert "idx_t)n" in source.replace(" ", "")


def test_sizeof_of_an_expression_is_that_expression_not_a_type_name():
    # `sizeof(out[0])` was read as `sizeof(Index)` (the parser's node class name), and a file's own
    # `typedef long long Index;` made the rewrite zero 8 bytes of a 4-byte output
    for source in _proposals(ROUND / "sizeof_expression_class_name" / "baseline.cu"):
        assert "sizeof(Index)" not in source


@pytest.mark.parametrize("name", ["baseline_qualified.cu", "baseline_using.cu"])
def test_two_kernels_of_one_name_in_two_namespaces_are_neither_read(name):
    # the launch names sq::reduce_kernel (a sum of squares); the tiers read the file-scope
    # reduce_kernel (a plain sum) and rewrote the launch to a plain sum
    path = ROUND / "same_name_kernels" / name
    split = split_program(path.read_text(), name)
    part = read_editable(split.editable, split.harness, split.exported)
    assert "reduce_kernel" not in part.functions
    assert any(p.startswith("reduce_kernel: more than one function of this name") for p in part.problems), part.problems
    assert _proposals(path) == []


def test_a_run_folder_is_always_one_folder_under_runs_dir(tmp_path):
    assert kernel_name(Path("...cu")) == "kernel" and kernel_name(Path("a/..cu")) == "kernel"
    runs = tmp_path / "project" / "runs"
    settings = Settings()
    settings = settings.model_copy(update={"data_dir": tmp_path / "data", "cache_dir": tmp_path / "cache",
                                           "optimize": settings.optimize.model_copy(update={"runs_dir": runs})})
    for kernel, run_id in ((kernel_name(Path("...cu")), "20261201-000000-abcd"), ("k", "../../../escaped"),
                           ("..", "20261201-000000-abcd")):
        record = RunRecord(run_id=run_id, kernel=kernel, kernel_path="/w/kernel/x.cu", kernel_sha256="0" * 64,
                           started_at="2026-12-01T00:00:00", status="accepted", optimizer="offline",
                           run_dir="/w/runs/x", best_speedup=9.9)
        bundle = RunBundle(record=record, attempts=[], files={"summary.json": b"{}"}, worker_run_dir="/w/runs/x",
                           worker_kernel_path="/w/kernel/x.cu")
        try:
            written = Path(import_run(bundle, settings, str(tmp_path / "x.cu")).run_dir).resolve()
        except InputError as exc:
            assert "is not one folder under" in str(exc)
            continue
        assert written.is_relative_to(runs.resolve()), written
    assert not (tmp_path / "project" / "20261201-000000-abcd").exists() and not (tmp_path / "escaped").exists()
