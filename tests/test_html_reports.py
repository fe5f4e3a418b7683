"""The HTML reports of `optimize` (report.html) and `bench check --html`: self-contained, data escaped,
figures present and right; rendered by headless Chromium where it is installed (no GPU)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

from kernelloop.bench.check import BenchCheck, KernelCheck
from kernelloop.bench.html_report import bench_html
from kernelloop.config import VerifySettings
from kernelloop.profiler.run import diagnose_report
from kernelloop.reports.figures import roofline_problem
from kernelloop.reports.page import Page
from kernelloop.reports.screenshot import find_browser
from kernelloop.runs.report import RunFacts, report_html
from kernelloop.tools.gpu import GpuInfo
from kernelloop.verify.records import BufferSpec, Manifest
from kernelloop.verify.regression import compare_times
from kernelloop.verify.stats import decide

from .conftest import run_cli_in_process
from kernelloop.verify.verdict import GateResult, Reason, Verdict, WorkModel

ROOT = Path(__file__).resolve().parent.parent
HOSTILE = "<script>alert(1)</script> & [bold]x[/bold] \"q\" https://evil.example/x.js"
SVG_NS = "http://www.w3.org/2000/svg"
GPU = GpuInfo(index=0, name="NVIDIA H200", compute_capability="9.0", driver_version="580.159.04")
# naive_matmul at n = 1024 on an H200, as a v2 harness declares and measures it
MATMUL = WorkModel(bytes_read=8_388_608, bytes_written=4_194_304, flops=2 * 1024**3, copy_gbps=4020, fma_gflops=61000)
COPYLIKE = WorkModel(bytes_read=268_435_456, bytes_written=268_435_456, flops=0, copy_gbps=4020, fma_gflops=61000)


class Parsed(HTMLParser):
    """Every tag, attribute, text run and style block of a page."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.attrs: list[tuple[str, str, str]] = []  # (tag, name, value)
        self.text: list[str] = []
        self.styles: list[str] = []
        self._in: list[str] = []
        self.feed(text)
        self.close()

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.attrs += [(tag, name, value or "") for name, value in attrs]
        self._in.append(tag)

    def handle_startendtag(self, tag, attrs):
        self.tags.append(tag)
        self.attrs += [(tag, name, value or "") for name, value in attrs]

    def handle_endtag(self, tag):
        if tag in self._in:
            while self._in and self._in.pop() != tag:
                pass

    def handle_data(self, data):
        (self.styles if self._in and self._in[-1] == "style" else self.text).append(data)

    @property
    def all_text(self) -> str:
        return "".join(self.text)


def assert_self_contained(page: str) -> Parsed:
    parsed = Parsed(page)
    forbidden = {"script", "link", "img", "iframe", "object", "embed", "video", "audio", "source", "base", "foreignobject"}
    assert not forbidden & set(parsed.tags), forbidden & set(parsed.tags)
    for tag, name, value in parsed.attrs:
        if re.search(r"https?://", value):  # only the SVG namespace names a URL, and nothing fetches it
            assert (name, value) == ("xmlns", SVG_NS), (tag, name, value)
        if name in ("src", "href", "xlink:href", "action", "poster", "srcset", "data"):
            assert value.startswith("#"), (tag, name, value)
        assert not name.startswith("on"), (tag, name)  # no event handlers
        if name == "style":
            assert "url(" not in value and "@import" not in value
    for css in parsed.styles:
        assert "@import" not in css and not re.search(r"url\(\s*['\"]?(?!#)", css), css
    csp = [v for t, n, v in parsed.attrs if t == "meta" and n == "content" and "default-src 'none'" in v]
    assert csp, "no Content-Security-Policy forbidding requests"
    assert page.startswith("<!DOCTYPE html>") and '<meta charset="utf-8">' in page
    return parsed


def svg_labels(page: str) -> list[str]:
    return re.findall(r'<svg role="img" aria-label="([^"]*)"', page)


# -- synthetic runs ---------------------------------------------------------------------------

def _diagnoses():
    before = diagnose_report(ROOT / "tests" / "fixtures" / "ncu" / "suite" / "naive_matmul.ncu-rep")
    after = before.model_copy(update={
        "summary": f"compute-bound after tiling {HOSTILE}",
        "key_metrics": [e.model_copy(update={"value": (e.value or 0) * 0.5}) for e in before.key_metrics]})
    return before, after


