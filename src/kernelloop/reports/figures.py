"""The reports' figures: matplotlib drawn to SVG text, to be placed inline in an HTML page.

Each function returns the text of one `<svg>` element: no XML declaration, DOCTYPE or metadata
(nothing that names a URL but the SVG namespace), text kept as text (`svg.fonttype` none: the
browser's sans-serif font, no embedded or fetched font), element ids unique per figure (so many
figures share a page). Figures are drawn on `matplotlib.figure.Figure` objects with the SVG
canvas: no pyplot, no GUI backend, no global state. Text from data (kernel names) is never read
as mathtext (`text.parse_math` off) and matplotlib escapes it in the SVG.

`roofline_problem` says in words why a roofline cannot be drawn; the page shows that sentence
instead of the figure.
"""

from __future__ import annotations

import io
import math
import re
import uuid
from typing import NamedTuple

import matplotlib
from matplotlib.backends.backend_svg import FigureCanvasSVG
from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, NullFormatter

from ..verify.verdict import WorkModel

BASELINE = "#64748b"  # slate: the baseline / the recorded reference
CANDIDATE = "#2563eb"  # blue: the candidate / the current program
ACCEPTED = "#16a34a"
REJECTED = "#dc2626"
UNTIMED = "#9ca3af"
BAR = "#d97706"  # the acceptance bar, the regression band's edges
CEILING = "#111827"
STATUS_COLORS = {"same": "#16a34a", "faster": "#2563eb", "slower": "#dc2626", "failed": "#dc2626",
                 "ambiguous": "#d97706", "error": "#9ca3af"}

_RC = {"svg.fonttype": "none", "text.parse_math": False, "font.family": "sans-serif", "font.size": 9,
       "axes.titlesize": 10, "axes.spines.top": False, "axes.spines.right": False, "axes.grid": True,
       "grid.color": "#e5e7eb", "grid.linewidth": 0.6, "axes.axisbelow": True, "svg.hashsalt": None}


class IterationPoint(NamedTuple):
    """One attempt of an optimize run."""

    iteration: int
    speedup: float | None  # measured (median baseline / median candidate); None: never timed
    accepted: bool
    outcome: str  # "accepted" or "rejected: <kind>"


class PerfPoint(NamedTuple):
    """One program's median kernel time on the experiment a WorkModel describes."""

    label: str  # "baseline", "candidate", "reference", "current"
    ms: float
    color: str


class ChangeRow(NamedTuple):
    """One kernel of `bench check`: its time ratio current/reference with the sign-test interval."""

    name: str
    status: str  # same | faster | slower | failed | ambiguous | error
    threshold: float  # the regression threshold t (0.03: 3 %)
    ratio: float | None = None
    lower: float | None = None
    upper: float | None = None


def _figure(width: float, height: float) -> Figure:
    fig = Figure(figsize=(width, height), dpi=96, layout="constrained")
    FigureCanvasSVG(fig)
    return fig


def _svg(fig: Figure, *, description: str) -> str:
    """The figure as one <svg> element for inline use (see the module's docstring)."""
    buffer = io.StringIO()
    with matplotlib.rc_context({"svg.hashsalt": "kernelloop"}):
        fig.savefig(buffer, format="svg", metadata={"Date": None, "Creator": None, "Format": None, "Type": None})
    text = buffer.getvalue()
    text = text[text.index("<svg"):]
    text = re.sub(r"\s*<metadata>.*?</metadata>", "", text, flags=re.S)
    text = re.sub(r'\s+xmlns:xlink="[^"]*"', "", text, count=1)
    # matplotlib's ids ("figure_1", clip paths) repeat from figure to figure: one page holds
    # several, so every id and every reference to one gets this figure's own prefix
    prefix = "f" + uuid.uuid4().hex[:8] + "-"

    def own_ids(tag: re.Match) -> str:  # inside tags only: text from data stays as it is
        t = re.sub(r'(\sid=")([^"]+")', lambda m: m.group(1) + prefix + m.group(2), tag.group(0))
        t = re.sub(r"url\(#([^)]+)\)", lambda m: f"url(#{prefix}{m.group(1)})", t)
        return re.sub(r'(href=")#([^"]+")', lambda m: f"{m.group(1)}#{prefix}{m.group(2)}", t)

    text = re.sub(r"<[^>]+>", own_ids, text)
    # an accessible name for the figure (matplotlib escapes nothing we add here: escape it)
    label = description.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;").replace(">", "&gt;")
    return text.replace("<svg ", f'<svg role="img" aria-label="{label}" ', 1).strip()


