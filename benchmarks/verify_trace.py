"""One `kernelloop verify`, every progress step printed with the seconds since the start, then each
gate's verdict, then the seconds spent in each kind of step (a script that prints figures, not a
test): where a verification's time goes.

    python3 benchmarks/verify_trace.py BASELINE.cu CANDIDATE.cu [--memcheck off] [--cache-dir DIR]
    python3 benchmarks/verify_trace.py --summarize TRACE.log   # the summary of a trace printed before

A step lasts until the next one starts; steps of one kind differ only in their seeds, sizes, scales
and layouts (`kinds_of_steps`). On an H100 (2026-12-07), an llm.c-style RMS norm at 32768 x 800 x 256
took 468 s, about 390 s of it in 150-odd correctness experiments (tests/fixtures/gpu_captures/).
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from kernelloop.config import Settings, VerifySettings  # noqa: E402
from kernelloop.verify.gate import verify_files  # noqa: E402


_STEP = re.compile(r"^\s*(?P<at>\d+(?:\.\d+)?) s  (?P<stage>[\w ]+): (?P<message>.*)$")
# what tells one experiment of a kind from another: seeds, sizes, scales, offsets, pair numbers
_PARTICULARS = [(re.compile(r"seed \d+"), "seed N"), (re.compile(r"\d+(?:\.\d+)? x 2\^-?\d+"), "S"),
                (re.compile(r"\d+(?: x \d+)+"), "SIZE"), (re.compile(r"\d+(?:\.\d+)?"), "N")]


def kinds_of_steps(trace: str) -> list[tuple[str, float, int]]:
    """(kind, seconds, steps) for each kind of step in a trace this script printed, the longest
    first; a step lasts until the next starts (the last, until the verdict line)."""
    steps = [(float(m["at"]), f"{m['stage']}: {m['message']}") for line in trace.splitlines()
             if (m := _STEP.match(line))]
    totals: dict[str, list[float]] = {}
    for (at, text), (after, _) in zip(steps, steps[1:]):
        kind = text
        for pattern, word in _PARTICULARS:
            kind = pattern.sub(word, kind)
        entry = totals.setdefault(kind, [0.0, 0])
        entry[0] += after - at
        entry[1] += 1
    return sorted(((k, v[0], int(v[1])) for k, v in totals.items()), key=lambda row: -row[1])


def _print_kinds(trace: str, most: int = 25) -> None:
    rows = kinds_of_steps(trace)
    print(f"seconds by kind of step ({sum(r[1] for r in rows):.1f} s in all):")
    for kind, seconds, count in rows[:most]:
        print(f"  {seconds:7.1f} s  {count:4d} x  {kind[:140]}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("baseline", type=Path, nargs="?")
    ap.add_argument("candidate", type=Path, nargs="?")
    ap.add_argument("--memcheck", default="auto", choices=["auto", "on", "off"])
    ap.add_argument("--cache-dir", type=Path, default=None)
    ap.add_argument("--summarize", type=Path, help="summarize a trace this script printed before, and stop")
    args = ap.parse_args()
    if args.summarize:
        _print_kinds(args.summarize.read_text())
        return
    if args.baseline is None or args.candidate is None:
        ap.error("give BASELINE and CANDIDATE (or --summarize TRACE)")
    start = time.monotonic()
    lines: list[str] = []

    def say(p) -> None:
        lines.append(f"{time.monotonic() - start:8.1f} s  {p.stage}: {p.message}")
        print(lines[-1], flush=True)

    settings = Settings(verify=VerifySettings(memcheck=args.memcheck),
                        **({"cache_dir": args.cache_dir} if args.cache_dir else {}))
    v = verify_files(args.baseline, args.candidate, settings, progress=say)
    lines.append(f"{time.monotonic() - start:8.1f} s  verdict: {'ACCEPTED' if v.accepted else 'rejected'} "
                 f"{[r.value for r in v.reasons]}: {v.summary}")
    print(lines[-1], flush=True)
    for g in v.gates:
        print(f"  {g.gate}: {g.status}: {g.detail}", flush=True)
    for n in v.notes:
        print(f"  note: {n}", flush=True)
    _print_kinds("\n".join(lines))


if __name__ == "__main__":
    main()
