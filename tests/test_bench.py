"""`kernelloop bench`: the suite, references, the verdict mapping, exit codes and CI outputs (no GPU)."""

from __future__ import annotations

import json
import shutil

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

from .conftest import ROOT, run_cli_in_process

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
    assert load_settings({"pairs": 15}, project_dir=tmp_path).verify.timing_pairs == VerifySettings().timing_pairs
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

_run_cli = run_cli_in_process


def test_check_writes_junit_the_step_summary_and_json_and_exits_by_verdict(tmp_path, monkeypatch, capsys):
    import kernelloop.bench.check as check_module

    _project(tmp_path)
    seen = {}

    def fake_check_suite(settings, *, names=None, progress=None, on_kernel=None, against=None, working=None):
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


# -- --against REV: the suite, references and settings of a trusted revision (red team round 46) --

def _git(root, *args):
    import subprocess
    subprocess.run(["git", "-c", "user.email=t@t", "-c", "user.name=t", *args], cwd=root, check=True,
                   capture_output=True)


def _repository_with_recorded_suite(tmp_path):
    from kernelloop.bench.trusted import Revision, trusted_settings
    root = _project(tmp_path / "repo", kernels=("transpose", "row_softmax"))
    settings = load_settings(project_dir=root)
    for entry in suite_entries(settings, project_dir=root):
        _record_by_hand(entry)
    _git(root, "init", "-q", "-b", "main")
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "suite")
    revision = Revision("main", root)
    return root, revision, trusted_settings


def test_against_a_trusted_revision_a_re_recorded_reference_and_loosened_settings_are_not_used(tmp_path):
    from kernelloop.bench.check import _prepare, _prepare_against
    root, revision, trusted_settings = _repository_with_recorded_suite(tmp_path)
    honest = (root / "k" / "transpose.cu").read_text()
    # The change: a wrong transpose, its reference "re-recorded" from it, the bar raised and memcheck off.
    wrong = honest.replace("out[(size_t)col * rows + row] = in[(size_t)row * cols + col];",
                           "out[(size_t)col * rows + row] = in[(size_t)row * cols + col] * 1.01f;")
    assert wrong != honest
    (root / "k" / "transpose.cu").write_text(wrong)
    entry = next(e for e in suite_entries(load_settings(project_dir=root), project_dir=root) if e.name == "transpose")
    _record_by_hand(entry, wrong)
    toml = root / "kernelloop.toml"
    toml.write_text(toml.read_text().replace('references_dir = "refs"',
                                             'references_dir = "refs"\nregression_threshold = 0.9')
                    + "[verify]\nmemcheck = \"off\"\nrtol = 0.5\n")
    working = load_settings(project_dir=root)
    # the working tree alone: the forged reference is taken, and the program is compared with itself
    forged = next(p for p in _prepare(suite_entries(working, project_dir=root), working) if p.entry.name == "transpose")
    assert forged.reference_text == forged.current_text == wrong
    # against main: main's reference (the honest program) and main's settings
    trusted = trusted_settings(revision)
    assert trusted.bench.regression_threshold == 0.03 and trusted.verify.memcheck != "off" and trusted.verify.rtol is None
    prepared = {p.entry.name: p for p in _prepare_against(revision, trusted, working, None)}
    assert prepared["transpose"].reference_text == honest and prepared["transpose"].current_text == wrong
    assert prepared["transpose"].reference_from == "main" and prepared["transpose"].entry.regression_threshold == 0.03
    assert any("records a new reference" in n for n in prepared["transpose"].notes)
    assert prepared["row_softmax"].notes == []


def test_against_a_trusted_revision_a_removed_kernel_is_an_error_and_an_added_one_is_new(tmp_path):
    from kernelloop.bench.check import _prepare_against
    root, revision, trusted_settings = _repository_with_recorded_suite(tmp_path)
    toml = root / "kernelloop.toml"
    # the change drops row_softmax from the suite and deletes its program, and adds stencil2d
    text = toml.read_text().replace('[[bench.kernels]]\nname = "row_softmax"\nprogram = "k/row_softmax.cu"\n', "")
    shutil.copy(ROOT / "kernels" / "stencil2d.cu", root / "k" / "stencil2d.cu")
    toml.write_text(text + '[[bench.kernels]]\nname = "stencil2d"\nprogram = "k/stencil2d.cu"\n')
    (root / "k" / "row_softmax.cu").unlink()
    working = load_settings(project_dir=root)
    _record_by_hand(next(e for e in suite_entries(working, project_dir=root) if e.name == "stencil2d"))
    prepared = {p.entry.name: p for p in _prepare_against(revision, trusted_settings(revision), working, None)}
    assert set(prepared) == {"transpose", "row_softmax", "stencil2d"}
    assert "removing a kernel from the suite" in prepared["row_softmax"].problem
    assert prepared["stencil2d"].reference_from == "the working tree"
    assert any("new in this change" in n for n in prepared["stencil2d"].notes)
    with pytest.raises(InputError, match="no kernel named 'nope'"):
        _prepare_against(revision, trusted_settings(revision), working, ["nope"])