_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def _power_of_ten(value: float, _position: object = None) -> str:
    """A log axis's tick as text (matplotlib's default is mathtext, which these figures do not read)."""
    if value <= 0:
        return ""
    exponent = round(math.log10(value))
    if abs(math.log10(value) - exponent) > 1e-6:
        return ""
    return f"{value:g}" if -2 <= exponent <= 3 else "10" + str(exponent).translate(_SUPERSCRIPT)


def _log_axis(axis) -> None:
    axis.set_major_locator(LogLocator(base=10))
    axis.set_major_formatter(FuncFormatter(_power_of_ten))
    axis.set_minor_formatter(NullFormatter())


_NICE_SPEEDUPS = (0.1, 0.2, 0.5, 1, 1.5, 2, 3, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000)


def _times(x: float) -> str:
    return f"{x:.3g}×" if x < 10 else f"{x:.0f}×"


def speedup_chart(points: list[IterationPoint], threshold: float) -> str:
    """Speedup per attempt against the acceptance bar: bars grow from the baseline (1×) on a
    log axis, up when faster, down when slower; an attempt never timed (it did not build, was
    wrong, ...) is a cross at 1× with its kind."""
    with matplotlib.rc_context(_RC):
        fig = _figure(7.2, 3.2)
        ax = fig.add_subplot()
        ax.set_yscale("log")
        timed = [p.speedup for p in points if p.speedup and p.speedup > 0]
        top = max([threshold, *timed]) * 1.6
        bottom = min([1 / 1.6, *[s / 1.6 for s in timed]])
        ax.set_ylim(bottom, top)
        xs = list(range(len(points)))
        for x, p in zip(xs, points):
            if p.speedup and p.speedup > 0:
                color = ACCEPTED if p.accepted else REJECTED
                ax.bar(x, p.speedup - 1, bottom=1.0, width=0.6, color=color, alpha=0.85)
                above = p.speedup >= 1
                ax.annotate(_times(p.speedup), (x, p.speedup), xytext=(0, 3 if above else -3),
                            textcoords="offset points", ha="center", va="bottom" if above else "top", fontsize=8,
                            bbox={"facecolor": "white", "edgecolor": "none", "pad": 1.0})  # legible over the bar line
            else:
                ax.plot([x], [1.0], marker="x", markersize=9, color=UNTIMED, mew=2)
                ax.annotate(p.outcome.removeprefix("rejected: "), (x, 1.0), xytext=(0, -10),
                            textcoords="offset points", ha="center", va="top", fontsize=8, color="#4b5563")
        ax.axhline(1.0, color=BASELINE, linewidth=1)
        ax.axhline(threshold, color=BAR, linestyle="--", linewidth=1.2)
        ax.annotate(f"bar {threshold:g}×", (1.0, threshold), xycoords=("axes fraction", "data"), xytext=(-2, 2),
                    textcoords="offset points", ha="right", va="bottom", color=BAR, fontsize=8)
        ax.set_xticks(xs, [f"it {p.iteration}" for p in points])
        ax.set_xlim(-0.7, max(len(points), 3) - 0.3)
        ax.yaxis.set_major_locator(FixedLocator([t for t in _NICE_SPEEDUPS if bottom <= t <= top]))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}×"))
        ax.yaxis.set_minor_locator(FixedLocator([]))
        ax.set_ylabel("speedup over the baseline (log)")
        ax.grid(axis="x", visible=False)
        ax.legend(handles=[_patch(ACCEPTED, "accepted"), _patch(REJECTED, "rejected (timed)"),
                           _cross("not timed")], loc="upper left", fontsize=8, frameon=False, ncols=3)
        return _svg(fig, description=f"speedup per iteration against the bar {threshold:g}x")