def _verdict(work: WorkModel | None, base_ms=0.416, cand_ms=0.073) -> Verdict:
    base = [base_ms * (1 + 0.001 * (i - 3)) for i in range(7)]  # medians: base_ms, cand_ms
    cand = [cand_ms * (1 + 0.001 * (3 - i)) for i in range(7)]
    speed = decide(base, cand, threshold=1.2, confidence=0.95)
    return Verdict(accepted=True, summary="accepted", baseline_file="naive_matmul.cu", candidate_file="best.cu",
                   settings=VerifySettings(), speed=speed, work=work, gates=[
                       GateResult(gate="policy", status="pass", candidate="clean"),
                       GateResult(gate="compile", status="pass", baseline="OK", candidate="OK", detail="nvcc -O3"),
                       GateResult(gate="correctness", status="pass", baseline="reference", candidate="match",
                                  detail=f"2 fresh seeds {HOSTILE}"),
                       GateResult(gate="memcheck", status="skipped", detail="no compute-sanitizer"),
                       GateResult(gate="speedup", status="pass", detail=speed.describe())])


def facts(*, status="accepted", work: WorkModel | None = MATMUL, base_ms=0.416, cand_ms=0.073) -> RunFacts:
    before, after = _diagnoses()
    accepted = status == "accepted"
    return RunFacts(
        run_id="20261121-101502-3fa2", kernel=f"naive_matmul{HOSTILE}", kernel_path=f"/k/[a]&<b>/{HOSTILE}.cu",
        status=status, stop_reason="accepted" if accepted else f"3 iterations {HOSTILE}", optimizer="offline",
        gpu="NVIDIA H200", max_iterations=3, iterations=3, threshold=1.2, diagnosis=before,
        diagnosis_after=after if accepted else None, best_verdict=_verdict(work, base_ms, cand_ms) if accepted else None,
        iteration_accepted=3 if accepted else None,
        attempts=[{"iteration": 1, "approach": f"tiling {HOSTILE}", "outcome": "rejected: compile", "speedup": None,
                   "reason": f"error: {HOSTILE}"},
                  {"iteration": 2, "approach": "unroll", "outcome": "rejected: not_faster", "speedup": 1.08,
                   "reason": "1.08x vs bar 1.20x"},
                  {"iteration": 3, "approach": "register blocking", "outcome": "accepted" if accepted else "rejected: not_faster",
                   "speedup": base_ms / cand_ms, "reason": "ok"}],
        timings={"profile": 3.1, "verify": 12.0}, loop_time_s=23.6,
        certificate="certificate.json" if accepted else None)


def _kernel_check(name: str, status: str, ratio: float, work: WorkModel | None, *, gates_fail: str = "") -> KernelCheck:
    reference = [1.0 * (1 + 0.002 * (i % 3)) for i in range(9)]
    current = [r * ratio for r in reference]
    decision = compare_times(reference, current, threshold=0.03, confidence=0.95)
    verdict = Verdict(accepted=status in ("same", "faster"), summary=decision.describe(), baseline_file="ref",
                      candidate_file=name, settings=VerifySettings(), regression=decision, work=work,
                      speed=decide(reference, current, threshold=1.2, confidence=0.95),
                      reasons=[Reason.correctness] if gates_fail else [],
                      gates=[GateResult(gate="correctness", status="fail" if gates_fail else "pass",
                                        candidate="MISMATCH" if gates_fail else "match", detail=gates_fail or "ok"),
                             GateResult(gate="regression", status="pass", detail=decision.describe())])
    return KernelCheck(name=name, program=f"kernels/{name}.cu", status=status, summary=f"{decision.describe()} {HOSTILE}",
                       regression_threshold=0.03, decision=decision, verdict=verdict, wall_s=30)


def bench_result() -> BenchCheck:
    return BenchCheck(gpu=GPU, wall_s=200, kernels=[
        _kernel_check("matmul", "same", 1.0, MATMUL).model_copy(update={"notes": [f"a new kernel {HOSTILE}"]}),
        _kernel_check(f"softmax{HOSTILE}", "slower", 1.25, COPYLIKE),
        _kernel_check("old_v1", "faster", 0.8, None),
        _kernel_check("wrong", "failed", 1.0, MATMUL, gates_fail=f"seed 7: out[3] {HOSTILE}"),
        KernelCheck(name="broken", program="kernels/broken.cu", status="error", summary=f"could not run {HOSTILE}",
                    regression_threshold=0.05)])


# -- optimize: report.html --------------------------------------------------------------------

