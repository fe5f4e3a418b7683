"""A report's HTML rendered to PNG by headless Chromium: how a person checks that a page looks
right without opening a browser (scripts/screenshot_report.py, tests/test_html_reports.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from ..errors import EnvironmentProblem, InputError

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def find_browser() -> str | None:
    return next((found for name in BROWSERS if (found := shutil.which(name))), None)


def screenshot(html: Path, png: Path, *, width: int = 1100, height: int = 8000, browser: str | None = None,
               timeout_s: float = 90.0) -> Path:
    """Render `html` in a `width` x `height` window to `png`, then cut the page's uniform tail
    (the window is taller than most reports). The page is opened from disk; a report needs no
    network (its Content-Security-Policy forbids every request)."""
    if not html.is_file():
        raise InputError(f"{html}: no such file")
    browser = browser or find_browser()
    if browser is None:
        raise EnvironmentProblem(f"no headless browser found (looked for {', '.join(BROWSERS)} on PATH)")
    png.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="kl-chromium-") as profile:
        command = [browser, "--headless", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
                   "--disable-extensions", "--disable-background-networking", f"--user-data-dir={profile}",
                   f"--window-size={width},{height}", f"--screenshot={png.resolve()}", html.resolve().as_uri()]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            command.insert(1, "--no-sandbox")  # Chromium refuses to run as root with its sandbox
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise EnvironmentProblem(f"{browser} took more than {timeout_s:.0f} s to render {html}") from None
    if done.returncode != 0 or not png.is_file():
        last = (done.stderr.strip().splitlines() or ["?"])[-1]
        raise EnvironmentProblem(f"{browser} could not render {html} (exit {done.returncode}): {last}")
    _trim_tail(png)
    return png


def _trim_tail(png: Path, margin: int = 24) -> None:
    """Cut the rows at the bottom that are all the same as the last one (the empty window below the page)."""
    from PIL import Image, ImageChops  # matplotlib's own dependency

    with Image.open(png) as image:
        image = image.convert("RGB")
        width, height = image.size
        last = image.crop((0, height - 1, width, height))
        bottom = height
        step = 8
        while bottom - step > 0:
            band = image.crop((0, bottom - step, width, bottom))
            if ImageChops.difference(band, last.resize((width, step))).getbbox() is not None:
                break
            bottom -= step
        if bottom + margin < height:
            image.crop((0, 0, width, bottom + margin)).save(png)