def _patch(color: str, label: str):
    from matplotlib.patches import Patch

    return Patch(color=color, label=label)


def _cross(label: str):
    from matplotlib.lines import Line2D

    return Line2D([], [], marker="x", color=UNTIMED, linestyle="none", mew=2, label=label)


def roofline_problem(work: WorkModel | None, points: list[PerfPoint]) -> str | None:
    """Why no roofline placement can be drawn, in a sentence; None when it can."""
    if work is None:
        return ("no roofline placement: the harness declares no work and measures no ceilings (a contract v1 "
                "program, or no timing runs were made); a v2 harness (kernelloop_harness.cuh, docs/contract.md) "
                "provides both")
    if work.copy_gbps <= 0:
        return "no roofline placement: the harness measured no copy bandwidth on this GPU"
    if work.bytes_read + work.bytes_written <= 0:
        return "no roofline placement: the harness declares no bytes read or written"
    if not points or any(p.ms <= 0 for p in points):
        return "no roofline placement: no kernel time was measured"
    return None


def _gb(value: float) -> str:
    return f"{value / 1000:.3g} T" if value >= 1000 else f"{value:.3g} G"


def roofline_chart(work: WorkModel, points: list[PerfPoint]) -> str:
    """Where each program sits under this GPU's measured ceilings.

    With declared FLOPs: a log-log roofline, x = FLOPs / (bytes read + written) per call, y =
    achieved GFLOP/s (FLOPs / median kernel time), ceiling min(FP32 FMA GFLOP/s, x * copy GB/s).
    Without (flops 0): achieved bandwidth, (bytes read + written) / median time, against the
    measured copy bandwidth. Call `roofline_problem` first: this draws only what it accepts."""
    problem = roofline_problem(work, points)
    if problem is not None:
        raise ValueError(problem)
    moved = work.bytes_read + work.bytes_written
    with matplotlib.rc_context(_RC):
        if work.flops <= 0:
            return _bandwidth_chart(work, points, moved)
        fig = _figure(7.2, 4.4)
        ax = fig.add_subplot()
        ax.set_xscale("log")
        ax.set_yscale("log")
        intensity = work.flops / moved
        achieved = [work.flops / (p.ms * 1e6) for p in points]  # GFLOP/s
        ridge = work.fma_gflops / work.copy_gbps if work.fma_gflops > 0 else intensity * 10
        lo_x, hi_x = min(intensity, ridge) / 8, max(intensity, ridge) * 8
        xs = [lo_x * (hi_x / lo_x) ** (i / 200) for i in range(201)]
        roof = [min(work.fma_gflops, x * work.copy_gbps) if work.fma_gflops > 0 else x * work.copy_gbps for x in xs]
        ax.plot(xs, roof, color=CEILING, linewidth=1.6, label="measured ceiling")
        if work.fma_gflops > 0:
            ax.annotate(f"FP32 FMA {_gb(work.fma_gflops)}FLOP/s", (hi_x, work.fma_gflops), xytext=(-2, 3),
                        textcoords="offset points", ha="right", va="bottom", fontsize=8)
        slope_x = lo_x * 2
        ax.annotate(f"copy {_gb(work.copy_gbps)}B/s", (slope_x, slope_x * work.copy_gbps), xytext=(4, -2),
                    textcoords="offset points", ha="left", va="top", fontsize=8, rotation=0)
        ax.axvline(intensity, color="#cbd5e1", linewidth=0.8, linestyle=":")
        bound = min(work.fma_gflops, intensity * work.copy_gbps) if work.fma_gflops > 0 else intensity * work.copy_gbps
        for i, (p, y) in enumerate(zip(points, achieved)):
            # the first (the baseline) a ring, the second a dot: both show where they coincide
            style = {"markersize": 12, "markerfacecolor": "none", "markeredgewidth": 2.2} if i == 0 else {"markersize": 7}
            ax.plot([intensity], [y], marker="o", color=p.color, linestyle="none", **style,
                    label=f"{p.label}: {p.ms:.4g} ms, {_gb(y)}FLOP/s ({y / bound:.0%} of the ceiling)")
            left = i % 2 == 0  # alternate sides: two programs of one experiment share x, often y too
            ax.annotate(p.label, (intensity, y), xytext=(-8 if left else 8, 0), textcoords="offset points",
                        ha="right" if left else "left", va="center", fontsize=8, color=p.color)
        y_all = [*achieved, *roof]
        ax.set_ylim(min(y_all) / 3, max(y_all) * 3)
        ax.set_xlim(lo_x, hi_x)
        ax.set_xlabel("arithmetic intensity: declared FLOP / bytes read + written per call (log)")
        ax.set_ylabel("achieved GFLOP/s (log)")
        _log_axis(ax.xaxis)
        _log_axis(ax.yaxis)
        fig.legend(loc="outside lower center", fontsize=8, frameon=False, ncols=1)
        return _svg(fig, description="roofline placement of " + " and ".join(p.label for p in points))


