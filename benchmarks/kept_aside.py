"""The offline optimizer on a kept-aside set of outside-style programs, as a user runs it (a script
that prints figures, not a test).

For each program of a set folder's specs.json (tests/fixtures/kept_aside_7/ by default, written
by a reviewer who did not read the optimizer): `kernelloop init FILE -o OUT <its init options>`,
then `kernelloop optimize OUT --optimizer offline --json`, each under a time cap. Prints one line
per program (family, expected headroom, init's outcome, the run's status, speedup, wall time) and
the shares: programs with headroom accepted, negative controls accepted (must be 0).

    python3 benchmarks/kept_aside.py [--set DIR] [--only NAME ...] [--cap-s 90] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _run(argv: list[str], cap_s: float, env: dict[str, str]) -> tuple[int, str, str, float]:
    started = time.monotonic()
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=cap_s, env=env)
        return done.returncode, done.stdout, done.stderr, time.monotonic() - started
    except subprocess.TimeoutExpired:
        return 124, "", f"over the {cap_s:g} s cap", time.monotonic() - started


def measure(folder: Path, name: str, entry: dict, work: Path, cap_s: float) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("NVIDIA_API_KEY", "KERNELLOOP_BASE_URL")}
    env.update(KERNELLOOP_DATA_DIR=str(work / "data"), KERNELLOOP_CACHE_DIR=str(work / "cache"))
    program = work / f"{Path(name).stem}_kl.cu"
    # The init options as the reviewer ran them, the output path made ours.
    words = shlex.split(entry["init_command"])
    options = words[words.index("-o") + 2:]
    row = {"program": name, "family": entry.get("family", ""), "expect": entry.get("expect", "")}
    rc, _, err, seconds = _run([sys.executable, "-m", "kernelloop", "init", str(folder / name), "-o", str(program),
                                *options], 300, env)
    row["init"] = "ok" if rc == 0 else (err.strip().splitlines() or ["failed"])[-1][:200]
    if rc != 0:
        return row
    rc, out, err, seconds = _run([sys.executable, "-m", "kernelloop", "optimize", str(program), "--optimizer", "offline",
                                  "--runs-dir", str(work / "runs"), "--json"], cap_s, env)
    row["wall_s"] = round(seconds, 1)
    try:
        summary = json.loads(out)
    except json.JSONDecodeError:
        row["status"] = f"no summary (exit {rc}): {(err.strip().splitlines() or [''])[-1][:200]}"
        return row
    row["status"] = summary.get("status")
    row["speedup"] = (summary.get("verify") or {}).get("speedup")
    # Why the run ended, and what each attempt was and why it was turned away (the run's summary.json):
    # the figures say how often, these say why.
    row["stop_reason"] = summary.get("stop_reason") or summary.get("reason") or summary.get("message")
    row["attempts"] = [f"{a.get('approach')}: {a.get('outcome')}" + (f" ({a.get('speedup')}x)" if a.get("speedup") else "")
                       + (f": {str(a.get('reason'))[:300]}" if a.get("reason") else "")
                       for a in summary.get("attempts") or []]
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", type=Path, default=ROOT / "tests" / "fixtures" / "kept_aside_7")
    parser.add_argument("--only", nargs="*", default=None)
    parser.add_argument("--cap-s", type=float, default=90.0, help="time cap of one optimize run")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    specs = json.loads((args.set / "specs.json").read_text())
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.only or list(specs):  # in the order --only gives
            row = measure(args.set, name, specs[name], Path(tmp), args.cap_s)
            rows.append(row)
            print(json.dumps(row), flush=True)
            if args.json:
                args.json.write_text(json.dumps(rows, indent=1))
    headroom = [r for r in rows if r["expect"] == "headroom"]
    negative = [r for r in rows if r["expect"] == "negative"]
    accepted = [r for r in headroom if r.get("status") == "accepted"]
    print(f"headroom: {len(accepted)} of {len(headroom)} accepted; negative controls accepted: "
          f"{sum(r.get('status') == 'accepted' for r in negative)} of {len(negative)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
