"""`bench check --html FILE`: the check as one self-contained HTML page (reports/page.py).

One row per kernel with its verdict; a figure of every kernel's time ratio current/reference
with its confidence interval over its ±threshold band; then per kernel its gate table and the
roofline placement of reference and current where the harness declares the work (contract v2)."""

from __future__ import annotations

from .. import __version__
from ..reports.figures import ChangeRow, change_chart
from ..reports.page import Cell, Page
from ..reports.sections import gate_table, roofline_section
from .check import EXIT_OK, EXIT_REGRESSION, EXIT_UNDECIDED, BenchCheck, KernelCheck
from .ci_outputs import _reproduction_words

_BANNERS = {EXIT_OK: ("no regression: every kernel SAME or FASTER", "good"),
            EXIT_REGRESSION: ("regression: a kernel SLOWER or failing a gate", "bad"),
            EXIT_UNDECIDED: ("undecided: no regression found, but a kernel AMBIGUOUS (a CI job may retry)", "warn")}
_PROBLEM = ("a kernel could not be checked (a usage or environment problem)", "warn")


def _change(k: KernelCheck) -> str:
    d = k.decision
    return f"{d.ratio - 1:+.1%} ({d.lower - 1:+.1%} to {d.upper - 1:+.1%})" if d else "-"


def bench_html(check: BenchCheck) -> str:
    page = Page(f"kernelloop bench check on {check.gpu.name}")
    page.heading(f"kernelloop bench check on {check.gpu.name}", level=1)
    text, kind = _BANNERS.get(check.exit_code, _PROBLEM)
    page.banner(f"exit code {check.exit_code}: {text}", kind)
    page.facts([("GPU", f"{check.gpu.name} (compute capability {check.gpu.compute_capability}, driver "
                        f"{check.gpu.driver_version})"),
                ("kernels", str(len(check.kernels))), ("wall time", f"{check.wall_s:.0f} s"),
                ("references from", getattr(check, "against", None) or "the working tree")])

    page.heading("Verdicts")
    page.table(["kernel", "verdict", "reference ms", "current ms", "change (interval)", "pairs", "bar",
                "recorded ms (GPU)", "check (s)"],
               [[k.name, Cell(k.status.upper(), k.status),
                 Cell(f"{k.decision.reference.median:.4f}" if k.decision else "-", "num"),
                 Cell(f"{k.decision.current.median:.4f}" if k.decision else "-", "num"),
                 Cell(_change(k), "num"), Cell(str(k.decision.pairs) if k.decision else "-", "num"),
                 Cell(f"±{k.regression_threshold:.0%}", "num"),
                 f"{k.reference.kernel_ms.median:.4f} ({k.reference.gpu})" if k.reference else "-",
                 Cell(f"{k.wall_s:.0f}", "num")] for k in check.kernels])
    if check.kernels:
        page.figure(change_chart([ChangeRow(name=k.name, status=k.status, threshold=k.regression_threshold,
                                            ratio=k.decision.ratio if k.decision else None,
                                            lower=k.decision.lower if k.decision else None,
                                            upper=k.decision.upper if k.decision else None) for k in check.kernels]),
                    "Each kernel's time ratio current / reference: the median pair ratio (dot) and the sign-test "
                    "confidence interval of the median pair ratio (line), over the kernel's band "
                    "[1/(1+t), 1+t] (shaded). SAME: the interval lies inside the band; SLOWER: wholly past its right "
                    "edge; FASTER: wholly past its left edge; AMBIGUOUS: it straddles an edge (docs/bench.md).")
    else:
        page.notice("the suite has no kernels")
    page.paragraph("Times are kernel-only, measured in interleaved (current, reference) pairs on this GPU in this "
                   "check; the recorded time (another day, maybe another GPU) is shown, never used to decide.",
                   muted=True)

    for k in check.kernels:
        page.heading(f"{k.name}: {k.status.upper()}", level=2, anchor=None)
        page.facts([("program", k.program), ("verdict", k.summary),
                    ("reference outputs", _reproduction_words(k))]
                   + ([("recorded", f"{k.reference.recorded_at} on {k.reference.gpu} (driver {k.reference.driver}, "
                                    f"nvcc {k.reference.nvcc}): {k.reference.kernel_ms.median:.4f} ms, IQR "
                                    f"{k.reference.kernel_ms.relative_iqr:.1%}")] if k.reference else []))
        for note in getattr(k, "notes", []):
            page.paragraph(f"note: {note}")
        if k.verdict is None:
            page.notice("not checked: no gate ran (see the verdict above)")
            continue
        page.heading("Gates", level=3)
        gate_table(page, k.verdict, baseline="reference", candidate="current")
        page.heading("Roofline: reference and current", level=3)
        roofline_section(page, k.verdict)
    return page.render(footer=f"kernelloop {__version__}; JUnit XML (--junit) and --json hold the same verdicts")