def _bandwidth_chart(work: WorkModel, points: list[PerfPoint], moved: int) -> str:
    fig = _figure(7.2, 0.9 + 0.45 * len(points))
    ax = fig.add_subplot()
    achieved = [moved / (p.ms * 1e6) for p in points]  # GB/s
    ys = list(range(len(points)))[::-1]
    ax.barh(ys, achieved, height=0.55, color=[p.color for p in points])
    for y, p, gbps in zip(ys, points, achieved):
        ax.annotate(f"{p.ms:.4g} ms, {_gb(gbps)}B/s ({gbps / work.copy_gbps:.0%} of copy)", (gbps, y),
                    xytext=(4, 0), textcoords="offset points", va="center", fontsize=8)
    ax.axvline(work.copy_gbps, color=CEILING, linestyle="--", linewidth=1.4)
    ax.annotate(f"measured copy {_gb(work.copy_gbps)}B/s", (work.copy_gbps, 1.0), xycoords=("data", "axes fraction"),
                xytext=(-3, -2), textcoords="offset points", ha="right", va="top", fontsize=8)
    ax.set_yticks(ys, [p.label for p in points])
    ax.set_xlim(0, max([*achieved, work.copy_gbps]) * 1.45)
    ax.set_ylim(-0.6, len(points) - 0.4 + 0.5)
    ax.set_xlabel(f"achieved bandwidth, GB/s: {moved / 1e6:.4g} MB read + written per call / median kernel time")
    ax.grid(axis="y", visible=False)
    return _svg(fig, description="achieved bandwidth of " + " and ".join(p.label for p in points))


def metrics_chart(rows: list[tuple[str, float | None, float | None]], *, before: str = "before",
                  after: str = "after") -> str:
    """Percent metrics (0-100) before and after, side by side: (label, before, after) rows."""
    with matplotlib.rc_context(_RC):
        fig = _figure(7.2, 0.7 + 0.36 * len(rows))
        ax = fig.add_subplot()
        ys = list(range(len(rows)))[::-1]
        height = 0.38
        for offset, index, color, name in ((height / 2, 1, BASELINE, before), (-height / 2, 2, CANDIDATE, after)):
            values = [r[index] for r in rows]
            ax.barh([y + offset for y in ys], [v or 0 for v in values], height=height, color=color, label=name)
            for y, v in zip(ys, values):
                ax.annotate("-" if v is None else f"{v:.0f}%", (v or 0, y + offset), xytext=(3, 0),
                            textcoords="offset points", va="center", fontsize=7)
        ax.set_yticks(ys, [r[0] for r in rows])
        ax.set_xlim(0, 112)
        ax.set_xlabel("% (Nsight Compute, one launch of the hot kernel)")
        ax.grid(axis="y", visible=False)
        ax.legend(loc="lower right", fontsize=8, frameon=True, framealpha=0.9)
        return _svg(fig, description=f"key metrics {before} and {after}")


