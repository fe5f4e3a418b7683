"""One `kernelloop verify`, every progress step printed with the seconds since the start, then each
gate's verdict (a script that prints figures, not a test): where a verification's time goes.

    python3 benchmarks/verify_trace.py BASELINE.cu CANDIDATE.cu [--memcheck off] [--cache-dir DIR]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from kernelloop.config import Settings, VerifySettings  # noqa: E402
from kernelloop.verify.gate import verify_files  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("baseline", type=Path)
    ap.add_argument("candidate", type=Path)
    ap.add_argument("--memcheck", default="auto", choices=["auto", "on", "off"])
    ap.add_argument("--cache-dir", type=Path, default=None)
    args = ap.parse_args()
    start = time.monotonic()

    def say(p) -> None:
        print(f"{time.monotonic() - start:8.1f} s  {p.stage}: {p.message}", flush=True)

    settings = Settings(verify=VerifySettings(memcheck=args.memcheck),
                        **({"cache_dir": args.cache_dir} if args.cache_dir else {}))
    v = verify_files(args.baseline, args.candidate, settings, progress=say)
    print(f"{time.monotonic() - start:8.1f} s  verdict: {'ACCEPTED' if v.accepted else 'rejected'} "
          f"{[r.value for r in v.reasons]}: {v.summary}", flush=True)
    for g in v.gates:
        print(f"  {g.gate}: {g.status}: {g.detail}", flush=True)
    for n in v.notes:
        print(f"  note: {n}", flush=True)


if __name__ == "__main__":
    main()
