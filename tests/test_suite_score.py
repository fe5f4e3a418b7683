"""The suite score (KernelBench's fast_p and the geometric-mean speedup) over optimize runs: the pure
function on synthetic summaries, the run store's latest runs, and `kernelloop runs score`."""

from __future__ import annotations

import json
import math
import sys

import pytest

from kernelloop.errors import InputError
from kernelloop.runs.store import RunRecord, RunStore
from kernelloop.runs.suite_score import (latest_per_kernel, score_markdown, score_record, score_store,
                                         score_summary, suite_score)


def accepted(kernel: str, speedup: float, run_id: str = "") -> dict:
    return {"kernel": kernel, "run_id": run_id or f"r-{kernel}", "status": "accepted",
            "verify": {"speedup": speedup, "iteration_accepted": 1},
            "attempts": [{"iteration": 1, "approach": "a", "outcome": "accepted", "speedup": speedup, "reason": "ok"}]}


def exhausted(kernel: str, *attempts: tuple[str, float | None]) -> dict:
    return {"kernel": kernel, "run_id": f"r-{kernel}", "status": "exhausted", "verify": {"speedup": None},
            "attempts": [{"iteration": i, "approach": "a", "outcome": outcome, "speedup": speed, "reason": "r"}
                         for i, (outcome, speed) in enumerate(attempts, 1)]}


def test_an_accepted_run_is_correct_at_its_proven_speedup():
    k = score_summary(accepted("matmul", 5.7))
    assert k.correct and k.correct_speedup == 5.7 and k.speedup == 5.7 and k.status == "accepted"


def test_a_rejected_attempt_correct_but_not_fast_enough_counts_as_correct_without_a_kept_speedup():
    k = score_summary(exhausted("softmax", ("rejected: compile", None), ("rejected: not_faster", 1.1),
                                ("rejected: not_faster", 0.9), ("rejected: correctness", None)))
    assert k.correct and k.correct_speedup == 1.1 and k.speedup == 1.0
    assert "iteration 2" in k.basis


def test_attempts_failing_another_gate_are_not_correct_whatever_their_speed():
    # a timing-audit or correctness failure may carry no speedup or one measured before the failure
    k = score_summary(exhausted("scan", ("rejected: correctness", None), ("rejected: timing", 3.0),
                                ("rejected: other", 9.0), ("rejected: compile", None)))
    assert not k.correct and k.correct_speedup is None and k.speedup == 1.0


def test_an_errored_or_unfinished_run_is_not_correct():
    errored = score_summary({"status": "error", "error": "nvcc: not found"}, kernel="transpose")
    assert not errored.correct and errored.speedup == 1.0 and "nvcc: not found" in errored.basis
    unknown = score_summary({"status": "unknown", "run_id": "x", "run_dir": ""}, kernel="stencil")
    assert not unknown.correct and unknown.status == "unknown"
    with pytest.raises(InputError):
        score_summary({"status": "error"})  # no kernel to name it by
    with pytest.raises(InputError, match="no valid speedup"):
        score_summary({"kernel": "k", "status": "accepted", "verify": {"speedup": None}})


def test_fast_p_and_the_geometric_mean_over_a_suite():
    score = suite_score([score_summary(accepted("matmul", 5.7)), score_summary(accepted("softmax", 1.2)),
                         score_summary(exhausted("reduce", ("rejected: not_faster", 1.1))),
                         score_summary(exhausted("scan", ("rejected: correctness", None))),
                         score_summary({"status": "error", "error": "boom"}, kernel="transpose")])
    assert score.n == 5 and score.correct == 3 and score.correct_share == pytest.approx(0.6)
    assert [(f.p, f.kernels) for f in score.fast] == [(1.0, 3), (1.2, 2), (2.0, 1)]
    assert score.fast_p(1.0) == pytest.approx(0.6) and score.fast_p(1.2) == pytest.approx(0.4)  # 1.2 itself counts
    assert score.fast_p(2.0) == pytest.approx(0.2)
    # kept speedups 5.7, 1.2, 1, 1, 1: the rejected 1.1x is not kept
    assert score.geomean_speedup == pytest.approx((5.7 * 1.2) ** (1 / 5))
    text = score_markdown(score)
    assert "fast_1.2: 2/5 (40%)" in text and "geomean speedup: 1.469x over 5 kernel(s)" in text
    assert sum(line.startswith("| ") for line in text.splitlines()) == 1 + 5  # the header, one row per kernel


def test_a_slower_correct_candidate_is_correct_but_not_fast_1():
    score = suite_score([score_summary(exhausted("k", ("rejected: not_faster", 0.8)))])
    assert score.correct == 1 and score.fast_p(1.0) == 0 and score.geomean_speedup == 1.0


def test_no_runs_give_no_shares_and_no_mean():
    score = suite_score([])
    assert score.n == 0 and score.correct_share is None and score.geomean_speedup is None
    assert all(f.share is None and f.kernels == 0 for f in score.fast)
    assert "geomean speedup: - (no kernels)" in score_markdown(score)