_NICE_RATIOS = (0.1, 0.2, 0.25, 0.5, 0.67, 0.8, 0.9, 0.95, 0.97, 0.99, 1, 1.01, 1.03, 1.05, 1.1, 1.25, 1.5, 2, 4, 5, 10)


def _short(text: str, limit: int = 28) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _spread_ticks(lo: float, hi: float) -> list[float]:
    """Nice ratios within [lo, hi], at least a ninth of the axis apart (log), 1 always kept."""
    gap = math.log(hi / lo) / 9
    chosen = [1.0] if lo <= 1 <= hi else []
    for side in (sorted((t for t in _NICE_RATIOS if 1 < t <= hi)),
                 sorted((t for t in _NICE_RATIOS if lo <= t < 1), reverse=True)):
        last = 1.0
        for t in side:
            if abs(math.log(t / last)) >= gap:
                chosen.append(t)
                last = t
    return sorted(chosen)


def change_chart(rows: list[ChangeRow]) -> str:
    """`bench check`: each kernel's time ratio current/reference (log axis) with its confidence
    interval, over its own band [1/(1+t), 1+t] (SAME lies inside; SLOWER past the right edge);
    the verdict and the change stand on the right."""
    with matplotlib.rc_context(_RC):
        fig = _figure(7.2, 0.9 + 0.42 * len(rows))
        ax = fig.add_subplot()
        ax.set_xscale("log")
        ys = list(range(len(rows)))[::-1]
        edges = [v for r in rows for v in (r.lower, r.upper, r.ratio, 1 + r.threshold, 1 / (1 + r.threshold))
                 if v is not None and v > 0]
        lo, hi = min(edges), max(edges)
        span = max(math.log(hi / lo), math.log(1.1))
        lo, hi = lo / math.exp(span * 0.12), hi * math.exp(span * 0.12)
        for y, r in zip(ys, rows):
            ax.fill_betweenx([y - 0.32, y + 0.32], 1 / (1 + r.threshold), 1 + r.threshold, color="#fde68a",
                             alpha=0.55, linewidth=0)
            color = STATUS_COLORS.get(r.status, UNTIMED)
            if r.ratio is None:
                ax.annotate("no measurement", (1.0, y), ha="center", va="center", fontsize=8, color="#4b5563",
                            bbox={"facecolor": "white", "edgecolor": "none", "pad": 1.5})
                continue
            if r.lower is not None and r.upper is not None:
                ax.plot([r.lower, r.upper], [y, y], color=color, linewidth=2.2, solid_capstyle="butt")
                ax.plot([r.lower, r.upper], [y, y], color=color, marker="|", markersize=9, linestyle="none")
            ax.plot([r.ratio], [y], marker="o", markersize=6, color=color)
        ax.axvline(1.0, color=BASELINE, linewidth=1)
        ax.set_xlim(lo, hi)
        ax.set_ylim(-0.7, len(rows) - 0.3)
        ax.set_yticks(ys, [_short(r.name) for r in rows])  # the page's table holds the whole name
        right = ax.twinx()
        right.set_ylim(ax.get_ylim())
        right.set_yticks(ys, [r.status.upper() + (f" {r.ratio - 1:+.1%}" if r.ratio is not None else "") for r in rows])
        for label, r in zip(right.get_yticklabels(), rows):
            label.set_color(STATUS_COLORS.get(r.status, UNTIMED))
        right.tick_params(axis="y", length=0)
        right.grid(False)
        right.spines["right"].set_visible(False)
        ax.xaxis.set_major_locator(FixedLocator(_spread_ticks(lo, hi)))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.xaxis.set_minor_locator(FixedLocator([]))
        ax.set_xlabel("time ratio current / reference (log)")
        ax.grid(axis="y", visible=False)
        return _svg(fig, description="time ratio of each kernel against its reference")