def test_optimize_report_is_self_contained_and_escapes_every_piece_of_data():
    page = report_html(facts())
    parsed = assert_self_contained(page)
    text = parsed.all_text
    # data shows as the literal text it is, wherever it comes from: kernel, path, approach, gate detail, summary
    assert f"kernelloop optimize: naive_matmul{HOSTILE}" in text
    assert f"/k/[a]&<b>/{HOSTILE}.cu" in text and f"tiling {HOSTILE}" in text
    assert f"2 fresh seeds {HOSTILE}" in text and f"compute-bound after tiling {HOSTILE}" in text
    assert "<script>" not in page and "&lt;script&gt;" in page
    labels = svg_labels(page)
    assert labels == ["speedup per iteration against the bar 1.2x", "roofline placement of baseline and candidate",
                      "key metrics before and after"]
    assert page.count("<svg ") == 3 and page.count("</svg>") == 3
    ids = re.findall(r'\sid="([^"]+)"', page)
    assert len(ids) == len(set(ids)), "element ids repeat between figures"
    assert "kernelloop verify-cert certificate.json" in text
    # the gate table: one row per gate with its status
    assert "✓ pass" in text and "– skipped" in text and "no compute-sanitizer" in text


def test_the_roofline_places_both_programs_by_their_declared_work_and_measured_ceilings():
    page = report_html(facts())
    # 2^31 FLOPs per call: 0.416 ms is 5.16 TFLOP/s, 0.073 ms 29.4; the ceiling at 171 FLOP/byte is FMA's 61 TFLOP/s
    assert "baseline: 0.416 ms, 5.16 TFLOP/s (8% of the ceiling)" in page
    assert "candidate: 0.073 ms, 29.4 TFLOP/s (48% of the ceiling)" in page
    assert "FP32 FMA 61 TFLOP/s" in page and "copy 4.02 TB/s" in page
    assert "arithmetic intensity 171 FLOP/byte" in Parsed(page).all_text


def test_without_flops_the_placement_is_bandwidth_against_the_copy_ceiling():
    page = report_html(facts(work=COPYLIKE, base_ms=0.9216, cand_ms=0.0681))
    assert "achieved bandwidth of baseline and candidate" in svg_labels(page)
    # 536.9 MB per call: 0.9216 ms is 583 GB/s (14 % of 4020), 0.0681 ms 7.88 TB/s
    assert "0.9216 ms, 583 GB/s (14% of copy)" in page and "0.0681 ms, 7.88 TB/s (196% of copy)" in page
    assert "no FLOPs are declared" in Parsed(page).all_text


def test_a_report_says_plainly_when_a_figure_cannot_be_drawn():
    v1 = report_html(facts(work=None))
    assert "contract v1" in Parsed(v1).all_text and "roofline placement" not in " ".join(svg_labels(v1))
    exhausted = report_html(facts(status="exhausted"))
    text = assert_self_contained(exhausted).all_text
    assert "EXHAUSTED after 3 iteration(s)" in text and f"3 iterations {HOSTILE}" in text
    assert "no candidate was accepted, so there is no before/after pair to place" in text
    assert "no candidate was accepted: there is no proof" in text
    assert svg_labels(exhausted) == ["speedup per iteration against the bar 1.2x", "key metrics before and after"]
    for work, problem in ((None, "contract v1"), (MATMUL.model_copy(update={"copy_gbps": 0.0}), "no copy bandwidth"),
                          (MATMUL.model_copy(update={"bytes_read": 0, "bytes_written": 0}), "no bytes")):
        assert problem in roofline_problem(work, [])  # type: ignore[operator]


def test_work_comes_from_the_harness_manifests_best_ceilings():
    buffers = [BufferSpec(name="a", role="input", dtype="float32", count=1024),
               BufferSpec(name="table", role="input", dtype="float32", count=4096, partial=True),
               BufferSpec(name="acc", role="inout", dtype="float32", count=256),
               BufferSpec(name="out", role="output", dtype="float64", count=100),
               BufferSpec(name="tmp", role="scratch", dtype="float32", count=999)]
    manifests = [Manifest(contract=2, warmup=1, calls=3, flops=5e6, copy_gbps=c, fma_gflops=f, buffers=buffers)
                 for c, f in ((3900.0, 60000.0), (4020.0, 59000.0))]
    work = WorkModel.of(manifests)
    assert (work.bytes_read, work.bytes_written) == (4 * 1024 + 4 * 256, 4 * 256 + 8 * 100)
    assert (work.flops, work.copy_gbps, work.fma_gflops) == (5e6, 4020.0, 60000.0)