# -- the run store ----------------------------------------------------------------------------

def _record(store: RunStore, run_id: str, kernel: str, status: str, started: str, summary: dict | None = None) -> None:
    store.start_run(RunRecord(run_id=run_id, kernel=kernel, kernel_path=f"/k/{kernel}.cu", kernel_sha256="0" * 64,
                              started_at=started, status=status, optimizer="offline", run_dir=f"/runs/{run_id}",
                              summary=summary or {}))


@pytest.fixture
def store(tmp_path) -> RunStore:
    store = RunStore(tmp_path / "runs.sqlite")
    _record(store, "20261120-0900-aaaa", "matmul", "exhausted", "2026-11-20T09:00:00+00:00",
            exhausted("matmul", ("rejected: correctness", None)))
    _record(store, "20261121-0900-bbbb", "matmul", "accepted", "2026-11-21T09:00:00+00:00", accepted("matmul", 4.0))
    _record(store, "20261121-1000-cccc", "softmax", "error", "2026-11-21T10:00:00+00:00")
    _record(store, "20261121-1100-dddd", "reduce", "exhausted", "2026-11-21T11:00:00+00:00",
            exhausted("reduce", ("rejected: not_faster", 1.15)))
    return store


def test_the_latest_run_of_each_kernel_is_scored_by_the_store(store):
    latest = latest_per_kernel(store.list_runs(limit=-1))
    assert [r.run_id for r in latest] == ["20261121-0900-bbbb", "20261121-1100-dddd", "20261121-1000-cccc"]
    score = score_store(store)
    by_kernel = {k.kernel: k for k in score.kernels}
    assert by_kernel["matmul"].speedup == 4.0 and by_kernel["matmul"].run_id == "20261121-0900-bbbb"
    assert not by_kernel["softmax"].correct and by_kernel["softmax"].status == "error"
    assert by_kernel["reduce"].correct and by_kernel["reduce"].correct_speedup == 1.15
    assert score.correct == 2 and score.fast_p(1.2) == pytest.approx(1 / 3)
    assert score.geomean_speedup == pytest.approx(4.0 ** (1 / 3))


def test_given_runs_are_scored_one_per_kernel(store):
    score = score_store(store, ["20261120-0900", "20261121-1100"])  # unique prefixes
    assert [k.run_id for k in score.kernels] == ["20261120-0900-aaaa", "20261121-1100-dddd"]
    assert score.correct == 1 and score.geomean_speedup == 1.0
    with pytest.raises(InputError, match="one run per kernel"):
        score_store(store, ["20261120-0900", "20261121-0900"])
    with pytest.raises(InputError, match="no run"):
        score_store(store, ["19990101"])


def test_a_running_or_interrupted_run_is_not_correct_even_with_an_old_summary(tmp_path):
    store = RunStore(tmp_path / "runs.sqlite")
    _record(store, "r1", "matmul", "interrupted", "2026-11-21T09:00:00+00:00", accepted("matmul", 3.0))
    k = score_record(store.get_run("r1"))
    assert not k.correct and k.speedup == 1.0 and "interrupted" in k.basis


def test_an_empty_store_is_a_user_error(tmp_path):
    with pytest.raises(InputError, match="kernelloop optimize"):
        score_store(RunStore(tmp_path / "runs.sqlite"))


# -- kernelloop runs score --------------------------------------------------------------------

def _run_cli(monkeypatch, capsys, *args):
    from kernelloop.cli import app as cli

    monkeypatch.setattr(sys, "argv", ["kernelloop", *args])
    with pytest.raises(SystemExit) as exited:
        cli.main()
    captured = capsys.readouterr()
    return exited.value.code, captured.out, captured.err


def test_runs_score_prints_a_table_and_json(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("KERNELLOOP_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.chdir(tmp_path)
    code, _, err = _run_cli(monkeypatch, capsys, "runs", "score")
    assert code == 2 and "no runs" in err and len(err.strip().splitlines()) == 1
    store = RunStore(tmp_path / "data" / "runs.sqlite")
    _record(store, "r1", "mm[b]x", "accepted", "2026-11-21T09:00:00+00:00", accepted("mm[b]x", 2.5))
    _record(store, "r2", "softmax", "error", "2026-11-21T10:00:00+00:00")
    code, out, _ = _run_cli(monkeypatch, capsys, "runs", "score")
    assert code == 0 and "mm[b]x" in out  # data printed literally, never as markup
    assert "fast_2: 1/2 (50%) correct and at least 2x faster" in out
    assert f"geomean speedup: {math.sqrt(2.5):.3f}x over 2 kernel(s)" in out
    code, out, _ = _run_cli(monkeypatch, capsys, "runs", "score", "--json", "r1")
    data = json.loads(out)
    assert code == 0 and data["n"] == 1 and data["geomean_speedup"] == 2.5
    assert [(f["p"], f["share"]) for f in data["fast"]] == [(1.0, 1.0), (1.2, 1.0), (2.0, 1.0)]
