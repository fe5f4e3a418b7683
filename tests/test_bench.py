"""`kernelloop bench`: the suite, references, the verdict mapping, exit codes and CI outputs (no GPU)."""

from __future__ import annotations

import json
import shutil
import sys

import pytest
from junitparser import Error, Failure, JUnitXml

from kernelloop.bench.check import (EXIT_OK, EXIT_REGRESSION, EXIT_UNDECIDED, EXIT_USAGE, BenchCheck, KernelCheck,
                                    harness_changed, status_of)
from kernelloop.bench.ci_outputs import junit_xml, step_summary
from kernelloop.bench.reference import Reference, read_reference, sha256_text
from kernelloop.bench.suite import suite_entries
from kernelloop.config import VerifySettings, load_settings
from kernelloop.errors import ConfigError, InputError
from kernelloop.tools.gpu import GpuInfo
from kernelloop.verify.regression import compare_times
from kernelloop.verify.reproduce import RecordedExperiment, Reproduction
from kernelloop.verify.stats import Spread
from kernelloop.verify.verdict import Reason, Verdict

from .conftest import ROOT

GPU = GpuInfo(index=0, name="NVIDIA H100 80GB HBM3", compute_capability="9.0", driver_version="580.159.04")


def _project(tmp_path, kernels=("transpose", "row_softmax"), extra=""):
    (tmp_path / "k").mkdir(parents=True)
    lines = ["[bench]", 'references_dir = "refs"', extra]
    for name in kernels:
        shutil.copy(ROOT / "kernels" / f"{name}.cu", tmp_path / "k" / f"{name}.cu")
        lines += ["[[bench.kernels]]", f'name = "{name}"', f'program = "k/{name}.cu"']
    (tmp_path / "kernelloop.toml").write_text("\n".join(lines) + "\n")
    return tmp_path


def _reference(name: str, text: str) -> Reference:
    return Reference(kernel=name, program=f"k/{name}.cu", program_sha256=sha256_text(text),
                     recorded_at="2026-11-25T06:00:00+00:00", kernelloop_version="0", gpu=GPU.name,
                     driver=GPU.driver_version, arch="sm_90", nvcc="13.0", contract=2,
                     kernel_ms=Spread.of([1.0, 1.01, 0.99]), samples_ms=[1.0, 1.01, 0.99],
                     experiments=[RecordedExperiment(seed=5, secret="ab" * 32, output_sha256="0" * 64)])


def _record_by_hand(entry, text: str | None = None) -> Reference:
    text = text if text is not None else entry.program.read_text()
    reference = _reference(entry.name, text)
    entry.reference_dir.mkdir(parents=True, exist_ok=True)
    entry.reference_program.write_text(text)
    entry.reference_record.write_text(reference.model_dump_json())
    return reference


# -- the suite ----------------------------------------------------------------------------

def test_suite_entries_resolve_against_the_project_folder(tmp_path):
    _project(tmp_path, extra="regression_threshold = 0.05")
    settings = load_settings(project_dir=tmp_path)
    entries = suite_entries(settings, project_dir=tmp_path)
    assert [e.name for e in entries] == ["transpose", "row_softmax"]
    assert entries[0].program == tmp_path / "k" / "transpose.cu"
    assert entries[0].reference_dir == tmp_path / "refs" / "transpose"
    assert entries[0].regression_threshold == 0.05
    assert [e.name for e in suite_entries(settings, project_dir=tmp_path, names=["row_softmax"])] == ["row_softmax"]


def test_a_kernels_own_threshold_wins(tmp_path):
    _project(tmp_path, kernels=("transpose",))
    with (tmp_path / "kernelloop.toml").open("a") as f:
        f.write("regression_threshold = 0.1\n")
    entry, = suite_entries(load_settings(project_dir=tmp_path), project_dir=tmp_path)
    assert entry.regression_threshold == 0.1


