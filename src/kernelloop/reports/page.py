"""One self-contained HTML page: inline CSS, figures as inline SVG, nothing fetched.

Every piece of data (kernel names, paths, gate details, summaries) goes through `html.escape`:
the builder's methods take plain text and escape it; only SVG from `figures.py` is placed as it
is (and refused if it holds a script). A Content-Security-Policy meta tag forbids the page any
network request or script, so it opens the same on an air-gapped machine as anywhere.
"""

from __future__ import annotations

import html
from collections.abc import Iterable
from typing import NamedTuple

CSS = """
:root { color-scheme: light; }
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif;
       margin: 0; background: #f8fafc; color: #111827; line-height: 1.45; font-size: 14px; }
main { max-width: 980px; margin: 0 auto; padding: 24px 28px 48px; background: #fff; min-height: 100vh;
       box-shadow: 0 0 0 1px #e5e7eb; }
h1 { font-size: 22px; margin: 4px 0 8px; overflow-wrap: break-word; }
h2 { font-size: 17px; margin: 28px 0 8px; padding-bottom: 4px; border-bottom: 1px solid #e5e7eb; }
h3 { font-size: 15px; margin: 20px 0 6px; overflow-wrap: break-word; }
p { margin: 6px 0; }
.banner { display: inline-block; padding: 6px 12px; border-radius: 6px; font-weight: 600; margin: 4px 0 10px; }
.good { background: #dcfce7; color: #14532d; }
.bad { background: #fee2e2; color: #7f1d1d; }
.warn { background: #fef3c7; color: #78350f; }
.neutral { background: #e0e7ff; color: #1e3a8a; }
.muted { color: #6b7280; }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: 2px 14px; margin: 8px 0; }
dl.facts dt { color: #6b7280; }
dl.facts dd { margin: 0; overflow-wrap: break-word; min-width: 0; }
table { border-collapse: collapse; width: 100%; margin: 8px 0; font-size: 13px; }
th, td { border: 1px solid #e5e7eb; padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #f1f5f9; font-weight: 600; }
td { overflow-wrap: break-word; }
td.same, td.faster, td.slower, td.failed, td.ambiguous, td.error { white-space: nowrap; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.pass, td.same { color: #166534; font-weight: 600; }
td.faster { color: #1d4ed8; font-weight: 600; }
td.fail, td.slower, td.failed { color: #b91c1c; font-weight: 600; }
td.skipped, td.ambiguous { color: #92400e; font-weight: 600; }
td.info, td.error { color: #374151; font-weight: 600; }
figure { margin: 10px 0 14px; }
figure svg { width: 100%; height: auto; display: block; }
figcaption { color: #4b5563; font-size: 12.5px; margin-top: 2px; }
.notice { border-left: 4px solid #d97706; background: #fffbeb; padding: 8px 12px; margin: 8px 0; }
pre { background: #0f172a; color: #e2e8f0; padding: 8px 12px; border-radius: 6px; overflow-x: auto;
      white-space: pre-wrap; word-break: break-all; font-size: 12.5px; }
code { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
footer { margin-top: 36px; color: #6b7280; font-size: 12px; }
"""

CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"


def esc(text: object) -> str:
    return html.escape(str(text), quote=True)


class Cell(NamedTuple):
    """A table cell with a class (status colours, right-aligned numbers)."""

    text: str
    cls: str = ""


class Page:
    """Build a page from plain text: every method escapes what it is given."""

    def __init__(self, title: str) -> None:
        self.title = title
        self._parts: list[str] = []

    def heading(self, text: str, level: int = 2, anchor: str | None = None) -> None:
        ident = f' id="{esc(anchor)}"' if anchor else ""
        self._parts.append(f"<h{level}{ident}>{esc(text)}</h{level}>")

    def banner(self, text: str, kind: str) -> None:
        """kind: good | bad | warn | neutral."""
        self._parts.append(f'<div class="banner {esc(kind)}">{esc(text)}</div>')

    def paragraph(self, text: str, *, muted: bool = False) -> None:
        self._parts.append(f'<p{" class=muted" if muted else ""}>{esc(text)}</p>')

    def notice(self, text: str) -> None:
        self._parts.append(f'<div class="notice">{esc(text)}</div>')

    def facts(self, pairs: Iterable[tuple[str, str]]) -> None:
        rows = "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in pairs)
        self._parts.append(f'<dl class="facts">{rows}</dl>')

    def table(self, headers: list[str], rows: Iterable[Iterable[str | Cell]]) -> None:
        head = "".join(f"<th>{esc(h)}</th>" for h in headers)
        body = []
        for row in rows:
            cells = []
            for cell in row:
                c = cell if isinstance(cell, Cell) else Cell(str(cell))
                cls = f' class="{esc(c.cls)}"' if c.cls else ""
                cells.append(f"<td{cls}>{esc(c.text)}</td>")
            body.append("<tr>" + "".join(cells) + "</tr>")
        self._parts.append(f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>")

    def code(self, text: str) -> None:
        self._parts.append(f"<pre><code>{esc(text)}</code></pre>")

    def figure(self, svg: str, caption: str) -> None:
        """An SVG from figures.py (trusted: matplotlib escapes its text), with a caption (escaped)."""
        if not svg.lstrip().startswith("<svg") or "<script" in svg.lower() or "<foreignobject" in svg.lower():
            raise ValueError("a figure must be one <svg> element without scripts or foreign objects")
        self._parts.append(f"<figure>{svg}<figcaption>{esc(caption)}</figcaption></figure>")

    def render(self, *, footer: str = "") -> str:
        foot = f"<footer>{esc(footer)}</footer>" if footer else ""
        return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                f"<meta http-equiv=\"Content-Security-Policy\" content=\"{CSP}\">\n"
                "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
                f"<title>{esc(self.title)}</title>\n<style>{CSS}</style>\n</head>\n<body>\n<main>\n"
                + "\n".join(self._parts) + f"\n{foot}\n</main>\n</body>\n</html>\n")