def test_a_figure_holding_a_script_is_refused():
    page = Page("x")
    with pytest.raises(ValueError):
        page.figure('<svg><script>alert(1)</script></svg>', "caption")
    with pytest.raises(ValueError):
        page.figure("<div>not svg</div>", "caption")


# -- bench check --html -----------------------------------------------------------------------

def test_bench_report_has_a_row_per_kernel_the_change_figure_gates_and_rooflines():
    page = bench_html(bench_result())
    parsed = assert_self_contained(page)
    text = parsed.all_text
    verdicts = page.split("<h2>Verdicts</h2>", 1)[1].split("</table>", 1)[0]
    assert verdicts.count("<tr>") == 1 + 5  # header, one row per kernel
    for word in ("SAME", "SLOWER", "FASTER", "FAILED", "ERROR"):
        assert f">{word}<" in verdicts
    assert f"softmax{HOSTILE}" in text and f"seed 7: out[3] {HOSTILE}" in text and f"could not run {HOSTILE}" in text
    assert "<script>" not in page
    labels = svg_labels(page)
    assert labels[0] == "time ratio of each kernel against its reference"
    # rooflines where the harness declared the work: matmul and wrong (FLOPs), softmax (bandwidth); old_v1 says why not
    assert labels[1:] == ["roofline placement of reference and current", "achieved bandwidth of reference and current",
                          "roofline placement of reference and current"]
    assert "contract v1" in text and "not checked: no gate ran" in text
    assert "+25.0% (+25.0% to +25.0%)" in text  # the change with its interval
    assert "SLOWER +25.0%" in page  # beside its row in the figure
    assert "exit code 1: regression" in text and f"note: a new kernel {HOSTILE}" in text


_run_cli = run_cli_in_process


def test_bench_check_html_writes_the_report_and_a_missing_folder_stops_before_the_check(tmp_path, monkeypatch, capsys):
    import kernelloop.bench.check as check_module

    (tmp_path / "kernelloop.toml").write_text("")
    calls = []
    monkeypatch.setattr(check_module, "check_suite", lambda settings, **kw: calls.append(1) or bench_result())
    code, out, _ = _run_cli(monkeypatch, capsys, tmp_path, "bench", "check", "--json", "--html", "r.html")
    assert code == 1 and json.loads(out)["exit_code"] == 1
    assert_self_contained((tmp_path / "r.html").read_text(encoding="utf-8"))
    code, _, err = _run_cli(monkeypatch, capsys, tmp_path, "bench", "check", "--html", "nowhere/r.html")
    assert code == 2 and "--html nowhere/r.html" in err and len(err.strip().splitlines()) == 1
    assert calls == [1]  # refused before any check


# -- a real browser ---------------------------------------------------------------------------

@pytest.mark.skipif(find_browser() is None, reason="no Chromium or Chrome on PATH")
@pytest.mark.parametrize("which", ["optimize", "bench"])
def test_headless_chromium_renders_the_report_with_its_figures(tmp_path, which):
    import numpy as np
    from PIL import Image

    html = tmp_path / f"{which}.html"
    html.write_text(report_html(facts()) if which == "optimize" else bench_html(bench_result()), encoding="utf-8")
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "screenshot_report.py"), str(html), "-o",
                           str(tmp_path / "shot.png")], capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    with Image.open(tmp_path / "shot.png") as image:
        rgb = image.convert("RGB")
        width, height = rgb.size
        assert width == 1100 and 1500 < height < 8000  # the page, its empty tail cut
        pixels = np.asarray(rgb, dtype=np.int16).reshape(-1, 3)
    assert len(np.unique(pixels, axis=0)) > 200  # text, tables and figures, not a blank or an error page

    def near(color, tolerance=40) -> int:
        return int((np.abs(pixels - np.array(color)) <= tolerance).all(axis=1).sum())

    # the figures were drawn: the candidate/current blue (#2563eb) of the roofline and metrics, and
    # the accepted green (#16a34a) bar or the slower red (#dc2626) in the change figure
    assert near((0x25, 0x63, 0xEB)) > 2000
    assert near((0x16, 0xA3, 0x4A) if which == "optimize" else (0xDC, 0x26, 0x26)) > 200


def test_the_screenshot_script_says_in_one_line_what_is_missing(tmp_path):
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "screenshot_report.py"), str(tmp_path / "no.html")],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stderr.strip() == f"error: {tmp_path / 'no.html'}: no such file"