@pytest.mark.parametrize("text,message", [
    ("[bench]\nregression = 0.05\n", "unknown setting regression (did you mean regression_threshold?)"),
    ('[[bench.kernels]]\nname = "a"\nprogram = "a.cu"\nrepeats = 3\n', "repeats"),
    ('[[bench.kernels]]\nname = "a b"\nprogram = "a.cu"\n', "name"),
    ("[bench]\nregression_threshold = 1.5\n", "regression_threshold"),
])
def test_suite_mistakes_are_one_config_error(tmp_path, text, message):
    (tmp_path / "kernelloop.toml").write_text(text)
    with pytest.raises(ConfigError, match="kernelloop.toml") as caught:
        load_settings(project_dir=tmp_path)
    assert message in str(caught.value)


def test_no_suite_duplicates_unknown_names_and_missing_programs(tmp_path):
    with pytest.raises(ConfigError, match=r"\[\[bench.kernels\]\]"):
        suite_entries(load_settings(project_dir=tmp_path), project_dir=tmp_path)
    (tmp_path / "kernelloop.toml").write_text('[[bench.kernels]]\nname = "a"\nprogram = "a.cu"\n'
                                              '[[bench.kernels]]\nname = "a"\nprogram = "b.cu"\n')
    with pytest.raises(ConfigError, match="two"):
        suite_entries(load_settings(project_dir=tmp_path), project_dir=tmp_path)
    _project(tmp_path / "p", kernels=("transpose",))
    settings = load_settings(project_dir=tmp_path / "p")
    with pytest.raises(InputError, match="no kernel named 'nope'"):
        suite_entries(settings, project_dir=tmp_path / "p", names=["nope"])
    (tmp_path / "p" / "k" / "transpose.cu").unlink()
    with pytest.raises(InputError, match="no such file"):
        suite_entries(settings, project_dir=tmp_path / "p")


def test_environment_and_flags_layer_over_the_project_file(tmp_path, monkeypatch):
    _project(tmp_path, extra="pairs = 11")
    assert load_settings(project_dir=tmp_path).bench.pairs == 11
    monkeypatch.setenv("KERNELLOOP_BENCH_PAIRS", "13")
    assert load_settings(project_dir=tmp_path).bench.pairs == 13
    assert load_settings({"pairs": 15}, project_dir=tmp_path).bench.pairs == 15
    assert load_settings({"pairs": 15}, project_dir=tmp_path).verify.runs == VerifySettings().runs
    monkeypatch.setenv("KERNELLOOP_BENCH_KERNELS", "x")
    with pytest.raises(ConfigError, match="KERNELLOOP_BENCH_KERNELS"):
        load_settings(project_dir=tmp_path)


# -- references ---------------------------------------------------------------------------

def test_a_missing_reference_names_the_record_command(tmp_path):
    _project(tmp_path, kernels=("transpose",))
    entry, = suite_entries(load_settings(project_dir=tmp_path), project_dir=tmp_path)
    with pytest.raises(InputError, match="kernelloop bench record transpose"):
        read_reference(entry)


def test_a_reference_reads_back_and_an_edited_copy_is_refused(tmp_path):
    _project(tmp_path, kernels=("transpose",))
    entry, = suite_entries(load_settings(project_dir=tmp_path), project_dir=tmp_path)
    written = _record_by_hand(entry)
    reference, text = read_reference(entry)
    assert reference == written and text == entry.program.read_text()
    entry.reference_program.write_text(text.replace("dim3 block(32, 8)", "dim3 block(32, 4)"))
    with pytest.raises(InputError, match="changed since it was recorded"):
        read_reference(entry)
    entry.reference_record.write_text("{not json")
    with pytest.raises(InputError, match="not a kernelloop reference"):
        read_reference(entry)


def test_only_a_changed_harness_makes_a_reference_stale():
    text = (ROOT / "kernels" / "transpose.cu").read_text()
    editable_changed = text.replace("dim3 block(32, 8)", "dim3 block(32, 4)")
    harness_changed_text = text.replace("3001", "3003")
    assert editable_changed != text and harness_changed_text != text
    assert not harness_changed(text, text, "t.cu")
    assert not harness_changed(text, editable_changed, "t.cu")
    assert harness_changed(text, harness_changed_text, "t.cu")


