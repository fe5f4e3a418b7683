"""Certificates, the run log and the optimize/runs/verify-cert commands, without a GPU."""

from __future__ import annotations

import json
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kernelloop.cli.app import app
from kernelloop.runs.certificate import build_certificate, read_certificate, write_certificate
from kernelloop.runs.store import AttemptRecord, RunRecord, RunStore

from .conftest import ROOT, shared_cache_dir
from .graph_fakes import FakeToolbox, make_verdict

runner = CliRunner()
NAIVE = ROOT / "kernels" / "naive_matmul.cu"
TILED = (ROOT / "src" / "kernelloop" / "exemplars" / "matmul_smem_tiling.cu").read_text()


@pytest.fixture
def env(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELLOOP_CACHE_DIR", str(shared_cache_dir()))
    monkeypatch.setenv("KERNELLOOP_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv("NVIDIA_API_KEY", raising=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def certified_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "run"
    folder.mkdir(parents=True)
    baseline = NAIVE.read_text()
    best = baseline.replace("acc += A[row * n + k] * B[k * n + col];", "acc = fmaf(A[row * n + k], B[k * n + col], acc);")
    (folder / "baseline.cu").write_text(baseline)
    (folder / "best.cu").write_text(best)
    cert = build_certificate(make_verdict(accepted=True, speedup=1.5), kernel="naive_matmul", baseline_text=baseline,
                             candidate_text=best, candidate_editable="x")
    write_certificate(cert, folder / "certificate.json")
    return folder


def test_certificate_records_the_proof_and_verify_cert_static_checks_it(env):
    folder = certified_folder(env)
    cert = read_certificate(folder / "certificate.json")
    assert cert.threshold == 1.2 and cert.speedup == pytest.approx(1.5) and cert.driver == "580.159.04"
    assert [s.baseline_output_sha256 for s in cert.seeds] == [f"{1111:064x}", f"{2222:064x}"]
    assert cert.baseline_kernel_ms.runs == 7 and cert.nvcc_flags == ["-O3"]
    ok = runner.invoke(app, ["verify-cert", str(folder / "certificate.json"), "--static"])
    assert ok.exit_code == 0, ok.output
    assert "certificate holds" in ok.output


def test_verify_cert_detects_an_edited_program_and_an_edited_certificate(env):
    folder = certified_folder(env)
    best = folder / "best.cu"
    best.write_text(best.read_text() + "\n// edited\n")
    edited = runner.invoke(app, ["verify-cert", str(folder / "certificate.json"), "--static", "--json"])
    assert edited.exit_code == 1
    checks = {c["name"]: c["status"] for c in json.loads(edited.output)["checks"]}
    assert checks == {"digest": "pass", "baseline source": "pass", "candidate source": "fail",
                      "reference outputs": "skipped", "verify gate": "skipped"}
    folder2 = certified_folder(env / "second")
    data = json.loads((folder2 / "certificate.json").read_text())
    data["speedup"] = 9.9
    (folder2 / "certificate.json").write_text(json.dumps(data))
    forged = runner.invoke(app, ["verify-cert", str(folder2 / "certificate.json"), "--static"])
    assert forged.exit_code == 1 and "edited after it was issued" in forged.output


def test_verify_cert_without_a_gpu_says_so_in_one_line(env, monkeypatch, capsys):
    folder = certified_folder(env)
    monkeypatch.setattr("kernelloop.runs.recheck.detect_gpus", lambda: [])
    code, err = main_exit(["verify-cert", str(folder / "certificate.json")], monkeypatch, capsys)
    assert code == 2 and "needs a CUDA GPU" in err and len(err.strip().splitlines()) == 1


def test_run_store_lists_shows_and_remembers(env):
    store = RunStore(env / "runs.sqlite")
    for i, status in enumerate(("exhausted", "accepted")):
        store.start_run(RunRecord(run_id=f"2026112{i}-000000-ab{i}0", kernel="naive_matmul", kernel_path="k.cu",
                                  kernel_sha256="aa" if i else "bb", started_at=f"2026-11-2{i}T00:00:00+00:00",
                                  status="running", optimizer="offline", run_dir="/tmp/x"))
        store.add_attempt(AttemptRecord(run_id=f"2026112{i}-000000-ab{i}0", iteration=1, approach=f"try {i}",
                                        optimizer="offline", accepted=status == "accepted", kind=status, reason="r",
                                        kernel="naive_matmul", kernel_sha256="aa" if i else "bb"))
        store.update_run(f"2026112{i}-000000-ab{i}0", status=status, iterations=1)
    assert [r.status for r in store.list_runs()] == ["accepted", "exhausted"]
    assert store.get_run("20261121").run_id == "20261121-000000-ab10"
    with pytest.raises(Exception, match="ambiguous"):
        store.get_run("2026112")
    memory = store.memory("naive_matmul", "aa", limit=5)
    assert [(m.approach, m.same_program) for m in memory] == [("try 1", True), ("try 0", False)]
    assert store.memory("other", "cc", limit=5) == []


def main_exit(args, monkeypatch, capsys) -> tuple[int, str]:
    from kernelloop.cli import app as app_module

    monkeypatch.setattr("sys.argv", ["kernelloop", *args])
    with pytest.raises(SystemExit) as exit_info:
        app_module.main()
    return exit_info.value.code, capsys.readouterr().err


def test_optimize_without_a_gpu_is_one_line_and_exit_2(env, monkeypatch, capsys):
    monkeypatch.setattr("kernelloop.graph.inputs.detect_gpus", lambda: [])
    code, err = main_exit(["optimize", str(NAIVE), "--optimizer", "offline"], monkeypatch, capsys)
    assert code == 2 and "optimize needs a CUDA GPU" in err and "kernelloop doctor" in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def cli(args, monkeypatch, toolbox):
    """Run the real `kernelloop` main() with the MCP toolbox replaced and a GPU pretended."""
    from kernelloop.cli import app as app_module
    from kernelloop.tools.gpu import GpuInfo

    @asynccontextmanager
    async def factory(settings):
        yield toolbox

    monkeypatch.setattr("kernelloop.graph.optimize.mcp_toolbox", factory)
    monkeypatch.setattr("kernelloop.graph.inputs.detect_gpus",
                        lambda: [GpuInfo(index=0, name="NVIDIA H200", compute_capability="9.0", driver_version="580")])
    monkeypatch.setattr("sys.argv", ["kernelloop", *args])
    with pytest.raises(SystemExit) as exit_info:
        app_module.main()
    return exit_info.value.code


class OneShot:
    name = "offline"

    def __init__(self, sources):
        self.sources = list(sources)

    def propose(self, request):
        from kernelloop.optimizers.base import NoMoreCandidates, Proposal
        if not self.sources:
            raise NoMoreCandidates("no template fits")
        return Proposal(source=self.sources.pop(0), approach="tile", optimizer="offline")


@pytest.mark.nvcc
def test_optimize_cli_exit_codes_json_and_runs_commands(env, monkeypatch, capsys):
    monkeypatch.setattr("kernelloop.optimizers.factory.make_optimizer", lambda *a, **k: OneShot([TILED]))
    monkeypatch.setattr("kernelloop.graph.optimize.make_optimizer", lambda *a, **k: OneShot([TILED]))
    code = cli(["optimize", str(NAIVE), "--json"], monkeypatch, FakeToolbox([make_verdict(accepted=True, speedup=1.74)]))
    out = capsys.readouterr().out
    assert code == 0
    summary = json.loads(out)
    assert summary["status"] == "accepted" and Path(summary["run_dir"]).parent.parent == env / "runs"

    monkeypatch.setattr("kernelloop.graph.optimize.make_optimizer", lambda *a, **k: OneShot([]))
    code = cli(["optimize", str(NAIVE)], monkeypatch, FakeToolbox([]))
    out = capsys.readouterr().out
    assert code == 3 and "EXHAUSTED" in out

    listed = runner.invoke(app, ["runs", "list", "--json"])
    runs = json.loads(listed.output)
    assert [r["status"] for r in runs] == ["exhausted", "accepted"]
    shown = runner.invoke(app, ["runs", "show", summary["run_id"]])
    assert shown.exit_code == 0 and "accepted" in shown.output and "tile" in shown.output


def test_optimize_usage_errors_are_one_line_exit_2(env, monkeypatch, capsys):
    for args, expected in ((["optimize", "missing.cu"], "no such file"),
                           (["optimize"], "give the kernel to optimize"),
                           (["optimize", str(NAIVE), "--optimizer", "gpt"], "'auto', 'offline', 'nim' or 'openai'"),
                           (["optimize", "--resume", "nope"], "no run 'nope'")):
        code, err = main_exit(args, monkeypatch, capsys)
        assert code == 2, (args, err)
        assert expected in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, err


def test_a_certificate_keeps_per_output_tolerances_and_old_ones_keep_their_digest(tmp_path):
    from kernelloop.config import OutputTolerance
    verdict = make_verdict(accepted=True, speedup=1.5)
    plain = build_certificate(verdict, kernel="k", baseline_text="b", candidate_text="c", candidate_editable="e")
    assert plain.tolerances == {}
    # a certificate written before the field existed has no key for it: same digest
    body = json.loads(plain.model_dump_json())
    del body["tolerances"]
    from kernelloop.runs.certificate import Certificate
    assert Certificate.model_validate(body).canonical_digest() == plain.digest
    verdict.settings.tolerances = {"dbias": OutputTolerance(rtol=1e-4), "unused": OutputTolerance()}
    cert = build_certificate(verdict, kernel="k", baseline_text="b", candidate_text="c", candidate_editable="e")
    assert cert.tolerances == {"dbias": OutputTolerance(rtol=1e-4)} and cert.digest != plain.digest
    edited = cert.model_copy(update={"tolerances": {"dbias": OutputTolerance(rtol=1e-2)}})
    assert edited.canonical_digest() != cert.digest  # loosening a tolerance breaks the certificate
