"""Render a kernelloop HTML report (report.html of an optimize run, or bench check --html) to PNG
with headless Chromium, to look at it without a desktop browser.

    python3 scripts/screenshot_report.py runs/naive_matmul/<run id>/report.html [-o report.png]
        [--width 1100] [--height 8000] [--browser /usr/bin/chromium]

The PNG goes beside the HTML by default; the window is `--height` tall and the page's empty
tail is cut. Exit 2 (one line) when the file or a browser is missing.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from kernelloop.errors import KernelloopError
from kernelloop.reports.screenshot import screenshot


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("html", type=Path)
    ap.add_argument("-o", "--output", type=Path, help="the PNG [default: the HTML's name with .png]")
    ap.add_argument("--width", type=int, default=1100)
    ap.add_argument("--height", type=int, default=8000)
    ap.add_argument("--browser", help="a Chromium or Chrome executable [default: the first on PATH]")
    args = ap.parse_args()
    try:
        png = screenshot(args.html, args.output or args.html.with_suffix(".png"), width=args.width,
                         height=args.height, browser=args.browser)
    except KernelloopError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(png)
    return 0


if __name__ == "__main__":
    sys.exit(main())