# -- verdicts and exit codes ----------------------------------------------------------------

def _verdict(reasons, outcome="same"):
    decision = compare_times([1.0] * 9, [{"same": 1.0, "faster": 0.5, "slower": 1.5, "ambiguous": 1.0}[outcome]] * 9,
                             threshold=0.03, confidence=0.95)
    return Verdict(accepted=not reasons, summary="s", reasons=reasons, baseline_file="r", candidate_file="c",
                   settings=VerifySettings(), regression=decision if outcome != "ambiguous" else None)


@pytest.mark.parametrize("reasons,outcome,status", [
    ([], "same", "same"), ([], "faster", "faster"), ([Reason.slower], "slower", "slower"),
    ([Reason.inconclusive], "ambiguous", "ambiguous"), ([Reason.inconclusive], "same", "ambiguous"),
    ([Reason.correctness], "same", "failed"), ([Reason.memcheck, Reason.slower], "slower", "failed"),
    ([Reason.timer_escape], "same", "failed"), ([Reason.impossible_speed], "faster", "failed"),
])
def test_status_of_a_verdict(reasons, outcome, status):
    assert status_of(_verdict(reasons, outcome)) == status


def _kernel(name, status, **extra) -> KernelCheck:
    decision = compare_times([0.5] * 9, [0.5 * {"slower": 1.2, "faster": 0.8}.get(status, 1.0)] * 9,
                             threshold=0.03, confidence=0.95)
    return KernelCheck(name=name, program=f"k/{name}.cu", status=status, summary=f"{name} <b>|[x]",
                       regression_threshold=0.03, decision=decision if status != "error" else None, wall_s=12.5,
                       **extra)


@pytest.mark.parametrize("statuses,code", [
    (["same", "faster"], EXIT_OK), (["same", "slower"], EXIT_REGRESSION), (["failed", "ambiguous"], EXIT_REGRESSION),
    (["same", "ambiguous"], EXIT_UNDECIDED), (["error", "ambiguous"], EXIT_USAGE), (["slower", "error"], EXIT_REGRESSION),
])
def test_exit_codes_are_distinct(statuses, code):
    check = BenchCheck(gpu=GPU, kernels=[_kernel(f"k{i}", s) for i, s in enumerate(statuses)], wall_s=30)
    assert check.exit_code == code


def _suite_result() -> BenchCheck:
    reference = _reference("a", "x")
    return BenchCheck(gpu=GPU, wall_s=61.0, kernels=[
        _kernel("same_one", "same", reference=reference,
                reproduction=Reproduction(built=True, checked=2)),
        _kernel("slow_one", "slower"), _kernel("wrong_one", "failed"), _kernel("noisy_one", "ambiguous"),
        _kernel("broken_one", "error")])


def test_junit_xml_parses_with_a_junit_library(tmp_path):
    path = tmp_path / "bench.xml"
    path.write_text(junit_xml(_suite_result()))
    xml = JUnitXml.fromfile(str(path))
    suite = next(iter(xml))
    assert suite.tests == 5 and suite.failures == 2 and suite.errors == 2
    cases = {case.name: case for case in suite}
    assert cases["same_one"].is_passed
    kinds = {name: [type(r).__name__ for r in case.result] for name, case in cases.items()}
    assert kinds["slow_one"] == ["Failure"] and kinds["wrong_one"] == ["Failure"]
    assert kinds["noisy_one"] == ["Error"] and kinds["broken_one"] == ["Error"]
    failure = next(r for r in cases["slow_one"].result if isinstance(r, Failure))
    assert failure.type == "SLOWER" and failure.message == "slow_one <b>|[x]"
    assert next(r for r in cases["noisy_one"].result if isinstance(r, Error)).type == "AMBIGUOUS"
    import xml.etree.ElementTree as ET

    case = ET.parse(path).getroot().find(".//testcase[@name='same_one']")
    properties = {p.get("name"): p.get("value") for p in case.iter("property")}
    assert properties["status"] == "SAME" and properties["pairs"] == "9" and properties["recorded_gpu"] == GPU.name
    assert properties["reference_outputs_reproduced"] == "yes"


