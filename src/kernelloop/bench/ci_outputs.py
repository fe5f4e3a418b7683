"""What a CI system reads from `bench check`: JUnit XML and a Markdown step summary."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from .check import BenchCheck, KernelCheck

# JUnit's vocabulary: a regression or a wrong kernel is a failure; a kernel that could not be
# decided or not checked at all is an error (the test did not come to a verdict).
_FAILURES = {"slower": "SLOWER", "failed": "FAILED"}
_ERRORS = {"ambiguous": "AMBIGUOUS", "error": "ERROR"}


def _figures(k: KernelCheck) -> list[tuple[str, str]]:
    figures = [("status", k.status.upper()), ("regression_threshold", f"{k.regression_threshold:g}"),
               ("reference_from", k.reference_from)]
    if k.decision is not None:
        d = k.decision
        figures += [("time_ratio", f"{d.ratio:.4f}"), ("interval", f"{d.lower:.4f}-{d.upper:.4f}"),
                    ("confidence", f"{d.confidence:.3f}"), ("pairs", str(d.pairs)),
                    ("reference_ms", f"{d.reference.median:.6f}"), ("current_ms", f"{d.current.median:.6f}"),
                    ("reference_iqr", f"{d.reference.relative_iqr:.4f}"),
                    ("current_iqr", f"{d.current.relative_iqr:.4f}")]
    if k.reference is not None:
        figures += [("recorded_ms", f"{k.reference.kernel_ms.median:.6f}"), ("recorded_gpu", k.reference.gpu),
                    ("recorded_at", k.reference.recorded_at)]
    if k.reproduction is not None:
        figures.append(("reference_outputs_reproduced", "yes" if k.reproduction.reproduced
                        else "varies between runs" if k.reference_varies else "no"))
    return figures


def junit_xml(check: BenchCheck) -> str:
    """One <testcase> per kernel; the verdict in the message, every figure a property."""
    failures = sum(k.status in _FAILURES for k in check.kernels)
    errors = sum(k.status in _ERRORS for k in check.kernels)
    suites = ET.Element("testsuites", name="kernelloop bench", tests=str(len(check.kernels)),
                        failures=str(failures), errors=str(errors), time=f"{check.wall_s:.3f}")
    suite = ET.SubElement(suites, "testsuite", name="kernelloop bench check", tests=str(len(check.kernels)),
                          failures=str(failures), errors=str(errors), skipped="0", time=f"{check.wall_s:.3f}",
                          hostname=check.gpu.name)
    for k in check.kernels:
        case = ET.SubElement(suite, "testcase", classname="kernelloop.bench", name=k.name, file=k.program,
                             time=f"{k.wall_s:.3f}")
        properties = ET.SubElement(case, "properties")
        for name, value in _figures(k):
            ET.SubElement(properties, "property", name=name, value=value)
        if k.status in _FAILURES:
            ET.SubElement(case, "failure", type=_FAILURES[k.status], message=k.summary).text = _details(k)
        elif k.status in _ERRORS:
            ET.SubElement(case, "error", type=_ERRORS[k.status], message=k.summary).text = _details(k)
        ET.SubElement(case, "system-out").text = _details(k)
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"


def _details(k: KernelCheck) -> str:
    lines = [f"{k.name}: {k.status.upper()}: {k.summary}", *(f"  note: {note}" for note in k.notes)]
    if k.verdict is not None:
        lines += [f"  {g.gate}: {g.status} {g.detail}".rstrip() for g in k.verdict.gates]
    if k.reference is not None:
        r = k.reference
        lines.append(f"  recorded {r.recorded_at} on {r.gpu} (driver {r.driver}, nvcc {r.nvcc}): "
                     f"{r.kernel_ms.median:.4f} ms, IQR {r.kernel_ms.relative_iqr:.1%} (shown, not used to decide)")
    if k.reproduction is not None:
        lines.append("  reference outputs: " + _reproduction_words(k))
    return "\n".join(lines)


def _reproduction_words(k: KernelCheck) -> str:
    r = k.reproduction
    if r is None:
        return "not checked"
    if r.problem:
        return r.problem
    if r.reproduced:
        return f"reproduced bit for bit ({r.checked} recorded experiment(s))"
    if k.reference_varies:
        return (f"differ on {len(r.differing)} of {r.checked} recorded experiment(s): its results vary between "
                "runs (float atomics), so no bit-for-bit match is expected")
    return (f"differ on {len(r.differing)} of {r.checked} recorded experiment(s) (expected on another GPU, driver "
            "or nvcc; the verdict compares with the reference run here)")


def _cell(text: str) -> str:
    """Markdown table cell: literal text (no markup, no table breaks)."""
    out = text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")
    for ch in "`*_[]<>#~":
        out = out.replace(ch, "\\" + ch)
    return out


_ICONS = {"same": "✅", "faster": "🚀", "slower": "❌", "failed": "❌", "ambiguous": "⚠️", "error": "⚠️"}


def step_summary(check: BenchCheck) -> str:
    """A Markdown table for $GITHUB_STEP_SUMMARY (GitHub renders it on the run's page)."""
    lines = [f"### kernelloop bench check on {_cell(check.gpu.name)} (driver {_cell(check.gpu.driver_version)})", "",
             "| kernel | verdict | reference ms | current ms | change (interval) | pairs | recorded ms |",
             "|---|---|---:|---:|---|---:|---:|"]
    for k in check.kernels:
        d, r = k.decision, k.reference
        change = f"{d.ratio - 1:+.1%} ({d.lower - 1:+.1%} to {d.upper - 1:+.1%})" if d else "-"
        recorded = f"{r.kernel_ms.median:.4f} ({_cell(r.gpu)})" if r else "-"
        lines.append(f"| {_cell(k.name)} | {_ICONS[k.status]} {k.status.upper()} | "
                     f"{f'{d.reference.median:.4f}' if d else '-'} | {f'{d.current.median:.4f}' if d else '-'} | "
                     f"{change} | {d.pairs if d else '-'} | {recorded} |")
    lines.append("")
    for k in check.kernels:
        if k.status in ("failed", "error", "ambiguous"):
            lines.append(f"- **{_cell(k.name)}**: {_cell(k.summary)}")
        lines += [f"- {_cell(k.name)}: {_cell(note)}" for note in k.notes]
    thresholds = sorted({k.regression_threshold for k in check.kernels})
    source = f"the suite, references and settings of {_cell(check.against)}" if check.against else \
        "references from the working tree (`--against REV` takes them from a trusted revision)"
    lines += ["", f"Regression bar ±{', '.join(f'{t:.0%}' for t in thresholds)}; kernel-only times, interleaved with "
              f"the recorded reference program in this job; {source}; {check.wall_s:.0f} s in all.", ""]
    return "\n".join(lines)