def test_against_a_revision_that_does_not_exist_or_outside_git_is_one_line(tmp_path):
    from kernelloop.bench.trusted import Revision
    root, revision, _ = _repository_with_recorded_suite(tmp_path)
    with pytest.raises(InputError, match="no such revision here"):
        Revision("origin/nope", root)
    (tmp_path / "plain").mkdir()
    with pytest.raises(InputError, match="not inside a git repository"):
        Revision("main", tmp_path / "plain")


def test_against_a_name_a_tag_and_a_branch_share_is_refused_and_a_commit_is_pinned(tmp_path):
    from kernelloop.bench.trusted import Revision
    root, revision, _ = _repository_with_recorded_suite(tmp_path)
    assert len(revision.commit) == 40
    _git(root, "checkout", "-q", "-b", "side")
    (root / "k" / "transpose.cu").write_text((root / "k" / "transpose.cu").read_text() + "// side\n")
    _git(root, "commit", "-q", "-am", "side")
    _git(root, "tag", "main")  # a tag named like the branch: git would prefer one silently
    with pytest.raises(InputError, match="ambiguous, refs/heads/main and refs/tags/main both exist"):
        Revision("main", root)
    assert Revision("refs/heads/main", root).commit == revision.commit
    with pytest.raises(InputError, match="not a revision"):
        Revision("--output=x", root)


def test_against_a_symbolic_link_in_the_working_tree_does_not_choose_the_file_read(tmp_path):
    root, revision, _ = _repository_with_recorded_suite(tmp_path)
    record = root / "refs" / "transpose" / "reference.json"
    committed = revision.read(record)
    # the change replaces the reference folder with a link to another kernel's
    shutil.rmtree(root / "refs" / "transpose")
    (root / "refs" / "transpose").symlink_to(root / "refs" / "row_softmax")
    assert revision.read(record) == committed and '"kernel":"transpose"' in committed.replace(" ", "")


def test_a_header_named_like_the_trusted_harness_is_never_inlined_and_a_reference_reads_no_include_folder(tmp_path):
    # Red team round 47: an include folder's kernelloop_harness.cuh (or a header named like a system
    # one) went into the frozen harness of both the reference and the current program.
    from kernelloop.bench.check import harness_changed
    from kernelloop.program.split import split_program
    text = (ROOT / "kernels" / "sum_reduction.cu").read_text()
    headers = tmp_path / "ci_headers"
    headers.mkdir()
    (headers / "kernelloop_harness.cuh").write_text("#error the change's own harness\n")
    split = split_program(text, "sum_reduction.cu", [headers])
    assert split.headers == [] and "#error the change's own harness" not in split.harness
    assert not harness_changed(text, text, "sum_reduction.cu", [headers])
    (headers / "vector").write_text("// the change's own <vector>\n")
    assert harness_changed(text, text, "sum_reduction.cu", [headers])  # the current program would read it


def test_against_a_trusted_revision_the_check_builds_in_a_private_cache_never_the_configured_one(tmp_path,
                                                                                             monkeypatch):
    # Red team round 48: a cache_dir inside the checkout handed the change the reference's build.
    import kernelloop.bench.check as check_module
    root, revision, trusted_settings = _repository_with_recorded_suite(tmp_path)
    planted = root / ".kernelloop-cache"
    trusted = trusted_settings(revision).model_copy(update={"cache_dir": planted})
    seen = {}

    def capture(prepared, settings, started, progress, on_kernel, against):
        seen["cache"], seen["against"] = settings.cache_dir, against
        assert settings.cache_dir.is_dir()
        return "checked"

    monkeypatch.setattr(check_module, "_check_prepared", capture)
    assert check_module.check_suite(trusted, against=revision, working=load_settings(project_dir=root)) == "checked"
    assert seen["against"] == "main" and seen["cache"] != planted
    assert not str(seen["cache"]).startswith(str(root)) and not seen["cache"].exists()  # removed afterwards


@pytest.mark.nvcc
def test_a_build_record_naming_a_binary_outside_its_entry_is_not_used(tmp_path):
    from kernelloop.program.split import split_program
    from kernelloop.tools.nvcc import BuildResult, build_program
    split = split_program((ROOT / "kernels" / "transpose.cu").read_text(), "transpose.cu")
    first = build_program(split.editable_unit(), split.harness_unit(), arch="sm_90", cache_dir=tmp_path)
    assert first.ok and first.binary is not None
    elsewhere = tmp_path / "planted"
    elsewhere.write_bytes(b"#!/bin/sh\necho planted\n")
    meta = first.binary.parent / "build.json"
    record = BuildResult.model_validate_json(meta.read_text())
    meta.write_text(record.model_copy(update={"binary": elsewhere}).model_dump_json())
    again = build_program(split.editable_unit(), split.harness_unit(), arch="sm_90", cache_dir=tmp_path)
    assert again.ok and not again.cached and again.binary != elsewhere