def test_the_step_summary_is_a_markdown_table_with_data_escaped():
    text = step_summary(_suite_result())
    rows = [ln for ln in text.splitlines() if ln.startswith("| ")]
    assert len(rows) == 1 + 5  # header, one row per kernel
    assert all(row.count(" | ") == 6 for row in rows)  # no cell broke the table
    assert "SLOWER" in text and "+20.0%" in text and "AMBIGUOUS" in text
    assert "\\<b\\>\\|\\[x\\]" in text  # text from data is never markup


# -- the command line ---------------------------------------------------------------------

def _run_cli(monkeypatch, capsys, cwd, *args):
    from kernelloop.cli import app as cli

    monkeypatch.chdir(cwd)
    monkeypatch.setattr(sys, "argv", ["kernelloop", *args])
    with pytest.raises(SystemExit) as exited:
        cli.main()
    captured = capsys.readouterr()
    return exited.value.code, captured.out, captured.err


def test_check_writes_junit_the_step_summary_and_json_and_exits_by_verdict(tmp_path, monkeypatch, capsys):
    import kernelloop.bench.check as check_module

    _project(tmp_path)
    seen = {}

    def fake_check_suite(settings, *, names=None, progress=None, on_kernel=None):
        seen["pairs"], seen["names"] = settings.bench.pairs, names
        return _suite_result()

    monkeypatch.setattr(check_module, "check_suite", fake_check_suite)
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    code, out, _ = _run_cli(monkeypatch, capsys, tmp_path, "bench", "check", "--pairs", "11", "--junit",
                            str(tmp_path / "j.xml"), "--json", "same_one")
    assert code == EXIT_REGRESSION and seen == {"pairs": 11, "names": ["same_one"]}
    assert json.loads(out)["exit_code"] == EXIT_REGRESSION
    assert summary.read_text().startswith("earlier step\n### kernelloop bench check")  # appended, not replaced
    assert JUnitXml.fromfile(str(tmp_path / "j.xml"))
    code, out, _ = _run_cli(monkeypatch, capsys, tmp_path, "bench", "check")
    assert code == EXIT_REGRESSION and "slow_one" in out and "SLOWER" in out and "exit code 1" in out


def test_check_without_a_suite_or_reference_is_one_line_exit_2(tmp_path, monkeypatch, capsys):
    code, _, err = _run_cli(monkeypatch, capsys, tmp_path, "bench", "check")
    assert code == 2 and "[[bench.kernels]]" in err and "Traceback" not in err
    _project(tmp_path)
    code, _, err = _run_cli(monkeypatch, capsys, tmp_path, "bench", "check")
    assert code == 2 and "kernelloop bench record transpose" in err and len(err.strip().splitlines()) == 1


def test_a_changed_harness_stops_the_check_before_any_gpu_work(tmp_path, monkeypatch, capsys):
    import kernelloop.bench.check as check_module

    _project(tmp_path, kernels=("transpose",))
    entry, = suite_entries(load_settings(project_dir=tmp_path), project_dir=tmp_path)
    _record_by_hand(entry)
    entry.program.write_text(entry.program.read_text().replace("3001", "3003"))
    monkeypatch.setattr(check_module, "detect_gpus", lambda: pytest.fail("looked for a GPU"))
    code, _, err = _run_cli(monkeypatch, capsys, tmp_path, "bench", "check")
    assert code == 2 and "harness" in err and "kernelloop bench record transpose" in err


def test_record_without_a_gpu_is_one_line_exit_2(tmp_path, monkeypatch, capsys):
    import kernelloop.bench.reference as reference_module

    _project(tmp_path, kernels=("transpose",))
    monkeypatch.setattr(reference_module, "detect_gpus", lambda: [])
    code, _, err = _run_cli(monkeypatch, capsys, tmp_path, "bench", "record")
    assert code == 2 and "needs a CUDA GPU" in err
